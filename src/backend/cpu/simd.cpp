// simd.h: what the running CPU executes, asked once.
#include "backend/cpu/simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace channel::simd {

#if defined(__x86_64__) || defined(__i386__)
namespace {

// CPUID leaf 1's F16C bit (clang's __builtin_cpu_supports does not know "f16c").
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}

}  // namespace
#endif

bool cpu_runs_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool yes =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
  return yes;
#else
  return false;
#endif
}

bool cpu_runs_avx512() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool yes = cpu_runs_avx2() && __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return yes;
#else
  return false;
#endif
}

bool cpu_runs_avx512vnni() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool yes = cpu_runs_avx512() && __builtin_cpu_supports("avx512vnni");
  return yes;
#else
  return false;
#endif
}

}  // namespace channel::simd
