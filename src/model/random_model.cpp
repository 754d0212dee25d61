#include "model/random_model.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "bounded/bounded_config.h"
#include "gguf/gguf_writer.h"
#include "ops/fp16.h"
#include "ops/quant.h"
#include "ops/quantize.h"
#include "util/error.h"
#include "util/hash.h"

namespace channel {

namespace {

// xoshiro256** with Box-Muller normals.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& w : s_) w = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  void normals(float* out, int64_t n, float mean, float stddev) {
    for (int64_t i = 0; i < n; i += 2) {
      const double u1 = 1.0 - uniform(), u2 = uniform();  // u1 in (0, 1]
      const double r = std::sqrt(-2.0 * std::log(u1));
      out[i] = mean + stddev * static_cast<float>(r * std::cos(2 * M_PI * u2));
      if (i + 1 < n) out[i + 1] = mean + stddev * static_cast<float>(r * std::sin(2 * M_PI * u2));
    }
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

constexpr int64_t kRowsPerStream = 64;  // rows drawn from one seeded stream

// A [rows][cols] tensor of `type` with N(mean, stddev) entries.
std::vector<uint8_t> random_tensor(const std::string& name, int64_t cols, int64_t rows,
                                   GgmlType type, float mean, float stddev, uint64_t seed,
                                   ThreadPool& pool) {
  const auto traits = ggml_type_traits(static_cast<uint32_t>(type));
  const size_t row_bytes = ggml_row_bytes(*traits, cols);
  std::vector<uint8_t> data(row_bytes * static_cast<size_t>(rows));  // [rows][row_bytes]
  const int64_t n_streams = (rows + kRowsPerStream - 1) / kRowsPerStream;
  const uint64_t base = seed ^ fnv1a64(name);
  pool.parallel_for(n_streams, [&](int64_t begin, int64_t end, int) {
    std::vector<float> row(static_cast<size_t>(cols));  // [cols]
    for (int64_t s = begin; s < end; ++s) {
      uint64_t stream_seed = base + static_cast<uint64_t>(s) * 0x2545f4914f6cdd1dull;
      Rng rng(splitmix64(stream_seed));
      for (int64_t r = s * kRowsPerStream; r < std::min(rows, (s + 1) * kRowsPerStream); ++r) {
        rng.normals(row.data(), cols, mean, stddev);
        uint8_t* dst = data.data() + static_cast<size_t>(r) * row_bytes;
        quantize_row(type, row.data(), dst, cols);
      }
    }
  });
  return data;
}

}  // namespace

uint32_t llama_file_type_of(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
      return 0;
    case GgmlType::F16:
      return 1;
    case GgmlType::Q4_0:
      return 2;
    case GgmlType::Q4_1:
      return 3;
    case GgmlType::Q8_0:
      return 7;
    case GgmlType::Q5_0:
      return 8;
    case GgmlType::Q5_1:
      return 9;
    case GgmlType::Q2_K:
      return 10;
    case GgmlType::Q3_K:
      return 11;  // Q3_K_S: every weight Q3_K
    case GgmlType::Q4_K:
      return 14;  // Q4_K_S
    case GgmlType::Q5_K:
      return 16;  // Q5_K_S
    case GgmlType::Q6_K:
      return 18;
    case GgmlType::BF16:
      return 32;
  }
  return 0;
}

std::string synthetic_piece(int index) {
  // Pieces over a 26-letter alphabet: "▁" + letters and plain letters, by length.
  static const char* kSpace = "\xe2\x96\x81";
  int64_t i = index - 260;
  for (int len = 1;; ++len) {
    int64_t count = 1;
    for (int k = 0; k < len; ++k) count *= 26;
    for (int prefix = 1; prefix >= 0; --prefix) {  // with "▁" first: word starts
      if (i < count) {
        std::string s = prefix ? kSpace : "";
        std::string letters(static_cast<size_t>(len), 'a');
        int64_t v = i;
        for (int k = len - 1; k >= 0; --k, v /= 26)
          letters[static_cast<size_t>(k)] = static_cast<char>('a' + v % 26);
        return s + letters;
      }
      i -= count;
    }
  }
}

void validate(const RandomModelSpec& s) {
  auto positive = [](const char* field, int v) {
    if (v < 1) throw_error("mkmodel: --{} must be at least 1, got {}", field, v);
  };
  positive("hidden", s.hidden);
  positive("layers", s.layers);
  positive("heads", s.heads);
  positive("kv-heads", s.kv_heads);
  positive("head-dim", s.head_dim);
  positive("ffn", s.ffn);
  positive("window", s.window);
  if (s.vocab < 261)
    throw_error("mkmodel: --vocab must be at least 261 (4 specials + 256 bytes + 1), got {}",
                s.vocab);
  if (s.heads % s.kv_heads != 0)
    throw_error("mkmodel: --kv-heads {} must divide --heads {}", s.kv_heads, s.heads);
  if (s.head_dim % 2 != 0) throw_error("mkmodel: --head-dim must be even, got {}", s.head_dim);
  if (s.arch == Arch::bounded) {
    if (s.rope_dims < 0 || s.rope_dims > s.head_dim || s.rope_dims % 2 != 0)
      throw_error("mkmodel: --rope-dims {} must be even and at most --head-dim {}", s.rope_dims,
                  s.head_dim);
    if (s.sinks < 0 || s.sinks > BOUNDED_MAX_SINKS)
      throw_error("mkmodel: --sinks {} must be in [0, {}]", s.sinks, BOUNDED_MAX_SINKS);
    positive("global-every", s.global_every);
  }
  const auto traits = ggml_type_traits(static_cast<uint32_t>(s.type));
  for (auto [field, cols] : {std::pair{"hidden", s.hidden}, std::pair{"ffn", s.ffn},
                             std::pair{"heads x head-dim", s.heads * s.head_dim}}) {
    if (cols % traits->block_elems != 0)
      throw_error("mkmodel: {} = {} must be a multiple of {} for type {}", field, cols,
                  traits->block_elems, traits->name);
  }
}

void write_random_model(const RandomModelSpec& s, GgufWriter& w, ThreadPool& pool,
                        const std::set<std::string>& skip) {
  validate(s);
  const bool bounded = s.arch == Arch::bounded;
  const bool gemma = s.arch == Arch::gemma3 || bounded;  // bounded shares the gemma3 block
  const bool qwen3 = s.arch == Arch::qwen3;              // the llama block plus per-head Q/K norms
  const std::string arch = bounded ? "bounded" : gemma ? "gemma3" : qwen3 ? "qwen3" : "llama";
  auto is_global = [&](int il) { return il % s.global_every == s.global_every - 1; };
  const auto traits = ggml_type_traits(static_cast<uint32_t>(s.type));
  auto keep = [&](const std::string& k) { return skip.count(k) == 0; };
  auto u32 = [&](const std::string& k, uint32_t v) {
    if (keep(k)) w.set_u32(k, v);
  };
  auto f32 = [&](const std::string& k, float v) {
    if (keep(k)) w.set_f32(k, v);
  };
  auto str = [&](const std::string& k, const std::string& v) {
    if (keep(k)) w.set_string(k, v);
  };

  str("general.architecture", arch);
  str("general.name", "channel-random-" + arch + "-" + std::string(traits->name) + "-seed" +
                          std::to_string(s.seed));
  str("general.description", "random weights N(0, 0.02), norms 1 + N(0, 0.1), synthetic vocab");
  const uint32_t file_type = llama_file_type_of(s.type);
  u32("general.file_type", file_type);
  u32("general.quantization_version", 2);
  const std::string a = arch + ".";
  u32(a + "context_length", static_cast<uint32_t>(s.context));
  u32(a + "embedding_length", static_cast<uint32_t>(s.hidden));
  u32(a + "block_count", static_cast<uint32_t>(s.layers));
  u32(a + "feed_forward_length", static_cast<uint32_t>(s.ffn));
  u32(a + "attention.head_count", static_cast<uint32_t>(s.heads));
  u32(a + "attention.head_count_kv", static_cast<uint32_t>(s.kv_heads));
  u32(a + "attention.key_length", static_cast<uint32_t>(s.head_dim));
  u32(a + "attention.value_length", static_cast<uint32_t>(s.head_dim));
  u32(a + "rope.dimension_count", static_cast<uint32_t>(bounded ? s.rope_dims : s.head_dim));
  f32(a + "rope.freq_base", (gemma && !bounded) || qwen3 ? 1e6f : 1e4f);
  f32(a + "attention.layer_norm_rms_epsilon", gemma || qwen3 ? 1e-6f : 1e-5f);
  if (bounded) {
    u32(a + "attention.window", static_cast<uint32_t>(s.window));
    u32(a + "attention.sink_count", static_cast<uint32_t>(s.sinks));
    std::vector<uint32_t> types;  // 0 = bounded swa_sink_v1, 1 = global
    for (int il = 0; il < s.layers; ++il) types.push_back(is_global(il) ? 1 : 0);
    if (keep(a + "attention.layer_types")) w.set_u32_array(a + "attention.layer_types", types);
  } else if (gemma) {
    u32(a + "attention.sliding_window", static_cast<uint32_t>(s.window));
    u32(a + "attention.sliding_window_pattern", static_cast<uint32_t>(s.window_pattern));
    f32(a + "rope.freq_base_swa", 1e4f);
  } else {
    u32(a + "vocab_size", static_cast<uint32_t>(s.vocab));
  }

  if (s.retrieval_dim > 0) {  // optional metadata, no tensors: llama.cpp ignores unknown keys
    const size_t n = static_cast<size_t>(s.retrieval_dim) * static_cast<size_t>(s.hidden);
    std::vector<float> wq(n), wk(n);
    uint64_t stream = s.seed ^ 0x7265747269657661ull;
    Rng rng(splitmix64(stream));
    const float sd = 1.0f / std::sqrt(static_cast<float>(s.hidden));
    rng.normals(wq.data(), static_cast<int64_t>(n), 0.0f, sd);
    rng.normals(wk.data(), static_cast<int64_t>(n), 0.0f, sd);
    u32("channel.retrieval.dim", static_cast<uint32_t>(s.retrieval_dim));
    if (keep("channel.retrieval.query")) w.set_f32_array("channel.retrieval.query", wq);
    if (keep("channel.retrieval.key")) w.set_f32_array("channel.retrieval.key", wk);
  }

  // Synthetic SentencePiece vocabulary: types 1 normal, 2 unknown, 3 control, 6 byte.
  std::vector<std::string> tokens = {"<pad>", "<eos>", "<bos>", "<unk>"};
  std::vector<float> scores = {0, 0, 0, 0};
  std::vector<int32_t> types = {3, 3, 3, 2};
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(fmt::format("<0x{:02X}>", b));
    scores.push_back(0);
    types.push_back(6);
  }
  for (int id = 260; id < s.vocab; ++id) {
    tokens.push_back(synthetic_piece(id));
    scores.push_back(-static_cast<float>(id - 260));  // shorter pieces merge first
    types.push_back(1);
  }
  str("tokenizer.ggml.model", "llama");
  str("tokenizer.ggml.pre", "default");
  if (keep("tokenizer.ggml.tokens")) w.set_string_array("tokenizer.ggml.tokens", tokens);
  if (keep("tokenizer.ggml.scores")) w.set_f32_array("tokenizer.ggml.scores", scores);
  if (keep("tokenizer.ggml.token_type")) w.set_i32_array("tokenizer.ggml.token_type", types);
  u32("tokenizer.ggml.bos_token_id", 2);
  u32("tokenizer.ggml.eos_token_id", 1);
  u32("tokenizer.ggml.unknown_token_id", 3);
  u32("tokenizer.ggml.padding_token_id", 0);
  if (keep("tokenizer.ggml.add_bos_token")) w.set_bool("tokenizer.ggml.add_bos_token", true);
  if (keep("tokenizer.ggml.add_eos_token")) w.set_bool("tokenizer.ggml.add_eos_token", false);
  if (keep("tokenizer.ggml.add_space_prefix")) w.set_bool("tokenizer.ggml.add_space_prefix", false);

  auto matrix = [&](const std::string& name, int64_t cols, int64_t rows) {
    if (keep(name))
      w.add_tensor(name, s.type, {cols, rows},
                   random_tensor(name, cols, rows, s.type, 0.0f, 0.02f, s.seed, pool));
  };
  auto norm = [&](const std::string& name, int64_t n) {
    if (keep(name))
      w.add_tensor(name, GgmlType::F32, {n},
                   random_tensor(name, n, 1, GgmlType::F32, 1.0f, 0.1f, s.seed, pool));
  };
  const int64_t q_dim = static_cast<int64_t>(s.heads) * s.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(s.kv_heads) * s.head_dim;
  matrix("token_embd.weight", s.hidden, s.vocab);
  norm("output_norm.weight", s.hidden);
  for (int il = 0; il < s.layers; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    norm(p + "attn_norm.weight", s.hidden);
    matrix(p + "attn_q.weight", s.hidden, q_dim);
    matrix(p + "attn_k.weight", s.hidden, kv_dim);
    matrix(p + "attn_v.weight", s.hidden, kv_dim);
    matrix(p + "attn_output.weight", q_dim, s.hidden);
    if (gemma || qwen3) {
      norm(p + "attn_q_norm.weight", s.head_dim);
      norm(p + "attn_k_norm.weight", s.head_dim);
    }
    if (gemma) {
      norm(p + "post_attention_norm.weight", s.hidden);
      norm(p + "post_ffw_norm.weight", s.hidden);
    }
    norm(p + "ffn_norm.weight", s.hidden);
    matrix(p + "ffn_gate.weight", s.hidden, s.ffn);
    matrix(p + "ffn_up.weight", s.hidden, s.ffn);
    matrix(p + "ffn_down.weight", s.ffn, s.hidden);
    if (bounded && !is_global(il) && s.sinks > 0) {  // F32 sinks, GGUF ne [head_dim, S, n_kv_heads]
      for (const char* kind : {"attn_sink_k.weight", "attn_sink_v.weight"}) {
        const std::string name = p + kind;
        const float sd = name.find("sink_k") != std::string::npos ? 1.0f : 0.5f;  // keys: normed
        if (keep(name))
          w.add_tensor(name, GgmlType::F32, {s.head_dim, s.sinks, s.kv_heads},
                       random_tensor(name, s.head_dim, int64_t{s.sinks} * s.kv_heads, GgmlType::F32,
                                     0.0f, sd, s.seed, pool));
      }
    }
  }
}

}  // namespace channel
