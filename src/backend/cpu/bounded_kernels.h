// bounded_kernels.h: the inner loop of the bounded (swa_sink_v1) attention core
// (bounded/bounded_attention_core.h): one query position, the query heads that share one KV
// head, over S sinks and len <= W window keys:
//   s_s = q · k̂ˢ_s · scale                      (sinks, no rotation)
//   s_d = (R(d) q) · k_d · scale = q · (R(−d) k_d) · scale   (window key at distance d)
//   out = (Σ_s e^{s_s − m} v̂ˢ_s + Σ_d e^{s_d − m} v_d) / Σ e^{· − m},  m the row's maximum.
// Written once per instruction set in files of its own (bounded_kernels_avx512.cpp,
// bounded_kernels_avx2.cpp, the scalar reference in bounded_kernels.cpp), each compiled
// whenever the compiler can target it and dispatched at run time to the best the CPU runs
// (backend/cpu/simd.h).
//
// The SIMD variants rotate each key once for all heads of the group, score a block of keys
// at once (one vector accumulator per key, reduced together) and take e^x with the shared
// simd::exp_ps. Every term and its order depend only on (len, S, head_dim, rope_dims), never
// on which other positions or heads run beside it, so a prefill chunk and token-by-token
// decoding give the same bits.
#pragma once

#include <cstddef>
#include <span>

namespace channel::cpu {

struct BoundedGroupTask {
  int head_dim = 0;
  int half = 0;     // rope_dims / 2: dims i and i + half rotate as a NEOX pair, i < half
  int n_sinks = 0;  // S
  int len = 0;      // window keys, distances d = 0 .. len − 1
  int n_q = 0;      // query heads of the group
  float scale = 0.0f;
  const float* q = nullptr;       // [n_q][head_dim], normed, unrotated
  const float* sink_k = nullptr;  // [S][head_dim]
  const float* sink_v = nullptr;  // [S][head_dim]
  const float* const* keys = nullptr;    // [len] key row at distance d (raw, unrotated)
  const float* const* values = nullptr;  // [len] value row at distance d
  const float* cos = nullptr;  // rotation table: distance d's row at cos + d * half
  const float* sin = nullptr;
  float* scores = nullptr;  // scratch, [n_q][score_stride], score_stride >= S + len + 1
  size_t score_stride = 0;
  float* out = nullptr;  // [n_q][head_dim]
};

using BoundedGroupFn = void (*)(const BoundedGroupTask& task);

struct BoundedKernelVariant {
  const char* isa;  // "avx512", "avx2", "scalar"
  BoundedGroupFn fn;
};

// Runs the best variant this CPU executes.
void bounded_group_attend(const BoundedGroupTask& task);

// Which variant bounded_group_attend runs.
const char* bounded_kernel_isa();

// Every variant compiled into this build that this CPU executes, the dispatched one first
// and the scalar reference last, so a test can check each against the reference.
std::span<const BoundedKernelVariant> bounded_kernel_variants();

// The plain scalar reference (std::exp, one key and one head at a time).
void bounded_group_attend_ref(const BoundedGroupTask& task);

}  // namespace channel::cpu
