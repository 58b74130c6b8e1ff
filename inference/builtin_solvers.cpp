// The list of every solver built into the library. Adding a backend means adding it here.
#include "backends/cpu/bk_maxflow.h"
#include "backends/cpu/boost_maxflow.h"
#include "mrf/device.h"
#include "mrf/registry.h"

namespace mrf {

void RegisterBuiltinSolvers(Registry& registry) {
  // ---- Binary max-flow engines (a two-label model is one exact cut) ----
  registry.Add({"cpu-bk", Algorithm::kMaxFlow, Device::kCpu,
                "Boykov-Kolmogorov max-flow: exact, compact, re-solves incrementally after capacity changes", 10,
                true, {}, [] { return MakeBkEngine(); }, {}});
  registry.Add({"boost-bk", Algorithm::kMaxFlow, Device::kCpu,
                "Boost Graph's Boykov-Kolmogorov max-flow (independent reference, slow to build)", 0, true, {},
                [] { return MakeBoostMaxFlowEngine(); }, {}});
}

}  // namespace mrf
