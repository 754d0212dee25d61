// Helpers of the CUDA tests: skipping loudly without a device, device buffers from host
// vectors, llama.cpp's normalised mean squared error (test-backend-ops' NMSE), and the small
// random models the model tests run.
#pragma once

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/random_model.h"

#if defined(CHANNEL_HAS_CUDA)
#include <algorithm>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_kernels.h"
#include "util/error.h"

namespace channel::test {

// Empty when device 0 is usable, else the one-line reason.
inline std::string cuda_unavailable() {
  static const std::string why = [] {
    try {
      cuda::select_device(0);
      return std::string();
    } catch (const Error& e) {
      return std::string(e.what());
    }
  }();
  return why;
}

template <typename T>
cuda::DeviceBuffer to_device(const std::vector<T>& v) {
  cuda::DeviceBuffer b(std::max<size_t>(v.size() * sizeof(T), 1), "test data");
  cuda::check(cudaMemcpy(b.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "test upload");
  return b;
}

template <typename T>
std::vector<T> from_device(const cuda::DeviceBuffer& b, size_t count) {
  std::vector<T> v(count);
  cuda::check(cudaDeviceSynchronize(), "test sync");
  cuda::check(cudaMemcpy(v.data(), b.get(), count * sizeof(T), cudaMemcpyDeviceToHost), "test download");
  return v;
}

// An attention output written as Q8_0 blocks (got_q8: [n][row] quants, then [n][row / 32]
// f32 scales) must be, token by token, the bits convert_act makes of the float output
// (out: device [n][row]).
inline void expect_q8_rows(const cuda::DeviceBuffer& got_q8, const float* out, int n, int64_t row,
                           const std::string& what) {
  const size_t bytes = static_cast<size_t>(n * row + n * (row / 32) * 4);
  const std::vector<uint8_t> all = from_device<uint8_t>(got_q8, bytes);
  cuda::DeviceBuffer one(cuda::act_bytes(GgmlType::Q8_0, 1, row), "q8");
  for (int t = 0; t < n; ++t) {
    cuda::convert_act(GgmlType::Q8_0, out + t * row, 1, row, row, one.get(), nullptr);
    const std::vector<uint8_t> want =
        from_device<uint8_t>(one, static_cast<size_t>(row + row / 32 * 4));
    const auto* qs = all.data() + t * row;
    const auto* ds = all.data() + n * row + t * (row / 32) * 4;
    EXPECT_TRUE(std::equal(qs, qs + row, want.begin()) &&
                std::equal(ds, ds + row / 32 * 4, want.begin() + row))
        << what << " token " << t << " (Q8_0 output)";
  }
}

// Attention's output written as W_o's input for weights of `type` (AttnArgs::out_act in
// act_form(type)): per token the bytes convert_act gives over the float output `out`.
inline void expect_act_rows(GgmlType type, const cuda::DeviceBuffer& got, const float* out, int n,
                            int64_t row, const std::string& what) {
  if (cuda::act_form(type) == cuda::ActForm::q8) {
    expect_q8_rows(got, out, n, row, what);
    return;
  }
  const size_t per = cuda::act_bytes(type, 1, row);
  const std::vector<uint8_t> all = from_device<uint8_t>(got, per * static_cast<size_t>(n));
  cuda::DeviceBuffer one(per, "act");
  for (int t = 0; t < n; ++t) {
    cuda::convert_act(type, out + t * row, 1, row, row, one.get(), nullptr);
    const std::vector<uint8_t> want = from_device<uint8_t>(one, per);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), all.begin() + static_cast<int64_t>(t * per)))
        << what << " token " << t << " (" << ggml_type_name(static_cast<uint32_t>(type))
        << " output)";
  }
}

// The bytes W_o's input takes for n tokens of `row` elements in any form: the most of them.
inline size_t act_out_bytes(int n, int64_t row) {
  return static_cast<size_t>(n * row) * 4;
}

}  // namespace channel::test

#define CHANNEL_REQUIRE_CUDA()                                                           \
  do {                                                                                   \
    const std::string why_ = ::channel::test::cuda_unavailable();                        \
    if (!why_.empty()) {                                                                 \
      std::fprintf(stderr, "\n*** SKIPPED: no usable CUDA device: %s ***\n\n", why_.c_str()); \
      GTEST_SKIP() << "no usable CUDA device: " << why_;                                 \
    }                                                                                    \
  } while (0)
#endif

namespace channel::test {

// sum (a - b)^2 / sum b^2, as llama.cpp's test-backend-ops.
inline double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    err += d * d;
    norm += static_cast<double>(want[i]) * want[i];
  }
  return norm > 0 ? err / norm : err;
}

inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The model of spec, loaded from memory; its bytes stay alive with the test program (the
// model reads them in place).
inline std::shared_ptr<const Model> load_random_model(const RandomModelSpec& spec) {
  ThreadPool pool(1);
  GgufWriter w;
  write_random_model(spec, w, pool);
  auto bytes = std::make_shared<std::vector<uint8_t>>(w.to_bytes());
  static std::vector<std::shared_ptr<std::vector<uint8_t>>> keep;
  keep.push_back(bytes);
  return Model::load_from_memory(*bytes, "random.gguf");
}

// The CUDA model tests' model: 4 layers, 4 heads of 64 over 2 KV heads, a window of 16 on two
// layers of three, vocabulary 500; K-quant rows are whole 256-element super-blocks, so their
// widths are multiples of 256.
inline std::shared_ptr<const Model> small_random_model(Arch arch, GgmlType type,
                                                       uint64_t seed = 1) {
  const auto traits = ggml_type_traits(static_cast<uint32_t>(type));
  const bool kquant = traits && traits->block_elems == 256;
  RandomModelSpec s;
  s.arch = arch;
  s.type = type;
  s.hidden = kquant ? 256 : 128;
  s.layers = 4;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 64;
  s.ffn = kquant ? 512 : 320;
  s.window = 16;
  s.window_pattern = 3;
  s.vocab = 500;
  s.seed = seed;
  return load_random_model(s);
}

}  // namespace channel::test
