// Tokenizer behaviour on small hand-built vocabularies: SPM merge order, byte
// fallback, space prefix, special-token matching, byte-level BPE merges, decoding,
// the streaming decoder and bad input.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace channel {
namespace {

using Ids = std::vector<int32_t>;
const std::string kSp = "\xE2\x96\x81";  // U+2581

// Builds a vocabulary token by token; add() returns the new id.
struct VocabBuilder {
  Vocab v;
  int32_t add(const std::string& text, float score = 0.0f, TokenType type = TokenType::normal) {
    v.tokens.push_back(text);
    v.scores.push_back(score);
    v.types.push_back(type);
    return static_cast<int32_t>(v.tokens.size() - 1);
  }
};

// <unk> <s> </s>, then the 256 byte tokens <0x00>..<0xFF> (ids 3..258).
VocabBuilder spm_base() {
  VocabBuilder b;
  b.v.model = TokenizerModel::spm;
  b.v.unk_id = b.add("<unk>", 0, TokenType::unknown);
  b.v.bos_id = b.add("<s>", 0, TokenType::control);
  b.v.eos_id = b.add("</s>", 0, TokenType::control);
  for (int i = 0; i < 256; ++i) b.add(fmt::format("<0x{:02X}>", i), 0, TokenType::byte);
  return b;
}
int32_t byte_id(int b) {
  return 3 + b;
}

TEST(TokenizerSpm, MergesHighestScoreFirst) {
  auto b = spm_base();
  const int32_t a = b.add("a"), bb = b.add("b"), c = b.add("c");
  const int32_t ab = b.add("ab", -5), bc = b.add("bc", -1);
  auto tok = Tokenizer::from_vocab(b.v);
  EXPECT_EQ(tok.encode("abc", false, false), (Ids{a, bc}));
  b.v.scores[bc] = -10;
  tok = Tokenizer::from_vocab(b.v);
  EXPECT_EQ(tok.encode("abc", false, false), (Ids{ab, c}));
  (void)bb;
}

TEST(TokenizerSpm, EqualScoresMergeLeftmostFirst) {
  auto b = spm_base();
  b.add("a"), b.add("b");
  const int32_t c = b.add("c"), ab = b.add("ab", -1);
  b.add("bc", -1);
  const auto tok = Tokenizer::from_vocab(b.v);
  EXPECT_EQ(tok.encode("abc", false, false), (Ids{ab, c}));
}

TEST(TokenizerSpm, MergesChainIntoLongerTokens) {
  auto b = spm_base();
  b.add("a"), b.add("b"), b.add("c");
  b.add("ab", -1), b.add("bc", -3);
  const int32_t abc = b.add("abc", -2);
  const auto tok = Tokenizer::from_vocab(b.v);
  EXPECT_EQ(tok.encode("abc", false, false), (Ids{abc}));
  EXPECT_EQ(tok.encode("abcabc", false, false), (Ids{abc, abc}));
}

TEST(TokenizerSpm, ByteFallbackAndDecode) {
  auto b = spm_base();
  const int32_t a = b.add("a");
  const auto tok = Tokenizer::from_vocab(b.v);
  const Ids ids = tok.encode("a\xC3\xA9", false, false);  // "aé", é not in the vocabulary
  EXPECT_EQ(ids, (Ids{a, byte_id(0xC3), byte_id(0xA9)}));
  EXPECT_EQ(tok.decode(ids), "a\xC3\xA9");
  EXPECT_EQ(tok.token_to_piece(byte_id(0x41)), "A");
  // Invalid UTF-8 survives the round trip byte for byte.
  const std::string junk = "a\xFF\xC3";
  EXPECT_EQ(tok.decode(tok.encode(junk, false, false)), junk);
}

TEST(TokenizerSpm, ByteFallbackWithoutByteTokensUsesCharTokenThenUnk) {
  VocabBuilder b;
  b.v.model = TokenizerModel::spm;
  b.v.unk_id = b.add("<unk>", 0, TokenType::unknown);
  const int32_t x = b.add("x"), q = b.add("?");
  const auto tok = Tokenizer::from_vocab(b.v);
  EXPECT_EQ(tok.encode("x?z", false, false), (Ids{x, q, 0}));
}

TEST(TokenizerSpm, SpacePrefixAndSpaceMarker) {
  auto b = spm_base();
  b.v.add_space_prefix = true;
  b.v.add_bos = true;
  b.add(kSp), b.add("a"), b.add("b");
  const int32_t sa = b.add(kSp + "a", -1), sb = b.add(kSp + "b", -1);
  const auto tok = Tokenizer::from_vocab(b.v);
  EXPECT_EQ(tok.encode("a b", false, false), (Ids{sa, sb}));
  EXPECT_EQ(tok.encode("a b", true, false), (Ids{1, sa, sb}));
  EXPECT_EQ(tok.encode("", true, false), (Ids{1}));
  EXPECT_TRUE(tok.encode("", false, false).empty());
  // After a special token the next piece gets a space prefix again (llama.cpp).
  EXPECT_EQ(tok.encode("a</s>b", false, true), (Ids{sa, 2, sb}));
  // decode drops the first token's leading space; with BOS first it stays (llama.cpp).
  EXPECT_EQ(tok.decode(Ids{sa, sb}), "a b");
  EXPECT_EQ(tok.decode(Ids{1, sa, sb}), " a b");
  EXPECT_EQ(tok.token_to_piece(sa), " a");
}

TEST(TokenizerSpm, NoSpacePrefixWhenDisabled) {
  auto b = spm_base();
  const int32_t a = b.add("a"), sp = b.add(kSp), sb = b.add(kSp + "b", -1);
  b.add("b");
  const auto tok = Tokenizer::from_vocab(b.v);
  EXPECT_EQ(tok.encode("a b", false, false), (Ids{a, sb}));
  EXPECT_EQ(tok.encode(" ", false, false), (Ids{sp}));
  EXPECT_EQ(tok.decode(Ids{sb}), " b");
}

TEST(TokenizerSpecial, ControlOnlyWithParseSpecialUserDefinedAlways) {
  auto b = spm_base();
  const int32_t ctl = b.add("<ctl>", 0, TokenType::control);
  const int32_t ud = b.add("<ud>", 0, TokenType::user_defined);
  const int32_t x = b.add("x");
  const auto tok = Tokenizer::from_vocab(b.v);
  EXPECT_EQ(tok.encode("x<ctl>x<ud>", false, true), (Ids{x, ctl, x, ud}));
  const Ids plain = tok.encode("x<ctl>x<ud>", false, false);
  EXPECT_EQ(plain.front(), x);
  EXPECT_EQ(plain.back(), ud);
  EXPECT_EQ(plain.size(), 2u + 5u + 1u);  // "<ctl>" falls back to 5 byte tokens
  EXPECT_EQ(tok.decode(plain), "x<ctl>x<ud>");
  // decode hides CONTROL tokens, shows USER_DEFINED ones; token_to_piece can show both.
  EXPECT_EQ(tok.decode(Ids{x, ctl, ud}), "x<ud>");
  EXPECT_EQ(tok.token_to_piece(ctl), "<ctl>");
  EXPECT_EQ(tok.token_to_piece(ctl, false), "");
  EXPECT_TRUE(tok.is_control(ctl));
  EXPECT_FALSE(tok.is_control(ud));
}

TEST(TokenizerSpecial, LongerSpecialsAreCutFirst) {
  auto b = spm_base();
  const int32_t ab = b.add("ab", 0, TokenType::user_defined);
  const int32_t abc = b.add("abc", 0, TokenType::user_defined);
  const int32_t bcd = b.add("bcd", 0, TokenType::user_defined);
  const int32_t a = b.add("a");
  const auto tok = Tokenizer::from_vocab(b.v);
  EXPECT_EQ(tok.encode("abcab", false, false), (Ids{abc, ab}));
  // "abc" and "bcd" have equal length: the lower id goes first, then "d" is plain text.
  EXPECT_EQ(tok.encode("abcd", false, false), (Ids{abc, byte_id('d')}));
  // A longer special wins even when a shorter one starts earlier (llama.cpp's order).
  EXPECT_EQ(tok.encode("xbcd", false, false), (Ids{byte_id('x'), bcd}));
  (void)a;
}

TEST(TokenizerSpecial, RunsAndManySpecials) {
  auto b = spm_base();
  const int32_t n1 = b.add("\n", 0, TokenType::user_defined);
  const int32_t n2 = b.add("\n\n", 0, TokenType::user_defined);
  const int32_t n3 = b.add("\n\n\n", 0, TokenType::user_defined);
  std::vector<int32_t> tags;
  for (int i = 0; i < 50; ++i)
    tags.push_back(b.add(fmt::format("<t{}>", i), 0, TokenType::control));
  const auto tok = Tokenizer::from_vocab(b.v);
  // A run is cut greedily from the left by the longest token first.
  EXPECT_EQ(tok.encode("\n\n\n\n\n\n\n", false, false), (Ids{n3, n3, n1}));
  EXPECT_EQ(tok.encode("\n\n\n\n\n", false, false), (Ids{n3, n2}));
  std::string text;
  Ids expect;
  for (int rep = 0; rep < 3; ++rep) {
    for (int i = 49; i >= 0; --i) {
      text += fmt::format("<t{}>\n", i);
      expect.push_back(tags[i]);
      expect.push_back(n1);
    }
  }
  EXPECT_EQ(tok.encode(text, false, true), expect);
  EXPECT_EQ(tok.decode(expect), std::string(150, '\n'));
}

TEST(TokenizerSpecial, EndOfGenerationFromIdsAndTexts) {
  auto b = spm_base();
  const int32_t eot = b.add("<end_of_turn>");  // NORMAL in the file: becomes CONTROL
  const int32_t other = b.add("<start_of_turn>", 0, TokenType::control);
  const auto tok = Tokenizer::from_vocab(b.v);
  EXPECT_TRUE(tok.is_end_of_generation(2));  // eos
  EXPECT_TRUE(tok.is_end_of_generation(eot));
  EXPECT_FALSE(tok.is_end_of_generation(other));
  EXPECT_FALSE(tok.is_end_of_generation(1));
  EXPECT_FALSE(tok.is_end_of_generation(-5));
  EXPECT_FALSE(tok.is_end_of_generation(1 << 20));
  EXPECT_TRUE(tok.is_control(eot));
  EXPECT_EQ(tok.decode(Ids{eot}), "");
}

// --- byte-level BPE ------------------------------------------------------------

std::string mapped(std::string_view bytes) {
  std::string s;
  for (char c : bytes) unicode::append_utf8(s, unicode::byte_to_codepoint(static_cast<uint8_t>(c)));
  return s;
}

// The 256 byte stand-ins (id = byte value), then merges building "hello", " world".
VocabBuilder bpe_base(const std::string& pre) {
  VocabBuilder b;
  b.v.model = TokenizerModel::bpe;
  b.v.pre = pre;
  for (int i = 0; i < 256; ++i) b.add(mapped(std::string(1, static_cast<char>(i))));
  for (const char* m : {"h e", "l l", "he ll", "hell o", "\xC4\xA0 w", "o r", "\xC4\xA0w or", "l d",
                        "\xC4\xA0wor ld"}) {
    const std::string merge = m;
    const size_t sp = merge.find(' ');
    b.add(merge.substr(0, sp) + merge.substr(sp + 1));
    b.v.merges.push_back(merge);
  }
  return b;
}

TEST(TokenizerBpe, MergesByRank) {
  auto b = bpe_base("gpt-2");
  const auto tok = Tokenizer::from_vocab(b.v);
  const int32_t hello = 259, world = 264;  // ids of "hello" and "Ġworld"
  ASSERT_EQ(tok.token_text(hello), "hello");
  ASSERT_EQ(tok.token_text(world), "\xC4\xA0world");
  EXPECT_EQ(tok.encode("hello world", false, false), (Ids{hello, world}));
  EXPECT_EQ(tok.decode(Ids{hello, world}), "hello world");
  EXPECT_EQ(tok.token_to_piece(world), " world");
  EXPECT_EQ(tok.encode("hel", false, false), (Ids{256, 'l'}));  // "he" + "l"
}

TEST(TokenizerBpe, LowerRankWinsOverScoreOrPosition) {
  auto b = bpe_base("gpt-2");
  const int32_t bc = b.add("bc");
  const int32_t ab = b.add("ab");
  b.v.merges.push_back("b c");  // rank 9: applied first
  b.v.merges.push_back("a b");  // rank 10
  const auto tok = Tokenizer::from_vocab(b.v);
  EXPECT_EQ(tok.encode("abc", false, false), (Ids{'a', bc}));
  (void)ab;
}

TEST(TokenizerBpe, BytesOfNonAsciiTextRoundTrip) {
  const auto tok = Tokenizer::from_vocab(bpe_base("gpt-2").v);
  const std::string text = "caf\xC3\xA9 \xF0\x9F\x98\x80!";
  const Ids ids = tok.encode(text, false, false);
  EXPECT_EQ(ids, (Ids{'c', 'a', 'f', 0xC3, 0xA9, ' ', 0xF0, 0x9F, 0x98, 0x80, '!'}));
  EXPECT_EQ(tok.decode(ids), text);
  // Invalid UTF-8 is replaced by U+FFFD before merging, as llama.cpp does.
  EXPECT_EQ(tok.decode(tok.encode("a\xFF", false, false)), "a\xEF\xBF\xBD");
}

TEST(TokenizerBpe, Llama3TakesWholeWordsThatAreTokens) {
  for (const std::string pre : {"gpt-2", "llama-bpe"}) {
    auto b = bpe_base(pre);
    const int32_t xyz = b.add("xyz");  // no merge builds it
    const auto tok = Tokenizer::from_vocab(b.v);
    const Ids ids = tok.encode("xyz", false, false);
    if (pre == "llama-bpe") {
      EXPECT_EQ(ids, (Ids{xyz}));
    } else {
      EXPECT_EQ(ids, (Ids{'x', 'y', 'z'}));
    }
  }
}

TEST(TokenizerBpe, DecodeCleansSpacesExceptForQwen2) {
  for (const std::string pre : {"gpt-2", "llama-bpe", "default", "qwen2"}) {
    const auto tok = Tokenizer::from_vocab(bpe_base(pre).v);
    const std::string text = "a , b ' c 's";
    const std::string expect = pre == "qwen2" ? text : "a, b'c's";
    EXPECT_EQ(tok.decode(tok.encode(text, false, false)), expect) << pre;
  }
}

TEST(TokenizerBpe, ControlTokensAndBos) {
  auto b = bpe_base("llama-bpe");
  const int32_t bos = b.add("<|begin|>", 0, TokenType::control);
  b.v.bos_id = bos;
  b.v.add_bos = true;
  const auto tok = Tokenizer::from_vocab(b.v);
  EXPECT_TRUE(tok.add_bos_default());
  EXPECT_EQ(tok.encode("<|begin|>hello", true, true), (Ids{bos, bos, 259}));
  EXPECT_EQ(tok.encode("hello", true, true), (Ids{bos, 259}));
  EXPECT_EQ(tok.decode(Ids{bos, 259}), "hello");
}

// --- streaming -------------------------------------------------------------------

TEST(TextStreamDecoder, HoldsBackSplitCharacters) {
  auto b = spm_base();
  const int32_t a = b.add("a");
  const auto tok = Tokenizer::from_vocab(b.v);
  TextStreamDecoder dec(tok);
  EXPECT_EQ(dec.push(a), "a");
  EXPECT_EQ(dec.push(byte_id(0xF0)), "");  // 4-byte emoji arrives byte by byte
  EXPECT_EQ(dec.push(byte_id(0x9F)), "");
  EXPECT_EQ(dec.push(byte_id(0x98)), "");
  EXPECT_EQ(dec.push(byte_id(0x80)), "\xF0\x9F\x98\x80");
  EXPECT_EQ(dec.push(byte_id(0xC3)), "");
  EXPECT_EQ(dec.push(a),
            "\xC3"
            "a");  // can never complete: passed through
  EXPECT_EQ(dec.push(byte_id(0xE2)), "");
  EXPECT_EQ(dec.flush(), "\xE2");
  EXPECT_EQ(dec.flush(), "");
  EXPECT_EQ(dec.push(1), "");  // control tokens print nothing by default
  TextStreamDecoder raw(tok, true);
  EXPECT_EQ(raw.push(1), "<s>");
}

TEST(TextStreamDecoder, OutputConcatenatesToThePieces) {
  auto b = spm_base();
  const auto tok = Tokenizer::from_vocab(b.v);
  TextStreamDecoder dec(tok);
  std::string all, expect;
  for (int i = 0; i < 256; ++i) {
    const int byte = (i * 37 + 11) % 256;
    all += dec.push(byte_id(byte));
    expect.push_back(static_cast<char>(byte));
  }
  all += dec.flush();
  EXPECT_EQ(all, expect);
}

// --- bad input --------------------------------------------------------------------

TEST(TokenizerErrors, BadIdsAndVocabularies) {
  auto b = spm_base();
  const auto tok = Tokenizer::from_vocab(b.v);
  EXPECT_THROW(tok.decode(Ids{0, 259}), Error);
  EXPECT_THROW(tok.decode(Ids{-1}), Error);
  EXPECT_THROW(tok.token_to_piece(1000), Error);
  EXPECT_THROW(tok.token_text(-2), Error);
  EXPECT_THROW(Tokenizer::from_vocab(Vocab{}), Error);

  auto bad_bos = spm_base();
  bad_bos.v.bos_id = 5000;
  EXPECT_THROW(Tokenizer::from_vocab(bad_bos.v), Error);
  auto short_scores = spm_base();
  short_scores.v.scores.resize(3);
  EXPECT_THROW(Tokenizer::from_vocab(short_scores.v), Error);
  auto bad_pre = bpe_base("no-such-pre-tokenizer");
  try {
    Tokenizer::from_vocab(bad_pre.v);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-pre-tokenizer"), std::string::npos);
  }
}

TEST(TokenizerErrors, OddVocabulariesDoNotCrash) {
  VocabBuilder b;
  b.v.model = TokenizerModel::spm;
  b.add("");  // empty texts get a placeholder, as in llama.cpp
  b.add("a", std::numeric_limits<float>::quiet_NaN());
  b.add("a");  // duplicate text: the last id wins
  b.add("<0xZZ>", 0, TokenType::byte);
  b.add("u", 0, static_cast<TokenType>(99));
  const auto tok = Tokenizer::from_vocab(b.v);
  EXPECT_EQ(tok.token_text(0), "[EMPTY_0]");
  EXPECT_EQ(tok.encode("aa", false, false), (Ids{2, 2}));
  EXPECT_EQ(tok.encode("\xE2\x82\xAC", false, false), Ids{});  // no byte tokens, no unk
  EXPECT_EQ(tok.token_to_piece(3), "<0xZZ>");
  EXPECT_EQ(tok.token_to_piece(4), "");
}

}  // namespace
}  // namespace channel
