// matmul against matmul_ref (built from the scalar references) for every weight type, at
// awkward shapes, token counts and thread counts; dequantize_row; make_weight_matrix errors.
// Every SIMD variant of the matmul loops alone: simd_variants_test (simd_matmul_checks.h).
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/matmul.h"
#include "backend/cpu/quant_groups.h"
#include "backend/cpu/thread_pool.h"
#include "ops/fp16.h"
#include "ops/quant.h"
#include "ops/quant_legacy.h"
#include "support/quant_fixtures.h"
#include "util/error.h"

namespace channel {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,
                               GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0};

bool is_q8_activation_type(GgmlType t) {  // the int8 GEMM's types (Q8_0 activations)
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q5_0;
}

using test::make_random_weight;
using test::OwnedWeight;

std::vector<float> random_activations(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

void expect_matmul_matches_ref(const OwnedWeight& o, int64_t n, ThreadPool& pool) {
  const WeightMatrix& w = o.w;
  const auto x = random_activations(n * w.cols, static_cast<uint32_t>(n + w.rows));
  std::vector<float> got(n * w.rows + 1, -7.0f), want(n * w.rows);  // [n][rows] (+ sentinel)
  matmul(w, x.data(), n, got.data(), pool);
  matmul_ref(w, x.data(), n, want.data());
  std::vector<float> wrow(w.cols);
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w, r, wrow.data());
    for (int64_t t = 0; t < n; ++t) {
      double mag = 0.0;  // rounding-error scale of this dot
      for (int64_t c = 0; c < w.cols; ++c) mag += std::fabs(wrow[c] * x[t * w.cols + c]);
      ASSERT_NEAR(got[t * w.rows + r], want[t * w.rows + r], 2e-5 * mag + 1e-6)
          << "row " << r << " token " << t;
    }
  }
  EXPECT_EQ(got[n * w.rows], -7.0f) << "wrote past the end";
}

TEST(Matmul, MatchesReferenceForEveryTypeShapeAndThreadCount) {
  ThreadPool pools[] = {ThreadPool(1), ThreadPool(2), ThreadPool(3)};
  for (GgmlType type : kTypes) {
    const bool quant = is_q8_activation_type(type);
    const std::vector<int64_t> col_options =
        quant ? std::vector<int64_t>{32, 96, 1056} : std::vector<int64_t>{1, 17, 64, 129, 1056};
    for (int64_t cols : col_options) {
      for (int64_t rows : {1, 3, 17, 33, 70}) {
        const auto o = make_random_weight(type, rows, cols, static_cast<uint32_t>(rows * cols));
        for (int64_t n : {1, 2, 3, 7, 17, 44}) {
          for (auto& pool : pools) {
            SCOPED_TRACE(std::string(ggml_type_name(static_cast<uint32_t>(type))) +
                         " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
                         " n=" + std::to_string(n) + " threads=" + std::to_string(pool.size()));
            expect_matmul_matches_ref(o, n, pool);
          }
        }
      }
    }
  }
}

// Quantized weights: a token's outputs are the same bits whether it is decoded alone, sent
// in a small batch (matvec loops) or in a prompt (GEMM), on any thread count.
TEST(Matmul, QuantizedOutputsDoNotDependOnBatchOrThreads) {
  ThreadPool one(1), three(3);
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0}) {
    const int64_t rows = 70, cols = 1056;
    const auto o = make_random_weight(type, rows, cols, 31);
    const int64_t n = 23;
    const auto x = random_activations(n * cols, 32);
    std::vector<float> batched(n * rows), pair(2 * rows), alone(rows);
    matmul(o.w, x.data(), n, batched.data(), three);
    for (int64_t t = 0; t < n; ++t) {
      matmul(o.w, x.data() + t * cols, 1, alone.data(), t % 2 ? one : three);
      ASSERT_EQ(std::memcmp(alone.data(), batched.data() + t * rows, rows * sizeof(float)), 0)
          << ggml_type_name(static_cast<uint32_t>(type)) << " token " << t;
    }
    matmul(o.w, x.data(), 2, pair.data(), one);
    EXPECT_EQ(std::memcmp(pair.data(), batched.data(), 2 * rows * sizeof(float)), 0);
  }
}

// Q4_0 and Q5_0 weights regrouped for the AVX-512 kernels (backend/cpu/quant_groups.h) give
// the bits of the row-major blocks, decode and prompt (and dequantize_row the same rows), at
// row counts that leave a partial last group and on thread counts that split the rows. (Where
// this machine's kernels do not read a type's groups both runs take the rows: still equal.)
TEST(Matmul, QuantGroupsGiveTheBitsOfTheRows) {
  ThreadPool one(1), three(3);
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q5_0}) {
    const std::string name = ggml_type_name(static_cast<uint32_t>(type));
    for (int64_t rows : {1, 16, 37, 70, 256}) {
      for (int64_t cols : {32, 1056}) {
        const auto o = make_random_weight(type, rows, cols, static_cast<uint32_t>(rows + cols));
        std::vector<uint8_t> groups(cpu::quant_groups_bytes(type, rows, cols));
        cpu::pack_quant_groups(type, o.w.data, o.w.row_bytes, rows, cols, groups.data());
        WeightMatrix grouped = o.w;
        grouped.groups = groups.data();
        std::vector<uint8_t> blocks(o.w.row_bytes);
        std::vector<float> want_row(cols), got_row(cols);  // the embedding lookup too
        for (int64_t r = 0; r < rows; ++r) {
          cpu::quant_groups_row(type, groups.data(), cols, r, blocks.data());
          ASSERT_EQ(std::memcmp(blocks.data(), o.w.data + r * o.w.row_bytes, o.w.row_bytes), 0)
              << name << " row " << r << " of " << rows;
          dequantize_row(o.w, r, want_row.data());
          dequantize_row(grouped, r, got_row.data());
          ASSERT_EQ(want_row, got_row) << name << " row " << r << " of " << rows;
        }
        for (int64_t n : {1, 3, 40}) {
          const auto x = random_activations(n * cols, static_cast<uint32_t>(n));
          std::vector<float> want(n * rows), got(n * rows);
          for (ThreadPool* pool : {&one, &three}) {
            matmul(o.w, x.data(), n, want.data(), *pool);
            matmul(grouped, x.data(), n, got.data(), *pool);
            EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
                << name << " rows " << rows << " cols " << cols << " n " << n << " threads "
                << pool->size();
          }
        }
      }
    }
  }
}

// Q/K/V and gate/up run as one fused job: each matrix's outputs are the same bits as a
// matmul of it alone, for the decode matvec and the prompt GEMMs, with row counts that are
// not multiples of the split granule; a group of mixed types runs one matrix at a time.
TEST(Matmul, FusedGroupGivesTheBitsOfOneMatmulEach) {
  ThreadPool one(1), three(3);
  const int64_t cols = 256;
  const int64_t rows[] = {70, 33, 128};
  for (GgmlType type : kTypes) {
    std::vector<OwnedWeight> owned;
    for (int i = 0; i < 3; ++i)
      owned.push_back(make_random_weight(type, rows[i], cols, static_cast<uint32_t>(50 + i)));
    if (type == GgmlType::F16) owned[1] = make_random_weight(GgmlType::Q8_0, 33, cols, 51);
    const WeightMatrix* ws[] = {&owned[0].w, &owned[1].w, &owned[2].w};
    for (int64_t n : {1, 5, 40}) {
      const auto x = random_activations(n * cols, static_cast<uint32_t>(n));
      std::vector<std::vector<float>> fused(3), alone(3);
      float* ys[3];
      for (int i = 0; i < 3; ++i) {
        fused[i].assign(static_cast<size_t>(n * rows[i]), -1.0f);
        alone[i].resize(fused[i].size());
        ys[i] = fused[i].data();
        matmul(*ws[i], x.data(), n, alone[i].data(), one);
      }
      matmul_fused(ws, x.data(), n, ys, three);
      for (int i = 0; i < 3; ++i)
        EXPECT_EQ(std::memcmp(fused[i].data(), alone[i].data(), fused[i].size() * 4), 0)
            << ggml_type_name(static_cast<uint32_t>(type)) << " n " << n << " matrix " << i;
    }
  }
  const auto o = make_random_weight(GgmlType::Q8_0, 4, 32, 7);
  const WeightMatrix* ws[] = {&o.w, &o.w};
  float y[4];
  float* ys[] = {y};
  const std::vector<float> x(32, 1.0f);
  EXPECT_THROW(matmul_fused(ws, x.data(), 1, ys, one), Error);
}

// Float weights too (F32, F16, BF16): the GEMM tile and the decode loop give every output
// the same FMA chain and horizontal sum, so a token's outputs are the same bits whatever the
// batch: awkward row and column counts, every batch size up to 17 and 33, several threads.
TEST(Matmul, FloatOutputsDoNotDependOnBatchOrThreads) {
  ThreadPool one(1), three(3);
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 1},
                                     {3, 7},
                                     {5, 15},
                                     {7, 17},
                                     {31, 33},
                                     {33, 63},
                                     {70, 65},
                                     {17, 256}}) {
      const auto o = make_random_weight(type, rows, cols, static_cast<uint32_t>(rows * cols));
      const auto x = random_activations(33 * cols, 41);
      std::vector<float> alone(static_cast<size_t>(33 * rows));  // [33][rows]
      for (int64_t t = 0; t < 33; ++t)
        matmul(o.w, x.data() + t * cols, 1, alone.data() + t * rows, one);
      for (int64_t n : {2, 3, 4, 5, 7, 8, 9, 16, 17, 33}) {
        std::vector<float> batched(static_cast<size_t>(n * rows));
        matmul(o.w, x.data(), n, batched.data(), n % 2 ? one : three);
        ASSERT_EQ(std::memcmp(alone.data(), batched.data(), batched.size() * sizeof(float)), 0)
            << ggml_type_name(static_cast<uint32_t>(type)) << " rows " << rows << " cols " << cols
            << " n " << n;
      }
    }
  }
}

// The float GEMM cuts each output's FMA chain into column chunks (768) and works on groups of
// 32 rows x blocks of 48 tokens: shapes that cross every one of those edges, off by a few,
// still give each token the bits of its lone decode.
TEST(Matmul, FloatGemmBlocksKeepTheDecodeArithmetic) {
  ThreadPool one(1), three(3);
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    for (const auto& [rows, cols] :
         {std::pair<int64_t, int64_t>{33, 257}, {70, 769}, {31, 768}, {65, 1063}, {9, 1537}}) {
      const auto o = make_random_weight(type, rows, cols, static_cast<uint32_t>(rows + cols));
      constexpr int64_t kTokens = 101;
      const auto x = random_activations(kTokens * cols, 43);
      std::vector<float> alone(static_cast<size_t>(kTokens * rows));  // [kTokens][rows]
      for (int64_t t = 0; t < kTokens; ++t)
        matmul(o.w, x.data() + t * cols, 1, alone.data() + t * rows, one);
      for (int64_t n : {2, 25, 47, 48, 49, 97, 101}) {
        std::vector<float> batched(static_cast<size_t>(n * rows));
        matmul(o.w, x.data(), n, batched.data(), n % 2 ? one : three);
        ASSERT_EQ(std::memcmp(alone.data(), batched.data(), batched.size() * sizeof(float)), 0)
            << ggml_type_name(static_cast<uint32_t>(type)) << " rows " << rows << " cols " << cols
            << " n " << n;
      }
    }
  }
}

TEST(Matmul, DequantizeRowMatchesReference) {
  for (GgmlType type : kTypes) {
    const auto o = make_random_weight(type, 5, 96, 11);
    std::vector<float> got(96), want(96);
    for (int64_t r = 0; r < 5; ++r) {
      dequantize_row(o.w, r, got.data());
      const uint8_t* row = o.bytes.data() + r * o.w.row_bytes;
      switch (type) {
        case GgmlType::F32:
          std::memcpy(want.data(), row, 96 * 4);
          break;
        case GgmlType::F16:
          dequantize_row_f16_ref(reinterpret_cast<const uint16_t*>(row), want.data(), 96);
          break;
        case GgmlType::BF16:
          dequantize_row_bf16_ref(reinterpret_cast<const uint16_t*>(row), want.data(), 96);
          break;
        case GgmlType::Q8_0:
          dequantize_row_q8_0_ref(row, want.data(), 96);
          break;
        case GgmlType::Q4_0:
          dequantize_row_q4_0_ref(row, want.data(), 96);
          break;
        case GgmlType::Q5_0:
          dequantize_row_q5_0_ref(row, want.data(), 96);
          break;
        default:  // the other block types: quant_types_test
          break;
      }
      EXPECT_EQ(got, want) << ggml_type_name(static_cast<uint32_t>(type)) << " row " << r;
    }
  }
}

TEST(Matmul, ActivationsFollowTheWeightType) {
  // One weight of 1.0 and an activation that is not representable in f16 / bf16 / q8_0:
  // the output shows the activation rounding each type applies.
  const float x = 1.0f + 0x1p-12f;
  ThreadPool pool(1);
  for (GgmlType type : kTypes) {
    std::vector<float> ones(32, 0.0f);
    ones[0] = 1.0f;
    auto o = make_random_weight(type, 1, 32, 1);
    for (int64_t c = 0; c < 32; ++c) o.values[c] = ones[c];
    // Rebuild the single row with exact contents.
    const auto traits = *ggml_type_traits(static_cast<uint32_t>(type));
    (void)traits;
    if (type == GgmlType::F32) std::memcpy(o.bytes.data(), ones.data(), 128);
    if (type == GgmlType::F16 || type == GgmlType::BF16) {
      for (int c = 0; c < 32; ++c) {
        const uint16_t h = type == GgmlType::F16 ? fp32_to_fp16(ones[c]) : fp32_to_bf16(ones[c]);
        std::memcpy(o.bytes.data() + 2 * c, &h, 2);
      }
    }
    if (type == GgmlType::Q8_0) quantize_row_q8_0_ref(ones.data(), o.bytes.data(), 32);
    if (type == GgmlType::Q4_0) quantize_row_q4_0_ref(ones.data(), o.bytes.data(), 32);
    if (type == GgmlType::Q5_0) quantize_row_q5_0_ref(ones.data(), o.bytes.data(), 32);
    std::vector<float> xs(32, 0.0f);
    xs[0] = x;
    float y = 0.0f;
    matmul(o.w, xs.data(), 1, &y, pool);
    switch (type) {
      case GgmlType::F32:
        EXPECT_EQ(y, x);
        break;
      case GgmlType::F16:
        EXPECT_EQ(y, 1.0f);
        break;  // x rounds to 1 in f16
      case GgmlType::BF16:
        EXPECT_EQ(y, 1.0f);
        break;  // and in bf16
      default:
        EXPECT_NEAR(y, x, 1e-3f);
        break;  // q8_0: d_w * d_x * 127 * 127-ish
    }
  }
}

TEST(WeightMatrix, RejectsBadTensorsWithTheirName) {
  auto o = make_random_weight(GgmlType::Q8_0, 4, 64, 3);
  auto expect_error = [](TensorInfo t, const std::string& fragment) {
    try {
      make_weight_matrix(t);
      FAIL() << "no error for " << fragment;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("blk.0.test.weight"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  TensorInfo t = o.info;
  t.type_id = 23;  // iq4_xs
  expect_error(t, "iq4_xs");
  t = o.info;
  t.n_dims = 3;
  t.ne[2] = 2;
  expect_error(t, "2-D");
  t = o.info;
  t.ne[0] = 48;
  expect_error(t, "block size");
  t = o.info;
  t.n_bytes -= 1;
  expect_error(t, "bytes");
  t = o.info;
  t.ne[1] = 0;
  expect_error(t, "empty");
  auto f = make_random_weight(GgmlType::F32, 2, 8, 3);
  t = f.info;
  t.data += 1;  // never read: the check fails first
  expect_error(t, "aligned");
}

}  // namespace
}  // namespace channel
