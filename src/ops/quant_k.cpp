#include "ops/quant_k.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "ops/fp16.h"

namespace channel {
namespace {

template <typename Block>
Block load_block(const void* row, int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const uint8_t*>(row) + i * static_cast<int64_t>(sizeof(Block)),
              sizeof(b));
  return b;
}

void dequantize_parts(const KBlockParts& p, float* y) {
  for (int64_t i = 0; i < kQK_K; ++i) {
    const float dl = p.d * static_cast<float>(p.sc[i / 16]);
    const float ml = p.dmin * static_cast<float>(p.m[i / 16]);
    y[i] = dl * static_cast<float>(p.u[i] - p.offset) - ml;
  }
}

template <void (*kUnpack)(const void*, int64_t, KBlockParts*)>
void dequantize_row_k(const void* x, float* y, int64_t k) {
  KBlockParts p;
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    kUnpack(x, b, &p);
    dequantize_parts(p, y + b * kQK_K);
  }
}

template <void (*kUnpack)(const void*, int64_t, KBlockParts*)>
float dot_k(const void* w, const void* x, int64_t n_blocks) {
  double sum = 0.0;
  KBlockParts p;
  for (int64_t b = 0; b < n_blocks; ++b) {
    kUnpack(w, b, &p);
    const auto* xb =
        reinterpret_cast<const uint8_t*>(x) + b * static_cast<int64_t>(sizeof(BlockQ8_K));
    float xd;
    std::memcpy(&xd, xb + offsetof(BlockQ8_K, d), sizeof(xd));
    int8_t xq[kQK_K];
    std::memcpy(xq, xb + offsetof(BlockQ8_K, qs), sizeof(xq));
    int16_t bsums[kQK_K / 16];
    std::memcpy(bsums, xb + offsetof(BlockQ8_K, bsums), sizeof(bsums));
    int32_t sumi = 0, summ = 0;
    for (int g = 0; g < kQK_K / 16; ++g) {
      int32_t s = 0;
      for (int i = 16 * g; i < 16 * g + 16; ++i) s += (p.u[i] - p.offset) * xq[i];
      sumi += p.sc[g] * s;
      summ += p.m[g] * bsums[g];
    }
    sum += static_cast<double>(p.d * xd) * sumi - static_cast<double>(p.dmin * xd) * summ;
  }
  return static_cast<float>(sum);
}

}  // namespace

void k4_scale_min(const uint8_t q[12], int j, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void q3_k_scales(const uint8_t s[12], int out[16]) {
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? s[i] & 0x0f : s[i - 8] >> 4;
    const int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    out[i] = low | (high << 4);
  }
}

void unpack_q2_K(const void* row, int64_t i, KBlockParts* p) {
  const auto b = load_block<BlockQ2_K>(row, i);
  p->d = fp16_to_fp32(b.d);
  p->dmin = fp16_to_fp32(b.dmin);
  p->offset = 0;
  for (int g = 0; g < 16; ++g) {
    p->sc[g] = static_cast<int16_t>(b.scales[g] & 0x0f);
    p->m[g] = static_cast<int16_t>(b.scales[g] >> 4);
  }
  // Element 128n + 32k + l is bits 2k..2k+1 of qs[32n + l].
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l)
        p->u[128 * n + 32 * k + l] = static_cast<uint8_t>((b.qs[32 * n + l] >> (2 * k)) & 3);
}

void unpack_q3_K(const void* row, int64_t i, KBlockParts* p) {
  const auto b = load_block<BlockQ3_K>(row, i);
  p->d = fp16_to_fp32(b.d);
  p->dmin = 0;
  p->offset = 4;
  int sc[16];
  q3_k_scales(b.scales, sc);
  for (int g = 0; g < 16; ++g) {
    p->sc[g] = static_cast<int16_t>(sc[g] - 32);
    p->m[g] = 0;
  }
  // As Q2_K, plus the third bit: bit 4n + k of hmask[l].
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) {
        const int low = (b.qs[32 * n + l] >> (2 * k)) & 3;
        const int high = (b.hmask[l] >> (4 * n + k)) & 1;
        p->u[128 * n + 32 * k + l] = static_cast<uint8_t>(low | (high << 2));
      }
}

namespace {

// Q4_K/Q5_K: element 64j + l (l < 32) is the low nibble of qs[32j + l], element 64j + 32 + l
// its high nibble; sub-block s (32 elements) has scale and minimum s.
template <typename Block>
void unpack_k4(const Block& b, const uint8_t* qh, KBlockParts* p) {
  p->d = fp16_to_fp32(b.d);
  p->dmin = fp16_to_fp32(b.dmin);
  p->offset = 0;
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    k4_scale_min(b.scales, s, &sc, &m);
    p->sc[2 * s] = p->sc[2 * s + 1] = static_cast<int16_t>(sc);
    p->m[2 * s] = p->m[2 * s + 1] = static_cast<int16_t>(m);
  }
  for (int j = 0; j < 4; ++j)
    for (int l = 0; l < 32; ++l) {
      const uint8_t q = b.qs[32 * j + l];
      int lo = q & 0x0f, hi = q >> 4;
      if (qh) {  // Q5_K: the fifth bits of elements 64j + l and 64j + 32 + l
        lo |= ((qh[l] >> (2 * j)) & 1) << 4;
        hi |= ((qh[l] >> (2 * j + 1)) & 1) << 4;
      }
      p->u[64 * j + l] = static_cast<uint8_t>(lo);
      p->u[64 * j + 32 + l] = static_cast<uint8_t>(hi);
    }
}

}  // namespace

void unpack_q4_K(const void* row, int64_t i, KBlockParts* p) {
  const auto b = load_block<BlockQ4_K>(row, i);
  unpack_k4(b, nullptr, p);
}

void unpack_q5_K(const void* row, int64_t i, KBlockParts* p) {
  const auto b = load_block<BlockQ5_K>(row, i);
  unpack_k4(b, b.qh, p);
}

void unpack_q6_K(const void* row, int64_t i, KBlockParts* p) {
  const auto b = load_block<BlockQ6_K>(row, i);
  p->d = fp16_to_fp32(b.d);
  p->dmin = 0;
  p->offset = 32;
  for (int g = 0; g < 16; ++g) {
    p->sc[g] = b.scales[g];
    p->m[g] = 0;
  }
  // Half n: element 128n + 32k + l takes nibble (k / 2) of ql[64n + 32(k % 2) + l] and bits
  // 2k..2k+1 of qh[32n + l] above it.
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) {
        const uint8_t ql = b.ql[64 * n + 32 * (k % 2) + l];
        const int low = k < 2 ? ql & 0x0f : ql >> 4;
        const int high = (b.qh[32 * n + l] >> (2 * k)) & 3;
        p->u[128 * n + 32 * k + l] = static_cast<uint8_t>(low | (high << 4));
      }
}

void dequantize_row_q2_K_ref(const void* x, float* y, int64_t k) {
  dequantize_row_k<unpack_q2_K>(x, y, k);
}
void dequantize_row_q3_K_ref(const void* x, float* y, int64_t k) {
  dequantize_row_k<unpack_q3_K>(x, y, k);
}
void dequantize_row_q4_K_ref(const void* x, float* y, int64_t k) {
  dequantize_row_k<unpack_q4_K>(x, y, k);
}
void dequantize_row_q5_K_ref(const void* x, float* y, int64_t k) {
  dequantize_row_k<unpack_q5_K>(x, y, k);
}
void dequantize_row_q6_K_ref(const void* x, float* y, int64_t k) {
  dequantize_row_k<unpack_q6_K>(x, y, k);
}

void quantize_row_q8_K_ref(const float* x, void* y, int64_t k) {
  auto* out = static_cast<uint8_t*>(y);
  for (int64_t b = 0; b < k / kQK_K; ++b, x += kQK_K, out += sizeof(BlockQ8_K)) {
    BlockQ8_K blk{};
    float amax = 0.0f, max = 0.0f;
    for (int64_t j = 0; j < kQK_K; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax != 0.0f) {
      const float iscale = -127.0f / max;
      for (int64_t j = 0; j < kQK_K; ++j) {
        const float v = std::nearbyint(iscale * x[j]);
        blk.qs[j] = static_cast<int8_t>(std::min(127.0f, v));
      }
      for (int g = 0; g < kQK_K / 16; ++g) {
        int sum = 0;
        for (int j = 16 * g; j < 16 * g + 16; ++j) sum += blk.qs[j];
        blk.bsums[g] = static_cast<int16_t>(sum);
      }
      blk.d = 1.0f / iscale;
    }
    std::memcpy(out, &blk, sizeof(blk));
  }
}

float dot_q2_K_ref(const void* w, const void* x, int64_t n) {
  return dot_k<unpack_q2_K>(w, x, n);
}
float dot_q3_K_ref(const void* w, const void* x, int64_t n) {
  return dot_k<unpack_q3_K>(w, x, n);
}
float dot_q4_K_ref(const void* w, const void* x, int64_t n) {
  return dot_k<unpack_q4_K>(w, x, n);
}
float dot_q5_K_ref(const void* w, const void* x, int64_t n) {
  return dot_k<unpack_q5_K>(w, x, n);
}
float dot_q6_K_ref(const void* w, const void* x, int64_t n) {
  return dot_k<unpack_q6_K>(w, x, n);
}

}  // namespace channel
