#include "zenith/cpu_features.h"

#include <cpuid.h>

#include <cstdlib>
#include <cstring>

namespace zenith {
namespace {

bool cpu_has_avx512_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) return false;
  return (eax >> 5) & 1;  // CPUID.(EAX=7,ECX=1):EAX[5] AVX512_BF16
}

}  // namespace

bool bf16_arithmetic() {
  static const bool on = [] {
    const char* env = std::getenv("ZENITH_BF16_COMPUTE");
    if (env && std::strcmp(env, "0") == 0) return false;
    return cpu_has_avx512_bf16();
  }();
  return on;
}

}  // namespace zenith
