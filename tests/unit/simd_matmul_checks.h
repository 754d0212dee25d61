// The matmul family's checks of simd_variants_test: the row kernels (backend/cpu/
// vec_kernels.h), the block types' kernels (quant_kernels.h) and the matmul loops
// (matmul_kernels.h) of one variant against the scalar references, at awkward sizes and
// misaligned starts. Include only from simd_variants_test.cpp.
#pragma once

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/quant_kernels.h"
#include "backend/cpu/vec_kernels.h"
#include "gguf/ggml_type.h"
#include "ops/fp16.h"
#include "ops/quant.h"
#include "ops/quant_k.h"
#include "ops/quant_legacy.h"
#include "support/quant_fixtures.h"

namespace channel::simd_checks {

// The block types of quant_kernels.h.
constexpr GgmlType kBlockTypes[] = {GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K,
                                    GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

inline std::string type_name(GgmlType t) {
  return ggml_type_name(static_cast<uint32_t>(t));
}

// Rounding-error scale of a float dot.
inline float dot_tolerance(const float* a, const float* b, int64_t n) {
  double mag = 0.0;
  for (int64_t i = 0; i < n; ++i) mag += std::fabs(static_cast<double>(a[i]) * b[i]);
  return static_cast<float>(1e-5 * mag + 1e-6);
}

// Float rows: rounding and dequantizing bit for bit, dots to rounding.
inline void check_vec_float_rows(const cpu::VecKernels& K) {
  for (int64_t n : {1, 3, 7, 15, 17, 31, 33, 63, 65, 127, 129}) {
    for (int off = 0; off < 4; ++off) {
      SCOPED_TRACE(std::string(K.isa) + " n=" + std::to_string(n) +
                   " offset=" + std::to_string(off));
      const auto wf_all = test::random_normal_floats(n + off, static_cast<uint32_t>(n * 8 + off));
      const auto xf_all =
          test::random_normal_floats(n + off, static_cast<uint32_t>(n * 8 + off + 1000));
      std::vector<uint16_t> wh_all(n + off), wb_all(n + off);
      for (int64_t i = 0; i < n + off; ++i) {
        wh_all[i] = fp32_to_fp16(wf_all[i]);
        wb_all[i] = fp32_to_bf16(wf_all[i]);
      }
      const float* wf = wf_all.data() + off;
      const float* xf = xf_all.data() + off;
      const uint16_t* wh = wh_all.data() + off;
      const uint16_t* wb = wb_all.data() + off;

      std::vector<float> xh_all(n + off), xb_all(n + off);
      float* xh = xh_all.data() + off;
      float* xb = xb_all.data() + off;
      K.round_row_f16(xf, xh, n);
      K.round_row_bf16(xf, xb, n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(xh[i], fp16_to_fp32(fp32_to_fp16(xf[i]))) << i;
        ASSERT_EQ(xb[i], bf16_to_fp32(fp32_to_bf16(xf[i]))) << i;
      }

      std::vector<float> got_all(n + off + 1, -7.0f), want(n);
      float* got = got_all.data() + off;
      K.dequantize_row_f16(wh, got, n);
      dequantize_row_f16_ref(wh, want.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << i;
      EXPECT_EQ(got[n], -7.0f) << "wrote past the end";
      K.dequantize_row_bf16(wb, got, n);
      dequantize_row_bf16_ref(wb, want.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << i;
      EXPECT_EQ(got[n], -7.0f) << "wrote past the end";

      std::vector<float> whf(n), wbf(n);
      dequantize_row_f16_ref(wh, whf.data(), n);
      dequantize_row_bf16_ref(wb, wbf.data(), n);
      EXPECT_NEAR(K.dot_f32(wf, xf, n), dot_f32_ref(wf, xf, n), dot_tolerance(wf, xf, n));
      EXPECT_NEAR(K.dot_f16(wh, xh, n), dot_f16_ref(wh, xh, n), dot_tolerance(whf.data(), xh, n));
      EXPECT_NEAR(K.dot_bf16(wb, xb, n), dot_bf16_ref(wb, xb, n), dot_tolerance(wbf.data(), xb, n));
    }
  }
}

// Q8_0 / Q4_0 rows: quantizing and dequantizing bit for bit, dots to rounding; and the
// quantizer's edge blocks (all zero, a scale that underflows f16, large magnitudes).
inline void check_vec_block_rows(const cpu::VecKernels& K) {
  for (int64_t nb : {1, 3, 7, 15, 17, 31, 33, 63, 65, 127, 129}) {
    const int64_t k = nb * kQK;
    for (int off = 0; off < 4; ++off) {
      SCOPED_TRACE(std::string(K.isa) + " blocks=" + std::to_string(nb) +
                   " offset=" + std::to_string(off));
      // Activations: a float row (misaligned by `off` floats) quantized to misaligned bytes.
      const auto x_all =
          test::random_normal_floats(k + off, static_cast<uint32_t>(nb * 4 + off), 2.0f);
      const float* x = x_all.data() + off;
      std::vector<uint8_t> xq_all(nb * sizeof(BlockQ8_0) + off), xq_ref(nb * sizeof(BlockQ8_0));
      uint8_t* xq = xq_all.data() + off;
      K.quantize_row_q8_0(x, xq, k);
      quantize_row_q8_0_ref(x, xq_ref.data(), k);
      ASSERT_EQ(std::memcmp(xq, xq_ref.data(), xq_ref.size()), 0) << "quantize_row_q8_0";
      std::vector<float> xd(k);
      dequantize_row_q8_0_ref(xq, xd.data(), k);

      const auto w8_all =
          test::random_blocks(GgmlType::Q8_0, nb, static_cast<uint32_t>(nb + off), off);
      const auto w4_all =
          test::random_blocks(GgmlType::Q4_0, nb, static_cast<uint32_t>(nb - off), off);
      const uint8_t* w8 = w8_all.data() + off;
      const uint8_t* w4 = w4_all.data() + off;
      std::vector<float> got_all(k + off + 1, -7.0f), want(k);
      float* got = got_all.data() + off;

      K.dequantize_row_q8_0(w8, got, k);
      dequantize_row_q8_0_ref(w8, want.data(), k);
      for (int64_t i = 0; i < k; ++i) ASSERT_EQ(got[i], want[i]) << i;
      EXPECT_EQ(got[k], -7.0f) << "wrote past the end";
      EXPECT_NEAR(K.dot_q8_0(w8, xq, nb), dot_q8_0_ref(w8, xq, nb),
                  dot_tolerance(want.data(), xd.data(), k));

      K.dequantize_row_q4_0(w4, got, k);
      dequantize_row_q4_0_ref(w4, want.data(), k);
      for (int64_t i = 0; i < k; ++i) ASSERT_EQ(got[i], want[i]) << i;
      EXPECT_EQ(got[k], -7.0f) << "wrote past the end";
      EXPECT_NEAR(K.dot_q4_0(w4, xq, nb), dot_q4_0_ref(w4, xq, nb),
                  dot_tolerance(want.data(), xd.data(), k));
    }
  }
  std::vector<float> x(3 * kQK, 0.0f);  // block 0 all zero
  x[kQK] = 1e-30f;                      // block 1: scale underflows to f16 zero
  for (int j = 0; j < kQK; ++j) x[2 * kQK + j] = (j % 2 ? -6e4f : 6e4f) * (j + 1) / kQK;
  std::vector<BlockQ8_0> got(3), want(3);
  K.quantize_row_q8_0(x.data(), got.data(), static_cast<int64_t>(x.size()));
  quantize_row_q8_0_ref(x.data(), want.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(std::memcmp(got.data(), want.data(), sizeof(BlockQ8_0) * 3), 0) << K.isa;
}

inline void check_vec_kernels(const cpu::VecKernels& K) {
  check_vec_float_rows(K);
  check_vec_block_rows(K);
}

// Each block type's table: activation quantizer and dequantizer bit for bit, the dot to
// rounding, at awkward block counts and misaligned rows; fuzzed blocks (NaN, inf, subnormal
// scales) read and write nothing out of bounds and do not trap.
inline void check_quant_kernels(const cpu::QuantKernels& V) {
  for (GgmlType t : kBlockTypes) {
    const cpu::QuantTypeKernels* K = V.for_type(t);
    const cpu::QuantTypeKernels* R = cpu::quant_type_kernels_ref(t);
    ASSERT_NE(K, nullptr) << V.isa << " " << type_name(t);
    for (int64_t nb : {1, 2, 3, 5, 9, 13}) {
      for (int pad = 0; pad < 4; pad += 3) {
        SCOPED_TRACE(std::string(V.isa) + " " + type_name(t) + " blocks=" + std::to_string(nb) +
                     " pad=" + std::to_string(pad));
        const int64_t k = nb * R->block_elems;
        const auto x_all =
            test::random_normal_floats(k + pad, static_cast<uint32_t>(nb * 3 + pad), 1.5f);
        const float* x = x_all.data() + pad;
        std::vector<uint8_t> xq_all(static_cast<size_t>(nb * R->act_block_bytes + pad));
        std::vector<uint8_t> xq_ref(static_cast<size_t>(nb * R->act_block_bytes));
        uint8_t* xq = xq_all.data() + pad;
        K->quantize_act(x, xq, k);
        R->quantize_act(x, xq_ref.data(), k);
        ASSERT_EQ(std::memcmp(xq, xq_ref.data(), xq_ref.size()), 0) << "activations";

        const auto w_all = test::random_blocks(t, nb, static_cast<uint32_t>(nb + 100 * pad), pad);
        const uint8_t* w = w_all.data() + pad;
        std::vector<float> got(static_cast<size_t>(k + 1), -7.0f), want(static_cast<size_t>(k));
        K->dequantize(w, got.data(), k);
        R->dequantize(w, want.data(), k);
        for (int64_t i = 0; i < k; ++i) ASSERT_EQ(got[i], want[i]) << i;
        EXPECT_EQ(got[k], -7.0f) << "wrote past the end";

        const std::vector<float> xd = test::dequantize_activations(t, xq_ref.data(), k);
        double mag = 0.0;
        for (int64_t i = 0; i < k; ++i) mag += std::fabs(static_cast<double>(want[i]) * xd[i]);
        EXPECT_NEAR(K->dot(w, xq, nb), R->dot(w, xq_ref.data(), nb), 2e-5 * mag + 1e-5);
      }
    }
    for (uint32_t seed = 0; seed < 20; ++seed) {
      const int64_t nb = 1 + seed % 4, k = nb * K->block_elems;
      const auto w = test::random_blocks(t, nb, seed * 31 + 7, 0, /*fuzz=*/true);
      std::vector<float> y(static_cast<size_t>(k));
      K->dequantize(w.data(), y.data(), k);
      const auto x = test::random_normal_floats(k, seed);
      std::vector<uint8_t> xq(static_cast<size_t>(nb * K->act_block_bytes));
      K->quantize_act(x.data(), xq.data(), k);
      (void)K->dot(w.data(), xq.data(), nb);
    }
  }
}

// Activations prepared for w's type as backend/cpu/matmul.cpp does, from the references.
struct PreparedInput {
  std::vector<float> xf;       // [n][cols] rounded to the weight's precision
  std::vector<uint8_t> xq;     // [n][row bytes] the type's activation blocks
  std::vector<float> xd;       // [n][cols / 32] Q8_0 scales (Q8_0, Q4_0, Q5_0)
  std::vector<int32_t> xcorr;  // [n][cols / 32] zero-point corrections
  cpu::MatmulInput in;
};

inline PreparedInput prepare_input(GgmlType type, const std::vector<float>& x, int64_t n,
                                   int64_t cols) {
  PreparedInput p;
  p.in.n = n;
  p.xf.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    p.xf[i] = type == GgmlType::F16    ? fp16_to_fp32(fp32_to_fp16(x[i]))
              : type == GgmlType::BF16 ? bf16_to_fp32(fp32_to_bf16(x[i]))
                                       : x[i];
  }
  p.in.xf = p.xf.data();
  const bool q8 = type == GgmlType::Q8_0 || type == GgmlType::Q4_0 || type == GgmlType::Q5_0;
  if (q8) {
    const int64_t nb = cols / kQK;
    const int32_t zero_point = type == GgmlType::Q8_0 ? 128 : type == GgmlType::Q4_0 ? 8 : 16;
    p.xq.resize(static_cast<size_t>(n * nb) * sizeof(BlockQ8_0));
    quantize_row_q8_0_ref(x.data(), p.xq.data(), n * cols);
    for (int64_t b = 0; b < n * nb; ++b) {
      const BlockQ8_0 blk = load_q8_0(p.xq.data(), b);
      int32_t sum = 0;
      for (int j = 0; j < kQK; ++j) sum += blk.qs[j];
      p.xd.push_back(fp16_to_fp32(blk.d));
      p.xcorr.push_back(-zero_point * sum);
    }
    p.in.xq_row_bytes = static_cast<size_t>(nb) * sizeof(BlockQ8_0);
    p.in.xd = p.xd.data();
    p.in.xcorr = p.xcorr.data();
  } else if (const cpu::QuantTypeKernels* R = cpu::quant_type_kernels_ref(type)) {
    p.in.xq_row_bytes = static_cast<size_t>(cols / R->block_elems * R->act_block_bytes);
    p.xq.resize(p.in.xq_row_bytes * n);
    for (int64_t t = 0; t < n; ++t)
      R->quantize_act(x.data() + t * cols, p.xq.data() + t * p.in.xq_row_bytes, cols);
  }
  p.in.xq = p.xq.empty() ? nullptr : p.xq.data();
  return p;
}

// The matmul loops of every weight type over awkward row sub-ranges and token counts on both
// sides of the prompt GEMMs' thresholds, against matmul_ref; and each token's outputs the
// same bits alone as in the batch.
inline void check_matmul_kernels(const cpu::MatmulKernels& V) {
  constexpr GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                                 GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q4_1, GgmlType::Q5_1,
                                 GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                                 GgmlType::Q6_K};
  for (GgmlType type : kTypes) {
    const int64_t elems = ggml_type_traits(static_cast<uint32_t>(type))->block_elems;
    // 32-element blocks also at 37 blocks a row (the 16-row decode matvecs' long rows).
    const std::vector<int64_t> col_options =
        elems == 1    ? std::vector<int64_t>{1, 33, 129}
        : elems == 32 ? std::vector<int64_t>{elems, 3 * elems, 37 * elems}
                      : std::vector<int64_t>{elems, 3 * elems};
    for (int64_t cols : col_options) {
      const int64_t rows = 37;
      const auto o = test::make_random_weight(type, rows, cols, static_cast<uint32_t>(21 + cols));
      const cpu::MatmulWeights cw{o.w.type, o.w.data, o.w.row_bytes, o.w.rows, o.w.cols};
      std::vector<float> wrow(static_cast<size_t>(cols));
      for (int64_t n : {1, 3, 5, 9, 15}) {
        SCOPED_TRACE(std::string(V.isa) + " " + type_name(type) + " cols=" + std::to_string(cols) +
                     " n=" + std::to_string(n));
        EXPECT_GT(V.row_granule(type, n), 0);
        const auto x = test::random_normal_floats(n * cols, static_cast<uint32_t>(5 + n));
        const PreparedInput p = prepare_input(type, x, n, cols);
        std::vector<float> want(static_cast<size_t>(n * rows));
        matmul_ref(o.w, x.data(), n, want.data());
        std::vector<float> got(static_cast<size_t>(n * rows), -7.0f);
        V.rows(cw, p.in, 0, 5, got.data(), rows);  // awkward sub-ranges
        V.rows(cw, p.in, 5, 32, got.data(), rows);
        V.rows(cw, p.in, 32, rows, got.data(), rows);
        for (int64_t r = 0; r < rows; ++r) {
          dequantize_row(o.w, r, wrow.data());
          for (int64_t t = 0; t < n; ++t) {
            double mag = 0.0;  // rounding-error scale of this dot
            for (int64_t c = 0; c < cols; ++c) mag += std::fabs(wrow[c] * x[t * cols + c]);
            ASSERT_NEAR(got[t * rows + r], want[t * rows + r], 2e-5 * mag + 1e-5)
                << "row " << r << " token " << t;
          }
        }
        const PreparedInput last = prepare_input(type, std::vector<float>(x.end() - cols, x.end()),
                                                 1, cols);  // the last token alone
        std::vector<float> alone(static_cast<size_t>(rows));
        V.rows(cw, last.in, 0, rows, alone.data(), rows);
        ASSERT_EQ(std::memcmp(alone.data(), got.data() + (n - 1) * rows, rows * sizeof(float)), 0)
            << "the last token alone";
      }
    }
  }
}

}  // namespace channel::simd_checks
