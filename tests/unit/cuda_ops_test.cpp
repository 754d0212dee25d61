// Each CUDA kernel against its CPU reference by normalised error (llama.cpp's test-backend-ops
// style), at awkward sizes. Without a CUDA device every test is skipped with a loud message;
// a build without the backend has a single skipped test saying so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "backend/device.h"
#include "cuda_test_util.h"
#include "util/error.h"

#if !defined(CHANNEL_HAS_CUDA)

TEST(CudaOps, BuiltWithoutCuda) {
  std::fprintf(stderr, "\n*** SKIPPED: this build has no CUDA backend (CHANNEL_CUDA) ***\n\n");
  EXPECT_THROW(channel::parse_device("cuda"), channel::Error);
  GTEST_SKIP() << "this build has no CUDA backend";
}

#else

#include <cstring>

#include "backend/cpu/matmul.h"
#include "backend/cuda/cuda_cublas.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/kquant_group.h"
#include "gguf/ggml_type.h"
#include "ops/activation.h"
#include "ops/attention.h"
#include "ops/fp16.h"
#include "ops/norm.h"
#include "ops/quantize.h"
#include "ops/rope.h"
#include "util/hash.h"

namespace channel {
namespace {

using test::from_device;
using test::nmse;
using test::randn;
using test::to_device;

// A host weight matrix of `type` from random values, and its device (repacked) copy.
struct TestMatrix {
  std::vector<uint8_t> raw;
  WeightMatrix host;
  cuda::DeviceBuffer staging, q, d;
  cuda::DevMatrix dev;

  // nan_row (if any): that row's first value is NaN.
  TestMatrix(GgmlType type, int64_t rows, int64_t cols, uint32_t seed, int64_t nan_row = -1) {
    const auto traits = *ggml_type_traits(static_cast<uint32_t>(type));
    const size_t row_bytes = ggml_row_bytes(traits, cols);
    raw.resize(row_bytes * static_cast<size_t>(rows));
    std::vector<float> x = randn(static_cast<size_t>(rows * cols), seed, 0.5f);
    if (nan_row >= 0) x[static_cast<size_t>(nan_row * cols)] = std::nanf("");
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(type, x.data() + r * cols, raw.data() + r * row_bytes, cols);
    host = WeightMatrix{type, rows, cols, raw.data(), row_bytes};
    staging = to_device(raw);
    q = cuda::DeviceBuffer(cuda::repacked_q_bytes(type, rows, cols), "test weights");
    d = cuda::DeviceBuffer(std::max<size_t>(cuda::repacked_d_bytes(type, rows, cols), 1), "test scales");
    cuda::repack_weight(type, staging.get(), rows, cols, q.get(), d.get(), nullptr);
    dev = cuda::DevMatrix{type, rows, cols, q.get(), d.get()};
  }
};

struct MatmulCase {
  GgmlType type;
  int64_t rows, cols, n;
};

std::string case_name(const ::testing::TestParamInfo<MatmulCase>& info) {
  const MatmulCase& c = info.param;
  return ggml_type_name(static_cast<uint32_t>(c.type)) + "_" + std::to_string(c.rows) + "x" +
         std::to_string(c.cols) + "_n" + std::to_string(c.n);
}

class CudaMatmul : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(CudaMatmul, MatchesCpuReference) {
  CHANNEL_REQUIRE_CUDA();
  const MatmulCase c = GetParam();
  TestMatrix w(c.type, c.rows, c.cols, 7);
  const int64_t ldx = c.cols + 3;  // rows of the input are strided, as in the forward
  std::vector<float> x = randn(static_cast<size_t>(c.n * ldx), 11);
  std::vector<float> dense(static_cast<size_t>(c.n * c.cols));
  for (int64_t t = 0; t < c.n; ++t)
    std::copy_n(x.begin() + t * ldx, c.cols, dense.begin() + t * c.cols);
  std::vector<float> want(static_cast<size_t>(c.n * c.rows));
  matmul_ref(w.host, dense.data(), c.n, want.data());

  cuda::DeviceBuffer dx = to_device(x);
  cuda::DeviceBuffer act(cuda::act_bytes(c.type, c.n, c.cols), "act");
  const int64_t ldy = c.rows + 5;
  cuda::convert_act(c.type, dx.as<float>(), c.n, c.cols, ldx, act.get(), nullptr);
  // One token runs every matvec variant (cuda_kernels.h); several tokens the tiles, and from
  // kCublasMinTokens on cuBLAS too (run 1) where it loads.
  const bool cublas = c.n >= cuda::kCublasMinTokens && cuda::cublas_available();
  const int variants = c.n == 1 ? cuda::kMatvecVariants : cublas ? 2 : 1;
  const bool saved_cublas = cuda::gemm_uses_cublas();
  std::vector<std::vector<float> > outs;
  for (int v = 0; v < variants; ++v) {
    cuda::DeviceBuffer dy(static_cast<size_t>(c.n * ldy) * 4, "y");
    if (c.n > 1) cuda::set_gemm_cublas(v == 1);
    cuda::matmul_variant(w.dev, act.get(), c.n, dy.as<float>(), ldy, nullptr, c.n == 1 ? v : 0);
    cuda::set_gemm_cublas(saved_cublas);
    const std::vector<float> yl = from_device<float>(dy, static_cast<size_t>(c.n * ldy));
    std::vector<float> got(want.size());
    for (int64_t t = 0; t < c.n; ++t)
      std::copy_n(yl.begin() + t * ldy, c.rows, got.begin() + t * c.rows);
    const double e = nmse(got, want);
    // One token: the CPU's own arithmetic (integer block dots, rounded activations), summed in
    // another order. Several tokens: f16 / bf16 tensor-core inputs, llama.cpp's mul_mat bound.
    // The file's blocks (K-quants, Q4_1/Q5_0/Q5_1): f32 activations (one token) or f16
    // (several) against the reference's Q8_K / Q8_0 / Q8_1 activations, so the bound is the
    // activation quantization's, at any n.
    const bool quant = c.type == GgmlType::Q8_0 || c.type == GgmlType::Q4_0;
    const bool kquant = cuda::is_file_block(c.type);
    const double bound = kquant ? 5e-4 : c.n == 1 || c.type == GgmlType::F32 || !quant ? 1e-6 : 5e-4;
    const char* how = c.n == 1 ? "" : v == 1 ? " cublas" : " tiles";
    std::printf("[ cuda ] matmul %s v%d%s nmse %.3g (bound %.0e)\n", case_name({c, 0}).c_str(),
                v, how, e, bound);
    EXPECT_LE(e, bound) << "variant v" << v << how;
    outs.push_back(got);
  }
  // v8 sums each lane's units in v6's order from shared memory instead of registers: the
  // same bits.
  if (c.n == 1) {
    EXPECT_EQ(outs[8], outs[6]) << "v8 against v6";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, CudaMatmul,
    ::testing::Values(
        MatmulCase{GgmlType::F32, 67, 96, 1}, MatmulCase{GgmlType::F32, 67, 97, 5},
        MatmulCase{GgmlType::F32, 300, 2080, 3}, MatmulCase{GgmlType::F16, 67, 96, 1},
        MatmulCase{GgmlType::F16, 67, 100, 1}, MatmulCase{GgmlType::F16, 67, 100, 4},
        MatmulCase{GgmlType::F16, 300, 2080, 1}, MatmulCase{GgmlType::F16, 300, 2080, 70},
        MatmulCase{GgmlType::BF16, 67, 96, 1}, MatmulCase{GgmlType::BF16, 129, 2080, 70},
        MatmulCase{GgmlType::BF16, 33, 98, 3}, MatmulCase{GgmlType::Q8_0, 67, 96, 1},
        MatmulCase{GgmlType::Q8_0, 300, 2080, 1}, MatmulCase{GgmlType::Q8_0, 300, 4160, 1},
        MatmulCase{GgmlType::Q8_0, 67, 96, 2}, MatmulCase{GgmlType::Q8_0, 300, 2080, 70},
        MatmulCase{GgmlType::Q8_0, 129, 256, 130}, MatmulCase{GgmlType::Q4_0, 67, 96, 1},
        MatmulCase{GgmlType::Q4_0, 300, 2080, 1}, MatmulCase{GgmlType::Q4_0, 300, 4160, 1},
        MatmulCase{GgmlType::Q4_0, 300, 2080, 70}, MatmulCase{GgmlType::Q4_0, 129, 256, 130},
        MatmulCase{GgmlType::Q2_K, 67, 256, 1}, MatmulCase{GgmlType::Q3_K, 67, 512, 1},
        MatmulCase{GgmlType::Q4_K, 67, 256, 1}, MatmulCase{GgmlType::Q4_K, 300, 2560, 1},
        MatmulCase{GgmlType::Q4_K, 300, 2560, 70}, MatmulCase{GgmlType::Q4_K, 129, 256, 130},
        MatmulCase{GgmlType::Q5_K, 67, 768, 1}, MatmulCase{GgmlType::Q5_K, 129, 512, 33},
        MatmulCase{GgmlType::Q6_K, 67, 256, 1}, MatmulCase{GgmlType::Q6_K, 300, 2560, 1},
        MatmulCase{GgmlType::Q6_K, 300, 2560, 70}, MatmulCase{GgmlType::Q3_K, 129, 512, 5},
        MatmulCase{GgmlType::Q2_K, 129, 512, 70}, MatmulCase{GgmlType::Q8_0, 67, 4160, 1},
        MatmulCase{GgmlType::Q8_0, 5, 32, 1}, MatmulCase{GgmlType::Q8_0, 1, 8224, 1},
        MatmulCase{GgmlType::Q4_0, 67, 8224, 1}, MatmulCase{GgmlType::Q4_0, 3, 64, 1},
        MatmulCase{GgmlType::F16, 67, 2056, 1}, MatmulCase{GgmlType::F16, 5, 8, 1},
        MatmulCase{GgmlType::BF16, 19, 2056, 1},
        // The legacy blocks of K-quant files' fallbacks (rows of 32 elements, not 256).
        MatmulCase{GgmlType::Q4_1, 67, 96, 1}, MatmulCase{GgmlType::Q4_1, 300, 1152, 70},
        MatmulCase{GgmlType::Q5_0, 67, 160, 1}, MatmulCase{GgmlType::Q5_0, 129, 1152, 33},
        MatmulCase{GgmlType::Q5_0, 300, 1152, 1}, MatmulCase{GgmlType::Q5_1, 67, 96, 1},
        MatmulCase{GgmlType::Q5_1, 129, 224, 130}, MatmulCase{GgmlType::Q4_1, 3, 32, 5},
        // A row whose activation does not fit beside v8's rings in shared memory (v6 runs).
        MatmulCase{GgmlType::Q8_0, 3, 80000, 1},
        // Rows past one 128 MiB chunk of dequantized weights (cuBLAS runs two).
        MatmulCase{GgmlType::Q4_0, 17000, 4096, 33}),
    case_name);

// The LM head storing its results to the host as it makes them (matmul_logits_to_host, v8):
// in windows of rows, whole or cut by a block's edge, the host gets the device's bits, and a
// non-finite row anywhere sets the host word.
TEST(CudaOps, LogitsToHostAreTheProduct) {
  CHANNEL_REQUIRE_CUDA();
  const int saved = cuda::matvec_variant();
  cuda::set_matvec_variant(8);
  cuda::PinnedBuffer bad(4, "bad");
  for (const GgmlType type : {GgmlType::Q8_0, GgmlType::F16, GgmlType::Q4_0, GgmlType::BF16}) {
    for (const int64_t rows :
         {int64_t{1}, int64_t{255}, int64_t{257}, int64_t{5000}, int64_t{70001}}) {
      const std::string what =
          ggml_type_name(static_cast<uint32_t>(type)) + " " + std::to_string(rows);
      // A NaN weight survives as a NaN in f16/bf16 (quantizing drops it from a block's scale).
      const bool keeps_nan = type == GgmlType::F16 || type == GgmlType::BF16;
      for (const int64_t nan_row : {int64_t{-1}, rows / 2, rows - 1}) {
        if (nan_row >= 0 && !keeps_nan) continue;
        TestMatrix w(type, rows, 96, 5, nan_row);
        const std::vector<float> x = randn(96, 9);
        cuda::DeviceBuffer dx = to_device(x);
        cuda::DeviceBuffer act(cuda::act_bytes(type, 1, 96), "act");
        cuda::convert_act(type, dx.as<float>(), 1, 96, 96, act.get(), nullptr);
        cuda::DeviceBuffer dy(static_cast<size_t>(rows) * 4, "y");
        cuda::PinnedBuffer host(static_cast<size_t>(rows) * 4, "host y");
        std::fill_n(host.as<float>(), rows, -7.0f);
        *bad.as<uint32_t>() = 0;
        ASSERT_TRUE(cuda::matmul_logits_to_host(w.dev, act.get(), dy.as<float>(), host.as<float>(),
                                                bad.as<uint32_t>(), nullptr))
            << what;
        cuda::check(cudaDeviceSynchronize(), "sync");
        const std::vector<float> y = from_device<float>(dy, static_cast<size_t>(rows));
        ASSERT_EQ(std::memcmp(y.data(), host.as<float>(), y.size() * 4), 0)
            << what << " nan " << nan_row;
        EXPECT_EQ(*bad.as<uint32_t>(), nan_row >= 0 ? 1u : 0u) << what << " nan " << nan_row;
        if (nan_row >= 0) {
          EXPECT_TRUE(std::isnan(y[static_cast<size_t>(nan_row)])) << what;
        }
      }
    }
  }
  cuda::set_matvec_variant(saved);
}

// The planes' CRC-32C a stored recall is checked with: the host's crc32c of each plane, at
// plane sizes that split into 1024, a few, or one run of words; written to device memory, and
// (as a stored recall takes them) straight to page-locked host memory.
TEST(CudaOps, Crc32cPlanesMatchTheHost) {
  CHANNEL_REQUIRE_CUDA();
  std::mt19937 rng(11);
  for (const uint64_t plane :
       {4ull, 12ull, 64ull, 1028ull, 2052ull, 16384ull, 131072ull, 196608ull, 524288ull}) {
    const int planes = 5;
    std::vector<uint8_t> bytes(plane * planes);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    for (const size_t offset : {0, 4}) {  // 16-byte loads where aligned, words otherwise
      cuda::DeviceBuffer data(bytes.size() + offset, "crc data"), out(planes * 4, "crc out");
      cuda::check(
          cudaMemcpy(data.as<char>() + offset, bytes.data(), bytes.size(), cudaMemcpyHostToDevice),
          "up");
      cuda::crc32c_planes(data.as<char>() + offset, planes, plane, out.as<uint32_t>(), nullptr);
      const std::vector<uint32_t> got = from_device<uint32_t>(out, planes);
      cuda::PinnedBuffer host(planes * 4, "crc out on the host");
      cuda::crc32c_planes(data.as<char>() + offset, planes, plane, host.as<uint32_t>(), nullptr);
      cuda::check(cudaDeviceSynchronize(), "crc to the host");
      for (int p = 0; p < planes; ++p) {
        const uint32_t want = crc32c(0, bytes.data() + p * plane, plane);
        EXPECT_EQ(got[p], want) << plane << " plane " << p << " offset " << offset;
        EXPECT_EQ(host.as<uint32_t>()[p], want) << plane << " plane " << p << " to the host";
      }
    }
  }
}

// A recalled episode written into its layers' arenas (write_episode_f16): values as stored,
// keys turned by delta as the host's rehydration turns them (f32 arithmetic on the f64 angle
// rounded to f32, back to f16 nearest-even), through the 16-byte pieces path (NEOX and
// NORMAL, whole and partial rotation) and the element path (rows it cannot take whole), into
// f16 and f32 arenas, with a token count that leaves a partial block.
TEST(CudaOps, EpisodeRowsMatchTheHostTurn) {
  CHANNEL_REQUIRE_CUDA();
  struct Case {
    int head_dim, n_rot;
    bool neox;
    size_t src_offset;  // halves: 1 makes the rows unaligned (element path)
  };
  const int n = 37, n_kv = 3, layers = 2;
  const int64_t cap = 60, first = 5;
  for (const Case c : {Case{128, 128, true, 0}, Case{128, 128, false, 0}, Case{128, 64, true, 0},
                       Case{64, 48, false, 0}, Case{72, 72, true, 0}, Case{128, 128, true, 1}}) {
    for (const bool f32 : {false, true}) {
      for (const double delta : {0.0, 1234.5, -77.0}) {
        const int width = n_kv * c.head_dim;
        const size_t values = static_cast<size_t>(2 * layers) * n * width;
        std::vector<uint16_t> rows(values + c.src_offset);
        std::mt19937 rng(3);
        std::normal_distribution<float> nd;
        for (uint16_t& h : rows) h = fp32_to_fp16(nd(rng));
        std::vector<double> inv(static_cast<size_t>(c.n_rot / 2));
        for (size_t i = 0; i < inv.size(); ++i)
          inv[i] = std::pow(10000.0, -2.0 * static_cast<double>(i) / c.n_rot);
        cuda::DeviceBuffer d_rows = to_device(rows), d_inv = to_device(inv);
        const size_t elem = f32 ? 4 : 2, arena = static_cast<size_t>(n_kv * cap * c.head_dim);
        std::vector<cuda::DeviceBuffer> k, v;
        std::vector<cuda::EpisodeDst> dst;
        for (int g = 0; g < layers; ++g) {
          k.emplace_back(arena * elem, "k arena");
          v.emplace_back(arena * elem, "v arena");
          cuda::check(cudaMemset(k.back().get(), 0, arena * elem), "clear");
          cuda::check(cudaMemset(v.back().get(), 0, arena * elem), "clear");
          dst.push_back({k.back().get(), v.back().get(), cap});
        }
        cuda::DeviceBuffer d_dst = to_device(dst);
        const cuda::RingRope rope{c.neox, c.n_rot, d_inv.as<double>()};
        cuda::write_episode_f16(d_rows.as<uint16_t>() + c.src_offset, 0, 2 * layers, n, n_kv,
                                c.head_dim, d_dst.as<cuda::EpisodeDst>(), first, f32, rope, delta,
                                nullptr);
        cuda::check(cudaDeviceSynchronize(), "write_episode_f16");
        const uint16_t* src = rows.data() + c.src_offset;
        for (int p = 0; p < 2 * layers; ++p) {
          const auto& buf = p % 2 == 0 ? k[p / 2] : v[p / 2];
          const std::vector<uint8_t> got = from_device<uint8_t>(buf, arena * elem);
          for (int t = 0; t < n; ++t)
            for (int h = 0; h < n_kv; ++h) {
              const uint16_t* x = src + (static_cast<size_t>(p) * n + t) * width + h * c.head_dim;
              std::vector<uint16_t> want(x, x + c.head_dim);
              if (p % 2 == 0 && delta != 0.0)
                for (int j = 0; j < c.n_rot / 2; ++j) {
                  const int a = c.neox ? j : 2 * j, b = c.neox ? j + c.n_rot / 2 : 2 * j + 1;
                  const auto co = static_cast<float>(std::cos(delta * inv[j]));
                  const auto si = static_cast<float>(std::sin(delta * inv[j]));
                  const float xa = fp16_to_fp32(x[a]), xb = fp16_to_fp32(x[b]);
                  want[a] = fp32_to_fp16(xa * co - xb * si);
                  want[b] = fp32_to_fp16(xa * si + xb * co);
                }
              const size_t at = (static_cast<size_t>(h) * cap + first + t) * c.head_dim;
              for (int i = 0; i < c.head_dim; ++i) {
                float g32;
                if (f32) {
                  std::memcpy(&g32, got.data() + (at + i) * 4, 4);
                } else {
                  uint16_t g16;
                  std::memcpy(&g16, got.data() + (at + i) * 2, 2);
                  g32 = fp16_to_fp32(g16);
                }
                // A turned key may sit one f16 step off where the host's cos/sin and the
                // device's sincos round their last f64 bit apart; values are exact.
                const float w32 = fp16_to_fp32(want[i]);
                const bool turned = p % 2 == 0 && delta != 0.0 && i < c.n_rot;
                ASSERT_LE(std::abs(g32 - w32), turned ? std::abs(w32) * 1e-3f + 1e-7f : 0.0f)
                    << "head_dim " << c.head_dim << " n_rot " << c.n_rot << " neox " << c.neox
                    << " offset " << c.src_offset << " f32 " << f32 << " delta " << delta
                    << " plane " << p << " token " << t << " head " << h << " dim " << i;
              }
            }
        }
      }
    }
  }
}

TEST(CudaOps, EmbeddingRowsMatchDequantizedRows) {
  CHANNEL_REQUIRE_CUDA();
  for (GgmlType type :
       {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
        GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K,
        GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const int64_t cols = cuda::is_kquant(type) ? 512 : 160;
    TestMatrix w(type, 50, cols, 3);
    const std::vector<int32_t> tokens = {0, 7, 49, 7};
    const float scale = 1.7f;
    std::vector<float> want(tokens.size() * cols);
    for (size_t t = 0; t < tokens.size(); ++t) {
      dequantize_row(w.host, tokens[t], want.data() + t * cols);
      for (int64_t i = 0; i < cols; ++i) want[t * cols + i] *= scale;
    }
    cuda::DeviceBuffer dt = to_device(tokens);
    cuda::DeviceBuffer dx(want.size() * 4, "x");
    cuda::embed(w.dev, dt.as<int32_t>(), static_cast<int>(tokens.size()), scale, dx.as<float>(), nullptr);
    EXPECT_LE(nmse(from_device<float>(dx, want.size()), want), 1e-12)
        << ggml_type_name(static_cast<uint32_t>(type));
  }
}

TEST(CudaOps, RmsNormMatchesReference) {
  CHANNEL_REQUIRE_CUDA();
  for (int64_t n : {1, 67, 1000, 4097, 8192}) {
    const int64_t rows = 3, ld = n + 2;
    const std::vector<float> x = randn(static_cast<size_t>(rows * ld), 5, 3.0f);
    const std::vector<float> w = randn(static_cast<size_t>(n), 6);
    std::vector<float> want(static_cast<size_t>(rows * n));
    for (int64_t r = 0; r < rows; ++r) rms_norm_ref(x.data() + r * ld, w.data(), n, 1e-6f, want.data() + r * n);
    cuda::DeviceBuffer dx = to_device(x), dw = to_device(w), dy(want.size() * 4, "y");
    cuda::rms_norm(dx.as<float>(), ld, dw.as<float>(), rows, n, 1e-6f, dy.as<float>(), n, nullptr);
    EXPECT_LE(nmse(from_device<float>(dy, want.size()), want), 1e-12) << n;

    // add_normed: resid += norm(x) * w, and resid += x without a norm.
    const std::vector<float> xd = randn(static_cast<size_t>(rows * n), 8);
    std::vector<float> resid = randn(static_cast<size_t>(rows * n), 9);
    std::vector<float> want2 = resid, want3 = resid;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> tmp(static_cast<size_t>(n));
      rms_norm_ref(xd.data() + r * n, w.data(), n, 1e-6f, tmp.data());
      for (int64_t i = 0; i < n; ++i) {
        want2[r * n + i] += tmp[i];
        want3[r * n + i] += xd[r * n + i];
      }
    }
    cuda::DeviceBuffer dxd = to_device(xd), dr = to_device(resid), dr3 = to_device(resid);
    cuda::add_normed(dxd.as<float>(), dw.as<float>(), rows, n, 1e-6f, dr.as<float>(), nullptr);
    cuda::add_normed(dxd.as<float>(), nullptr, rows, n, 1e-6f, dr3.as<float>(), nullptr);
    EXPECT_LE(nmse(from_device<float>(dr, want2.size()), want2), 1e-12) << n;
    EXPECT_LE(nmse(from_device<float>(dr3, want3.size()), want3), 1e-14) << n;
  }
}

TEST(CudaOps, RopeMatchesReferenceNormalNeoxPartial) {
  CHANNEL_REQUIRE_CUDA();
  const std::vector<int32_t> positions = {0, 1, 17, 5000, 70000};
  const std::vector<float> factors = {1.0f, 1.5f, 2.0f, 4.0f, 8.0f, 1.0f, 1.0f, 3.0f,
                                      1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f};
  cuda::DeviceBuffer dff = to_device(factors);
  for (RopeStyle style : {RopeStyle::normal, RopeStyle::neox}) {
    for (int n_rot : {64, 32}) {  // full and partial rotation of 64-dim heads
      for (bool use_factors : {false, true}) {
        if (use_factors && n_rot != 32) continue;
        const int n_heads = 3, hd = 64;
        const int64_t ld = n_heads * hd + 8;
        const std::vector<float> x = randn(positions.size() * ld, 4);
        std::vector<float> want = x;
        const RopeParams p{style, n_rot, 10000.0f, 0.5f, use_factors ? factors.data() : nullptr};
        std::vector<float> cs(static_cast<size_t>(n_rot));
        for (size_t t = 0; t < positions.size(); ++t) {
          rope_angles(p, positions[t], cs.data());
          rope_apply(p, cs.data(), want.data() + t * ld, n_heads, hd);
        }
        cuda::DeviceBuffer dx = to_device(x), dp = to_device(positions);
        const cuda::RopeDev rp = cuda::make_rope(
            style == RopeStyle::neox ? cuda::RopeMode::neox : cuda::RopeMode::normal, n_rot,
            10000.0f, 0.5f, use_factors ? dff.as<float>() : nullptr);
        cuda::rope(rp, dx.as<float>(), ld, static_cast<int>(positions.size()), n_heads, hd,
                   dp.as<int32_t>(), nullptr);
        const double e = nmse(from_device<float>(dx, want.size()), want);
        EXPECT_LE(e, 1e-11) << "style " << static_cast<int>(style) << " n_rot " << n_rot;
      }
    }
  }
}

TEST(CudaOps, GluMatchesReference) {
  CHANNEL_REQUIRE_CUDA();
  const int n = 3;
  const int64_t n_ff = 1031;
  std::vector<float> gu = randn(static_cast<size_t>(n * 2 * n_ff), 12, 4.0f);
  gu[0] = 12.0f;  // past the GELU table's short-cuts
  gu[1] = -11.0f;
  for (bool gelu : {false, true}) {
    std::vector<float> want(static_cast<size_t>(n * n_ff));
    for (int t = 0; t < n; ++t) {
      const float* g = gu.data() + t * 2 * n_ff;
      if (gelu)
        gelu_tanh_glu_ref(g, g + n_ff, n_ff, want.data() + t * n_ff);
      else
        silu_glu_ref(g, g + n_ff, n_ff, want.data() + t * n_ff);
    }
    cuda::DeviceBuffer dg = to_device(gu), dout(want.size() * 4, "out");
    cuda::glu(dg.as<float>(), 2 * n_ff, n, n_ff, gelu, dout.as<float>(), nullptr);
    EXPECT_LE(nmse(from_device<float>(dout, want.size()), want), gelu ? 1e-8 : 1e-12) << gelu;
  }
  std::vector<float> x = randn(1000, 13, 40.0f), want = x;
  softcap(want.data(), 1000, 30.0f);
  cuda::DeviceBuffer dx = to_device(x);
  cuda::softcap(dx.as<float>(), 1000, 30.0f, nullptr);
  EXPECT_LE(nmse(from_device<float>(dx, 1000), want), 1e-12);
}

// The logits check: each block's flag says whether its share holds a NaN or an Inf, written
// straight into pinned host memory, and every flag is rewritten by the next launch.
TEST(CudaOps, NonfiniteFlagsFindEachBadValue) {
  CHANNEL_REQUIRE_CUDA();
  cuda::PinnedBuffer flags(cuda::kNonfiniteBlocks * 4, "flags");
  uint32_t* f = flags.as<uint32_t>();
  for (const int64_t count : {int64_t{1}, int64_t{63}, int64_t{1000}, int64_t{262144 + 7}}) {
    std::vector<float> x = randn(static_cast<size_t>(count), 21, 50.0f);
    cuda::DeviceBuffer dx = to_device(x);
    std::fill(f, f + cuda::kNonfiniteBlocks, 7u);
    cuda::nonfinite_flags(dx.as<float>(), count, f, nullptr);
    cuda::check(cudaDeviceSynchronize(), "sync");
    EXPECT_FALSE(cuda::any_nonfinite(f)) << count;
    for (int b = 0; b < cuda::kNonfiniteBlocks; ++b) ASSERT_EQ(f[b], 0u) << count << " " << b;
    const int64_t share = (count + cuda::kNonfiniteBlocks - 1) / cuda::kNonfiniteBlocks;
    for (const int64_t at : {int64_t{0}, count / 2, count - 1}) {
      for (const float bad : {std::nanf(""), INFINITY, -INFINITY}) {
        std::vector<float> y = x;
        y[static_cast<size_t>(at)] = bad;
        cuda::DeviceBuffer dy = to_device(y);
        cuda::nonfinite_flags(dy.as<float>(), count, f, nullptr);
        cuda::check(cudaDeviceSynchronize(), "sync");
        EXPECT_TRUE(cuda::any_nonfinite(f)) << count << " at " << at;
        for (int b = 0; b < cuda::kNonfiniteBlocks; ++b)
          ASSERT_EQ(f[b], b == at / share ? 1u : 0u) << count << " at " << at << " block " << b;
      }
    }
  }
}

// The Q8_0 activation blocks of one token ([n] int8 then [n/32] f32 scales), dequantized.
std::vector<float> dequant_act(const cuda::DeviceBuffer& act, int64_t n) {
  const std::vector<int8_t> raw = from_device<int8_t>(act, static_cast<size_t>(n) + static_cast<size_t>(n / 32) * 4);
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float d;
    std::memcpy(&d, raw.data() + n + (i / 32) * 4, 4);
    out[static_cast<size_t>(i)] = d * static_cast<float>(raw[static_cast<size_t>(i)]);
  }
  return out;
}

// Decode's fused stages against the kernels they replace, run in sequence, for every
// activation form: Q8_0 blocks (dequantized, within their rounding), f16, bf16 and f32 (the
// same bytes).
TEST(CudaOps, FusedNormAndGluQuantMatchTheSequence) {
  CHANNEL_REQUIRE_CUDA();
  auto expect_same = [](GgmlType type, const cuda::DeviceBuffer& got,
                        const cuda::DeviceBuffer& want, int64_t n, const std::string& what) {
    if (type == GgmlType::Q8_0) {
      EXPECT_LE(nmse(dequant_act(got, n), dequant_act(want, n)), 1e-6) << what;
      return;
    }
    const size_t bytes = cuda::act_bytes(type, 1, n);
    EXPECT_EQ(from_device<uint8_t>(got, bytes), from_device<uint8_t>(want, bytes))
        << ggml_type_name(static_cast<uint32_t>(type)) << " " << what;
  };
  const GgmlType types[] = {GgmlType::Q8_0, GgmlType::F16, GgmlType::BF16, GgmlType::F32};
  for (int64_t n : {32, 96, 1000, 3840}) {
    const std::vector<float> proj = randn(static_cast<size_t>(n), 21, 2.0f);
    const std::vector<float> resid = randn(static_cast<size_t>(n), 22, 3.0f);
    const std::vector<float> pw = randn(static_cast<size_t>(n), 23);
    const std::vector<float> nw = randn(static_cast<size_t>(n), 24);
    cuda::DeviceBuffer dp = to_device(proj), dpw = to_device(pw), dnw = to_device(nw);
    for (const GgmlType type : types) {
      if (type == GgmlType::Q8_0 && n % 32 != 0) continue;  // blocks of 32
      for (int mode = 0; mode < 3; ++mode) {  // no proj; proj added; proj normed and added
        const float* p = mode ? dp.as<float>() : nullptr;
        const float* post = mode == 2 ? dpw.as<float>() : nullptr;
        cuda::DeviceBuffer r1 = to_device(resid), r2 = to_device(resid);
        cuda::DeviceBuffer xn(static_cast<size_t>(n) * 4, "xn");
        cuda::DeviceBuffer a1(cuda::act_bytes(type, 1, n), "act");
        cuda::DeviceBuffer a2(cuda::act_bytes(type, 1, n), "act");
        if (p) cuda::add_normed(p, post, 1, n, 1e-6f, r1.as<float>(), nullptr);
        cuda::rms_norm(r1.as<float>(), n, dnw.as<float>(), 1, n, 1e-6f, xn.as<float>(), n, nullptr);
        cuda::convert_act(type, xn.as<float>(), 1, n, n, a1.get(), nullptr);
        cuda::norm_quant(p, post, r2.as<float>(), dnw.as<float>(), 1, n, 1e-6f, type, a2.get(),
                         nullptr);
        const std::vector<float> want_r = from_device<float>(r1, static_cast<size_t>(n));
        EXPECT_LE(nmse(from_device<float>(r2, static_cast<size_t>(n)), want_r), 1e-12)
            << n << " " << mode;
        expect_same(type, a2, a1, n, "norm " + std::to_string(n) + " " + std::to_string(mode));
      }
    }
  }
  const int64_t n_ff = 15360;
  const std::vector<float> gu = randn(static_cast<size_t>(2 * n_ff), 25, 3.0f);
  cuda::DeviceBuffer dg = to_device(gu), ff(static_cast<size_t>(n_ff) * 4, "ff");
  for (const GgmlType type : types)
    for (bool gelu : {false, true}) {
      cuda::DeviceBuffer a1(cuda::act_bytes(type, 1, n_ff), "act");
      cuda::DeviceBuffer a2(cuda::act_bytes(type, 1, n_ff), "act");
      cuda::glu(dg.as<float>(), 2 * n_ff, 1, n_ff, gelu, ff.as<float>(), nullptr);
      cuda::convert_act(type, ff.as<float>(), 1, n_ff, n_ff, a1.get(), nullptr);
      cuda::glu_quant(dg.as<float>(), 2 * n_ff, 1, n_ff, gelu, type, a2.get(), nullptr);
      expect_same(type, a2, a1, n_ff, gelu ? "glu gelu" : "glu silu");
    }
}

// q/k/v of n tokens through per-head norms and rope; K/V land in the f16 cache at their slots.
TEST(CudaOps, QkvFinishNormsRotatesAndStores) {
  CHANNEL_REQUIRE_CUDA();
  const int n_head = 4, n_kv = 2, hd = 64, n = 5;
  const int64_t cap = 40, ld = (n_head + 2 * n_kv) * hd + 4;
  const std::vector<int32_t> positions = {3, 4, 5, 900, 901};
  const std::vector<int32_t> slots = {0, 39, 7, 8, 20};
  const std::vector<float> qkv = randn(static_cast<size_t>(n * ld), 21);
  const std::vector<float> qn = randn(hd, 22), kn = randn(hd, 23);
  const RopeParams p{RopeStyle::neox, 48, 1e6f, 1.0f, nullptr};

  cuda::DeviceBuffer dqkv = to_device(qkv), dqn = to_device(qn), dkn = to_device(kn);
  cuda::DeviceBuffer dpos = to_device(positions), dslots = to_device(slots);
  cuda::DeviceBuffer kc(static_cast<size_t>(n_kv * cap * hd) * 2, "k"), vc(static_cast<size_t>(n_kv * cap * hd) * 2, "v");
  const cuda::QkvLayout l{n_head, n_kv, hd, hd, ld};
  cuda::qkv_finish(l, dqkv.as<float>(), n, dqn.as<float>(), dkn.as<float>(), 1e-6f,
                   cuda::make_rope(cuda::RopeMode::neox, 48, 1e6f, 1.0f, nullptr), dpos.as<int32_t>(),
                   dslots.as<int32_t>(), kc.get(), vc.get(), cap, nullptr);
  const std::vector<float> got_qkv = from_device<float>(dqkv, qkv.size());
  const std::vector<uint16_t> got_k = from_device<uint16_t>(kc, static_cast<size_t>(n_kv * cap * hd));
  const std::vector<uint16_t> got_v = from_device<uint16_t>(vc, static_cast<size_t>(n_kv * cap * hd));

  std::vector<float> want_q, got_q, want_kv, got_kv;
  std::vector<float> cs(48);
  for (int t = 0; t < n; ++t) {
    std::vector<float> row(qkv.begin() + t * ld, qkv.begin() + (t + 1) * ld);
    for (int h = 0; h < n_head + n_kv; ++h)
      rms_norm_ref(row.data() + h * hd, (h < n_head ? qn : kn).data(), hd, 1e-6f, row.data() + h * hd);
    rope_angles(p, positions[static_cast<size_t>(t)], cs.data());
    rope_apply(p, cs.data(), row.data(), n_head + n_kv, hd);
    for (int i = 0; i < n_head * hd; ++i) {
      want_q.push_back(row[static_cast<size_t>(i)]);
      got_q.push_back(got_qkv[static_cast<size_t>(t * ld + i)]);
    }
    for (int hk = 0; hk < n_kv; ++hk) {
      for (int i = 0; i < hd; ++i) {
        const size_t at = (static_cast<size_t>(hk) * cap + static_cast<size_t>(slots[static_cast<size_t>(t)])) * hd + i;
        want_kv.push_back(fp16_to_fp32(fp32_to_fp16(row[static_cast<size_t>((n_head + hk) * hd + i)])));
        got_kv.push_back(fp16_to_fp32(got_k[at]));
        want_kv.push_back(fp16_to_fp32(fp32_to_fp16(row[static_cast<size_t>((n_head + n_kv + hk) * hd + i)])));
        got_kv.push_back(fp16_to_fp32(got_v[at]));
      }
    }
  }
  EXPECT_LE(nmse(got_q, want_q), 1e-11);
  EXPECT_LE(nmse(got_kv, want_kv), 1e-7);  // one f16 rounding step at most
}

// The arguments of a slot attention over device buffers: queries [n][n_head][hd], a cache of
// n_kv heads of cap slots (f16, or f32 with kv_f32), the slot table and each query's range.
struct SlotAttnShape {
  int n, n_head, n_kv, hd;
  int64_t cap;
  bool kv_f32;
};
cuda::AttnArgs slot_attn_args(const SlotAttnShape& s, const cuda::DeviceBuffer& q, const void* k,
                              const void* v, const cuda::DeviceBuffer& table,
                              const cuda::DeviceBuffer& first, const cuda::DeviceBuffer& count,
                              int splits, cuda::DeviceBuffer& part, cuda::DeviceBuffer& out) {
  cuda::AttnArgs a;
  a.q = q.as<float>();
  a.ldq = static_cast<int64_t>(s.n_head) * s.hd;
  a.k_cache = k;
  a.v_cache = v;
  a.cap = s.cap;
  a.kv_f32 = s.kv_f32;
  a.table = table.as<int32_t>();
  a.first = first.as<int32_t>();
  a.count = count.as<int32_t>();
  a.n = s.n;
  a.n_head = s.n_head;
  a.n_head_kv = s.n_kv;
  a.head_dim = s.hd;
  a.head_dim_v = s.hd;
  a.scale = 1.0f / std::sqrt(static_cast<float>(s.hd));
  a.splits = splits;
  a.part = part.as<float>();
  a.out = out.as<float>();
  return a;
}

// Prompt-chunk attention on tensor cores against attend_ref and against the slot kernel: a
// chunk of queries past a shuffled table's earlier entries (a depth), each query's range
// causal and a sliding window's (so a block's queries see different ranges), an empty range,
// chunks not a multiple of the 64-query tile, every head size it takes, split and unsplit.
// Its queries and probabilities are f16: a bound of f16 roundings, not the slot kernel's 1e-10.
TEST(CudaOps, FlashAttentionMatchesReference) {
  CHANNEL_REQUIRE_CUDA();
  for (int hd : {64, 96, 128, 160, 192, 224, 256}) {
    for (int group : {1, 2, 4}) {
      for (int n : {33, 150}) {
        const int n_kv = 2, n_head = n_kv * group, depth = 70, window = 90;
        const int64_t cap = depth + n + 5;
        const std::vector<float> k = randn(static_cast<size_t>(n_kv * cap * hd), 7 + hd, 0.7f);
        const std::vector<float> v = randn(k.size(), 9 + group, 0.7f);
        std::vector<uint16_t> k16(k.size()), v16(v.size());
        std::vector<float> kr(k.size()), vr(v.size());  // as the f16 cache holds them
        for (size_t i = 0; i < k.size(); ++i) {
          k16[i] = fp32_to_fp16(k[i]);
          v16[i] = fp32_to_fp16(v[i]);
          kr[i] = fp16_to_fp32(k16[i]);
          vr[i] = fp16_to_fp32(v16[i]);
        }
        std::vector<int32_t> table(static_cast<size_t>(cap));
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), std::mt19937(11));
        std::vector<int32_t> first(static_cast<size_t>(n)), count(static_cast<size_t>(n));
        for (int t = 0; t < n; ++t) {
          const int p = depth + t;  // entries 0 .. p, or a window of them for every other 7
          const bool sliding = (t / 7) % 2 == 1;
          first[static_cast<size_t>(t)] = sliding ? std::max(0, p - window + 1) : 0;
          count[static_cast<size_t>(t)] = p + 1 - first[static_cast<size_t>(t)];
        }
        count[5] = 0;  // a query that sees nothing
        const std::vector<float> q = randn(static_cast<size_t>(n * n_head * hd), 41 + n, 0.5f);
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        std::vector<float> want(q.size()), scores(static_cast<size_t>(cap));
        for (int t = 0; t < n; ++t)
          for (int h = 0; h < n_head; ++h) {
            const int hk = h / group;
            const AttentionHead head{kr.data() + hk * cap * hd, vr.data() + hk * cap * hd, hd, hd};
            const std::span<const int32_t> visible(
                table.data() + first[static_cast<size_t>(t)],
                static_cast<size_t>(count[static_cast<size_t>(t)]));
            attend_ref(q.data() + (t * n_head + h) * hd, head, visible, scale, scores.data(),
                       want.data() + (t * n_head + h) * hd);
          }
        cuda::DeviceBuffer dk = to_device(k16), dv = to_device(v16), dq = to_device(q),
                           dt = to_device(table), df = to_device(first), dc = to_device(count);
        for (int splits : {1, 3}) {
          cuda::DeviceBuffer part(cuda::attention_part_floats(n, n_head, hd, splits) * 4, "part");
          cuda::DeviceBuffer out(want.size() * 4, "out"), out_slots(want.size() * 4, "out");
          cuda::AttnArgs a = slot_attn_args({n, n_head, n_kv, hd, cap, false}, dq, dk.get(),
                                            dv.get(), dt, df, dc, splits, part, out);
          ASSERT_TRUE(cuda::flash_attention_supported(a));
          cuda::flash_attention(a, nullptr);
          const std::vector<float> got = from_device<float>(out, want.size());
          const std::string what = "hd " + std::to_string(hd) + " group " + std::to_string(group) +
                                   " n " + std::to_string(n) + " splits " + std::to_string(splits);
          EXPECT_LE(nmse(got, want), 2e-6) << what;
          for (int h = 0; h < n_head; ++h)  // the empty range gives zeros
            for (int i = 0; i < hd; ++i)
              EXPECT_EQ(got[static_cast<size_t>((5 * n_head + h) * hd + i)], 0.0f) << what;
          // attention() takes this path for the chunk, unless told not to.
          a.out = out_slots.as<float>();
          cuda::attention(a, nullptr);
          EXPECT_EQ(from_device<float>(out_slots, want.size()), got) << what << " (attention())";
          cuda::set_flash_attention(false);
          cuda::attention(a, nullptr);
          cuda::set_flash_attention(true);
          EXPECT_LE(nmse(from_device<float>(out_slots, want.size()), want), 1e-10)
              << what << " (slots)";

          // As Q8_0 blocks: per token the bits of convert_act over the float output.
          const int64_t row = static_cast<int64_t>(n_head) * hd;
          const size_t q8_bytes = static_cast<size_t>(n * row + n * (row / 32) * 4);
          cuda::DeviceBuffer got_q8(q8_bytes, "q8");
          a.out = out.as<float>();
          a.out_act = got_q8.get();
          cuda::flash_attention(a, nullptr);
          test::expect_q8_rows(got_q8, out.as<float>(), n, row, what);
        }
      }
    }
  }
}

// Attention through a shuffled slot table, with per-query ranges (an empty one included),
// against attend_ref over the same f16-rounded keys and values; split and unsplit; the output
// in every form W_o's input takes.
TEST(CudaOps, SlotAttentionMatchesReference) {
  CHANNEL_REQUIRE_CUDA();
  for (bool f32 : {false, true}) {  // the f16 cache, and the f32 one of F32 models
    for (int hd : {32, 64, 96, 128, 160, 192, 224, 256}) {
      for (int group : {1, 2, 3, 8}) {
        const int n_kv = 2, n_head = n_kv * group;
        const int64_t cap = 301;
        // Fill the cache through qkv_finish (no norms, no rotation): every slot gets a key/value.
        const int64_t ld = (n_head + 2 * n_kv) * hd;
        const std::vector<float> qkv = randn(static_cast<size_t>(cap * ld), 31 + hd + group, 0.7f);
        std::vector<int32_t> ids(static_cast<size_t>(cap));
        std::iota(ids.begin(), ids.end(), 0);
        cuda::DeviceBuffer dqkv = to_device(qkv), dids = to_device(ids);
        const size_t elem = f32 ? 4 : 2;
        cuda::DeviceBuffer kc(static_cast<size_t>(n_kv * cap * hd) * elem, "k"),
            vc(static_cast<size_t>(n_kv * cap * hd) * elem, "v");
        const cuda::QkvLayout l{n_head, n_kv, hd, hd, ld, f32};
        cuda::qkv_finish(l, dqkv.as<float>(), static_cast<int>(cap), nullptr, nullptr, 1e-6f,
                         cuda::make_rope(cuda::RopeMode::normal, 0, 1e4f, 1.0f, nullptr),
                         dids.as<int32_t>(), dids.as<int32_t>(), kc.get(), vc.get(), cap, nullptr);
        std::vector<int32_t> table = ids;
        std::shuffle(table.begin(), table.end(), std::mt19937(5));
        const std::vector<int32_t> first = {0, 10, 100, 300, 0};
        const std::vector<int32_t> count = {1, 57, 201, 0, 301};
        const int n = static_cast<int>(first.size());
        const std::vector<float> q = randn(static_cast<size_t>(n * n_head * hd), 41, 0.5f);
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

        // Reference: keys and values as the cache holds them (f16, or f32).
        auto held = [&](float x) { return f32 ? x : fp16_to_fp32(fp32_to_fp16(x)); };
        std::vector<float> k(static_cast<size_t>(n_kv * cap * hd)), v(k.size());
        for (int64_t s = 0; s < cap; ++s)
          for (int hk = 0; hk < n_kv; ++hk)
            for (int i = 0; i < hd; ++i) {
              const size_t at = (static_cast<size_t>(hk) * cap + s) * hd + i;
              k[at] = held(qkv[static_cast<size_t>(s * ld + (n_head + hk) * hd + i)]);
              v[at] = held(qkv[static_cast<size_t>(s * ld + (n_head + n_kv + hk) * hd + i)]);
            }
        std::vector<float> want(static_cast<size_t>(n * n_head * hd)),
            scores(static_cast<size_t>(cap));
        for (int t = 0; t < n; ++t)
          for (int h = 0; h < n_head; ++h) {
            const int hk = h / group;
            const AttentionHead head{k.data() + hk * cap * hd, v.data() + hk * cap * hd, hd, hd};
            const std::span<const int32_t> visible(
                table.data() + first[static_cast<size_t>(t)],
                static_cast<size_t>(count[static_cast<size_t>(t)]));
            attend_ref(q.data() + (t * n_head + h) * hd, head, visible, scale, scores.data(),
                       want.data() + (t * n_head + h) * hd);
          }

        cuda::DeviceBuffer dq = to_device(q), dt = to_device(table), df = to_device(first),
                           dc = to_device(count);
        {
          for (int splits : {1, 7}) {
            cuda::DeviceBuffer part(
                std::max<size_t>(cuda::attention_part_floats(n, n_head, hd, splits), 1) * 4,
                "part");
            cuda::DeviceBuffer out(want.size() * 4, "out");
            cuda::AttnArgs a = slot_attn_args({n, n_head, n_kv, hd, cap, f32}, dq, kc.get(),
                                              vc.get(), dt, df, dc, splits, part, out);
            cuda::attention(a, nullptr);
            const std::vector<float> got = from_device<float>(out, want.size());
            const std::string what = "hd " + std::to_string(hd) + " group " +
                                     std::to_string(group) + " splits " + std::to_string(splits) +
                                     " f32 " + std::to_string(f32);
            EXPECT_LE(nmse(got, want), 1e-10) << what;
            for (int h = 0; h < n_head; ++h)  // the empty range gives zeros
              for (int i = 0; i < hd; ++i)
                EXPECT_EQ(got[static_cast<size_t>((3 * n_head + h) * hd + i)], 0.0f) << what;

            // The output as W_o's input: per token the bytes of convert_act over the float
            // output (Q8_0 blocks: [n][row] quants then [n][row / 32] scales).
            const int64_t row = static_cast<int64_t>(n_head) * hd;
            for (GgmlType wo : {GgmlType::Q8_0, GgmlType::F16, GgmlType::BF16, GgmlType::F32}) {
              cuda::DeviceBuffer got_act(test::act_out_bytes(n, row), "act");
              a.out_act = got_act.get();
              a.out_form = cuda::act_form(wo);
              cuda::attention(a, nullptr);
              test::expect_act_rows(wo, got_act, out.as<float>(), n, row, what);
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace channel

#endif
