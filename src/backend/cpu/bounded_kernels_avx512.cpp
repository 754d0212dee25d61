// The AVX-512 variant of the bounded group kernel (contract in bounded_kernels.h): keys in
// blocks of 16, each rotated once into a zero-padded buffer shared by the group's heads,
// 16 scores per head reduced together, e^x by simd::exp_ps, outputs in registers.
#include <algorithm>
#include <limits>
#include <vector>

#include "backend/cpu/bounded_kernels.h"
#include "backend/cpu/simd.h"
#include "backend/cpu/simd_reduce.h"

namespace channel::cpu {

#if defined(CHANNEL_SIMD_AVX512)

namespace {

constexpr int kW = 16;  // lanes, and keys per block

__mmask16 lanes(int n) {
  return simd::lanes16(n);
}

int round_up(int n) {
  return (n + kW - 1) / kW * kW;
}

// dst (hdp floats, zero past hd) <- R(−d) k: pairs (i, i + half) as (c k0 + s k1, c k1 − s k0),
// the other dims copied. half = 0 copies the row.
void rotate_row(const float* k, const float* c, const float* s, int half, int hd, int hdp,
                float* dst) {
  for (int p = 0; p < half; p += kW) {
    const __mmask16 m = lanes(half - p);
    const __m512 k0 = _mm512_maskz_loadu_ps(m, k + p), k1 = _mm512_maskz_loadu_ps(m, k + half + p);
    const __m512 vc = _mm512_maskz_loadu_ps(m, c + p), vs = _mm512_maskz_loadu_ps(m, s + p);
    _mm512_mask_storeu_ps(dst + p, m, _mm512_fmadd_ps(vc, k0, _mm512_mul_ps(vs, k1)));
    _mm512_mask_storeu_ps(dst + half + p, m, _mm512_fmsub_ps(vc, k1, _mm512_mul_ps(vs, k0)));
  }
  for (int p = 2 * half; p < hdp; p += kW) {
    _mm512_mask_storeu_ps(dst + p, lanes(hdp - p), _mm512_maskz_loadu_ps(lanes(hd - p), k + p));
  }
}

// Scores of nk <= 16 keys (rows of kb) for every head: row h, columns [col, col + nk).
void score_block(const BoundedGroupTask& t, const float* qbuf, int hdp, const float* kb, int nk,
                 int col) {
  const __m512 scale = _mm512_set1_ps(t.scale);
  for (int h = 0; h < t.n_q; ++h) {
    const float* qh = qbuf + static_cast<size_t>(h) * hdp;
    __m512 acc[kW];
    for (int i = 0; i < kW; ++i) {
      __m512 a = _mm512_setzero_ps();
      if (i < nk) {
        const float* kr = kb + static_cast<size_t>(i) * hdp;
        for (int c = 0; c < hdp; c += kW) {
          a = _mm512_fmadd_ps(_mm512_loadu_ps(qh + c), _mm512_loadu_ps(kr + c), a);
        }
      }
      acc[simd::reduce16_slot(i)] = a;
    }
    float* row = t.scores + static_cast<size_t>(h) * t.score_stride + col;
    _mm512_mask_storeu_ps(row, lanes(nk), _mm512_mul_ps(simd::reduce16(acc), scale));
  }
}

// row[0, n) <- e^(row − max); returns 1 / their sum.
float softmax_row(float* row, int n) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 vmax = neg_inf;
  for (int i = 0; i < n; i += kW) {
    vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(neg_inf, lanes(n - i), row + i));
  }
  const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512 vsum = _mm512_setzero_ps();
  for (int i = 0; i < n; i += kW) {
    const __mmask16 m = lanes(n - i);
    const __m512 e = simd::exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, row + i), mx));
    _mm512_mask_storeu_ps(row + i, m, e);
    vsum = _mm512_add_ps(vsum, _mm512_maskz_mov_ps(m, e));
  }
  return 1.0f / _mm512_reduce_add_ps(vsum);
}

// o[0, hd) <- inv · (Σ_s p_s sink_v_s + Σ_d p_d values_d), 64 dims at a time in registers.
void weighted_sum(const BoundedGroupTask& t, const float* p, float inv, float* o) {
  const int hd = t.head_dim;
  for (int c0 = 0; c0 < hd; c0 += 4 * kW) {
    const __mmask16 m0 = lanes(hd - c0), m1 = lanes(hd - c0 - kW), m2 = lanes(hd - c0 - 2 * kW),
                    m3 = lanes(hd - c0 - 3 * kW);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    auto add = [&](float w_, const float* v) {
      const __m512 w = _mm512_set1_ps(w_);
      a0 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m0, v), a0);
      a1 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m1, v + kW), a1);
      a2 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m2, v + 2 * kW), a2);
      a3 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m3, v + 3 * kW), a3);
    };
    for (int s = 0; s < t.n_sinks; ++s) add(p[s], t.sink_v + static_cast<size_t>(s) * hd + c0);
    for (int d = 0; d < t.len; ++d) add(p[t.n_sinks + d], t.values[d] + c0);
    const __m512 vinv = _mm512_set1_ps(inv);
    _mm512_mask_storeu_ps(o + c0, m0, _mm512_mul_ps(a0, vinv));
    _mm512_mask_storeu_ps(o + c0 + kW, m1, _mm512_mul_ps(a1, vinv));
    _mm512_mask_storeu_ps(o + c0 + 2 * kW, m2, _mm512_mul_ps(a2, vinv));
    _mm512_mask_storeu_ps(o + c0 + 3 * kW, m3, _mm512_mul_ps(a3, vinv));
  }
}

void attend(const BoundedGroupTask& t) {
  const int hd = t.head_dim, hdp = round_up(hd);
  thread_local std::vector<float> qbuf, kbuf;  // grow, never shrink: decoding allocates nothing
  if (qbuf.size() < static_cast<size_t>(t.n_q) * hdp) qbuf.resize(static_cast<size_t>(t.n_q) * hdp);
  if (kbuf.size() < static_cast<size_t>(kW) * hdp) kbuf.resize(static_cast<size_t>(kW) * hdp);
  for (int h = 0; h < t.n_q; ++h) {  // zero-padded queries
    rotate_row(t.q + static_cast<size_t>(h) * hd, nullptr, nullptr, 0, hd, hdp,
               qbuf.data() + static_cast<size_t>(h) * hdp);
  }
  for (int b0 = 0; b0 < t.n_sinks; b0 += kW) {
    const int nk = std::min(kW, t.n_sinks - b0);
    for (int i = 0; i < nk; ++i) {
      rotate_row(t.sink_k + static_cast<size_t>(b0 + i) * hd, nullptr, nullptr, 0, hd, hdp,
                 kbuf.data() + static_cast<size_t>(i) * hdp);
    }
    score_block(t, qbuf.data(), hdp, kbuf.data(), nk, b0);
  }
  for (int d0 = 0; d0 < t.len; d0 += kW) {
    const int nk = std::min(kW, t.len - d0);
    for (int i = 0; i < nk; ++i) {
      const size_t d = static_cast<size_t>(d0 + i);
      rotate_row(t.keys[d], t.cos + d * t.half, t.sin + d * t.half, t.half, hd, hdp,
                 kbuf.data() + static_cast<size_t>(i) * hdp);
    }
    score_block(t, qbuf.data(), hdp, kbuf.data(), nk, t.n_sinks + d0);
  }
  for (int h = 0; h < t.n_q; ++h) {
    float* row = t.scores + static_cast<size_t>(h) * t.score_stride;
    const float inv = softmax_row(row, t.n_sinks + t.len);
    weighted_sum(t, row, inv, t.out + static_cast<size_t>(h) * hd);
  }
}

}  // namespace

const BoundedKernelVariant* bounded_kernel_avx512_variant() {
  static const BoundedKernelVariant v{"avx512", attend};
  return &v;
}

#else  // CHANNEL_SIMD_AVX512

const BoundedKernelVariant* bounded_kernel_avx512_variant() {
  return nullptr;  // this compiler cannot target avx512
}

#endif  // CHANNEL_SIMD_AVX512

}  // namespace channel::cpu
