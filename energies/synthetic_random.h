#pragma once
/// @file synthetic_random.h
/// @brief Portable random numbers for the synthetic test images (internal to energies/).
///
/// The standard distributions differ between library implementations; these use only the raw
/// output of std::mt19937_64, whose sequence the standard fixes, so a seed gives the same images
/// everywhere.

#include <cmath>
#include <cstdint>
#include <random>

namespace mrf::synthetic {

/// Uniform integer in [lo, hi].
inline int Uniform(std::mt19937_64& rng, int lo, int hi) {
  return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
}

/// Standard normal sample (Box-Muller).
inline double Normal(std::mt19937_64& rng) {
  const double u1 = (static_cast<double>(rng() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  const double u2 = static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace mrf::synthetic
