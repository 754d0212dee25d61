// Tokenizer construction, special-token partitioning, decoding and the streaming
// decoder. The SPM and BPE merge loops live in spm.cpp and bpe.cpp.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace channel {

namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// Texts that mark end-of-turn / end-of-generation tokens in common vocabularies
// (llama.cpp recognises the same ones when the metadata does not name them).
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "<end_of_utterance>",
};
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
};

uint8_t attr_of(TokenType type) {
  switch (type) {
    case TokenType::normal:
      return kAttrNormal;
    case TokenType::unknown:
      return kAttrUnknown;
    case TokenType::control:
      return kAttrControl;
    case TokenType::user_defined:
      return kAttrUserDefined;
    case TokenType::unused:
      return kAttrUnused;
    case TokenType::byte:
      return kAttrByte;
    case TokenType::undefined:
      return 0;
  }
  return 0;  // unknown type values render as nothing, like llama.cpp's UNDEFINED
}

void check_id(std::string_view what, int32_t id, size_t n_vocab) {
  if (id != kNoToken && (id < 0 || static_cast<size_t>(id) >= n_vocab)) {
    throw_error("tokenizer: {} = {} is outside the vocabulary (n_vocab {})", what, id, n_vocab);
  }
}

void check_token(int32_t id, size_t n_vocab) {
  if (id < 0 || static_cast<size_t>(id) >= n_vocab) {
    throw_error("tokenizer: token id {} is outside the vocabulary (n_vocab {})", id, n_vocab);
  }
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out.append(to);
  }
  out.append(s, pos);
  s.swap(out);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "<0xAB>" -> 0xAB; -1 when the text is not of that form.
int byte_token_value(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  const int hi = hex_digit(text[3]), lo = hex_digit(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// llama.cpp's clean-up of decoded gpt2-style text, done in place like the original so
// that overlapping patterns resolve the same way.
void clean_up_spaces(std::string& t) {
  // " ?", " !", " .", " ,": drop the space.
  size_t n = t.size(), w = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) {
    const char x = t[i];
    if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --w;
    t[w++] = x;
  }
  // " ' ": drop both spaces around a lone apostrophe.
  n = w, w = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) {
    const char x = t[i];
    if (x == '\'' && i + 1 < n && t[i - 1] == ' ' && t[i + 1] == ' ') {
      --w;
      t[++i] = '\0';  // the following space is skipped (and no longer reads as a space)
    }
    t[w++] = x;
  }
  // " 's", " 'm", " 're", " 've": attach the contraction.
  n = w, w = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) {
    const char x = t[i];
    if (t[i - 1] == ' ' && x == '\'' && i + 1 < n) {
      const char x1 = t[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --w;
      } else if (x1 != 't' && x1 != 'd' && i + 2 < n) {
        const char x2 = t[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --w;
      }
    }
    t[w++] = x;
  }
  t.resize(w);
}

void build_trie(Tokenizer::Impl& v) {
  v.trie.assign(1, {});
  for (size_t rank = 0; rank < v.specials.size(); ++rank) {
    const std::string& text = v.texts[v.specials[rank]];
    int32_t node = 0;
    for (char c : text) {
      const auto byte = static_cast<uint8_t>(c);
      int32_t child = v.trie[node].first_child;
      while (child >= 0 && v.trie[child].byte != byte) child = v.trie[child].next_sibling;
      if (child < 0) {
        child = static_cast<int32_t>(v.trie.size());
        Tokenizer::Impl::TrieNode n;
        n.byte = byte;
        n.next_sibling = v.trie[node].first_child;
        v.trie.push_back(n);
        v.trie[node].first_child = child;
      }
      node = child;
    }
    // Keep the first (higher-priority) of two specials with the same text.
    if (v.trie[node].token == kNoToken) v.trie[node].token = static_cast<int32_t>(rank);
  }
}

// Marks end-of-generation tokens the way llama.cpp does: the named ids, plus tokens
// whose text is a known end marker (those also become CONTROL).
void find_end_tokens(Tokenizer::Impl& v) {
  const auto lookup = [&](std::string_view text) { return v.find(text); };
  if (v.eot == kNoToken) {
    for (std::string_view t : kEotTexts) {
      if (int32_t id = lookup(t); id != kNoToken) {
        v.eot = id;
        v.attrs[id] |= kAttrControl;
        break;
      }
    }
  }
  if (v.eom == kNoToken) {
    if (int32_t id = lookup("<|eom_id|>"); id != kNoToken) {
      v.eom = id;
      v.attrs[id] |= kAttrControl;
    }
  }
  v.eog.assign(v.texts.size(), 0);
  for (std::string_view t : kEogTexts) {
    if (int32_t id = lookup(t); id != kNoToken) {
      v.eog[id] = 1;
      v.attrs[id] |= kAttrControl;
    }
  }
  // Gemma 4 style vocabularies use </s> as an ordinary token.
  if (int32_t s = lookup("</s>"); s != kNoToken && lookup("<|tool_response>") != kNoToken) {
    v.eog[s] = 0;
    v.attrs[s] = kAttrNormal;
  }
  for (int32_t id : {v.eos, v.eot, v.eom}) {
    if (id != kNoToken) v.eog[id] = 1;
  }
}

void build_merges(Tokenizer::Impl& v, const std::vector<std::string>& merges) {
  v.merge_ranks.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    if (i > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
      throw_error("tokenizer: too many merges ({})", merges.size());
    }
    std::string_view m = merges[i];
    const size_t space = m.find(' ', 1);
    if (space == std::string_view::npos) continue;  // cannot match any pair of symbols
    const std::string_view left = m.substr(0, space), right = m.substr(space + 1);
    const int32_t lid = v.find(left), rid = v.find(right);
    const auto rank = static_cast<int32_t>(i);
    if (lid != kNoToken && rid != kNoToken) {
      v.merge_ranks.emplace((static_cast<uint64_t>(lid) << 32) | static_cast<uint32_t>(rid), rank);
    } else {
      v.text_merge_ranks.emplace(
          std::to_string(left.size()) + ":" + std::string(left) + std::string(right), rank);
    }
  }
}

}  // namespace

Tokenizer Tokenizer::from_vocab(Vocab vocab) {
  const size_t n = vocab.tokens.size();
  if (n == 0) throw_error("tokenizer: the vocabulary is empty (tokenizer.ggml.tokens)");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw_error("tokenizer: vocabulary too large ({} tokens)", n);
  }
  if (!vocab.scores.empty() && vocab.scores.size() < n) {
    throw_error("tokenizer: tokenizer.ggml.scores has {} entries for {} tokens",
                vocab.scores.size(), n);
  }
  if (!vocab.types.empty() && vocab.types.size() < n) {
    throw_error("tokenizer: tokenizer.ggml.token_type has {} entries for {} tokens",
                vocab.types.size(), n);
  }
  check_id("tokenizer.ggml.bos_token_id", vocab.bos_id, n);
  check_id("tokenizer.ggml.eos_token_id", vocab.eos_id, n);
  check_id("tokenizer.ggml.eot_token_id", vocab.eot_id, n);
  check_id("tokenizer.ggml.eom_token_id", vocab.eom_id, n);
  check_id("tokenizer.ggml.unknown_token_id", vocab.unk_id, n);

  auto v = std::make_shared<Impl>();
  v->model = vocab.model;
  v->add_bos = vocab.add_bos;
  if (vocab.model == TokenizerModel::bpe) {
    v->pre = pre_tokenizer_from_name(vocab.pre);
    v->ignore_merges = v->pre == PreTokenizer::llama3;
    v->clean_spaces = v->pre != PreTokenizer::qwen2;
  }
  v->add_space_prefix = vocab.add_space_prefix;
  v->bos = vocab.bos_id, v->eos = vocab.eos_id, v->eot = vocab.eot_id, v->eom = vocab.eom_id;
  v->unk = vocab.unk_id;

  v->texts = std::move(vocab.tokens);
  v->scores.resize(n, 0.0f);
  v->types.resize(n, TokenType::normal);
  v->attrs.resize(n, kAttrNormal);
  for (size_t i = 0; i < n; ++i) {
    if (v->texts[i].empty()) v->texts[i] = "[EMPTY_" + std::to_string(i) + "]";
    if (!vocab.scores.empty()) {
      // A NaN would break the merge queue's ordering; treat it as the lowest score.
      const float s = vocab.scores[i];
      v->scores[i] = std::isnan(s) ? -std::numeric_limits<float>::infinity() : s;
    }
    if (!vocab.types.empty()) {
      v->types[i] = vocab.types[i];
      v->attrs[i] = attr_of(vocab.types[i]);
    }
  }
  v->index.build(v->texts);

  if (v->model == TokenizerModel::bpe) build_merges(*v, vocab.merges);
  find_end_tokens(*v);

  for (size_t i = 0; i < n; ++i) {
    if (v->attrs[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) {
      v->specials.push_back(static_cast<int32_t>(i));
    }
  }
  std::stable_sort(v->specials.begin(), v->specials.end(),
                   [&](int32_t a, int32_t b) { return v->texts[a].size() > v->texts[b].size(); });
  build_trie(*v);

  for (const std::string& t : v->texts) {
    for (size_t k = t.find(kSpaceMarker, 1); k != std::string::npos;
         k = t.find(kSpaceMarker, k + 1)) {
      if (k < 3 || std::string_view(t).substr(k - 3, 3) != kSpaceMarker) {
        v->joins_space[static_cast<uint8_t>(t[k - 1])] = 1;
      }
    }
  }
  for (int b = 0; b < 256; ++b) {
    const char hex[] = "0123456789ABCDEF";
    const std::string name = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
    int32_t id = v->find(name);
    if (id == kNoToken) id = v->find(std::string(1, static_cast<char>(b)));
    v->byte_tokens[b] = id == kNoToken ? v->unk : id;  // kNoToken: the byte is dropped
  }
  return Tokenizer(std::move(v));
}

std::vector<Tokenizer::Impl::Fragment> Tokenizer::Impl::partition(std::string_view text,
                                                                  bool parse_special) const {
  std::vector<Fragment> out;  // [n_fragments] in text order
  if (text.empty()) return out;

  // 1. Where each eligible special occurs: one trie walk per position. Occurrences of a
  //    token at consecutive positions (runs of "\n", say) are kept as one interval.
  struct Occurrences {
    uint32_t rank;  // priority: index into `specials`
    size_t start, count;
  };
  std::vector<Occurrences> occ;
  std::vector<int32_t> last(specials.size(), -1);  // [n_specials] rank's latest entry in occ
  for (size_t p = 0; p < text.size(); ++p) {
    int32_t node = 0;
    for (size_t q = p; q < text.size(); ++q) {
      const auto byte = static_cast<uint8_t>(text[q]);
      int32_t child = trie[node].first_child;
      while (child >= 0 && trie[child].byte != byte) child = trie[child].next_sibling;
      if (child < 0) break;
      node = child;
      const int32_t rank = trie[node].token;
      if (rank == kNoToken) continue;
      if (!parse_special && (attrs[specials[rank]] & (kAttrControl | kAttrUnknown))) continue;
      int32_t& e = last[rank];
      if (e >= 0 && occ[e].start + occ[e].count == p) {
        ++occ[e].count;
      } else {
        e = static_cast<int32_t>(occ.size());
        occ.push_back({static_cast<uint32_t>(rank), p, 1});
      }
    }
  }
  if (occ.empty()) return {{0, text.size(), kNoToken}};
  std::stable_sort(occ.begin(), occ.end(),
                   [](const Occurrences& a, const Occurrences& b) { return a.rank < b.rank; });

  // 2. Cut them out longest first (llama.cpp's order): each token takes, in every raw
  //    fragment left by the longer ones, its leftmost non-overlapping occurrences.
  std::map<size_t, Fragment> frags;  // keyed by begin; together they tile the text
  frags[0] = {0, text.size(), kNoToken};
  size_t last_end = 0;  // end of the current token's latest match
  for (size_t i = 0; i < occ.size(); ++i) {
    if (i == 0 || occ[i].rank != occ[i - 1].rank) last_end = 0;
    const int32_t id = specials[occ[i].rank];
    const size_t len = texts[id].size();
    const size_t stop = occ[i].start + occ[i].count;  // candidate starts: [p, stop)
    for (size_t p = std::max(occ[i].start, last_end); p < stop;) {
      auto it = std::prev(frags.upper_bound(p));  // the fragment holding p
      const Fragment f = it->second;
      if (f.token != kNoToken || p + len > f.end) {
        p = f.end;  // already taken, or no room left in this raw fragment
        continue;
      }
      frags.erase(it);
      if (p > f.begin) frags[f.begin] = {f.begin, p, kNoToken};
      frags[p] = {p, p + len, id};
      if (p + len < f.end) frags[p + len] = {p + len, f.end, kNoToken};
      last_end = p = p + len;
    }
  }
  out.reserve(frags.size());
  for (const auto& [begin, f] : frags) out.push_back(f);
  return out;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  const Impl& v = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && v.bos != kNoToken) out.push_back(v.bos);
  bool prev_special = true;  // SPM: the first piece and any piece after a special get a space
  std::string piece;
  for (const Impl::Fragment& f : v.partition(text, parse_special)) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    const std::string_view raw = text.substr(f.begin, f.end - f.begin);
    if (v.model == TokenizerModel::spm) {
      // SentencePiece sees spaces as U+2581.
      piece.clear();
      if (v.add_space_prefix && prev_special) piece.append(kSpaceMarker);
      for (char c : raw) {
        if (c == ' ') {
          piece.append(kSpaceMarker);
        } else {
          piece.push_back(c);
        }
      }
      v.encode_spm(piece, out);
    } else {
      v.encode_bpe(raw, out);
    }
    prev_special = false;
  }
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  const Impl& v = *impl_;
  check_token(id, v.texts.size());
  const uint8_t attr = v.attrs[id];
  const std::string& text = v.texts[id];
  if (attr & (kAttrControl | kAttrUnknown)) return render_special ? text : std::string();
  if (attr & kAttrUserDefined) return text;
  if (attr & kAttrNormal) {
    if (v.model == TokenizerModel::spm) {
      std::string s = text;
      replace_all(s, kSpaceMarker, " ");
      return s;
    }
    // Byte-level BPE: every code point stands for one byte.
    std::string s;
    size_t offset = 0;
    while (offset < text.size()) {
      const size_t start = offset;
      const int byte = unicode::codepoint_to_byte(unicode::decode_utf8(text, offset));
      if (byte >= 0) {
        s.push_back(static_cast<char>(byte));
      } else {  // not a byte stand-in: say so, as llama.cpp does
        s += "[UNK_BYTE_0x";
        for (size_t i = start; i < offset; ++i) {
          s += fmt::format("{:02x}", static_cast<uint8_t>(text[i]));
        }
        s += text + "]";
      }
    }
    return s;
  }
  if (attr & kAttrByte) {
    const int byte = byte_token_value(text);
    return byte >= 0 ? std::string(1, static_cast<char>(byte)) : text;
  }
  return {};  // UNDEFINED and UNUSED tokens
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  const Impl& v = *impl_;
  std::string out;
  bool strip_space = v.add_space_prefix;  // only the very first token's leading space
  for (int32_t id : ids) {
    std::string piece = token_to_piece(id, false);
    if (strip_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    strip_space = false;
    out += piece;
  }
  if (v.clean_spaces) clean_up_spaces(out);
  return out;
}

int32_t Tokenizer::n_vocab() const {
  return impl_->n_vocab();
}
int32_t Tokenizer::bos_id() const {
  return impl_->bos;
}
int32_t Tokenizer::eos_id() const {
  return impl_->eos;
}
int32_t Tokenizer::unk_id() const {
  return impl_->unk;
}
bool Tokenizer::add_bos_default() const {
  return impl_->add_bos;
}
TokenizerModel Tokenizer::model() const {
  return impl_->model;
}
PreTokenizer Tokenizer::pre_tokenizer() const {
  return impl_->pre;
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return id >= 0 && id < impl_->n_vocab() && impl_->eog[id];
}

bool Tokenizer::is_control(int32_t id) const {
  check_token(id, impl_->texts.size());
  return impl_->attrs[id] & (kAttrControl | kAttrUnknown);
}

const std::string& Tokenizer::token_text(int32_t id) const {
  check_token(id, impl_->texts.size());
  return impl_->texts[id];
}

TokenType Tokenizer::token_type(int32_t id) const {
  check_token(id, impl_->texts.size());
  return impl_->types[id];
}

// --- TextStreamDecoder ---------------------------------------------------------

namespace {

// How many bytes at the end of `s` start a UTF-8 character that is not complete yet
// but still could be (0 when the text ends on a boundary or on hopeless bytes).
size_t incomplete_tail(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<uint8_t>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = 0;
    if ((c & 0xE0) == 0xC0)
      need = 2;
    else if ((c & 0xF0) == 0xE0)
      need = 3;
    else if ((c & 0xF8) == 0xF0)
      need = 4;
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace

std::string TextStreamDecoder::push(int32_t id) {
  pending_ += tokenizer_.token_to_piece(id, render_special_);
  const size_t keep = incomplete_tail(pending_);
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string TextStreamDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace channel
