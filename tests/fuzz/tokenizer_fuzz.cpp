// libFuzzer target for the tokenizer: encode arbitrary bytes and decode arbitrary
// in-range ids with every vocabulary at hand. Two small hand-built vocabularies
// (SPM and byte-level BPE) are always used; the real Gemma 3, Llama 3 and
// stories260K vocabularies too when the reference data is found (CHANNEL_TESTDATA_DIR,
// else ../shared/testdata next to the checkout). Loaded once, on first use.
//
// Input: byte 0 picks the options (bit 0 add_bos, bit 1 parse_special, bits 2..
// the vocabulary), the rest is the text; the same bytes read as little-endian
// int32 values give the ids to decode.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace {

using channel::Tokenizer;
using channel::TokenType;
using channel::Vocab;

Vocab small_spm() {
  Vocab v;
  v.model = channel::TokenizerModel::spm;
  v.add_space_prefix = true;
  v.add_bos = true;
  const auto add = [&](std::string t, float score, TokenType type) {
    v.tokens.push_back(std::move(t));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0, TokenType::unknown);
  add("<s>", 0, TokenType::control);
  add("</s>", 0, TokenType::control);
  add("<ud>", 0, TokenType::user_defined);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    add(name, 0, TokenType::byte);
  }
  const char* pieces[] = {"\xE2\x96\x81",
                          "a",
                          "b",
                          "ab",
                          "\xE2\x96\x81"
                          "a",
                          "ba",
                          "aba",
                          "\xE2\x96\x81\xE2\x96\x81"};
  for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); ++i) {
    add(pieces[i], -static_cast<float>(i % 3), TokenType::normal);
  }
  v.unk_id = 0, v.bos_id = 1, v.eos_id = 2;
  return v;
}

Vocab small_bpe() {
  Vocab v;
  v.model = channel::TokenizerModel::bpe;
  v.pre = "llama-bpe";
  for (int b = 0; b < 256; ++b) {
    std::string s;
    channel::unicode::append_utf8(s, channel::unicode::byte_to_codepoint(static_cast<uint8_t>(b)));
    v.tokens.push_back(s);
  }
  for (const char* m : {"a b", "ab a", "\xC4\xA0 a",
                        "\xC4\xA0"
                        "a b"}) {
    std::string merge = m;
    const size_t sp = merge.find(' ');
    v.tokens.push_back(merge.substr(0, sp) + merge.substr(sp + 1));
    v.merges.push_back(merge);
  }
  v.tokens.push_back("<|special|>");
  v.types.assign(v.tokens.size(), TokenType::normal);
  v.types.back() = TokenType::control;
  v.bos_id = static_cast<int32_t>(v.tokens.size() - 1);
  return v;
}

std::filesystem::path testdata_dir() {
  if (const char* env = std::getenv("CHANNEL_TESTDATA_DIR")) return env;
  // tests/fuzz/<this file> -> ../shared/testdata beside the checkout
  return std::filesystem::path(__FILE__).parent_path() / ".." / ".." / ".." / "shared" / "testdata";
}

const std::vector<Tokenizer>& tokenizers() {
  static const std::vector<Tokenizer> all = [] {
    std::vector<Tokenizer> t = {Tokenizer::from_vocab(small_spm()),
                                Tokenizer::from_vocab(small_bpe())};
    for (const char* rel : {"tokenizer/gemma3-vocab.gguf", "tokenizer/llama3-vocab.gguf",
                            "stories260K/stories260K.gguf"}) {
      const std::filesystem::path p = testdata_dir() / rel;
      if (std::filesystem::exists(p)) t.push_back(Tokenizer::from_gguf(channel::GgufFile::open(p)));
    }
    return t;
  }();
  return all;
}

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::vector<Tokenizer>& all = tokenizers();
  const uint8_t options = data[0];
  const Tokenizer& tok = all[(options >> 2) % all.size()];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  const std::vector<int32_t> ids = tok.encode(text, options & 1, options & 2);
  for (int32_t id : ids) check(id >= 0 && id < tok.n_vocab());
  const std::string back = tok.decode(ids);

  // Arbitrary in-range ids decode, whole and streamed, to the same bytes (no clean-up
  // or leading-space rule applies to the stream, so compare against the raw pieces).
  std::vector<int32_t> random_ids;
  for (size_t i = 1; i + 4 <= size; i += 4) {
    uint32_t raw;
    std::memcpy(&raw, data + i, 4);
    random_ids.push_back(static_cast<int32_t>(raw % static_cast<uint32_t>(tok.n_vocab())));
  }
  const std::string whole = tok.decode(random_ids);
  channel::TextStreamDecoder stream(tok);
  std::string streamed, pieces;
  for (int32_t id : random_ids) {
    streamed += stream.push(id);
    pieces += tok.token_to_piece(id, false);
    check(tok.is_end_of_generation(id) || !tok.is_end_of_generation(id));
  }
  streamed += stream.flush();
  check(streamed == pieces);
  // Ids outside the vocabulary are an error, not a crash.
  try {
    const int32_t bad[] = {tok.n_vocab()};
    tok.decode(bad);
    check(false);
  } catch (const channel::Error&) {
  }
  return static_cast<int>(back.size() + whole.size()) & 0;
}
