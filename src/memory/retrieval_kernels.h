// retrieval_kernels.h: the inner loops of recall in attention space (docs/memory-format.md,
// "Retrieval section"), each with its scalar reference: an episode's representative keys
// scored with a cue's queries, and an episode's per-token projected vectors scored with a
// projected cue. Stored vectors are f16; cues are f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace channel {

// Sum over blocks b < n_blocks (a block is one KV head of one layer) and query heads g < group
// of max over r < R of dot(q[b][g], keys[b][r]): q is [n_blocks][group][dim] f32, keys are
// [n_blocks][R][dim] f16. The caller multiplies by the attention scale.
float key_match_score_ref(const float* q, const uint16_t* keys, size_t n_blocks, size_t group,
                          size_t R, size_t dim);
float key_match_score(const float* q, const uint16_t* keys, size_t n_blocks, size_t group,
                      size_t R, size_t dim);

// max over t < n of dot(c, rows[t]): c is [dim] f32, rows [n][dim] f16. n >= 1.
float proj_max_score_ref(const float* c, const uint16_t* rows, size_t n, size_t dim);
float proj_max_score(const float* c, const uint16_t* rows, size_t n, size_t dim);

// Which variant the two dispatch to ("avx512", "avx2", "scalar").
const char* retrieval_kernels_isa();

// Every variant of the two compiled into this build that this CPU executes
// (retrieval_kernels_avx512.cpp, retrieval_kernels_avx2.cpp), the dispatched one first, the
// scalar references last.
struct RetrievalKernels {
  const char* isa;
  float (*key_match_score)(const float* q, const uint16_t* keys, size_t n_blocks, size_t group,
                           size_t R, size_t dim);
  float (*proj_max_score)(const float* c, const uint16_t* rows, size_t n, size_t dim);
};
std::span<const RetrievalKernels> retrieval_kernel_variants();

}  // namespace channel
