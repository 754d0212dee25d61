// Channel's own K-quant weight quantizers (ops/quantize.h). Not llama-quantize's bits, but
// the same formats and the same kind of fit: each sub-block's scale (and minimum) is chosen
// among a few candidate grids by least squares, then the super-block's scales are quantized
// and every value is re-rounded against the scale it will actually be decoded with.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/fp16.h"
#include "ops/quant_k.h"
#include "ops/quantize.h"

namespace channel {
namespace {

int nearest(float v) {
  return static_cast<int>(std::nearbyint(v));
}

// x[n] ~ scale * L + min with L in [0, nmax], min <= 0. Returns scale, sets *neg_min = -min.
float fit_scale_min(const float* x, int n, int nmax, float* neg_min) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  lo = std::min(lo, 0.0f);
  if (hi <= lo) {
    *neg_min = -lo;
    return 0.0f;
  }
  float best_scale = (hi - lo) / static_cast<float>(nmax), best_min = lo;
  double best_err = INFINITY;
  for (int step = -5; step <= 10; ++step) {
    const float iscale = (static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / (hi - lo);
    double sl = 0, sll = 0, sx = 0, slx = 0;
    int L[32];
    for (int i = 0; i < n; ++i) {
      L[i] = std::clamp(nearest(iscale * (x[i] - lo)), 0, nmax);
      sl += L[i];
      sll += static_cast<double>(L[i]) * L[i];
      sx += x[i];
      slx += L[i] * static_cast<double>(x[i]);
    }
    const double det = n * sll - sl * sl;
    if (det <= 0) continue;
    double scale = (n * slx - sl * sx) / det, mn = (sll * sx - sl * slx) / det;
    if (mn > 0) {  // the format's minimum is subtracted: it cannot be positive
      mn = 0;
      scale = slx / sll;
    }
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double e = scale * L[i] + mn - x[i];
      err += e * e;
    }
    if (err < best_err) {
      best_err = err;
      best_scale = static_cast<float>(scale);
      best_min = static_cast<float>(mn);
    }
  }
  *neg_min = -best_min;
  return std::max(best_scale, 0.0f);
}

// x[n] ~ scale * L with L in [-nmax, nmax - 1]; returns scale (signed, like llama.cpp's).
float fit_scale_symmetric(const float* x, int n, int nmax) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax == 0) return 0.0f;
  float best = max / static_cast<float>(-nmax);
  double best_err = INFINITY;
  for (int step = -9; step <= 9; ++step) {
    const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    double sll = 0, slx = 0;
    int L[16];
    for (int i = 0; i < n; ++i) {
      L[i] = std::clamp(nearest(iscale * x[i]), -nmax, nmax - 1);
      sll += static_cast<double>(L[i]) * L[i];
      slx += L[i] * static_cast<double>(x[i]);
    }
    if (sll == 0) continue;
    const double scale = slx / sll;
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double e = scale * L[i] - x[i];
      err += e * e;
    }
    if (err < best_err) {
      best_err = err;
      best = static_cast<float>(scale);
    }
  }
  return best;
}

// Sub-block scales and minimums of one super-block for the (scale, min) types, quantized to
// `bits` bits under f16 super-scales d, dmin; L[256] the re-rounded quants in [0, nmax].
void quantize_scale_min(const float* x, int sub, int nmax, int bits, uint16_t* d_out,
                        uint16_t* dmin_out, int* q_sc, int* q_m, uint8_t* L) {
  const int n_sub = static_cast<int>(kQK_K) / sub;
  float scales[16], mins[16], max_scale = 0, max_min = 0;
  for (int j = 0; j < n_sub; ++j) {
    scales[j] = fit_scale_min(x + j * sub, sub, nmax, &mins[j]);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const int top = (1 << bits) - 1;
  const float d = max_scale / static_cast<float>(top), dmin = max_min / static_cast<float>(top);
  *d_out = fp32_to_fp16(d);
  *dmin_out = fp32_to_fp16(dmin);
  const float dd = fp16_to_fp32(*d_out), dm = fp16_to_fp32(*dmin_out);
  for (int j = 0; j < n_sub; ++j) {
    q_sc[j] = d > 0 ? std::clamp(nearest(scales[j] / d), 0, top) : 0;
    q_m[j] = dmin > 0 ? std::clamp(nearest(mins[j] / dmin), 0, top) : 0;
    const float s = dd * static_cast<float>(q_sc[j]), m = dm * static_cast<float>(q_m[j]);
    for (int i = 0; i < sub; ++i) {
      const float v = x[j * sub + i];
      L[j * sub + i] = static_cast<uint8_t>(s > 0 ? std::clamp(nearest((v + m) / s), 0, nmax) : 0);
    }
  }
}

// The symmetric types (Q3_K: nmax 4, 6-bit scales; Q6_K: nmax 32, 8-bit scales): per 16
// elements a signed scale; L[256] in [0, 2 nmax) (value + nmax).
void quantize_symmetric(const float* x, int nmax, int scale_neg, int scale_pos, uint16_t* d_out,
                        int* q_sc, uint8_t* L) {
  float scales[16], amax = 0, max = 0;
  for (int g = 0; g < 16; ++g) {
    scales[g] = fit_scale_symmetric(x + 16 * g, 16, nmax);
    if (std::fabs(scales[g]) > amax) {
      amax = std::fabs(scales[g]);
      max = scales[g];
    }
  }
  if (amax == 0) {
    *d_out = 0;
    for (int g = 0; g < 16; ++g) q_sc[g] = 0;
    std::memset(L, nmax, kQK_K);
    return;
  }
  const float iscale = -static_cast<float>(scale_neg) / max;
  *d_out = fp32_to_fp16(1.0f / iscale);
  const float d = fp16_to_fp32(*d_out);
  for (int g = 0; g < 16; ++g) {
    q_sc[g] = std::clamp(nearest(iscale * scales[g]), -scale_neg, scale_pos);
    const float s = d * static_cast<float>(q_sc[g]);
    for (int i = 0; i < 16; ++i) {
      const int q = s != 0 ? std::clamp(nearest(x[16 * g + i] / s), -nmax, nmax - 1) : 0;
      L[16 * g + i] = static_cast<uint8_t>(q + nmax);
    }
  }
}

template <typename Block>
void store(void* y, int64_t b, const Block& blk) {
  std::memcpy(static_cast<uint8_t*>(y) + b * static_cast<int64_t>(sizeof(Block)), &blk,
              sizeof(blk));
}

}  // namespace

void quantize_row_q2_K(const float* x, void* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK_K; ++b, x += kQK_K) {
    BlockQ2_K blk{};
    int sc[16], m[16];
    uint8_t L[kQK_K];
    quantize_scale_min(x, 16, 3, 4, &blk.d, &blk.dmin, sc, m, L);
    for (int g = 0; g < 16; ++g) blk.scales[g] = static_cast<uint8_t>(sc[g] | (m[g] << 4));
    for (int n = 0; n < 2; ++n)
      for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 32; ++l)
          blk.qs[32 * n + l] |= static_cast<uint8_t>(L[128 * n + 32 * j + l] << (2 * j));
    store(y, b, blk);
  }
}

void quantize_row_q3_K(const float* x, void* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK_K; ++b, x += kQK_K) {
    BlockQ3_K blk{};
    int sc[16];
    uint8_t L[kQK_K];
    quantize_symmetric(x, 4, 32, 31, &blk.d, sc, L);
    for (int i = 0; i < 16; ++i) {
      const int v = sc[i] + 32;  // stored 0..63
      if (i < 8) {
        blk.scales[i] |= static_cast<uint8_t>(v & 0x0f);
      } else {
        blk.scales[i - 8] |= static_cast<uint8_t>((v & 0x0f) << 4);
      }
      blk.scales[8 + i % 4] |= static_cast<uint8_t>((v >> 4) << (2 * (i / 4)));
    }
    for (int n = 0; n < 2; ++n)
      for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 32; ++l) {
          const uint8_t q = L[128 * n + 32 * j + l];
          blk.qs[32 * n + l] |= static_cast<uint8_t>((q & 3) << (2 * j));
          blk.hmask[l] |= static_cast<uint8_t>((q >> 2) << (4 * n + j));
        }
    store(y, b, blk);
  }
}

namespace {

template <typename Block>
void pack_k4_scales(Block& blk, const int sc[8], const int m[8]) {
  for (int j = 0; j < 4; ++j) {
    blk.scales[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    blk.scales[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    blk.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
  }
}

}  // namespace

void quantize_row_q4_K(const float* x, void* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK_K; ++b, x += kQK_K) {
    BlockQ4_K blk{};
    int sc[8], m[8];
    uint8_t L[kQK_K];
    quantize_scale_min(x, 32, 15, 6, &blk.d, &blk.dmin, sc, m, L);
    pack_k4_scales(blk, sc, m);
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 32; ++l)
        blk.qs[32 * j + l] = static_cast<uint8_t>(L[64 * j + l] | (L[64 * j + 32 + l] << 4));
    store(y, b, blk);
  }
}

void quantize_row_q5_K(const float* x, void* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK_K; ++b, x += kQK_K) {
    BlockQ5_K blk{};
    int sc[8], m[8];
    uint8_t L[kQK_K];
    quantize_scale_min(x, 32, 31, 6, &blk.d, &blk.dmin, sc, m, L);
    pack_k4_scales(blk, sc, m);
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo = L[64 * j + l], hi = L[64 * j + 32 + l];
        blk.qs[32 * j + l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
        blk.qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * j)) | ((hi >> 4) << (2 * j + 1)));
      }
    store(y, b, blk);
  }
}

void quantize_row_q6_K(const float* x, void* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK_K; ++b, x += kQK_K) {
    BlockQ6_K blk{};
    int sc[16];
    uint8_t L[kQK_K];
    quantize_symmetric(x, 32, 128, 127, &blk.d, sc, L);
    for (int g = 0; g < 16; ++g) blk.scales[g] = static_cast<int8_t>(sc[g]);
    for (int n = 0; n < 2; ++n)
      for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 32; ++l) {
          const uint8_t q = L[128 * n + 32 * j + l];
          uint8_t& ql = blk.ql[64 * n + 32 * (j % 2) + l];
          ql |= static_cast<uint8_t>(j < 2 ? (q & 0x0f) : ((q & 0x0f) << 4));
          blk.qh[32 * n + l] |= static_cast<uint8_t>((q >> 4) << (2 * j));
        }
    store(y, b, blk);
  }
}

}  // namespace channel
