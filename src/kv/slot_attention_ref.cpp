// Scalar references: attention through the active-slot table, and plain contiguous
// attention over gathered K/V. Both use the same three helpers in the same order, which is
// what makes them equal bit for bit. Recall rows are widened to f32 first, so a recall key
// gives exactly what the same key widened into the f32 arena would.
#include <cmath>
#include <limits>
#include <vector>

#include "kv/slot_attention.h"
#include "ops/fp16.h"
#include "util/error.h"

namespace channel {

namespace {

float dot_ref(const float* a, const float* b, uint32_t n) {
  float s = 0.0f;
  for (uint32_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// scores[i] <- exp(scores[i] - max); returns the sum, accumulated in order.
float softmax_numerators(float* scores, size_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, scores[i]);
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    scores[i] = std::exp(scores[i] - mx);
    sum += scores[i];
  }
  return sum;
}

void accumulate(float* out, const float* v, float w, uint32_t n) {
  for (uint32_t d = 0; d < n; ++d) out[d] += w * v[d];
}

// One KV head's row of a slot, from the f32 arena or the f16 recall rows (widened into buf).
struct RowSource {
  const float* arena;      // [n_slots][hd] of this KV head
  const uint16_t* recall;  // recall row 0 of this KV head, or null
  const RecallRowsF16& rr;
  uint32_t n_slots, hd;
  const float* row(uint32_t slot, float* buf) const {
    if (slot < n_slots) return arena + size_t{slot} * hd;
    const uint16_t* h = recall + (slot - rr.first) * rr.row_stride;
    for (uint32_t d = 0; d < hd; ++d) buf[d] = fp16_to_fp32(h[d]);
    return buf;
  }
};

}  // namespace

void check_slot_attn_shape(const SlotAttnShape& s, const RopeFreqs& rope) {
  if (s.n_head == 0 || s.n_head_kv == 0 || s.head_dim == 0 || s.n_head % s.n_head_kv != 0)
    throw_error("kv: attention shape n_head {} n_head_kv {} head_dim {} is invalid", s.n_head,
                s.n_head_kv, s.head_dim);
  if (rope.n_rot > s.head_dim || rope.inv_freq.size() != rope.n_rot / 2)
    throw_error("kv: rope n_rot {} does not fit head_dim {}", rope.n_rot, s.head_dim);
}

void check_recall_rows(const SlotAttnShape& s, const RecallRowsF16& r) {
  if (r.count == 0) return;
  if (r.k == nullptr || r.v == nullptr)
    throw_error("kv: recall rows: {} slots from {} but no K/V rows", r.count, r.first);
  if (r.row_stride < size_t{s.n_head_kv} * s.head_dim)
    throw_error("kv: recall rows: row_stride {} < n_head_kv {} * head_dim {}", r.row_stride,
                s.n_head_kv, s.head_dim);
  if (r.count > UINT32_MAX - r.first)
    throw_error("kv: recall rows: first {} + count {} overflows the slot ids", r.first, r.count);
  if (r.first < s.n_slots)
    throw_error("kv: recall slots [{}, {}) overlap the arena's {} slots", r.first,
                r.first + r.count, s.n_slots);
}

void slot_attention_ref(const SlotAttnShape& shape, const RopeFreqs& rope, const float* q,
                        const float* k, const float* v, std::span<const SlotRun> runs, float scale,
                        float* out, const RecallRowsF16& recall) {
  check_slot_attn_shape(shape, rope);
  check_recall_rows(shape, recall);
  const uint32_t hd = shape.head_dim, rep = shape.n_head / shape.n_head_kv;
  const size_t head_stride = size_t{shape.n_slots} * hd;  // one KV head of the arena
  size_t n_keys = 0;
  for (const SlotRun& r : runs) {
    for (uint32_t i = 0; i < r.count; ++i) {
      const uint32_t s = r.slots[i];
      if (s >= shape.n_slots &&
          (recall.count == 0 || s < recall.first || s - recall.first >= recall.count))
        throw_error("kv: active slot {} is neither in the arena of {} slots nor a recall slot", s,
                    shape.n_slots);
    }
    n_keys += r.count;
  }
  std::vector<float> qrot(runs.size() * shape.n_head * hd);  // [n_runs][n_head][hd]
  for (size_t r = 0; r < runs.size(); ++r)
    rope_rotate_at(rope, runs[r].rope_pos, q, qrot.data() + r * shape.n_head * hd, shape.n_head,
                   hd);
  std::vector<float> scores(n_keys);
  std::vector<float> wide(hd);  // [hd] one recall row widened to f32
  for (uint32_t h = 0; h < shape.n_head; ++h) {
    const uint32_t g = h / rep;
    const size_t rec_off = size_t{g} * hd;  // KV head g within a recall row
    const RowSource ks{k + g * head_stride, recall.count ? recall.k + rec_off : nullptr, recall,
                       shape.n_slots, hd};
    const RowSource vs{v + g * head_stride, recall.count ? recall.v + rec_off : nullptr, recall,
                       shape.n_slots, hd};
    float* o = out + size_t{h} * hd;
    for (uint32_t d = 0; d < hd; ++d) o[d] = 0.0f;
    if (n_keys == 0) continue;
    size_t j = 0;
    for (size_t r = 0; r < runs.size(); ++r)
      for (uint32_t i = 0; i < runs[r].count; ++i)
        scores[j++] = scale * dot_ref(qrot.data() + (r * shape.n_head + h) * hd,
                                      ks.row(runs[r].slots[i], wide.data()), hd);
    const float sum = softmax_numerators(scores.data(), n_keys);
    j = 0;
    for (size_t r = 0; r < runs.size(); ++r)
      for (uint32_t i = 0; i < runs[r].count; ++i)
        accumulate(o, vs.row(runs[r].slots[i], wide.data()), scores[j++] / sum, hd);
  }
}

void contiguous_attention_ref(const SlotAttnShape& shape, const float* qrot,
                              std::span<const uint32_t> key_group, const float* k, const float* v,
                              float scale, float* out) {
  const uint32_t hd = shape.head_dim, rep = shape.n_head / shape.n_head_kv;
  const size_t n_keys = key_group.size();
  const size_t row = size_t{shape.n_head_kv} * hd;  // one gathered key: all KV heads
  std::vector<float> scores(n_keys);
  for (uint32_t h = 0; h < shape.n_head; ++h) {
    float* o = out + size_t{h} * hd;
    for (uint32_t d = 0; d < hd; ++d) o[d] = 0.0f;
    if (n_keys == 0) continue;
    for (size_t j = 0; j < n_keys; ++j)
      scores[j] = scale * dot_ref(qrot + (size_t{key_group[j]} * shape.n_head + h) * hd,
                                  k + j * row + (h / rep) * hd, hd);
    const float sum = softmax_numerators(scores.data(), n_keys);
    for (size_t j = 0; j < n_keys; ++j)
      accumulate(o, v + j * row + (h / rep) * hd, scores[j] / sum, hd);
  }
}

}  // namespace channel
