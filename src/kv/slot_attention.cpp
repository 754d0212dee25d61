// The SIMD attention kernel over the active-slot table (contract in slot_attention.h).
// Per KV head it scores every key for all query heads that share it (each K row is read
// once), takes the softmax with a vectorised exp, and accumulates V rows the same way.
// Recall rows (f16) go through dot_f16 / axpy_f16, which widen 16 or 8 halves at a time.
#include <cmath>
#include <cstring>
#include <limits>

#include "kv/slot_attention.h"
#include "ops/fp16.h"
#include "util/error.h"

#if defined(__AVX512F__) || defined(__AVX2__)
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_ps().
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

namespace channel {

namespace {

#if defined(__AVX512F__)

constexpr const char* kIsa = "avx512";

// 16 values of a row widened to f32: f32 rows as they are, f16 rows converted exactly.
__m512 load16(const float* x) {
  return _mm512_loadu_ps(x);
}
__m512 load16(const uint16_t* x) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
}

// The first n < 16 values widened, the rest zero; reads nothing past x + n.
__m512 load16_tail(const float* x, uint32_t n) {
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), x);
}
__m512 load16_tail(const uint16_t* x, uint32_t n) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << n) - 1), x));
#else
  alignas(32) uint16_t buf[16] = {};
  std::memcpy(buf, x, n * sizeof(uint16_t));
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(buf)));
#endif
}

// a . b over n values; b is a K row, f32 or f16.
template <typename T>
float dot(const float* a, const T* b, uint32_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  uint32_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), load16(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), load16(b + i + 16), acc1);
  }
  for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), load16(b + i), acc0);
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), load16_tail(b + i, n - i), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

// y += w x; x is a V row, f32 or f16.
template <typename T>
void axpy(float* y, const T* x, float w, uint32_t n) {
  const __m512 vw = _mm512_set1_ps(w);
  uint32_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(vw, load16(x + i), _mm512_loadu_ps(y + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(
        y + i, m, _mm512_fmadd_ps(vw, load16_tail(x + i, n - i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

// exp(x) for x <= 0 (Cephes-style: x = n ln2 + r, degree-6 polynomial in r, scale by 2^n).
__m512 exp_ps(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

// s[i] <- exp(s[i] - max); returns the sum.
float softmax_numerators(float* s, size_t n) {
  __m512 vmax = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  size_t i = 0;
  for (; i + 16 <= n; i += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(s + i));
  float mx = _mm512_reduce_max_ps(vmax);
  for (; i < n; ++i) mx = std::max(mx, s[i]);
  const __m512 vm = _mm512_set1_ps(mx);
  __m512 vsum = _mm512_setzero_ps();
  for (i = 0; i + 16 <= n; i += 16) {
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(s + i), vm));
    _mm512_storeu_ps(s + i, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + i), vm));
    _mm512_mask_storeu_ps(s + i, m, e);
    vsum = _mm512_add_ps(vsum, _mm512_maskz_mov_ps(m, e));
  }
  return _mm512_reduce_add_ps(vsum);
}

#elif defined(__AVX2__)

constexpr const char* kIsa = "avx2";

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 8 values of a row widened to f32 (f16 through F16C when the build has it), and one value.
__m256 load8(const float* x) {
  return _mm256_loadu_ps(x);
}
__m256 load8(const uint16_t* x) {
#if defined(__F16C__)
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
#else
  alignas(32) float f[8];
  for (int i = 0; i < 8; ++i) f[i] = fp16_to_fp32(x[i]);
  return _mm256_load_ps(f);
#endif
}
float value(float x) {
  return x;
}
float value(uint16_t x) {
  return fp16_to_fp32(x);
}

template <typename T>
float dot(const float* a, const T* b, uint32_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  uint32_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), load8(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8(b + i), acc0);
  float s = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += a[i] * value(b[i]);
  return s;
}

template <typename T>
void axpy(float* y, const T* x, float w, uint32_t n) {
  const __m256 vw = _mm256_set1_ps(w);
  uint32_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(vw, load8(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += w * value(x[i]);
}

__m256 exp_ps(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));  // keeps 2^n a normal float
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

float softmax_numerators(float* s, size_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, s[i]);
  const __m256 vm = _mm256_set1_ps(mx);
  __m256 vsum = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(s + i), vm));
    _mm256_storeu_ps(s + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  float sum = hsum(vsum);
  for (; i < n; ++i) {
    s[i] = std::exp(s[i] - mx);
    sum += s[i];
  }
  return sum;
}

#else

constexpr const char* kIsa = "scalar";

float value(float x) {
  return x;
}
float value(uint16_t x) {
  return fp16_to_fp32(x);
}

template <typename T>
float dot(const float* a, const T* b, uint32_t n) {
  float s = 0.0f;
  for (uint32_t i = 0; i < n; ++i) s += a[i] * value(b[i]);
  return s;
}

template <typename T>
void axpy(float* y, const T* x, float w, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) y[i] += w * value(x[i]);
}

float softmax_numerators(float* s, size_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, s[i]);
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    s[i] = std::exp(s[i] - mx);
    sum += s[i];
  }
  return sum;
}

#endif

}  // namespace

const char* slot_attention_isa() {
  return kIsa;
}

void slot_attention(const SlotAttnShape& shape, const RopeFreqs& rope, const float* q,
                    const float* k, const float* v, std::span<const SlotRun> runs, float scale,
                    float* out, SlotAttnScratch& scratch, const RecallRowsF16& recall) {
  check_slot_attn_shape(shape, rope);
  check_recall_rows(shape, recall);
  const uint32_t hd = shape.head_dim, rep = shape.n_head / shape.n_head_kv;
  const size_t head_stride = size_t{shape.n_slots} * hd;  // one KV head of the arena
  const size_t q_stride = size_t{shape.n_head} * hd;      // one rotated query
  size_t n_keys = 0;
  for (const SlotRun& r : runs) n_keys += r.count;
  scratch.cs.resize(runs.size() * rope.n_rot);
  scratch.qrot.resize(runs.size() * q_stride);
  scratch.scores.resize(rep * n_keys);
  scratch.inv_sum.resize(rep);
  for (size_t r = 0; r < runs.size(); ++r) {
    float* cs = scratch.cs.data() + r * rope.n_rot;
    rope_cos_sin(rope, runs[r].rope_pos, cs);
    rope_rotate(rope, cs, q, scratch.qrot.data() + r * q_stride, shape.n_head, hd);
  }
  for (uint32_t g = 0; g < shape.n_head_kv; ++g) {
    const float* kh = k + g * head_stride;
    const float* vh = v + g * head_stride;
    // Recall row 0 of KV head g; a slot >= n_slots is a recall slot (slots are trusted).
    const uint16_t* rk = recall.count ? recall.k + size_t{g} * hd : nullptr;
    const uint16_t* rv = recall.count ? recall.v + size_t{g} * hd : nullptr;
    float* o = out + size_t{g} * rep * hd;  // the rep query heads of KV head g
    for (size_t d = 0; d < size_t{rep} * hd; ++d) o[d] = 0.0f;
    if (n_keys == 0) continue;
    float* sc = scratch.scores.data();  // [rep][n_keys]
    size_t j = 0;
    for (size_t r = 0; r < runs.size(); ++r) {
      const float* qg = scratch.qrot.data() + r * q_stride + size_t{g} * rep * hd;
      for (uint32_t i = 0; i < runs[r].count; ++i, ++j) {
        const uint32_t s = runs[r].slots[i];
        if (s < shape.n_slots) {
          const float* krow = kh + size_t{s} * hd;
          for (uint32_t h = 0; h < rep; ++h)
            sc[h * n_keys + j] = scale * dot(qg + h * hd, krow, hd);
        } else {
          const uint16_t* krow = rk + (s - recall.first) * recall.row_stride;
          for (uint32_t h = 0; h < rep; ++h)
            sc[h * n_keys + j] = scale * dot(qg + h * hd, krow, hd);
        }
      }
    }
    float* inv = scratch.inv_sum.data();
    for (uint32_t h = 0; h < rep; ++h) inv[h] = 1.0f / softmax_numerators(sc + h * n_keys, n_keys);
    j = 0;
    for (size_t r = 0; r < runs.size(); ++r)
      for (uint32_t i = 0; i < runs[r].count; ++i, ++j) {
        const uint32_t s = runs[r].slots[i];
        if (s < shape.n_slots) {
          const float* vrow = vh + size_t{s} * hd;
          for (uint32_t h = 0; h < rep; ++h)
            axpy(o + h * hd, vrow, sc[h * n_keys + j] * inv[h], hd);
        } else {
          const uint16_t* vrow = rv + (s - recall.first) * recall.row_stride;
          for (uint32_t h = 0; h < rep; ++h)
            axpy(o + h * hd, vrow, sc[h * n_keys + j] * inv[h], hd);
        }
      }
  }
}

}  // namespace channel
