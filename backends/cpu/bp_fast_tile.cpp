// Host side of the fast tile visit (backends/common/bp_fast_tile.h): which problems it takes.
#include "backends/common/bp_fast_tile.h"

namespace mrf::bp::fast {

Support FastSupport(int num_labels, int kind, Cost truncation, Cost max_unary_spread, Cost max_message,
                    Cost min_scale) {
  Support s;
  const int L = num_labels;
  if (L < 2 || L > 32) {
    s.why = "the fast kernel takes 2 to 32 labels (got " + std::to_string(L) + ")";
    return s;
  }
  if (min_scale < 0) {
    s.why = "the fast kernel needs non-negative edge scales";
    return s;
  }
  const PairwiseParams p{kind, L, truncation, nullptr};
  switch (kind) {
    case kPottsMessage:
      s.form = kFormClamp;
      break;
    case kLinearMessage: {
      const int r = LinearWindow(truncation, L);
      s.form = r <= 0 ? kFormClamp : r == 1 ? kFormNeighbour : kFormLinearDT;
      break;
    }
    case kQuadraticMessage: {
      if (!UseQuadraticWindow(p)) {
        s.why = "the fast kernel takes truncated quadratic terms with a window below 8 labels";
        return s;
      }
      const int r = QuadraticWindow(truncation, L);
      s.form = r == 0 ? kFormClamp : kFormQuadWindow;
      s.params.window = r;
      break;
    }
    default:
      s.why = "the fast kernel does not take pairwise tables";
      return s;
  }
  const std::int64_t distance = MaxFamilyDistance(p);
  if (distance < 0) {
    s.why = "the fast kernel needs a non-negative truncation";
    return s;
  }
  s.params.max_distance = static_cast<int>(distance);
  const std::int64_t needed = std::int64_t{max_unary_spread} + 8 * std::int64_t{max_message} + 1;
  if (max_unary_spread < 0 || max_message < 0 || needed > kMaxPacked) {
    s.why = "the fast kernel's 16-bit sums need unary spread + 8 x message spread + 1 <= " +
            std::to_string(kMaxPacked) + " (got " + std::to_string(max_unary_spread) + " + 8 x " +
            std::to_string(max_message) + " + 1)";
    return s;
  }
  int padded = 4;
  while (padded < L) padded *= 2;
  s.words = padded / 2;
  s.pad_cost = static_cast<int>(std::int64_t{max_unary_spread} + 4 * std::int64_t{max_message} + 1);
  s.ok = true;
  return s;
}

}  // namespace mrf::bp::fast
