// Q4_1, Q5_0, Q5_1 and the K-quants: the scalar references against their definitions
// (dequantized float dots, round trips), matmul against matmul_ref with batch-independent
// outputs, and the load-time errors for bad blocks. Every SIMD table against the references:
// simd_variants_test (simd_matmul_checks.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/quant_kernels.h"
#include "backend/cpu/thread_pool.h"
#include "gguf/ggml_type.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "ops/fp16.h"
#include "backend/cpu/matmul.h"
#include "ops/quant.h"
#include "ops/quant_k.h"
#include "ops/quant_legacy.h"
#include "ops/quantize.h"
#include "ops/weight.h"
#include "support/quant_fixtures.h"
#include "util/error.h"

namespace channel {
namespace {

constexpr GgmlType kNewTypes[] = {GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K,
                                  GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

std::string name_of(GgmlType t) {
  return ggml_type_name(static_cast<uint32_t>(t));
}

int64_t block_bytes(GgmlType t) {
  return ggml_type_traits(static_cast<uint32_t>(t))->block_bytes;
}

using test::dequantize_activations;
using test::factor_offsets;
using test::random_blocks;

std::vector<float> random_floats(int64_t n, uint32_t seed, float scale = 1.0f) {
  return test::random_normal_floats(n, seed, scale);
}

TEST(QuantTypesRef, DotsMatchDequantizedFloatDots) {
  for (GgmlType t : kNewTypes) {
    const cpu::QuantTypeKernels* ref = cpu::quant_type_kernels_ref(t);
    ASSERT_NE(ref, nullptr) << name_of(t);
    for (int64_t nb : {1, 3, 7}) {
      SCOPED_TRACE(name_of(t) + " blocks=" + std::to_string(nb));
      const int64_t k = nb * ref->block_elems;
      const auto w = random_blocks(t, nb, static_cast<uint32_t>(nb * 7 + 1), 0);
      const auto x = random_floats(k, static_cast<uint32_t>(nb), 2.0f);
      std::vector<uint8_t> xq(static_cast<size_t>(nb * ref->act_block_bytes));
      ref->quantize_act(x.data(), xq.data(), k);
      const std::vector<float> xd = dequantize_activations(t, xq.data(), k);
      std::vector<float> wd(static_cast<size_t>(k));
      ref->dequantize(w.data(), wd.data(), k);
      double want = 0.0, mag = 0.0;
      for (int64_t i = 0; i < k; ++i) {
        want += static_cast<double>(wd[i]) * xd[i];
        mag += std::fabs(static_cast<double>(wd[i]) * xd[i]);
      }
      // Q8_1 carries the minimum through s = f16(d * sum q): relative error 2^-11 of that term.
      EXPECT_NEAR(ref->dot(w.data(), xq.data(), nb), want, 1e-3 * mag + 1e-5);
    }
  }
}

TEST(QuantTypesRef, LegacyQuantizersRoundTripWithinHalfAStep) {
  struct Case {
    GgmlType type;
    void (*quantize)(const float*, void*, int64_t);
    int levels;
  };
  for (const Case& c : {Case{GgmlType::Q4_1, quantize_row_q4_1_ref, 15},
                        Case{GgmlType::Q5_0, quantize_row_q5_0_ref, 31},
                        Case{GgmlType::Q5_1, quantize_row_q5_1_ref, 31}}) {
    const int64_t k = 4 * kQK;
    const auto x = random_floats(k, 9);
    std::vector<uint8_t> q(static_cast<size_t>(4 * block_bytes(c.type)));
    c.quantize(x.data(), q.data(), k);
    std::vector<float> y(static_cast<size_t>(k));
    cpu::quant_type_kernels_ref(c.type)->dequantize(q.data(), y.data(), k);
    for (int64_t b = 0; b < 4; ++b) {
      float lo = x[b * kQK], hi = lo;
      for (int j = 0; j < kQK; ++j) {
        lo = std::min(lo, x[b * kQK + j]);
        hi = std::max(hi, x[b * kQK + j]);
      }
      // Q4_1/Q5_1 span [min, max] in `levels` steps: within half a step. Q5_0's step is
      // amax / 16, and the end opposite the signed maximum is clamped at 15 steps: one step.
      const float tol = c.type == GgmlType::Q5_0 ? std::max(-lo, hi) / 16.0f
                                                 : 0.5f * (hi - lo) / static_cast<float>(c.levels);
      for (int j = 0; j < kQK; ++j)
        EXPECT_NEAR(y[b * kQK + j], x[b * kQK + j], tol * 1.01f + 1e-3f)
            << name_of(c.type) << " block " << b << " element " << j;
    }
  }
}

TEST(QuantTypesRef, Q8KScalesByTheSignedMaximumAndSumsEvery16) {
  auto x = random_floats(2 * kQK_K, 4);
  x[37] = -9.0f;  // the largest magnitude: it maps to -127 and d = -max / 127
  std::vector<BlockQ8_K> q(2);
  quantize_row_q8_K_ref(x.data(), q.data(), 2 * kQK_K);
  EXPECT_EQ(q[0].qs[37], -127);
  EXPECT_FLOAT_EQ(q[0].d, 9.0f / 127.0f);
  for (int b = 0; b < 2; ++b) {
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += q[b].qs[16 * g + j];
      EXPECT_EQ(q[b].bsums[g], sum);
    }
    for (int j = 0; j < kQK_K; ++j)
      EXPECT_NEAR(q[b].d * q[b].qs[j], x[b * kQK_K + j], std::fabs(q[b].d) * 0.5f + 1e-6f);
  }
  std::vector<float> zeros(kQK_K, 0.0f);
  quantize_row_q8_K_ref(zeros.data(), q.data(), kQK_K);
  EXPECT_EQ(q[0].d, 0.0f);
  EXPECT_EQ(q[0].bsums[3], 0);
}

// The unpacked form reads each type's bit layout: check a hand-built Q4_K and Q6_K block.
TEST(QuantTypesRef, KBlockLayouts) {
  BlockQ4_K b4{};
  b4.d = fp32_to_fp16(1.0f);
  b4.dmin = fp32_to_fp16(0.5f);
  b4.scales[1] = 3;      // sub-block 1 (elements 32..63): scale 3
  b4.scales[5] = 2;      // ... minimum 2
  b4.scales[8] = 0x75;   // sub-block 4: scale low 5, minimum low 7
  b4.scales[0] = 0x40;   // sub-block 4: scale high bits 1 (+16); sub-block 0 scale 0
  b4.qs[1] = 0x9a;       // element 1: 0xa, element 33: 0x9
  b4.qs[64 + 2] = 0x0c;  // element 130: 0xc (sub-block 4)
  std::vector<float> y(kQK_K);
  dequantize_row_q4_K_ref(&b4, y.data(), kQK_K);
  EXPECT_EQ(y[1], 0.0f);                  // scale 0, minimum 0
  EXPECT_EQ(y[33], 3.0f * 9 - 0.5f * 2);  // sub-block 1
  EXPECT_EQ(y[130], 21.0f * 12 - 0.5f * 7);

  BlockQ6_K b6{};
  b6.d = fp32_to_fp16(0.25f);
  for (int g = 0; g < 16; ++g) b6.scales[g] = static_cast<int8_t>(g - 8);
  b6.ql[64 + 32 + 5] = 0x3f;  // half 1: element 128 + 32 + 5 low 0xf, element 128 + 96 + 5 low 3
  b6.qh[32 + 5] = 0xc4;       // bits 2..3 = 1 (element 165), bits 6..7 = 3 (element 229)
  dequantize_row_q6_K_ref(&b6, y.data(), kQK_K);
  EXPECT_EQ(y[165], 0.25f * (165 / 16 - 8) * ((0xf | (1 << 4)) - 32));
  EXPECT_EQ(y[229], 0.25f * (229 / 16 - 8) * ((0x3 | (3 << 4)) - 32));
  EXPECT_EQ(y[0], 0.25f * -8 * -32);
}

// Channel's writers, decoded by the reference dequantizers: the error of every type against
// the f32 input (Gaussian weights, relative RMS error), ordered by bits, within bounds.
TEST(QuantTypesWrite, EveryTypeRoundTripsThroughTheReferenceDequantizer) {
  struct Case {
    GgmlType type;
    double max_rel_rms;
  };
  const Case cases[] = {{GgmlType::Q2_K, 0.40},  {GgmlType::Q3_K, 0.22},  {GgmlType::Q4_K, 0.11},
                        {GgmlType::Q5_K, 0.055}, {GgmlType::Q6_K, 0.028}, {GgmlType::Q4_1, 0.11},
                        {GgmlType::Q5_0, 0.08},  {GgmlType::Q5_1, 0.055}, {GgmlType::Q8_0, 0.01},
                        {GgmlType::Q4_0, 0.15}};
  const int64_t k = 8 * kQK_K;
  auto x = random_floats(k, 77, 0.02f);
  for (int i = 0; i < 40; ++i) x[static_cast<size_t>(i * 51)] *= 6.0f;  // some outliers
  double signal = 0;
  for (float v : x) signal += static_cast<double>(v) * v;
  double last = 1.0;
  for (const Case& c : cases) {
    const auto traits = *ggml_type_traits(static_cast<uint32_t>(c.type));
    std::vector<uint8_t> q(ggml_row_bytes(traits, k));
    quantize_row(c.type, x.data(), q.data(), k);
    std::vector<float> y(static_cast<size_t>(k));
    if (const auto* ref = cpu::quant_type_kernels_ref(c.type)) {
      ref->dequantize(q.data(), y.data(), k);
    } else if (c.type == GgmlType::Q8_0) {
      dequantize_row_q8_0_ref(q.data(), y.data(), k);
    } else {
      dequantize_row_q4_0_ref(q.data(), y.data(), k);
    }
    double err = 0;
    for (int64_t i = 0; i < k; ++i) err += std::pow(static_cast<double>(y[i]) - x[i], 2);
    const double rel = std::sqrt(err / signal);
    std::printf("[ quantize ] %-5s relative rms error %.4f\n", name_of(c.type).c_str(), rel);
    EXPECT_LE(rel, c.max_rel_rms) << name_of(c.type);
    if (traits.block_elems == kQK_K) {  // more bits, less error
      EXPECT_LT(rel, last) << name_of(c.type);
      last = rel;
    }
    EXPECT_EQ(
        first_nonfinite_scale_block(c.type, q.data(), k / traits.block_elems, traits.block_bytes),
        -1);
  }
}

// The load check finds the first block whose f16 factors are not finite. (Every SIMD
// variant's kernels on fuzzed blocks: simd_variants_test.)
TEST(QuantTypesLoad, FirstNonFiniteScaleBlockIsFound) {
  for (GgmlType t : kNewTypes) {
    auto w = random_blocks(t, 6, 5, 0);
    EXPECT_EQ(first_nonfinite_scale_block(t, w.data(), 6, block_bytes(t)), -1) << name_of(t);
    const uint16_t inf = 0x7c00, nan = 0xfe01;
    const std::vector<int> offs = factor_offsets(t);
    std::memcpy(w.data() + 4 * block_bytes(t) + offs.back(), &nan, 2);
    std::memcpy(w.data() + 5 * block_bytes(t) + offs.front(), &inf, 2);
    EXPECT_EQ(first_nonfinite_scale_block(t, w.data(), 6, block_bytes(t)), 4) << name_of(t);
  }
}

using test::OwnedWeight;

// matmul (threaded, SIMD) against matmul_ref, and each token's outputs the same bits alone or
// in any batch, so chunked prefill and decode agree exactly.
TEST(QuantTypesMatmul, MatchesReferenceAndIsBatchIndependent) {
  ThreadPool one(1), three(3);
  for (GgmlType t : kNewTypes) {
    const int64_t elems = ggml_type_traits(static_cast<uint32_t>(t))->block_elems;
    for (int64_t cols : {elems, 3 * elems}) {
      for (int64_t rows : {1, 7, 35, 50}) {  // GEMM panels: 32 rows, halves of 16
        SCOPED_TRACE(name_of(t) + " rows=" + std::to_string(rows) +
                     " cols=" + std::to_string(cols));
        const OwnedWeight o =
            test::random_block_weight(t, rows, cols, static_cast<uint32_t>(rows + cols));
        const WeightMatrix& w = o.w;
        const int64_t n = 19;
        const auto x = random_floats(n * cols, static_cast<uint32_t>(rows));
        std::vector<float> got(static_cast<size_t>(n * rows)), want(got.size());
        matmul(w, x.data(), n, got.data(), three);
        matmul_ref(w, x.data(), n, want.data());
        std::vector<float> wrow(static_cast<size_t>(cols));
        for (int64_t r = 0; r < rows; ++r) {
          dequantize_row(w, r, wrow.data());
          for (int64_t tok = 0; tok < n; ++tok) {
            double mag = 0.0;
            for (int64_t c = 0; c < cols; ++c) mag += std::fabs(wrow[c] * x[tok * cols + c]);
            ASSERT_NEAR(got[tok * rows + r], want[tok * rows + r], 2e-5 * mag + 1e-6)
                << "row " << r << " token " << tok;
          }
        }
        std::vector<float> alone(static_cast<size_t>(rows));
        for (int64_t tok = 0; tok < n; tok += 4) {
          matmul(w, x.data() + tok * cols, 1, alone.data(), tok % 8 ? one : three);
          ASSERT_EQ(std::memcmp(alone.data(), got.data() + tok * rows, rows * sizeof(float)), 0)
              << "token " << tok;
        }
      }
    }
  }
}

TEST(QuantTypesLoad, NonFiniteScaleIsAOneLineErrorNamingTensorAndType) {
  for (GgmlType t : kNewTypes) {
    const int64_t elems = ggml_type_traits(static_cast<uint32_t>(t))->block_elems;
    OwnedWeight o = test::random_block_weight(t, 4, 2 * elems, 3);
    const uint16_t inf = 0xfc00;
    std::memcpy(o.bytes.data() + 5 * block_bytes(t) + factor_offsets(t).back(), &inf, 2);
    try {
      make_weight_matrix(o.info);
      ADD_FAILURE() << "no error for " << name_of(t);
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("blk.0.test.weight"), std::string::npos) << msg;
      EXPECT_NE(msg.find(name_of(t)), std::string::npos) << msg;
      EXPECT_NE(msg.find("block 5 (row 2)"), std::string::npos) << msg;
      EXPECT_NE(msg.find("non-finite scale"), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
}

TEST(QuantTypesLoad, KQuantRowNotAMultipleOf256IsAOneLineError) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  // 128 elements of q4_K: half a super-block (the bytes of one whole block, so only the
  // row length is wrong).
  w.add_tensor("blk.0.attn_q.weight", GgmlType::F32, {64, 2}, std::vector<uint8_t>(512));
  const std::vector<uint8_t> good = w.to_bytes();
  // Patch the tensor record: ne[0] = 128 and type q4_K (12), found by the name.
  std::vector<uint8_t> bad = good;
  const std::string name = "blk.0.attn_q.weight";
  const auto at = std::search(bad.begin(), bad.end(), name.begin(), name.end()) - bad.begin();
  const size_t rec = static_cast<size_t>(at) + name.size();  // n_dims u32, ne u64 x2, type u32
  const uint64_t ne0 = 128, ne1 = 1;
  const uint32_t type = 12;
  std::memcpy(bad.data() + rec + 4, &ne0, 8);
  std::memcpy(bad.data() + rec + 12, &ne1, 8);
  std::memcpy(bad.data() + rec + 20, &type, 4);
  try {
    GgufFile::from_memory(bad.data(), bad.size(), "k.gguf");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("blk.0.attn_q.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("q4_K"), std::string::npos) << msg;
    EXPECT_NE(msg.find("256"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace channel
