// Seeds derived from (seed, stream, epoch, index): the randomness of an item depends on its
// position only, never on which worker computed it or in which order.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace zenith::dataset::detail {

// SplitMix64's finaliser: a good 64-bit mixer.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline uint64_t derive_seed(std::initializer_list<uint64_t> parts) {
  uint64_t h = 0x6a09e667f3bcc908ull;
  for (uint64_t p : parts) h = mix64(h ^ mix64(p));
  return h;
}

}  // namespace zenith::dataset::detail
