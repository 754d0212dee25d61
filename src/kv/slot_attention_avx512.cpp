// The AVX-512 variant of slot_attention: its own blocked driver (keys scored 16 at a time,
// outputs in registers), rows 16 values at a time, masked tails.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/simd.h"
#include "backend/cpu/simd_reduce.h"
#include "kv/slot_attention.h"
#include "ops/fp16.h"

namespace channel {

#if defined(CHANNEL_SIMD_AVX512)

namespace kv_avx512 {
namespace {

constexpr uint32_t kW = 16;  // lanes, and keys per scoring block
constexpr uint32_t kHeads = 4;  // query heads per pass: their accumulators stay in registers

// 16 values of a row widened to f32 (f32 rows as they are, f16 rows converted exactly); the
// lanes outside m are zero and nothing outside them is read.
__m512 load16(const float* x, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, x);
}
__m512 load16(const uint16_t* x, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x));
}

// The K or V rows of one KV head: slot s < n_slots in the f32 arena, above it an f16 recall
// row (slots are trusted: they come from the session's rings).
struct Rows {
  const float* arena;  // [n_slots][hd]
  const uint16_t* recall;
  uint32_t n_slots, first;
  size_t stride;
  uint32_t hd;
  const float* f32(uint32_t s) const { return arena + size_t{s} * hd; }
  const uint16_t* f16(uint32_t s) const { return recall + (s - first) * stride; }
};

// (padded query) · row over hd values, the row's tail masked.
template <typename T>
__m512 row_dot(const float* qh, const T* row, uint32_t hd) {
  __m512 a = _mm512_setzero_ps();
  uint32_t c = 0;
  for (; c + kW <= hd; c += kW) a = _mm512_fmadd_ps(_mm512_loadu_ps(qh + c), load16(row + c, 0xFFFF), a);
  if (c < hd) a = _mm512_fmadd_ps(_mm512_loadu_ps(qh + c), load16(row + c, simd::lanes16(int(hd - c))), a);
  return a;
}

// sc[j] <- scale · qh · K[slots[i]] for the nk <= 16 keys of one block.
void score_block(const Rows& k, const uint32_t* slots, int nk, const float* qh, __m512 vscale,
                 float* sc) {
  __m512 acc[kW];
#pragma GCC unroll 16
  for (int i = 0; i < int(kW); ++i) {
    __m512 a = _mm512_setzero_ps();
    if (i < nk) {
      const uint32_t s = slots[i];
      a = s < k.n_slots ? row_dot(qh, k.f32(s), k.hd) : row_dot(qh, k.f16(s), k.hd);
    }
    acc[simd::reduce16_slot(i)] = a;
  }
  _mm512_mask_storeu_ps(sc, simd::lanes16(nk), _mm512_mul_ps(simd::reduce16(acc), vscale));
}

// o_h[c0, c0 + 64) <- inv_h · Σ_j p_hj V[j] for NH heads, their 4 x NH accumulators in
// registers while every V row of the runs streams by once.
template <int NH>
void weighted_pass(const Rows& v, std::span<const SlotRun> runs, const float* const* p,
                   const float* inv, uint32_t c0, float* const* o) {
  __mmask16 m[4];
  #pragma GCC unroll 4
  for (uint32_t c = 0; c < 4; ++c) m[c] = simd::lanes16(int(v.hd - c0 - c * kW));
  __m512 a[NH][4];
  #pragma GCC unroll 4
  for (int h = 0; h < NH; ++h)
    #pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) a[h][c] = _mm512_setzero_ps();
  size_t j = 0;
  for (const SlotRun& r : runs) {
    for (uint32_t i = 0; i < r.count; ++i, ++j) {
      const uint32_t s = r.slots[i];
      __m512 x[4];
      if (s < v.n_slots) {
        const float* row = v.f32(s) + c0;
        #pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) x[c] = load16(row + c * kW, m[c]);
      } else {
        const uint16_t* row = v.f16(s) + c0;
        #pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) x[c] = load16(row + c * kW, m[c]);
      }
      #pragma GCC unroll 4
      for (int h = 0; h < NH; ++h) {
        const __m512 w = _mm512_set1_ps(p[h][j]);
        #pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) a[h][c] = _mm512_fmadd_ps(w, x[c], a[h][c]);
      }
    }
  }
  #pragma GCC unroll 4
  for (int h = 0; h < NH; ++h) {
    const __m512 vi = _mm512_set1_ps(inv[h]);
    #pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) _mm512_mask_storeu_ps(o[h] + c0 + c * kW, m[c], _mm512_mul_ps(a[h][c], vi));
  }
}

// row[0, n) <- e^(row − max); returns their sum.
float softmax_numerators(float* s, size_t n) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 vmax = neg_inf;
  for (size_t i = 0; i < n; i += kW) {
    vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(neg_inf, simd::lanes16(int(n - i)), s + i));
  }
  const __m512 vm = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512 vsum = _mm512_setzero_ps();
  for (size_t i = 0; i < n; i += kW) {
    const __mmask16 m = simd::lanes16(int(n - i));
    const __m512 e = simd::exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + i), vm));
    _mm512_mask_storeu_ps(s + i, m, e);
    vsum = _mm512_add_ps(vsum, _mm512_maskz_mov_ps(m, e));
  }
  return _mm512_reduce_add_ps(vsum);
}

// The driver (contract in slot_attention.h), blocked: per KV head, keys scored 16 at once
// for each query head (one accumulator per key, reduced together), the softmax; then, for
// up to kHeads query heads at a time, every V row read once with the outputs (64 dims) in
// registers.
void slot_attention_blocked(const SlotAttnShape& shape, const RopeFreqs& rope, const float* q,
                            const float* k, const float* v, std::span<const SlotRun> runs,
                            float scale, float* out, SlotAttnScratch& scratch,
                            const RecallRowsF16& recall) {
  const uint32_t hd = shape.head_dim, rep = shape.n_head / shape.n_head_kv;
  const uint32_t hdp = (hd + kW - 1) / kW * kW;
  const size_t head_stride = size_t{shape.n_slots} * hd;  // one KV head of the arena
  const size_t q_stride = size_t{shape.n_head} * hd;      // one rotated query
  size_t n_keys = 0;
  for (const SlotRun& r : runs) n_keys += r.count;
  const size_t n_runs = runs.size();
  scratch.cs.resize(n_runs * rope.n_rot);
  // [n_runs][n_head][hd] rotated queries, then [n_runs][n_head][hdp] the same zero-padded
  scratch.qrot.resize(n_runs * q_stride + n_runs * shape.n_head * hdp);
  scratch.scores.resize(rep * n_keys);
  scratch.inv_sum.resize(rep);
  float* qpad = scratch.qrot.data() + n_runs * q_stride;
  for (size_t r = 0; r < n_runs; ++r) {
    float* cs = scratch.cs.data() + r * rope.n_rot;
    float* qr = scratch.qrot.data() + r * q_stride;
    rope_cos_sin(rope, runs[r].rope_pos, cs);
    rope_rotate(rope, cs, q, qr, shape.n_head, hd);
    for (uint32_t h = 0; h < shape.n_head; ++h) {
      for (uint32_t c = 0; c < hdp; c += kW) {
        _mm512_storeu_ps(qpad + (r * shape.n_head + h) * hdp + c,
                         load16(qr + size_t{h} * hd + c, simd::lanes16(int(hd - c))));
      }
    }
  }
  const __m512 vscale = _mm512_set1_ps(scale);
  for (uint32_t g = 0; g < shape.n_head_kv; ++g) {
    const Rows krows{k + g * head_stride, recall.count ? recall.k + size_t{g} * hd : nullptr,
                     shape.n_slots, recall.first, recall.row_stride, hd};
    const Rows vrows{v + g * head_stride, recall.count ? recall.v + size_t{g} * hd : nullptr,
                     shape.n_slots, recall.first, recall.row_stride, hd};
    float* o = out + size_t{g} * rep * hd;  // the rep query heads of KV head g
    if (n_keys == 0) {
      for (size_t d = 0; d < size_t{rep} * hd; ++d) o[d] = 0.0f;
      continue;
    }
    float* sc = scratch.scores.data();  // [rep][n_keys]
    // Scores: blocks of 16 keys in order within each run (a block never spans two runs:
    // they rotate the query differently), each block scored for every head while its rows
    // are in L1. A score's bits do not depend on the block: each key's accumulator is
    // reduced on its own.
    size_t j = 0;
    for (size_t r = 0; r < n_runs; ++r) {
      const float* qg = qpad + (r * shape.n_head + size_t{g} * rep) * hdp;
      for (uint32_t i = 0; i < runs[r].count; i += kW) {
        const int nk = int(std::min<uint32_t>(kW, runs[r].count - i));
        for (uint32_t h = 0; h < rep; ++h) {
          score_block(krows, runs[r].slots + i, nk, qg + size_t{h} * hdp, vscale,
                      sc + size_t{h} * n_keys + j);
        }
        j += size_t(nk);
      }
    }
    for (uint32_t h = 0; h < rep; ++h) {
      scratch.inv_sum[h] = 1.0f / softmax_numerators(sc + size_t{h} * n_keys, n_keys);
    }
    for (uint32_t h0 = 0; h0 < rep; h0 += kHeads) {
      const uint32_t nh = std::min(kHeads, rep - h0);
      const float* p[kHeads];
      float* oh[kHeads];
      for (uint32_t h = 0; h < nh; ++h) {
        p[h] = sc + size_t{h0 + h} * n_keys;
        oh[h] = o + size_t{h0 + h} * hd;
      }
      const float* inv = scratch.inv_sum.data() + h0;
      for (uint32_t c0 = 0; c0 < hd; c0 += 4 * kW) {
        switch (nh) {
          case 1: weighted_pass<1>(vrows, runs, p, inv, c0, oh); break;
          case 2: weighted_pass<2>(vrows, runs, p, inv, c0, oh); break;
          case 3: weighted_pass<3>(vrows, runs, p, inv, c0, oh); break;
          default: weighted_pass<4>(vrows, runs, p, inv, c0, oh); break;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kv_avx512

const SlotAttentionVariant* slot_attention_avx512_variant() {
  static const SlotAttentionVariant v{"avx512", kv_avx512::slot_attention_blocked};
  return &v;
}

#else  // CHANNEL_SIMD_AVX512

const SlotAttentionVariant* slot_attention_avx512_variant() {
  return nullptr;  // this compiler cannot target avx512
}

#endif  // CHANNEL_SIMD_AVX512

}  // namespace channel
