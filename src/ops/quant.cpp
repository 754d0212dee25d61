#include "ops/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/fp16.h"

namespace channel {

BlockQ8_0 load_q8_0(const void* row, int64_t i) {
  BlockQ8_0 b;
  std::memcpy(&b, static_cast<const uint8_t*>(row) + i * sizeof(BlockQ8_0), sizeof(b));
  return b;
}

BlockQ4_0 load_q4_0(const void* row, int64_t i) {
  BlockQ4_0 b;
  std::memcpy(&b, static_cast<const uint8_t*>(row) + i * sizeof(BlockQ4_0), sizeof(b));
  return b;
}

static void store_block(void* row, int64_t i, const void* block, size_t size) {
  std::memcpy(static_cast<uint8_t*>(row) + i * size, block, size);
}

void dequantize_row_f16_ref(const uint16_t* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k; ++i) y[i] = fp16_to_fp32(x[i]);
}

void dequantize_row_bf16_ref(const uint16_t* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k; ++i) y[i] = bf16_to_fp32(x[i]);
}

void dequantize_row_q8_0_ref(const void* x, float* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b) {
    const BlockQ8_0 blk = load_q8_0(x, b);
    const float d = fp16_to_fp32(blk.d);
    for (int64_t j = 0; j < kQK; ++j) y[b * kQK + j] = d * static_cast<float>(blk.qs[j]);
  }
}

void dequantize_row_q4_0_ref(const void* x, float* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b) {
    const BlockQ4_0 blk = load_q4_0(x, b);
    const float d = fp16_to_fp32(blk.d);
    for (int64_t j = 0; j < kQK / 2; ++j) {
      y[b * kQK + j] = d * static_cast<float>((blk.qs[j] & 0x0f) - 8);
      y[b * kQK + j + kQK / 2] = d * static_cast<float>((blk.qs[j] >> 4) - 8);
    }
  }
}

void quantize_row_q8_0_ref(const float* x, void* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b) {
    const float* xb = x + b * kQK;  // [32]
    float amax = 0.0f;
    for (int64_t j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    BlockQ8_0 blk;
    blk.d = fp32_to_fp16(amax / 127.0f);
    // nearbyint in the default rounding mode rounds ties to even, like the SIMD quantizer.
    for (int64_t j = 0; j < kQK; ++j) blk.qs[j] = static_cast<int8_t>(std::nearbyint(xb[j] * id));
    store_block(y, b, &blk, sizeof(blk));
  }
}

void quantize_row_q8_0_weights_ref(const float* x, void* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b) {
    const float* xb = x + b * kQK;  // [32]
    float amax = 0.0f;
    for (int64_t j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_0 blk;
    blk.d = fp32_to_fp16(d);
    for (int64_t j = 0; j < kQK; ++j) blk.qs[j] = static_cast<int8_t>(std::round(xb[j] * id));
    store_block(y, b, &blk, sizeof(blk));
  }
}

void quantize_row_q4_0_ref(const float* x, void* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b) {
    const float* xb = x + b * kQK;  // [32]
    float amax = 0.0f, max = 0.0f;
    for (int64_t j = 0; j < kQK; ++j) {
      if (std::fabs(xb[j]) > amax) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    auto q = [&](float v) {
      return std::min(15, static_cast<int>(static_cast<int8_t>(v * id + 8.5f)));
    };
    BlockQ4_0 blk;
    blk.d = fp32_to_fp16(d);
    for (int64_t j = 0; j < kQK / 2; ++j) {
      blk.qs[j] = static_cast<uint8_t>(q(xb[j]) | (q(xb[j + kQK / 2]) << 4));
    }
    store_block(y, b, &blk, sizeof(blk));
  }
}

float dot_f32_ref(const float* w, const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(w[i]) * x[i];
  return static_cast<float>(sum);
}

float dot_f16_ref(const uint16_t* w, const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(fp16_to_fp32(w[i])) * x[i];
  return static_cast<float>(sum);
}

float dot_bf16_ref(const uint16_t* w, const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(bf16_to_fp32(w[i])) * x[i];
  return static_cast<float>(sum);
}

float dot_q8_0_ref(const void* w, const void* x, int64_t n_blocks) {
  double sum = 0.0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ8_0 wb = load_q8_0(w, b), xb = load_q8_0(x, b);
    int32_t isum = 0;
    for (int64_t j = 0; j < kQK; ++j) isum += wb.qs[j] * xb.qs[j];
    sum += static_cast<double>(fp16_to_fp32(wb.d) * fp16_to_fp32(xb.d)) * isum;
  }
  return static_cast<float>(sum);
}

float dot_q4_0_ref(const void* w, const void* x, int64_t n_blocks) {
  double sum = 0.0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ4_0 wb = load_q4_0(w, b);
    const BlockQ8_0 xb = load_q8_0(x, b);
    int32_t isum = 0;
    for (int64_t j = 0; j < kQK / 2; ++j) {
      isum += ((wb.qs[j] & 0x0f) - 8) * xb.qs[j];
      isum += ((wb.qs[j] >> 4) - 8) * xb.qs[j + kQK / 2];
    }
    sum += static_cast<double>(fp16_to_fp32(wb.d) * fp16_to_fp32(xb.d)) * isum;
  }
  return static_cast<float>(sum);
}

}  // namespace channel
