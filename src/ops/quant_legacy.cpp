#include "ops/quant_legacy.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
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

template <typename Block>
void store_block(void* row, int64_t i, const Block& b) {
  std::memcpy(static_cast<uint8_t*>(row) + i * static_cast<int64_t>(sizeof(Block)), &b, sizeof(b));
}

// Nibbles (and fifth bits from qh, when given) of a 32-element block, unsigned.
void unpack_nibbles(const uint8_t qs[kQK / 2], const uint8_t* qh_bytes, int8_t q[kQK]) {
  uint32_t qh = 0;
  if (qh_bytes) std::memcpy(&qh, qh_bytes, sizeof(qh));
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = static_cast<int8_t>((qs[j] & 0x0f) | (((qh >> j) & 1) << 4));
    q[j + kQK / 2] = static_cast<int8_t>((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
  }
}

// Packs unsigned 4- or 5-bit quants into nibbles and (for 5 bits) qh.
void pack_nibbles(const uint8_t q[kQK], uint8_t qs[kQK / 2], uint8_t* qh_bytes) {
  uint32_t qh = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + kQK / 2] & 0x0f) << 4));
    qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((q[j + kQK / 2] >> 4) & 1) << (j + 16);
  }
  if (qh_bytes) std::memcpy(qh_bytes, &qh, sizeof(qh));
}

// Q4_1 / Q5_1: scale and minimum of a block, q = min(top, trunc((x - min) / d + 0.5)).
void quantize_min_block(const float* x, int top, uint16_t* d_out, uint16_t* m_out, uint8_t q[kQK]) {
  float min = FLT_MAX, max = -FLT_MAX;
  for (int j = 0; j < kQK; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  const float d = (max - min) / static_cast<float>(top);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = fp32_to_fp16(d);
  *m_out = fp32_to_fp16(min);
  for (int j = 0; j < kQK; ++j) {
    q[j] = static_cast<uint8_t>(std::min(top, static_cast<int>((x[j] - min) * id + 0.5f)));
  }
}

}  // namespace

void unpack_q4_1(const void* row, int64_t i, int8_t q[kQK], float* d, float* m) {
  const auto b = load_block<BlockQ4_1>(row, i);
  unpack_nibbles(b.qs, nullptr, q);
  *d = fp16_to_fp32(b.d);
  *m = fp16_to_fp32(b.m);
}

void unpack_q5_0(const void* row, int64_t i, int8_t q[kQK], float* d) {
  const auto b = load_block<BlockQ5_0>(row, i);
  unpack_nibbles(b.qs, b.qh, q);
  for (int j = 0; j < kQK; ++j) q[j] = static_cast<int8_t>(q[j] - 16);
  *d = fp16_to_fp32(b.d);
}

void unpack_q5_1(const void* row, int64_t i, int8_t q[kQK], float* d, float* m) {
  const auto b = load_block<BlockQ5_1>(row, i);
  unpack_nibbles(b.qs, b.qh, q);
  *d = fp16_to_fp32(b.d);
  *m = fp16_to_fp32(b.m);
}

void dequantize_row_q4_1_ref(const void* x, float* y, int64_t k) {
  int8_t q[kQK];
  float d, m;
  for (int64_t b = 0; b < k / kQK; ++b) {
    unpack_q4_1(x, b, q, &d, &m);
    for (int j = 0; j < kQK; ++j) y[b * kQK + j] = static_cast<float>(q[j]) * d + m;
  }
}

void dequantize_row_q5_0_ref(const void* x, float* y, int64_t k) {
  int8_t q[kQK];
  float d;
  for (int64_t b = 0; b < k / kQK; ++b) {
    unpack_q5_0(x, b, q, &d);
    for (int j = 0; j < kQK; ++j) y[b * kQK + j] = static_cast<float>(q[j]) * d;
  }
}

void dequantize_row_q5_1_ref(const void* x, float* y, int64_t k) {
  int8_t q[kQK];
  float d, m;
  for (int64_t b = 0; b < k / kQK; ++b) {
    unpack_q5_1(x, b, q, &d, &m);
    for (int j = 0; j < kQK; ++j) y[b * kQK + j] = static_cast<float>(q[j]) * d + m;
  }
}

void quantize_row_q8_1_ref(const float* x, void* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b) {
    const float* xb = x + b * kQK;  // [32]
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    BlockQ8_1 blk;
    int32_t sum = 0;
    for (int j = 0; j < kQK; ++j) {
      blk.qs[j] = static_cast<int8_t>(std::nearbyint(xb[j] * id));
      sum += blk.qs[j];
    }
    blk.d = fp32_to_fp16(d);
    blk.s = fp32_to_fp16(d * static_cast<float>(sum));
    store_block(y, b, blk);
  }
}

void quantize_row_q4_1_ref(const float* x, void* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b) {
    BlockQ4_1 blk;
    uint8_t q[kQK];
    quantize_min_block(x + b * kQK, 15, &blk.d, &blk.m, q);
    pack_nibbles(q, blk.qs, nullptr);
    store_block(y, b, blk);
  }
}

void quantize_row_q5_1_ref(const float* x, void* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b) {
    BlockQ5_1 blk;
    uint8_t q[kQK];
    quantize_min_block(x + b * kQK, 31, &blk.d, &blk.m, q);
    pack_nibbles(q, blk.qs, blk.qh);
    store_block(y, b, blk);
  }
}

void quantize_row_q5_0_ref(const float* x, void* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b) {
    const float* xb = x + b * kQK;  // [32]
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      if (std::fabs(xb[j]) > amax) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ5_0 blk;
    blk.d = fp32_to_fp16(d);
    uint8_t q[kQK];
    for (int j = 0; j < kQK; ++j) {
      q[j] = static_cast<uint8_t>(
          std::min(31, static_cast<int>(static_cast<int8_t>(xb[j] * id + 16.5f))));
    }
    pack_nibbles(q, blk.qs, blk.qh);
    store_block(y, b, blk);
  }
}

float dot_q5_0_ref(const void* w, const void* x, int64_t n_blocks) {
  double sum = 0.0;
  int8_t q[kQK];
  float dw;
  for (int64_t b = 0; b < n_blocks; ++b) {
    unpack_q5_0(w, b, q, &dw);
    const BlockQ8_0 xb = load_q8_0(x, b);
    int32_t isum = 0;
    for (int j = 0; j < kQK; ++j) isum += q[j] * xb.qs[j];
    sum += static_cast<double>(dw * fp16_to_fp32(xb.d)) * isum;
  }
  return static_cast<float>(sum);
}

namespace {

template <void (*kUnpack)(const void*, int64_t, int8_t*, float*, float*)>
float dot_min_ref(const void* w, const void* x, int64_t n_blocks) {
  double sum = 0.0;
  int8_t q[kQK];
  float dw, mw;
  for (int64_t b = 0; b < n_blocks; ++b) {
    kUnpack(w, b, q, &dw, &mw);
    const auto xb = load_block<BlockQ8_1>(x, b);
    int32_t isum = 0;
    for (int j = 0; j < kQK; ++j) isum += q[j] * xb.qs[j];
    sum += static_cast<double>(dw * fp16_to_fp32(xb.d)) * isum +
           static_cast<double>(mw * fp16_to_fp32(xb.s));
  }
  return static_cast<float>(sum);
}

}  // namespace

float dot_q4_1_ref(const void* w, const void* x, int64_t n_blocks) {
  return dot_min_ref<unpack_q4_1>(w, x, n_blocks);
}

float dot_q5_1_ref(const void* w, const void* x, int64_t n_blocks) {
  return dot_min_ref<unpack_q5_1>(w, x, n_blocks);
}

}  // namespace channel
