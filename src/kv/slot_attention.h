// Decode attention through the active-slot table: one query token, GQA, an f32 K/V arena
// plus optional recall rows held as f16 (tier 3, token-major).
// The kernels loop over runs of active slots (virtual_positions.h), rotate the unrotated
// query once per run by run.rope_pos, and take one softmax over every visible key:
//   out_h = sum_j softmax_j(scale * (R(rope_pos(j)) q_h) . k[kvh][slot_j]) v[kvh][slot_j]
// with kvh = h / (n_head / n_head_kv). They know nothing about tiers, spans or clocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kv/virtual_positions.h"
#include "ops/rope.h"

namespace channel {

struct SlotAttnShape {
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;  // divides n_head
  uint32_t head_dim = 0;   // of K and V
  uint32_t n_slots = 0;    // slots per KV head in the arena
};

// Recall slots held apart from the f32 arena as f16 bits (a session's tier 3, token-major so
// that recall reads land there directly): slot s in [first, first + count) reads KV head g's
// key row at k + (s - first) * row_stride + g * head_dim, its value row likewise from v.
struct RecallRowsF16 {
  const uint16_t* k = nullptr;  // [count][row_stride], row s - first: [n_head_kv][head_dim]
  const uint16_t* v = nullptr;  // [count][row_stride], likewise
  uint32_t first = UINT32_MAX;  // the first recall slot; the default: there are none
  uint32_t count = 0;
  size_t row_stride = 0;  // f16 values from one slot's row to the next
};

// Reusable buffers of the fast kernel, so decoding allocates nothing once warm.
struct SlotAttnScratch {
  std::vector<float> cs;       // [n_runs][n_rot] cos/sin per run
  std::vector<float> qrot;     // [n_runs][n_head][head_dim] rotated queries
  std::vector<float> scores;   // [n_head / n_head_kv][n_keys]
  std::vector<float> inv_sum;  // [n_head / n_head_kv]
};

// The obvious scalar reference. q: [n_head][head_dim] (unrotated); k, v:
// [n_head_kv][n_slots][head_dim]; out: [n_head][head_dim]. No keys gives zeros. A slot
// s < n_slots reads the arena, a slot in [recall.first, recall.first + recall.count) reads
// the recall rows, widened exactly to f32. Throws channel::Error for a bad shape, bad recall
// rows (check_recall_rows) or a slot in neither range.
void slot_attention_ref(const SlotAttnShape& shape, const RopeFreqs& rope, const float* q,
                        const float* k, const float* v, std::span<const SlotRun> runs, float scale,
                        float* out, const RecallRowsF16& recall = {});

// The SIMD kernel (the best of the variants below), same contract; it checks the shape
// and the recall rows but trusts the slots (they come from a SlotRing or LocalRing of this
// arena): a slot >= n_slots is taken to be a recall slot.
void slot_attention(const SlotAttnShape& shape, const RopeFreqs& rope, const float* q,
                    const float* k, const float* v, std::span<const SlotRun> runs, float scale,
                    float* out, SlotAttnScratch& scratch, const RecallRowsF16& recall = {});

// Throws channel::Error unless n_head_kv divides n_head and the rope fits head_dim.
void check_slot_attn_shape(const SlotAttnShape& shape, const RopeFreqs& rope);

// Throws channel::Error unless recall is empty (count 0) or: both row pointers are set,
// row_stride >= n_head_kv * head_dim, first + count fits in uint32_t and the recall range
// does not overlap the arena's [0, n_slots).
void check_recall_rows(const SlotAttnShape& shape, const RecallRowsF16& recall);

// Which variant slot_attention runs: "avx512", "avx2" or "scalar".
const char* slot_attention_isa();

// Every variant compiled into this build that this CPU executes, the dispatched one first
// (the scalar one last, always there), so a test can check each against the reference. A
// variant trusts its arguments: slot_attention checks them before it calls one.
using SlotAttentionFn = void (*)(const SlotAttnShape& shape, const RopeFreqs& rope,
                                 const float* q, const float* k, const float* v,
                                 std::span<const SlotRun> runs, float scale, float* out,
                                 SlotAttnScratch& scratch, const RecallRowsF16& recall);
struct SlotAttentionVariant {
  const char* isa;
  SlotAttentionFn fn;
};
std::span<const SlotAttentionVariant> slot_attention_variants();

// Plain contiguous softmax attention over gathered keys, for tests: qrot:
// [n_groups][n_head][head_dim] already-rotated queries, key_group: [n_keys] which qrot row
// each key is scored with, k, v: [n_keys][n_head_kv][head_dim]. slot_attention_ref equals
// it bit for bit when qrot comes from rope_rotate at each run's rope_pos.
void contiguous_attention_ref(const SlotAttnShape& shape, const float* qrot,
                              std::span<const uint32_t> key_group, const float* k, const float* v,
                              float scale, float* out);

}  // namespace channel
