#include "mrf/threads.h"

#include <tbb/info.h>
#include <tbb/task_arena.h>

#include <algorithm>

namespace mrf {

int ThreadsFor(int requested) {
  if (requested <= 0) return tbb::this_task_arena::max_concurrency();
  return std::min(requested, std::max(1, tbb::info::default_concurrency()));
}

void RunOnThreads(int requested, const std::function<void()>& work) {
  if (requested <= 0) {
    work();
    return;
  }
  tbb::task_arena arena(ThreadsFor(requested));
  arena.execute(work);
}

}  // namespace mrf
