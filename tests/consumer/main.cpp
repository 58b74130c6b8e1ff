// A downstream program: builds a tiny two-label model, solves it through the installed library,
// and checks the answer against exhaustive search.
#include <cstdio>

#include "mrf/model.h"
#include "mrf/solve.h"

int main() {
  mrf::Model model;
  model.topology = mrf::Topology::Grid2D(3, 2, 4);
  model.num_labels = 2;
  model.unary = {0, 9, 9, 0, 0, 9, 9, 0, 0, 9, 9, 0};
  model.pairwise.lambda = 4;
  const mrf::Result result = mrf::Solve(model);
  if (!result.ok) {
    std::fprintf(stderr, "solve failed: %s\n", result.message.c_str());
    return 1;
  }
  mrf::Energy best = -1;
  for (int mask = 0; mask < 64; ++mask) {
    mrf::Labeling labels(6);
    for (int p = 0; p < 6; ++p) labels[p] = (mask >> p) & 1;
    const mrf::Energy e = mrf::EvaluateEnergy(model, labels).total;
    if (best < 0 || e < best) best = e;
  }
  std::printf("backend %s energy %lld optimum %lld\n", result.backend_used.c_str(),
              static_cast<long long>(result.energy), static_cast<long long>(best));
  return result.energy == best ? 0 : 1;
}
