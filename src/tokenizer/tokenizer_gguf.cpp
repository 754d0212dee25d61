// Tokenizer::from_gguf: reads the tokenizer.ggml.* metadata into a Vocab, with
// llama.cpp's defaults for keys a file may leave out.
#include <limits>

#include "gguf/gguf_reader.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace channel {

namespace {

// An optional token-id key. -1 (also written as 0xFFFFFFFF) means "none". Ids the
// tokenizer relies on must be inside the vocabulary; other ids out of range are
// ignored, as llama.cpp does.
int32_t read_id(const GgufFile& f, std::string_view key, int32_t fallback, size_t n_vocab,
                bool required_in_range) {
  if (!f.find(key)) return static_cast<size_t>(fallback) < n_vocab ? fallback : kNoToken;
  const int64_t id = f.get_int(key);
  if (id == -1 || id == 0xFFFFFFFFll) return kNoToken;
  if (id < 0 || static_cast<uint64_t>(id) >= n_vocab) {
    if (!required_in_range) return kNoToken;
    throw_error("tokenizer: {}: {} = {} is outside the vocabulary (n_vocab {})", f.name(), key, id,
                n_vocab);
  }
  return static_cast<int32_t>(id);
}

// Runs `fn`, adding the file name to a "tokenizer: ..." error that lacks it.
template <typename Fn>
auto naming_file(const GgufFile& f, Fn fn) {
  try {
    return fn();
  } catch (const Error& e) {
    constexpr std::string_view kPrefix = "tokenizer: ";
    const std::string_view what = e.what();
    if (what.substr(0, kPrefix.size()) != kPrefix) throw;
    throw Error(fmt::format("tokenizer: {}: {}", f.name(), what.substr(kPrefix.size())));
  }
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufFile& f) {
  Vocab v;
  const std::string model = f.get_string("tokenizer.ggml.model");
  int32_t bos = kNoToken, eos = kNoToken, unk = kNoToken;
  if (model == "llama") {
    v.model = TokenizerModel::spm;
    bos = 1, eos = 2, unk = 0;
    v.add_bos = true;
    v.add_space_prefix = true;  // stories260K and other llama2.c conversions omit the key
  } else if (model == "gpt2") {
    v.model = TokenizerModel::bpe;
    bos = 11, eos = 11;
    v.pre = f.get_string_or("tokenizer.ggml.pre", "default");
    v.add_bos =
        naming_file(f, [&] { return pre_tokenizer_from_name(v.pre); }) == PreTokenizer::llama3;
  } else {
    throw_error("tokenizer: {}: unknown tokenizer.ggml.model '{}' (supported: llama, gpt2)",
                f.name(), model);
  }

  for (std::string_view t : f.get_string_array("tokenizer.ggml.tokens")) v.tokens.emplace_back(t);
  const size_t n = v.tokens.size();
  if (n == 0) throw_error("tokenizer: {}: tokenizer.ggml.tokens is empty", f.name());
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw_error("tokenizer: {}: tokenizer.ggml.tokens has too many entries ({})", f.name(), n);
  }
  if (f.find("tokenizer.ggml.scores")) {
    v.scores = f.get_f32_array("tokenizer.ggml.scores");
    if (v.scores.size() < n) {
      throw_error("tokenizer: {}: tokenizer.ggml.scores has {} entries for {} tokens", f.name(),
                  v.scores.size(), n);
    }
  }
  if (f.find("tokenizer.ggml.token_type")) {
    const std::vector<int64_t> types = f.get_int_array("tokenizer.ggml.token_type");
    if (types.size() < n) {
      throw_error("tokenizer: {}: tokenizer.ggml.token_type has {} entries for {} tokens", f.name(),
                  types.size(), n);
    }
    v.types.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = types[i];
      v.types.push_back(t >= 0 && t <= 6 ? static_cast<TokenType>(t) : TokenType::undefined);
    }
  }
  if (v.model == TokenizerModel::bpe) {
    for (std::string_view m : f.get_string_array("tokenizer.ggml.merges")) v.merges.emplace_back(m);
  }

  v.bos_id = read_id(f, "tokenizer.ggml.bos_token_id", bos, n, true);
  v.eos_id = read_id(f, "tokenizer.ggml.eos_token_id", eos, n, true);
  v.eot_id = read_id(f, "tokenizer.ggml.eot_token_id", kNoToken, n, true);
  v.eom_id = read_id(f, "tokenizer.ggml.eom_token_id", kNoToken, n, true);
  v.unk_id = read_id(f, "tokenizer.ggml.unknown_token_id", unk, n, true);
  v.pad_id = read_id(f, "tokenizer.ggml.padding_token_id", kNoToken, n, false);
  v.add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", v.add_bos);
  v.add_space_prefix = f.get_bool_or("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  return naming_file(f, [&] { return from_vocab(std::move(v)); });
}

}  // namespace channel
