// Tokenizer::Impl: the tokenizer's immutable lookup tables, shared by the SPM and
// BPE encoders (internal to src/tokenizer/).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/token_index.h"
#include "tokenizer/tokenizer.h"

namespace channel {

// Token attribute bits (a token can gain kAttrControl when its text marks it as an
// end-of-generation token, as llama.cpp does).
enum TokenAttr : uint8_t {
  kAttrNormal = 1,
  kAttrUnknown = 2,
  kAttrControl = 4,
  kAttrUserDefined = 8,
  kAttrUnused = 16,
  kAttrByte = 32,
};

struct Tokenizer::Impl {
  TokenizerModel model = TokenizerModel::spm;
  PreTokenizer pre = PreTokenizer::standard;
  bool add_bos = false;
  bool add_space_prefix = false;  // SPM encode: prepend " "; decode: drop the first " "
  bool ignore_merges = false;     // BPE: a pre-tokenized word that is a token is taken whole
  bool clean_spaces = false;      // decode: drop " " before ?!., and in " 's" (gpt2-style BPE)

  std::vector<std::string> texts;  // [n_vocab] token texts (never empty)
  std::vector<float> scores;       // [n_vocab]
  std::vector<TokenType> types;    // [n_vocab] as given
  std::vector<uint8_t> attrs;      // [n_vocab] TokenAttr bits
  std::vector<uint8_t> eog;        // [n_vocab] 1 = ends generation

  TokenIndex index;  // text -> id over `texts`
  // BPE merge ranks keyed by (left id << 32 | right id) when both sides are tokens,
  // and by "<left len>:left right" text otherwise (rare; usually empty).
  std::unordered_map<uint64_t, int32_t> merge_ranks;
  std::unordered_map<std::string, int32_t> text_merge_ranks;

  // CONTROL, USER_DEFINED and UNKNOWN tokens, longest text first: the order in which
  // encode() cuts them out of the text.
  std::vector<int32_t> specials;
  // Byte-wise trie over the special texts, to find which ones occur in a text.
  struct TrieNode {
    int32_t first_child = -1;
    int32_t next_sibling = -1;
    int32_t token = kNoToken;  // a special token ending here
    uint8_t byte = 0;
  };
  std::vector<TrieNode> trie;  // [n_nodes], node 0 is the root

  std::array<int32_t, 256> byte_tokens{};  // [256]
  // SPM: joins_space[b] is 1 when some token has U+2581 right after byte b (other than
  // inside a leading run of U+2581). Where the text has U+2581 after any other byte, no
  // token can span that point, so the merge loop runs on each side separately.
  std::array<uint8_t, 256>
      joins_space{};  // [256]  // SPM byte fallback: <0xXX>, else the byte itself

  int32_t bos = kNoToken, eos = kNoToken, eot = kNoToken, eom = kNoToken, unk = kNoToken;

  int32_t find(std::string_view text) const { return index.find(text, texts); }
  int32_t n_vocab() const { return static_cast<int32_t>(texts.size()); }

  // A piece of text (raw) or a special token cut out of it.
  struct Fragment {
    size_t begin = 0, end = 0;  // byte range in the input, when token == kNoToken
    int32_t token = kNoToken;
  };
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;

  void encode_spm(std::string_view text, std::vector<int32_t>& out) const;
  void encode_bpe(std::string_view text, std::vector<int32_t>& out) const;
  int32_t merge_rank(int32_t left_id, std::string_view left, int32_t right_id,
                     std::string_view right) const;
};

}  // namespace channel
