#include "backend/cpu/matmul.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/quant_groups.h"
#include "backend/cpu/quant_kernels.h"
#include "backend/cpu/thread_scratch.h"
#include "backend/cpu/vec_kernels.h"
#include "ops/fp16.h"
#include "ops/quant.h"
#include "util/error.h"

namespace channel {
namespace {

// Block types whose activations are Q8_0 with per-block scales and zero-point corrections
// (the int8 GEMM of matmul_kernels.h); Q5_0 also has a quant_kernels.h table.
bool is_quant(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q5_0;
}

int32_t zero_point_of(GgmlType t) {
  return t == GgmlType::Q8_0 ? 128 : t == GgmlType::Q4_0 ? 8 : 16;
}

void check_type(const WeightMatrix& w) {
  if (cpu::quant_type_kernels(w.type)) return;
  switch (w.type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
      return;
    default:
      break;
  }
  throw_error("matmul: unsupported weight type {}", static_cast<uint32_t>(w.type));
}

// The caller's reusable activation buffer, 64-byte aligned (grows, never shrinks), so a
// decode step does not allocate.
struct Activations;
uint8_t* activation_scratch(size_t bytes) {
  return cpu::thread_scratch<Activations>(bytes);
}

// Quantizes token rows [t0, t1) to Q8_0 blocks, with each block's scale as f32 and its q sum
// times minus the weight's zero point (see cpu::MatmulInput).
void prepare_quant(const float* x, int64_t cols, int32_t zero_point, int64_t t0, int64_t t1,
                   uint8_t* xq, float* xd, int32_t* xcorr) {
  const int64_t nb = cols / kQK;
  for (int64_t t = t0; t < t1; ++t) {
    uint8_t* q = xq + t * nb * static_cast<int64_t>(sizeof(BlockQ8_0));
    cpu::quantize_row_q8_0(x + t * cols, q, cols);
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ8_0 blk = load_q8_0(q, b);
      int32_t sum = 0;
      for (int j = 0; j < kQK; ++j) sum += blk.qs[j];
      xd[t * nb + b] = fp16_to_fp32(blk.d);
      xcorr[t * nb + b] = -zero_point * sum;
    }
  }
}

// Prepares x for w's type (see matmul.h) in the calling thread's scratch.
cpu::MatmulInput prepare_input(const WeightMatrix& w, const float* x, int64_t n, ThreadPool& pool) {
  cpu::MatmulInput in;
  in.n = n;
  const int64_t nb = w.cols / kQK;
  // Activation prep is cheap next to the matmul; split it only when there is plenty.
  auto run = [&](int64_t items, const std::function<void(int64_t, int64_t, int)>& fn) {
    if (items >= 8) {
      pool.parallel_for(items, fn);
    } else {
      fn(0, items, 0);
    }
  };
  if (is_quant(w.type)) {
    const size_t q_bytes = static_cast<size_t>(n * nb) * sizeof(BlockQ8_0);
    const size_t q_padded = (q_bytes + 63) / 64 * 64;
    uint8_t* buf = activation_scratch(q_padded + static_cast<size_t>(n * nb) * 8);
    uint8_t* xq = buf;                                                         // [n][nb] blocks
    float* xd = reinterpret_cast<float*>(buf + q_padded);                      // [n][nb]
    int32_t* xcorr = reinterpret_cast<int32_t*>(buf + q_padded + n * nb * 4);  // [n][nb]
    const int32_t zero_point = zero_point_of(w.type);
    run(n, [&](int64_t t0, int64_t t1, int) {
      prepare_quant(x, w.cols, zero_point, t0, t1, xq, xd, xcorr);
    });
    in.xq = xq;
    in.xq_row_bytes = static_cast<size_t>(nb) * sizeof(BlockQ8_0);
    in.xd = xd;
    in.xcorr = xcorr;
  } else if (const cpu::QuantTypeKernels* qk = cpu::quant_type_kernels(w.type)) {
    const size_t row_bytes = static_cast<size_t>(w.cols / qk->block_elems * qk->act_block_bytes);
    uint8_t* xq = activation_scratch(static_cast<size_t>(n) * row_bytes);  // [n][row_bytes]
    run(n, [&](int64_t t0, int64_t t1, int) {
      for (int64_t t = t0; t < t1; ++t)
        qk->quantize_act(x + t * w.cols, xq + t * row_bytes, w.cols);
    });
    in.xq = xq;
    in.xq_row_bytes = row_bytes;
  } else if (w.type == GgmlType::F32) {
    in.xf = x;
  } else {
    float* xf = reinterpret_cast<float*>(activation_scratch(static_cast<size_t>(n * w.cols) * 4));
    run(n, [&](int64_t t0, int64_t t1, int) {
      for (int64_t t = t0; t < t1; ++t) {
        if (w.type == GgmlType::F16) {
          cpu::round_row_f16(x + t * w.cols, xf + t * w.cols, w.cols);
        } else {
          cpu::round_row_bf16(x + t * w.cols, xf + t * w.cols, w.cols);
        }
      }
    });
    in.xf = xf;
  }
  return in;
}

}  // namespace

void matmul(const WeightMatrix& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  const WeightMatrix* ws[] = {&w};
  float* const ys[] = {y};
  matmul_fused(ws, x, n, ys, pool);
}

void matmul_fused(std::span<const WeightMatrix* const> ws, const float* x, int64_t n,
                  std::span<float* const> ys, ThreadPool& pool) {
  constexpr size_t kMaxFused = 8;
  if (ws.size() != ys.size() || ws.size() > kMaxFused)
    throw_error("matmul_fused: {} weights and {} outputs (at most {})", ws.size(), ys.size(),
                kMaxFused);
  if (ws.empty() || n <= 0) {
    for (const WeightMatrix* w : ws) check_type(*w);
    return;
  }
  const WeightMatrix& w0 = *ws[0];
  for (const WeightMatrix* w : ws) {
    check_type(*w);
    if (w->type != w0.type || w->cols != w0.cols) {  // different activations: one at a time
      for (size_t i = 0; i < ws.size(); ++i) matmul(*ws[i], x, n, ys[i], pool);
      return;
    }
  }
  const cpu::MatmulInput in = prepare_input(w0, x, n, pool);
  // Each matrix's rows in units of `granule` rows, numbered one matrix after another, so a
  // unit never spans two matrices and every matrix is split where it would be alone.
  const int64_t granule = cpu::matmul_row_granule(w0.type, n);
  int64_t first_unit[kMaxFused + 1] = {0};
  for (size_t i = 0; i < ws.size(); ++i)
    first_unit[i + 1] = first_unit[i] + (ws[i]->rows + granule - 1) / granule;
  pool.parallel_for(first_unit[ws.size()], [&](int64_t u0, int64_t u1, int) {
    for (size_t i = 0; i < ws.size(); ++i) {
      const int64_t a = std::max(u0, first_unit[i]), b = std::min(u1, first_unit[i + 1]);
      if (a >= b) continue;
      const WeightMatrix& w = *ws[i];
      const cpu::MatmulWeights cw{w.type, w.data, w.row_bytes, w.rows, w.cols, w.groups};
      cpu::matmul_rows(cw, in, (a - first_unit[i]) * granule,
                       std::min((b - first_unit[i]) * granule, w.rows), ys[i], w.rows);
    }
  });
}

namespace {

// Row `row` of regrouped weights back in the file's blocks, in a buffer of this thread: the
// file's rows are dropped from memory once the groups are made (Model).
const uint8_t* regrouped_row(const WeightMatrix& w, int64_t row) {
  thread_local std::vector<uint8_t> blocks;
  blocks.resize(w.row_bytes);
  cpu::quant_groups_row(w.type, w.groups, w.cols, row, blocks.data());
  return blocks.data();
}

}  // namespace

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
      cpu::dequantize_row_q4_0(w.groups ? regrouped_row(w, row) : wr, out, w.cols);
      return;
    default:
      if (const cpu::QuantTypeKernels* qk = cpu::quant_type_kernels(w.type)) {
        qk->dequantize(w.groups ? regrouped_row(w, row) : wr, out, w.cols);
        return;
      }
      break;
  }
  throw_error("dequantize_row: unsupported weight type {}", static_cast<uint32_t>(w.type));
}

void matmul_ref(const WeightMatrix& w, const float* x, int64_t n, float* y) {
  check_type(w);
  const cpu::QuantTypeKernels* qk = cpu::quant_type_kernels_ref(w.type);
  std::vector<uint8_t> xa(qk ? static_cast<size_t>(w.cols / qk->block_elems * qk->act_block_bytes)
                             : 0);                               // the type's activation blocks
  std::vector<float> xr(static_cast<size_t>(w.cols));            // [cols]
  std::vector<BlockQ8_0> xq(static_cast<size_t>(w.cols / kQK));  // [cols / 32]
  for (int64_t t = 0; t < n; ++t) {
    const float* xt = x + t * w.cols;
    for (int64_t i = 0; i < w.cols; ++i) {
      if (w.type == GgmlType::F16) {
        xr[i] = fp16_to_fp32(fp32_to_fp16(xt[i]));
      } else if (w.type == GgmlType::BF16) {
        xr[i] = bf16_to_fp32(fp32_to_bf16(xt[i]));
      } else {
        xr[i] = xt[i];
      }
    }
    if (is_quant(w.type)) quantize_row_q8_0_ref(xt, xq.data(), w.cols);
    if (qk) qk->quantize_act(xt, xa.data(), w.cols);
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
        default:
          v = qk->dot(wr, xa.data(), w.cols / qk->block_elems);
          break;
      }
      y[t * w.rows + r] = v;
    }
  }
}

}  // namespace channel
