// Decode attention through the active-slot table: one query token, GQA, f32 K/V arena.
// The kernels loop over runs of active slots (virtual_positions.h), rotate the unrotated
// query once per run by run.rope_pos, and take one softmax over every visible key:
//   out_h = sum_j softmax_j(scale * (R(rope_pos(j)) q_h) . k[kvh][slot_j]) v[kvh][slot_j]
// with kvh = h / (n_head / n_head_kv). They know nothing about tiers, spans or clocks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/rope_f64.h"
#include "kv/virtual_positions.h"

namespace channel {

struct SlotAttnShape {
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;  // divides n_head
  uint32_t head_dim = 0;   // of K and V
  uint32_t n_slots = 0;    // slots per KV head in the arena
};

// Reusable buffers of the fast kernel, so decoding allocates nothing once warm.
struct SlotAttnScratch {
  std::vector<float> cs;       // [n_runs][n_rot] cos/sin per run
  std::vector<float> qrot;     // [n_runs][n_head][head_dim] rotated queries
  std::vector<float> scores;   // [n_head / n_head_kv][n_keys]
  std::vector<float> inv_sum;  // [n_head / n_head_kv]
};

// The obvious scalar reference. q: [n_head][head_dim] (unrotated); k, v:
// [n_head_kv][n_slots][head_dim]; out: [n_head][head_dim]. No keys gives zeros.
// Throws channel::Error for a bad shape or a slot >= n_slots.
void slot_attention_ref(const SlotAttnShape& shape, const RopeFreqs& rope, const float* q,
                        const float* k, const float* v, std::span<const SlotRun> runs, float scale,
                        float* out);

// The SIMD kernel (AVX-512, AVX2 or scalar fallback), same contract; it checks the shape
// but trusts the slots (they come from a SlotRing or LocalRing of this arena).
void slot_attention(const SlotAttnShape& shape, const RopeFreqs& rope, const float* q,
                    const float* k, const float* v, std::span<const SlotRun> runs, float scale,
                    float* out, SlotAttnScratch& scratch);

// Throws channel::Error unless n_head_kv divides n_head and the rope fits head_dim.
void check_slot_attn_shape(const SlotAttnShape& shape, const RopeFreqs& rope);

// Which SIMD path slot_attention was compiled with: "avx512", "avx2" or "scalar".
const char* slot_attention_isa();

// Plain contiguous softmax attention over gathered keys, for tests: qrot:
// [n_groups][n_head][head_dim] already-rotated queries, key_group: [n_keys] which qrot row
// each key is scored with, k, v: [n_keys][n_head_kv][head_dim]. slot_attention_ref equals
// it bit for bit when qrot comes from rope_rotate at each run's rope_pos.
void contiguous_attention_ref(const SlotAttnShape& shape, const float* qrot,
                              std::span<const uint32_t> key_group, const float* k, const float* v,
                              float scale, float* out);

}  // namespace channel
