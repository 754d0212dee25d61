// Tokenizer::from_gguf on hand-made metadata: llama.cpp's defaults for absent keys,
// and a clear channel::Error for every kind of bad tokenizer metadata.
#include <functional>

#include <gtest/gtest.h>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace channel {
namespace {

using Ids = std::vector<int32_t>;
const std::string kSp = "\xE2\x96\x81";

// A tiny llama2.c-style SPM vocabulary: <unk> <s> </s>, byte tokens, a few pieces.
GgufWriter spm_writer() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(fmt::format("<0x{:02X}>", b));
    scores.push_back(0);
    types.push_back(6);
  }
  for (const std::string& p : {kSp, std::string("h"), std::string("i"), kSp + "h", kSp + "hi"}) {
    tokens.push_back(p);
    scores.push_back(-1.0f);
    types.push_back(1);
  }
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_f32_array("tokenizer.ggml.scores", scores);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);  // "none", as stories260K has
  return w;
}

Tokenizer load(const GgufWriter& w) {
  const std::vector<uint8_t> bytes = w.to_bytes();
  const GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), "test.gguf");
  return Tokenizer::from_gguf(f);
}

// Expects from_gguf to throw a channel::Error whose message contains `needle`.
void expect_error(const GgufWriter& w, const std::string& needle) {
  try {
    load(w);
    ADD_FAILURE() << "expected an error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(TokenizerGguf, SpmDefaultsMatchLlamaCpp) {
  const Tokenizer tok = load(spm_writer());
  EXPECT_EQ(tok.model(), TokenizerModel::spm);
  EXPECT_TRUE(tok.add_bos_default());  // add_bos_token absent: true for SPM
  // add_space_prefix absent: true, so "hi" becomes "▁hi".
  EXPECT_EQ(tok.encode("hi", true, true), (Ids{1, 263}));
  EXPECT_EQ(tok.decode(Ids{263}), "hi");
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
}

TEST(TokenizerGguf, SpmFlagsFromMetadata) {
  GgufWriter w = spm_writer();
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_i32("tokenizer.ggml.eot_token_id", -1);
  const Tokenizer tok = load(w);
  EXPECT_FALSE(tok.add_bos_default());
  EXPECT_EQ(tok.encode("hi", false, true), (Ids{260, 261}));
}

TEST(TokenizerGguf, BpeNeedsMergesAndAKnownPreTokenizer) {
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "llama-bpe");
  w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "ab"});
  expect_error(w, "tokenizer.ggml.merges");
  w.set_string_array("tokenizer.ggml.merges", {"a b"});
  const Tokenizer tok = load(w);
  EXPECT_EQ(tok.model(), TokenizerModel::bpe);
  EXPECT_EQ(tok.pre_tokenizer(), PreTokenizer::llama3);
  EXPECT_TRUE(tok.add_bos_default());
  EXPECT_EQ(tok.bos_id(), kNoToken);  // default 11 is outside this vocabulary
  EXPECT_EQ(tok.encode("abab", true, true), (Ids{2, 2}));
  w.set_string("tokenizer.ggml.pre", "mystery-pre");
  expect_error(w, "mystery-pre");
}

TEST(TokenizerGguf, BadMetadataIsAClearError) {
  struct Case {
    std::string needle;
    std::function<void(GgufWriter&)> edit;
  };
  const std::vector<Case> cases = {
      {"tokenizer.ggml.model", [](GgufWriter& w) { w.set_u32("tokenizer.ggml.model", 1); }},
      {"'bert'", [](GgufWriter& w) { w.set_string("tokenizer.ggml.model", "bert"); }},
      {"tokenizer.ggml.tokens",
       [](GgufWriter& w) { w.set_string_array("tokenizer.ggml.tokens", {}); }},
      {"tokenizer.ggml.tokens", [](GgufWriter& w) { w.set_u32("tokenizer.ggml.tokens", 3); }},
      {"tokenizer.ggml.scores",
       [](GgufWriter& w) {
         w.set_f32_array("tokenizer.ggml.scores", {0.0f, 1.0f});
       }},
      {"tokenizer.ggml.scores",
       [](GgufWriter& w) { w.set_string_array("tokenizer.ggml.scores", {"x"}); }},
      {"tokenizer.ggml.token_type",
       [](GgufWriter& w) { w.set_i32_array("tokenizer.ggml.token_type", {1}); }},
      {"tokenizer.ggml.bos_token_id",
       [](GgufWriter& w) { w.set_u32("tokenizer.ggml.bos_token_id", 100000); }},
      {"tokenizer.ggml.eos_token_id",
       [](GgufWriter& w) { w.set_i32("tokenizer.ggml.eos_token_id", -7); }},
      {"tokenizer.ggml.unknown_token_id",
       [](GgufWriter& w) { w.set_u64("tokenizer.ggml.unknown_token_id", 1ull << 40); }},
      {"tokenizer.ggml.eot_token_id",
       [](GgufWriter& w) { w.set_u32("tokenizer.ggml.eot_token_id", 264); }},
      {"tokenizer.ggml.add_bos_token",
       [](GgufWriter& w) { w.set_u32("tokenizer.ggml.add_bos_token", 1); }},
  };
  for (const Case& c : cases) {
    GgufWriter w = spm_writer();
    c.edit(w);
    expect_error(w, c.needle);
  }
  GgufWriter missing;
  missing.set_string("general.architecture", "llama");
  expect_error(missing, "tokenizer.ggml.model");
}

}  // namespace
}  // namespace channel
