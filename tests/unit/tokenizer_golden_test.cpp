// The tokenizer against llama.cpp's output on the real Gemma 3 and Llama 3
// vocabularies and on stories260K (reference data in ../shared/testdata).
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf_reader.h"
#include "testdata.h"
#include "tokenizer/tokenizer.h"

namespace channel {
namespace {

// Loading a 262k-token vocabulary takes a moment: do it once per vocabulary.
const Tokenizer& load(const std::string& rel) {
  static std::map<std::string, Tokenizer> cache;
  auto it = cache.find(rel);
  if (it == cache.end()) {
    const GgufFile file = GgufFile::open(test::testdata_path(rel));
    it = cache.emplace(rel, Tokenizer::from_gguf(file)).first;
  }
  return it->second;
}

nlohmann::json read_json(const std::string& rel) {
  std::ifstream in(test::testdata_path(rel));
  return nlohmann::json::parse(in);
}

void check_goldens(const std::string& vocab, const std::string& goldens) {
  const Tokenizer& tok = load(vocab);
  const nlohmann::json g = read_json(goldens);
  ASSERT_EQ(tok.bos_id(), g["bos_id"].get<int32_t>());
  ASSERT_TRUE(tok.add_bos_default());
  int n = 0;
  for (const auto& c : g["cases"]) {
    const std::string text = c["text"];
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const auto ids_plain = c["ids_no_parse_special"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(text, true, true), ids) << "text: " << text;
    EXPECT_EQ(tok.encode(text, true, false), ids_plain) << "text (no parse_special): " << text;
    const std::vector<int32_t> no_bos(ids.begin() + 1, ids.end());
    EXPECT_EQ(tok.encode(text, false, true), no_bos) << "text (no BOS): " << text;
    ++n;
  }
  EXPECT_EQ(n, g["n_cases"].get<int>());
}

TEST(TokenizerGolden, Gemma3MatchesLlamaCpp) {
  CHANNEL_REQUIRE_TESTDATA();
  check_goldens("tokenizer/gemma3-vocab.gguf", "tokenizer/gemma3-goldens.json");
}

TEST(TokenizerGolden, Llama3MatchesLlamaCpp) {
  CHANNEL_REQUIRE_TESTDATA();
  check_goldens("tokenizer/llama3-vocab.gguf", "tokenizer/llama3-goldens.json");
}

TEST(TokenizerGolden, Stories260KAddsBosAndSpacePrefix) {
  CHANNEL_REQUIRE_TESTDATA();
  const Tokenizer& tok = load("stories260K/stories260K.gguf");
  EXPECT_EQ(tok.n_vocab(), 512);
  EXPECT_TRUE(tok.add_bos_default());
  EXPECT_EQ(tok.encode("Once upon a time", true, true),
            (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok.encode("", true, true), (std::vector<int32_t>{1}));
  EXPECT_TRUE(tok.is_end_of_generation(2));
  EXPECT_FALSE(tok.is_end_of_generation(1));
}

}  // namespace
}  // namespace channel
