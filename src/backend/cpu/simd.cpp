// simd.h: what the running CPU executes, asked once.
#include "backend/cpu/simd.h"

namespace channel::simd {

bool cpu_runs_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __builtin_cpu_supports("f16c");
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
