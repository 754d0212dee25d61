// The whole forward on CUDA against the CPU engine (random models of every supported
// architecture and type: prefill, graph-captured decode, decode_all) and against llama.cpp's
// goldens with the tolerances of model_goldens_test; and the one-line errors of the backend,
// which need no device. Without a device the GPU tests skip loudly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/cpu/thread_pool.h"
#include "backend/device.h"
#include "cuda_test_util.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/random_model.h"
#include "runtime/session.h"
#include "testdata.h"
#include "util/error.h"

namespace channel {
namespace {

TEST(CudaDevice, ParsesDeviceNames) {
  EXPECT_FALSE(parse_device("cpu").is_cuda());
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "cudax", "CPU", ""}) {
    try {
      parse_device(bad);
      ADD_FAILURE() << "no error for '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
  }
  if (cuda_backend_built()) {
    EXPECT_EQ(parse_device("cuda").index, 0);
    EXPECT_EQ(parse_device("cuda:3").index, 3);
    EXPECT_EQ(parse_device("cuda:3").name(), "cuda:3");
  } else {
    EXPECT_THROW(parse_device("cuda"), Error);
  }
}

}  // namespace
}  // namespace channel

#if defined(CHANNEL_HAS_CUDA)

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_session.h"
#include "backend/cuda/kquant_group.h"

namespace channel {
namespace {

using test::nmse;

std::shared_ptr<const Model> random_model(Arch arch, GgmlType type) {
  return test::small_random_model(arch, type);
}

std::string one_line_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Errors that come before any device work, so they hold on a machine without a GPU too.
TEST(CudaDevice, UnsupportedModelsAndMissingDevicesGiveOneLine) {
  RandomModelSpec b;
  b.arch = Arch::bounded;
  b.hidden = 64;
  b.heads = 2;
  b.kv_heads = 1;
  b.head_dim = 32;
  b.ffn = 128;
  b.layers = 3;
  b.window = 8;
  b.rope_dims = 16;
  b.vocab = 300;
  ThreadPool pool(1);
  GgufWriter w;
  write_random_model(b, w, pool);
  const std::vector<uint8_t> bytes = w.to_bytes();
  auto bounded = Model::load_from_memory(bytes, "b.gguf");
  const std::string e1 = one_line_error([&] { cuda::CudaWeights::upload(bounded, 99); });
  ASSERT_FALSE(e1.empty());
  EXPECT_EQ(e1.rfind("cuda: ", 0), 0u) << e1;
  EXPECT_EQ(e1.find('\n'), std::string::npos);

  auto llama = random_model(Arch::llama, GgmlType::Q8_0);
  const std::string e2 = one_line_error([&] { cuda::CudaWeights::upload(llama, 99); });
  ASSERT_FALSE(e2.empty());
  EXPECT_EQ(e2.rfind("cuda: ", 0), 0u) << e2;
  EXPECT_EQ(e2.find('\n'), std::string::npos);
  if (test::cuda_unavailable().empty()) {
    EXPECT_NE(e2.find("device 99 does not exist"), std::string::npos) << e2;
  } else {
    std::printf("[ cuda ] without a device: %s\n", e2.c_str());
  }

  // Head sizes: every multiple of 32 up to 256; another is refused by name before any device
  // work (a machine without a GPU gives the same line).
  for (int hd : {32, 64, 96, 128, 160, 192, 224, 256})
    EXPECT_TRUE(cuda::attention_shape_supported(hd, hd, 4)) << hd;
  for (int hd : {16, 48, 80, 100, 288})
    EXPECT_FALSE(cuda::attention_shape_supported(hd, hd, 1)) << hd;
  EXPECT_FALSE(cuda::attention_shape_supported(128, 64, 1));
  EXPECT_FALSE(cuda::attention_shape_supported(128, 128, 9));
  RandomModelSpec odd;
  odd.arch = Arch::llama;
  odd.hidden = 96;
  odd.heads = 2;
  odd.kv_heads = 1;
  odd.head_dim = 48;
  odd.ffn = 128;
  odd.layers = 1;
  odd.vocab = 300;
  GgufWriter ow;
  write_random_model(odd, ow, pool);
  const std::vector<uint8_t> odd_bytes = ow.to_bytes();
  auto odd_model = Model::load_from_memory(odd_bytes, "odd.gguf");
  const std::string e3 = one_line_error([&] { cuda::CudaWeights::upload(odd_model, 0); });
  EXPECT_NE(e3.find("cuda: head_dim 48"), std::string::npos) << e3;
  EXPECT_EQ(e3.find('\n'), std::string::npos);
}

struct ModelCase {
  Arch arch;
  GgmlType type;
};

class CudaModel : public ::testing::TestWithParam<ModelCase> {};

// The model on the device against the CPU: a prompt in chunks and in one chunk (flash
// attention), one-token steps on the graph and without it, truncation, decode_all, errors.
void expect_matches_cpu(const std::shared_ptr<const Model>& model) {
  auto weights = cuda::CudaWeights::upload(model, 0);
  const int n_vocab = model->hparams().n_vocab;
  std::vector<int32_t> prompt(45);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 37 + 5) % n_vocab);

  Session cpu(model, SessionConfig{.n_ctx = 64, .n_threads = 2, .n_batch = 20});
  cuda::CudaSession gpu(weights, cuda::CudaSessionConfig{.n_ctx = 64, .n_batch = 20});
  cuda::CudaSession plain(weights, cuda::CudaSessionConfig{.n_ctx = 64, .n_batch = 20, .graphs = false});
  auto as_vec = [](std::span<const float> s) { return std::vector<float>(s.begin(), s.end()); };
  // Quantized weights: the tensor-core prefill rounds activations to f16 where the CPU uses
  // Q8_0 blocks; float weights differ by the f16 KV cache and summation order.
  const double bound = 2e-3;
  const std::vector<float> want = as_vec(cpu.decode(prompt));
  const std::vector<float> got = as_vec(gpu.decode(prompt));
  plain.decode(prompt);
  EXPECT_LE(nmse(got, want), bound) << "prefill";
  {  // the whole prompt in one chunk: attention on tensor cores (flash_attention)
    cuda::CudaSession wide(weights, cuda::CudaSessionConfig{.n_ctx = 64, .n_batch = 64});
    EXPECT_LE(nmse(as_vec(wide.decode(prompt)), want), bound) << "prefill in one chunk";
  }
  for (int i = 0; i < 8; ++i) {  // one-token steps: the captured graph, and without it
    const int32_t tok = static_cast<int32_t>((i * 11 + 3) % n_vocab);
    const std::vector<float> w1 = as_vec(cpu.decode(std::span(&tok, 1)));
    const std::vector<float> g1 = as_vec(gpu.decode(std::span(&tok, 1)));
    const std::vector<float> p1 = as_vec(plain.decode(std::span(&tok, 1)));
    EXPECT_LE(nmse(g1, w1), bound) << "step " << i;
    EXPECT_EQ(g1, p1) << "graph replay differs from direct launches at step " << i;
  }
  EXPECT_EQ(gpu.n_past(), 53);
  gpu.truncate_last(3);
  cpu.truncate_last(3);
  const int32_t tok = 42;
  EXPECT_LE(nmse(as_vec(gpu.decode(std::span(&tok, 1))), as_vec(cpu.decode(std::span(&tok, 1)))), bound);

  gpu.reset();
  cpu.reset();
  const std::vector<float> all_g = gpu.decode_all(std::span(prompt).first(25));
  const std::vector<float> all_c = as_vec(cpu.decode_all(std::span(prompt).first(25)));
  EXPECT_LE(nmse(all_g, all_c), bound) << "decode_all";
  EXPECT_THROW(gpu.decode(std::vector<int32_t>(40, 1)), Error);  // past n_ctx
  EXPECT_THROW(gpu.decode(std::vector<int32_t>{n_vocab}), Error);
}

TEST_P(CudaModel, MatchesCpuPrefillDecodeAndDecodeAll) {
  CHANNEL_REQUIRE_CUDA();
  expect_matches_cpu(random_model(GetParam().arch, GetParam().type));
}

// Head sizes between the powers of two (a lane's 3, 5, 6 and 7 elements in the slot kernels;
// flash attention's tiles of 96 .. 224), on each architecture, one KV head for four queries.
TEST(CudaModel, OtherHeadSizesMatchTheCpu) {
  CHANNEL_REQUIRE_CUDA();
  const struct {
    Arch arch;
    GgmlType type;
    int head_dim;
  } cases[] = {{Arch::llama, GgmlType::Q8_0, 96},
               {Arch::gemma3, GgmlType::F16, 160},
               {Arch::qwen3, GgmlType::Q4_0, 192},
               {Arch::gemma3, GgmlType::Q8_0, 224}};
  for (const auto& c : cases) {
    SCOPED_TRACE("head_dim " + std::to_string(c.head_dim));
    RandomModelSpec s;
    s.arch = c.arch;
    s.type = c.type;
    s.hidden = 128;
    s.layers = 3;
    s.heads = 4;
    s.kv_heads = 1;
    s.head_dim = c.head_dim;
    s.ffn = 256;
    s.window = 16;
    s.window_pattern = 3;
    s.vocab = 500;
    s.seed = 7;
    expect_matches_cpu(test::load_random_model(s));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Archs, CudaModel,
    ::testing::Values(ModelCase{Arch::llama, GgmlType::F32}, ModelCase{Arch::llama, GgmlType::Q8_0},
                      ModelCase{Arch::llama, GgmlType::Q4_0}, ModelCase{Arch::gemma3, GgmlType::F16},
                      ModelCase{Arch::gemma3, GgmlType::BF16}, ModelCase{Arch::gemma3, GgmlType::Q8_0},
                      ModelCase{Arch::gemma3, GgmlType::Q4_0}, ModelCase{Arch::qwen3, GgmlType::Q8_0},
                      ModelCase{Arch::llama, GgmlType::Q4_K}, ModelCase{Arch::gemma3, GgmlType::Q6_K},
                      ModelCase{Arch::qwen3, GgmlType::Q5_K}, ModelCase{Arch::llama, GgmlType::Q3_K},
                      ModelCase{Arch::gemma3, GgmlType::Q2_K}, ModelCase{Arch::bounded, GgmlType::F32},
                      ModelCase{Arch::bounded, GgmlType::Q8_0}),
    [](const auto& info) {
      const Arch a = info.param.arch;
      const char* arch = a == Arch::llama    ? "llama"
                         : a == Arch::gemma3 ? "gemma3"
                         : a == Arch::qwen3  ? "qwen3"
                                             : "bounded";
      return std::string(arch) + "_" + ggml_type_name(static_cast<uint32_t>(info.param.type));
    });

// Non-finite logits end the step with the one-line error, found on the device
// (nonfinite_flags) on the captured graph and without it, for a prompt and for one token;
// a healthy model's steps after that find nothing, so no flag is left set. Q8_0: the NaN
// passes through the Q8_0 activation blocks of the LM head's input (quant_store's NaN scale)
// instead of being rounded to a 0 quant.
TEST(CudaModel, NonFiniteLogitsGiveTheError) {
  CHANNEL_REQUIRE_CUDA();
  for (const GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
    SCOPED_TRACE(ggml_type_name(static_cast<uint32_t>(type)));
    auto model = test::small_random_model(Arch::llama, type, 5);
    // The final norm's weights are a copy the model owns (model.h): one NaN there reaches
    // every logit through the LM head.
    const_cast<std::vector<float>&>(model->weights().output_norm)[3] = std::nanf("");
    auto weights = cuda::CudaWeights::upload(model, 0);
    const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
    const int32_t tok = 7;
    for (bool graphs : {true, false}) {
      cuda::CudaSession s(weights,
                          cuda::CudaSessionConfig{.n_ctx = 32, .n_batch = 8, .graphs = graphs});
      try {
        s.decode(prompt);
        ADD_FAILURE() << "prefill of NaN logits did not throw (graphs " << graphs << ")";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("non-finite"), std::string::npos) << e.what();
      }
      EXPECT_THROW(s.decode(std::span(&tok, 1)), Error) << "graphs " << graphs;
    }
    auto healthy = cuda::CudaWeights::upload(test::small_random_model(Arch::llama, type, 5), 0);
    cuda::CudaSession s(healthy, cuda::CudaSessionConfig{.n_ctx = 32, .n_batch = 8});
    EXPECT_NO_THROW(s.decode(prompt));
    for (int i = 0; i < 3; ++i) EXPECT_NO_THROW(s.decode(std::span(&tok, 1)));
  }
}

// Text embeddings on the device (channel embed --device cuda): every token's final-norm hidden
// state, in chunks of the batch and one token at a time, against the CPU session's; the
// session's logits are not touched, and it goes on decoding after them.
TEST(CudaModel, HiddenStatesMatchTheCpu) {
  CHANNEL_REQUIRE_CUDA();
  for (const auto& [arch, type] :
       {std::pair{Arch::gemma3, GgmlType::Q8_0}, std::pair{Arch::llama, GgmlType::F16},
        std::pair{Arch::qwen3, GgmlType::F32}}) {
    SCOPED_TRACE(ggml_type_name(static_cast<uint32_t>(type)));
    auto model = random_model(arch, type);
    auto weights = cuda::CudaWeights::upload(model, 0);
    std::vector<int32_t> tokens(21);
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = static_cast<int32_t>((i * 29 + 3) % model->hparams().n_vocab);
    Session cpu(model, SessionConfig{.n_ctx = 64, .n_threads = 2});
    std::vector<float> want, got, one;
    cpu.hidden_states(tokens, want);
    cuda::CudaSession gpu(weights, cuda::CudaSessionConfig{.n_ctx = 64, .n_batch = 8});
    gpu.hidden_states(std::span(tokens).first(20), got);    // chunks of 8, 8 and 4
    gpu.hidden_states(std::span(tokens).subspan(20), one);  // one token: the decode path
    got.insert(got.end(), one.begin(), one.end());
    ASSERT_EQ(got.size(), want.size());
    // As CudaModel.MatchesCpuPrefillDecodeAndDecodeAll: the tensor-core prefill rounds Q8_0's
    // activations to f16 where the CPU quantizes them; f16 caches and summation order.
    const double bound = 2e-3;
    EXPECT_LE(nmse(got, want), bound);
    EXPECT_EQ(gpu.n_past(), 21);
    const int32_t next = 5;
    const std::span<const float> c = cpu.decode(std::span(&next, 1));
    const std::span<const float> l = gpu.decode(std::span(&next, 1));
    EXPECT_LE(nmse(std::vector<float>(l.begin(), l.end()), std::vector<float>(c.begin(), c.end())),
              bound);
  }
}

// The bounded architecture on the contiguous session: its swa_sink_v1 layers (a window of 16
// and 4 sinks) keep their rings on the device and their undo history on the host. A prompt of
// six windows in chunks wider than the window, decode on the graph past truncations (the host
// rings loaded back into the device), a truncation deeper than the undo history refused with
// the state kept, and reset, all against the CPU session.
TEST(CudaModelBounded, MatchesCpuAcrossWindowsAndTruncations) {
  CHANNEL_REQUIRE_CUDA();
  for (const GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
    auto model = random_model(Arch::bounded, type);
    const ModelHparams& hp = model->hparams();
    ASSERT_TRUE(hp.is_bounded(0));
    ASSERT_FALSE(hp.is_bounded(2));
    const int window = hp.bounded.window;
    const int n_vocab = hp.n_vocab;
    auto weights = cuda::CudaWeights::upload(model, 0);
    Session cpu(model, SessionConfig{.n_ctx = 160, .n_threads = 2, .n_batch = 24});
    cuda::CudaSession gpu(weights, cuda::CudaSessionConfig{.n_ctx = 160, .n_batch = 24});
    EXPECT_TRUE(gpu.has_bounded_layers());
    EXPECT_EQ(gpu.verify_capacity(), UNDO_DEPTH + 1);
    auto as_vec = [](std::span<const float> s) { return std::vector<float>(s.begin(), s.end()); };
    const double bound = 2e-3;
    double worst = 0;
    auto expect_close = [&](std::span<const float> g, std::span<const float> c, const char* what) {
      const double e = nmse(as_vec(g), as_vec(c));
      worst = std::max(worst, e);
      EXPECT_LE(e, bound) << ggml_type_name(static_cast<uint32_t>(type)) << " " << what
                          << " at n_past " << gpu.n_past();
    };
    std::vector<int32_t> prompt(static_cast<size_t>(6 * window));
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 37 + 5) % n_vocab);
    expect_close(gpu.decode(prompt), cpu.decode(prompt), "prefill");
    auto step = [&](int i) {
      const int32_t tok = static_cast<int32_t>((i * 11 + 3) % n_vocab);
      expect_close(gpu.decode(std::span(&tok, 1)), cpu.decode(std::span(&tok, 1)), "decode");
    };
    for (int i = 0; i < 20; ++i) step(i);
    gpu.truncate_last(5);
    cpu.truncate_last(5);
    for (int i = 20; i < 26; ++i) step(i);
    const int held = gpu.n_past();
    EXPECT_THROW(gpu.truncate_last(UNDO_DEPTH + 1), Error);  // beyond the undo history
    EXPECT_EQ(gpu.n_past(), held);
    step(26);
    const std::vector<int32_t> burst = {7, 8, 9, 10, 11, 12, 13};  // a chunk, then taken back
    expect_close(gpu.decode(burst), cpu.decode(burst), "burst");
    gpu.truncate_last(7);
    cpu.truncate_last(7);
    for (int i = 27; i < 30; ++i) step(i);
    gpu.reset();
    cpu.reset();
    const std::vector<float> all_g = gpu.decode_all(std::span(prompt).first(40));
    const std::vector<float> all_c = as_vec(cpu.decode_all(std::span(prompt).first(40)));
    const double e = nmse(all_g, all_c);
    worst = std::max(worst, e);
    EXPECT_LE(e, bound) << "decode_all after reset";
    std::printf("[ cuda ] bounded %s on the contiguous session: worst nmse %.3g\n",
                ggml_type_name(static_cast<uint32_t>(type)).c_str(), worst);
  }
}

// Every matvec variant, with and without decode's fused activation stages and programmatic
// dependent launch (cuda_kernels.h), gives the decode of v0 unfused up to summation order.
TEST(CudaModelDecode, MatvecVariantsAndFusedStagesAgree) {
  CHANNEL_REQUIRE_CUDA();
  const int saved_variant = cuda::matvec_variant();
  const bool saved_fuse = cuda::fused_decode();
  const bool saved_pdl = cuda::pdl_enabled();
  const bool saved_every_form = cuda::attention_writes_every_form();
  for (const ModelCase c :
       {ModelCase{Arch::gemma3, GgmlType::Q8_0}, ModelCase{Arch::llama, GgmlType::Q4_0},
        ModelCase{Arch::gemma3, GgmlType::F16}, ModelCase{Arch::qwen3, GgmlType::BF16}}) {
    auto model = random_model(c.arch, c.type);
    auto weights = cuda::CudaWeights::upload(model, 0);
    const int n_vocab = model->hparams().n_vocab;
    std::vector<int32_t> prompt(9);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 37 + 5) % n_vocab);
    auto run = [&](int variant, bool fuse, bool pdl) {
      cuda::set_matvec_variant(variant);
      cuda::set_fused_decode(fuse);
      cuda::set_pdl(pdl);
      cuda::CudaSession gpu(weights, cuda::CudaSessionConfig{.n_ctx = 32, .n_batch = 16});
      gpu.decode(prompt);
      std::vector<float> out;
      for (int i = 0; i < 4; ++i) {
        const int32_t tok = static_cast<int32_t>((i * 11 + 3) % n_vocab);
        const std::span<const float> l = gpu.decode(std::span(&tok, 1));
        out.insert(out.end(), l.begin(), l.end());
      }
      return out;
    };
    const std::vector<float> want = run(0, false, false);
    for (int v = 0; v < cuda::kMatvecVariants; ++v)
      for (int mode = 0; mode < 4; ++mode) {
        const bool fuse = mode & 1, pdl = mode & 2;
        const double e = nmse(run(v, fuse, pdl), want);
        std::printf("[ cuda ] decode %s v%d fuse %d pdl %d nmse %.3g\n",
                    ggml_type_name(static_cast<uint32_t>(c.type)).c_str(), v, fuse, pdl, e);
        EXPECT_LE(e, 1e-6) << ggml_type_name(static_cast<uint32_t>(c.type)) << " v" << v
                           << " fuse " << fuse << " pdl " << pdl;
      }
    // Per-product variants (each role its own kernel) decode as the rest do.
    {
      const std::string roles = "qkv:v0,wo:v6,gate_up:v8,down:v5,output:v2";
      cuda::set_role_variants(roles);
      const double e = nmse(run(8, true, true), want);
      cuda::set_role_variants("");
      EXPECT_LE(e, 1e-6) << ggml_type_name(static_cast<uint32_t>(c.type)) << " " << roles;
    }
    // W_o's input written by attention in every form (the default): the same bits as its
    // conversion after the merge.
    {
      cuda::set_attention_writes_every_form(false);
      const std::vector<float> fused = run(8, true, true);
      cuda::set_attention_writes_every_form(true);
      EXPECT_EQ(run(8, true, true), fused)
          << ggml_type_name(static_cast<uint32_t>(c.type)) << " W_o's input from attention";
      cuda::set_attention_writes_every_form(saved_every_form);
    }
  }
  cuda::set_matvec_variant(saved_variant);
  cuda::set_fused_decode(saved_fuse);
  cuda::set_pdl(saved_pdl);
}

// The decode kernel spec (channel bench --cuda-decode) sets each choice; a bad one is an error
// naming what it expected. No device needed: the choices are process settings.
TEST(CudaDecodeKernels, SpecSetsEachChoice) {
  const int saved_variant = cuda::matvec_variant();
  const bool saved[] = {cuda::fused_decode(), cuda::pdl_enabled(), cuda::one_kernel_attention(),
                        cuda::host_logits(), cuda::attention_writes_every_form()};
  cuda::set_decode_kernels("v6pf");
  EXPECT_EQ(cuda::matvec_variant(), 6);
  EXPECT_TRUE(cuda::fused_decode());
  EXPECT_TRUE(cuda::pdl_enabled());
  EXPECT_FALSE(cuda::one_kernel_attention());
  EXPECT_FALSE(cuda::host_logits());
  cuda::set_decode_kernels("v0a");
  EXPECT_EQ(cuda::matvec_variant(), 0);
  EXPECT_FALSE(cuda::fused_decode());
  EXPECT_FALSE(cuda::pdl_enabled());
  EXPECT_TRUE(cuda::one_kernel_attention());
  cuda::set_decode_kernels("v8fph");
  EXPECT_TRUE(cuda::host_logits());
  EXPECT_FALSE(cuda::one_kernel_attention());
  EXPECT_FALSE(cuda::attention_writes_every_form());
  cuda::set_decode_kernels("v0fpw");
  EXPECT_TRUE(cuda::attention_writes_every_form());
  EXPECT_FALSE(cuda::host_logits());
  for (const char* bad :
       {"", "v", "v9", "6f", "v6x", "v6ff", "v6f p", "v8hh", "v8ww", "v8fs", "v8fphs"})
    EXPECT_THROW(cuda::set_decode_kernels(bad), Error) << bad;
  // Per-product variants: "+role:vN" parts, each role at most once; a spec without them
  // clears them.
  const std::string saved_roles = cuda::role_variants();
  cuda::set_decode_kernels("v8fp+output:v6+down:v0");
  EXPECT_EQ(cuda::role_variants(), "down:v0,output:v6");
  cuda::DevMatrix m;
  m.type = GgmlType::Q8_0;
  m.role = cuda::MatRole::output;
  EXPECT_EQ(cuda::matvec_variant_for(m), 6);
  m.role = cuda::MatRole::wo;
  EXPECT_EQ(cuda::matvec_variant_for(m), 8);
  cuda::set_decode_kernels("v8fp");
  EXPECT_EQ(cuda::role_variants(), "");
  for (const char* bad : {"v8fp+out:v6", "v8fp+down:v9", "v8fp+down:v6+down:v0", "v8fp+down",
                          "v8fp++down:v6", "v8fp+"})
    EXPECT_THROW(cuda::set_decode_kernels(bad), Error) << bad;
  cuda::set_role_variants("qkv:v5,gate_up:v1");
  EXPECT_EQ(cuda::role_variants(), "qkv:v5,gate_up:v1");
  for (const char* bad : {"qkv=v5", "qkv:v5,", ",qkv:v5", "qkv:v5,,wo:v1", "qkv:5", "other:v1"})
    EXPECT_THROW(cuda::set_role_variants(bad), Error) << bad;
  EXPECT_EQ(cuda::role_variants(), "qkv:v5,gate_up:v1");  // a bad spec changes nothing
  cuda::set_role_variants(saved_roles);
  cuda::set_matvec_variant(saved_variant);
  cuda::set_fused_decode(saved[0]);
  cuda::set_pdl(saved[1]);
  cuda::set_one_kernel_attention(saved[2]);
  cuda::set_host_logits(saved[3]);
  cuda::set_attention_writes_every_form(saved[4]);
}

// The LM head writing the logits to the host itself (host_logits, v8): the same logits, bit
// for bit, as the copy after it, on the graph and without, for prompts and one-token steps;
// and a NaN reaching the logits still ends the step with the error.
TEST(CudaModelDecode, HostLogitsAreTheCopiedLogits) {
  CHANNEL_REQUIRE_CUDA();
  const int saved_variant = cuda::matvec_variant();
  const bool saved_host = cuda::host_logits();
  cuda::set_matvec_variant(8);
  for (const ModelCase c :
       {ModelCase{Arch::gemma3, GgmlType::Q8_0}, ModelCase{Arch::llama, GgmlType::F16},
        ModelCase{Arch::qwen3, GgmlType::Q4_0}}) {
    SCOPED_TRACE(ggml_type_name(static_cast<uint32_t>(c.type)));
    auto model = random_model(c.arch, c.type);
    auto weights = cuda::CudaWeights::upload(model, 0);
    const int n_vocab = model->hparams().n_vocab;
    std::vector<int32_t> prompt(9);
    for (size_t i = 0; i < prompt.size(); ++i)
      prompt[i] = static_cast<int32_t>((i * 37 + 5) % n_vocab);
    auto run = [&](bool host, bool graphs) {
      cuda::set_host_logits(host);
      cuda::CudaSession gpu(weights,
                            cuda::CudaSessionConfig{.n_ctx = 32, .n_batch = 16, .graphs = graphs});
      const std::span<const float> p = gpu.decode(prompt);
      std::vector<float> out(p.begin(), p.end());
      for (int i = 0; i < 5; ++i) {
        const int32_t tok = static_cast<int32_t>((i * 11 + 3) % n_vocab);
        const std::span<const float> l = gpu.decode(std::span(&tok, 1));
        out.insert(out.end(), l.begin(), l.end());
      }
      return out;
    };
    for (bool graphs : {true, false}) {
      const std::vector<float> copied = run(false, graphs);
      EXPECT_EQ(run(true, graphs), copied) << "graphs " << graphs;
    }
  }
  {  // a NaN in the final norm: Q8_0 blocks carry it (quant_store), the LM head marks it
    auto model = test::small_random_model(Arch::llama, GgmlType::Q8_0, 5);
    const_cast<std::vector<float>&>(model->weights().output_norm)[3] = std::nanf("");
    auto weights = cuda::CudaWeights::upload(model, 0);
    cuda::set_host_logits(true);
    for (bool graphs : {true, false}) {
      cuda::CudaSession s(weights,
                          cuda::CudaSessionConfig{.n_ctx = 32, .n_batch = 8, .graphs = graphs});
      const int32_t tok = 7;
      EXPECT_THROW(s.decode(std::span(&tok, 1)), Error) << "graphs " << graphs;
    }
  }
  cuda::set_host_logits(saved_host);
  cuda::set_matvec_variant(saved_variant);
}

// ---- llama.cpp's goldens ----------------------------------------------------------------------

std::vector<float> read_f32(const std::string& rel) {
  std::ifstream in(test::testdata_path(rel), std::ios::binary | std::ios::ate);
  const auto size = static_cast<size_t>(in.tellg());
  std::vector<float> v(size / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(size));
  return v;
}

// model_goldens_test's tolerances: max |diff| of the last position's logits. F32 models keep
// f32 keys and values on the device, as the CPU does; the others f16.
double golden_tolerance(const std::string& name) {
  if (!(name.ends_with("-f32") || name.ends_with("-f16"))) return 0.1;
  if (name == "llama-micro-f32") return 1e-4;
  if (name == "qwen3-micro-f32") return 1e-3;
  if (name == "gemma3-micro-f32") return 2e-3;
  return 3e-3;
}

class CudaGoldens : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGoldens, LastPositionLogitsWithinGoldenTolerance) {
  CHANNEL_REQUIRE_TESTDATA();
  const std::string name = GetParam();
  const std::string path = test::testdata_path("models/" + name + ".gguf");
  if (!std::ifstream(path)) {
    std::fprintf(stderr, "\n*** SKIPPED: %s not present ***\n\n", path.c_str());
    GTEST_SKIP() << path << " not present";
  }
  CHANNEL_REQUIRE_CUDA();
  auto model = Model::load(path);
  auto weights = cuda::CudaWeights::upload(model, 0);
  cuda::CudaSession session(weights, cuda::CudaSessionConfig{.n_ctx = 320});
  std::ifstream seq_file(test::testdata_path("goldens/sequences.json"));
  const nlohmann::json seqs = nlohmann::json::parse(seq_file)["sequences"];
  const double tol = golden_tolerance(name);
  for (const char* seq : {"seq1", "seq7", "seq100", "seq300"}) {
    const std::vector<int32_t> ids = seqs[seq].get<std::vector<int32_t>>();
    const std::vector<float> want = read_f32("goldens/" + name + "/" + seq + ".logits.f32");
    session.reset();
    const std::span<const float> got = session.decode(ids);
    double max_abs = 0;
    for (size_t i = 0; i < want.size(); ++i)
      max_abs = std::max(max_abs, std::abs(static_cast<double>(got[i]) - want[i]));
    std::printf("[ cuda goldens ] %-18s %-6s max|diff| %.3g (tolerance %.3g) nmse %.3g\n",
                name.c_str(), seq, max_abs, tol, nmse(std::vector<float>(got.begin(), got.end()), want));
    EXPECT_LE(max_abs, tol) << name << "/" << seq;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Micro, CudaGoldens,
    ::testing::Values("llama-micro-f32", "llama-micro-q8_0", "llama-micro-q4_0", "gemma3-micro-f32",
                      "gemma3-micro-f16", "gemma3-micro-q8_0", "gemma3-micro-q4_0",
                      "gemma3-micro-q4_1", "gemma3-micro-q5_0", "gemma3-micro-q5_1",
                      "gemma3-micro-q4_k_m", "gemma3-k-q2_k", "gemma3-k-q4_k_m", "gemma3-k-q6_k",
                      "llama-k-q3_k_m", "llama-k-q5_k_m", "qwen3-micro-f32", "qwen3-micro-q8_0",
                      "qwen3-k-q4_k_m"),
    [](const auto& info) {
      std::string s = info.param;
      std::replace(s.begin(), s.end(), '-', '_');
      return s;
    });

}  // namespace
}  // namespace channel

#endif
