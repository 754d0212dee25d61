// simd_variants.h: a kernel family's variants in dispatch order. Each per-ISA file of a family
// returns its table, or nullptr where the compiler could not target the ISA; the list keeps
// those the running CPU executes, best first, and ends with the scalar one, which always runs.
#pragma once

#include <vector>

#include "backend/cpu/simd.h"

namespace channel::simd {

// `runs_avx512`: cpu_runs_avx512(), or cpu_runs_avx512vnni() for the families whose AVX-512
// variant uses VNNI.
template <typename Variant>
std::vector<Variant> runnable_best_first(const Variant* avx512, bool runs_avx512,
                                         const Variant* avx2, const Variant& scalar) {
  std::vector<Variant> v;
  if (avx512 && runs_avx512) v.push_back(*avx512);
  if (avx2 && cpu_runs_avx2()) v.push_back(*avx2);
  v.push_back(scalar);
  return v;
}

}  // namespace channel::simd
