#include "ops/matmul.h"

#include <cstring>
#include <vector>

#include "backend/cpu/vec_kernels.h"
#include "ops/fp16.h"
#include "ops/quant.h"
#include "util/error.h"

namespace channel {
namespace {

// Bytes of one token's prepared activations for a weight type.
size_t activation_row_bytes(GgmlType type, int64_t cols) {
  switch (type) {
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
      return static_cast<size_t>(cols / kQK) * sizeof(BlockQ8_0);
    default:
      return static_cast<size_t>(cols) * sizeof(float);
  }
}

// Converts one token's activations to what the weight type's dot expects.
void prepare_activation(GgmlType type, const float* x, int64_t cols, uint8_t* out) {
  switch (type) {
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
      cpu::quantize_row_q8_0(x, out, cols);
      break;
    case GgmlType::F16:
      cpu::round_row_f16(x, reinterpret_cast<float*>(out), cols);
      break;
    case GgmlType::BF16:
      cpu::round_row_bf16(x, reinterpret_cast<float*>(out), cols);
      break;
    case GgmlType::F32:
      std::memcpy(out, x, static_cast<size_t>(cols) * sizeof(float));
      break;
  }
}

float dot_row(const WeightMatrix& w, int64_t row, const uint8_t* xa) {
  const uint8_t* wr = w.data + static_cast<size_t>(row) * w.row_bytes;
  switch (w.type) {
    case GgmlType::Q8_0:
      return cpu::dot_q8_0(wr, xa, w.cols / kQK);
    case GgmlType::Q4_0:
      return cpu::dot_q4_0(wr, xa, w.cols / kQK);
    case GgmlType::F16:
      return cpu::dot_f16(reinterpret_cast<const uint16_t*>(wr), reinterpret_cast<const float*>(xa),
                          w.cols);
    case GgmlType::BF16:
      return cpu::dot_bf16(reinterpret_cast<const uint16_t*>(wr),
                           reinterpret_cast<const float*>(xa), w.cols);
    case GgmlType::F32:
      return cpu::dot_f32(reinterpret_cast<const float*>(wr), reinterpret_cast<const float*>(xa),
                          w.cols);
  }
  return 0.0f;
}

void check_type(const WeightMatrix& w) {
  switch (w.type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
      return;
  }
  throw_error("matmul: unsupported weight type {}", static_cast<uint32_t>(w.type));
}

// The caller's reusable activation buffer (grows, never shrinks), so a decode step does
// not allocate.
std::vector<uint8_t>& activation_scratch(size_t bytes) {
  thread_local std::vector<uint8_t> scratch;
  if (scratch.size() < bytes) scratch.resize(bytes);
  return scratch;
}

}  // namespace

void matmul(const WeightMatrix& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  check_type(w);
  if (n <= 0) return;
  const size_t xa_row_bytes = activation_row_bytes(w.type, w.cols);
  uint8_t* xa =
      activation_scratch(xa_row_bytes * static_cast<size_t>(n)).data();  // [n][xa_row_bytes]
  auto prepare = [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      prepare_activation(w.type, x + t * w.cols, w.cols,
                         xa + static_cast<size_t>(t) * xa_row_bytes);
    }
  };
  if (n >= 4) {
    pool.parallel_for(n, prepare);
  } else {
    prepare(0, n, 0);
  }
  pool.parallel_for(w.rows, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t t = 0; t < n; ++t) {
        y[t * w.rows + r] = dot_row(w, r, xa + static_cast<size_t>(t) * xa_row_bytes);
      }
    }
  });
}

void dequantize_row(const WeightMatrix& w, int64_t row, float* out) {
  const uint8_t* wr = w.data + static_cast<size_t>(row) * w.row_bytes;
  switch (w.type) {
    case GgmlType::F32:
      std::memcpy(out, wr, static_cast<size_t>(w.cols) * sizeof(float));
      return;
    case GgmlType::F16:
      cpu::dequantize_row_f16(reinterpret_cast<const uint16_t*>(wr), out, w.cols);
      return;
    case GgmlType::BF16:
      cpu::dequantize_row_bf16(reinterpret_cast<const uint16_t*>(wr), out, w.cols);
      return;
    case GgmlType::Q8_0:
      cpu::dequantize_row_q8_0(wr, out, w.cols);
      return;
    case GgmlType::Q4_0:
      cpu::dequantize_row_q4_0(wr, out, w.cols);
      return;
  }
  throw_error("dequantize_row: unsupported weight type {}", static_cast<uint32_t>(w.type));
}

void matmul_ref(const WeightMatrix& w, const float* x, int64_t n, float* y) {
  check_type(w);
  std::vector<float> xr(static_cast<size_t>(w.cols));            // [cols]
  std::vector<BlockQ8_0> xq(static_cast<size_t>(w.cols / kQK));  // [cols / 32]
  for (int64_t t = 0; t < n; ++t) {
    const float* xt = x + t * w.cols;
    for (int64_t i = 0; i < w.cols; ++i) {
      if (w.type == GgmlType::F16)
        xr[i] = fp16_to_fp32(fp32_to_fp16(xt[i]));
      else if (w.type == GgmlType::BF16)
        xr[i] = bf16_to_fp32(fp32_to_bf16(xt[i]));
      else
        xr[i] = xt[i];
    }
    if (w.type == GgmlType::Q8_0 || w.type == GgmlType::Q4_0) {
      quantize_row_q8_0_ref(xt, xq.data(), w.cols);
    }
    for (int64_t r = 0; r < w.rows; ++r) {
      const uint8_t* wr = w.data + static_cast<size_t>(r) * w.row_bytes;
      const auto* w16 = reinterpret_cast<const uint16_t*>(wr);
      float v = 0.0f;
      switch (w.type) {
        case GgmlType::F32:
          v = dot_f32_ref(reinterpret_cast<const float*>(wr), xr.data(), w.cols);
          break;
        case GgmlType::F16:
          v = dot_f16_ref(w16, xr.data(), w.cols);
          break;
        case GgmlType::BF16:
          v = dot_bf16_ref(w16, xr.data(), w.cols);
          break;
        case GgmlType::Q8_0:
          v = dot_q8_0_ref(wr, xq.data(), w.cols / kQK);
          break;
        case GgmlType::Q4_0:
          v = dot_q4_0_ref(wr, xq.data(), w.cols / kQK);
          break;
      }
      y[t * w.rows + r] = v;
    }
  }
}

}  // namespace channel
