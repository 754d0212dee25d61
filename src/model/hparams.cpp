#include "model/hparams.h"

#include <cmath>
#include <limits>
#include <string_view>

#include "gguf/gguf_reader.h"
#include "util/error.h"

namespace channel {

namespace {

// Reads `<arch>.<suffix>` metadata with clear errors that name the file and the key.
struct KeyReader {
  const GgufFile& gguf;
  std::string arch;

  std::string key(std::string_view suffix) const { return arch + "." + std::string(suffix); }

  int required_int(std::string_view suffix, int min_value = 1) const {
    const std::string k = key(suffix);
    if (!gguf.find(k)) throw_error("{}: missing hyperparameter '{}'", gguf.name(), k);
    return checked(k, gguf.get_int(k), min_value);
  }
  int optional_int(std::string_view suffix, int fallback, int min_value = 1) const {
    const std::string k = key(suffix);
    if (!gguf.find(k)) return fallback;
    return checked(k, gguf.get_int(k), min_value);
  }
  float required_float(std::string_view suffix) const {
    const std::string k = key(suffix);
    if (!gguf.find(k)) throw_error("{}: missing hyperparameter '{}'", gguf.name(), k);
    return checked_float(k, gguf.get_float(k));
  }
  float optional_float(std::string_view suffix, float fallback) const {
    const std::string k = key(suffix);
    if (!gguf.find(k)) return fallback;
    return checked_float(k, gguf.get_float(k));
  }

  int checked(const std::string& k, int64_t v, int min_value) const {
    if (v < min_value || v > (1 << 24))
      throw_error("{}: hyperparameter '{}' = {} is out of range [{}, {}]", gguf.name(), k, v,
                  min_value, 1 << 24);
    return static_cast<int>(v);
  }
  float checked_float(const std::string& k, double v) const {
    if (!std::isfinite(v) || v < 0 || v > std::numeric_limits<float>::max())
      throw_error("{}: hyperparameter '{}' = {} is not a finite non-negative number", gguf.name(),
                  k, v);
    return static_cast<float>(v);
  }
};

}  // namespace

ModelHparams read_hparams(const GgufFile& gguf) {
  if (!gguf.find("general.architecture"))
    throw_error("{}: missing metadata key 'general.architecture'", gguf.name());
  ModelHparams hp;
  hp.arch = gguf.get_string("general.architecture");
  if (hp.arch == "llama") {
    hp.arch_id = Arch::llama;
  } else if (hp.arch == "gemma3") {
    hp.arch_id = Arch::gemma3;
  } else if (hp.arch == "qwen3") {
    hp.arch_id = Arch::qwen3;
  } else if (hp.arch == "bounded") {
    hp.arch_id = Arch::bounded;
  } else {
    throw_error("{}: unknown architecture '{}' (supported: llama, gemma3, qwen3, bounded)",
                gguf.name(), hp.arch);
  }
  const KeyReader r{gguf, hp.arch};

  hp.n_embd = r.required_int("embedding_length");
  hp.n_layer = r.required_int("block_count");
  hp.n_ff = r.required_int("feed_forward_length");
  hp.n_head = r.required_int("attention.head_count");
  hp.n_head_kv = r.optional_int("attention.head_count_kv", hp.n_head);
  hp.n_ctx_train = r.optional_int("context_length", 2048);
  if (hp.n_embd % hp.n_head != 0 && !gguf.find(r.key("attention.key_length")))
    throw_error("{}: missing hyperparameter '{}' (n_embd {} is not a multiple of n_head {})",
                gguf.name(), r.key("attention.key_length"), hp.n_embd, hp.n_head);
  hp.head_dim = r.optional_int("attention.key_length", hp.n_embd / hp.n_head);
  hp.head_dim_v = r.optional_int("attention.value_length", hp.head_dim);
  hp.n_rot = r.optional_int("rope.dimension_count", hp.head_dim);
  hp.rms_eps = r.required_float("attention.layer_norm_rms_epsilon");
  hp.rope_base = r.optional_float("rope.freq_base", 10000.0f);

  if (hp.n_head % hp.n_head_kv != 0)
    throw_error("{}: '{}' = {} does not divide '{}' = {}", gguf.name(),
                r.key("attention.head_count_kv"), hp.n_head_kv, r.key("attention.head_count"),
                hp.n_head);
  if (hp.n_rot % 2 != 0 || hp.n_rot > hp.head_dim)
    throw_error("{}: '{}' = {} must be even and at most the head size {}", gguf.name(),
                r.key("rope.dimension_count"), hp.n_rot, hp.head_dim);
  if (hp.head_dim_v != hp.head_dim)
    throw_error("{}: '{}' = {} differs from '{}' = {} (not supported)", gguf.name(),
                r.key("attention.value_length"), hp.head_dim_v, r.key("attention.key_length"),
                hp.head_dim);

  // Linear rope scaling (global layers only for gemma3).
  const std::string scaling_key = r.key("rope.scaling.type");
  if (gguf.find(scaling_key)) {
    const std::string type = gguf.get_string(scaling_key);
    if (type == "linear") {
      const float factor = r.required_float("rope.scaling.factor");
      if (factor <= 0)
        throw_error("{}: '{}' must be positive", gguf.name(), r.key("rope.scaling.factor"));
      hp.rope_freq_scale = 1.0f / factor;
    } else if (type != "none") {
      throw_error("{}: '{}' = '{}' is not supported (only linear)", gguf.name(), scaling_key, type);
    }
  }

  hp.attn_scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim));
  if (hp.arch_id == Arch::gemma3) {
    hp.rope_style = RopeStyle::neox;
    hp.sliding_window = r.optional_int("attention.sliding_window", 0, 0);
    hp.sliding_window_pattern = r.optional_int("attention.sliding_window_pattern", 6);
    hp.rope_base_swa = r.optional_float("rope.freq_base_swa", 10000.0f);
    hp.embd_scale = std::sqrt(static_cast<float>(hp.n_embd));
    const float qpas = r.optional_float("attention.query_pre_attn_scalar", 0.0f);
    if (qpas > 0) hp.attn_scale = 1.0f / std::sqrt(qpas);
    hp.final_logit_softcap = r.optional_float("final_logit_softcapping", 0.0f);
    hp.has_qk_norm = true;
    hp.has_post_norms = true;
    hp.gelu_ffn = true;
  }
  if (hp.arch_id == Arch::qwen3) {  // the llama block plus per-head Q/K RMS norms, NEOX rope
    hp.rope_style = RopeStyle::neox;
    hp.has_qk_norm = true;
  }
  if (hp.arch_id == Arch::bounded) {  // the gemma3 block; layers bounded or global (no sliding)
    hp.rope_style = RopeStyle::neox;
    hp.embd_scale = std::sqrt(static_cast<float>(hp.n_embd));
    hp.has_qk_norm = true;
    hp.has_post_norms = true;
    hp.gelu_ffn = true;
    hp.bounded =
        read_bounded_hparams(gguf, hp.n_layer, hp.n_head, hp.n_head_kv, hp.head_dim, hp.head_dim_v);
  }
  return hp;
}

}  // namespace channel
