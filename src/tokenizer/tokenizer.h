// Tokenizer: text <-> token ids from a model's GGUF vocabulary, reproducing
// llama.cpp's tokenization: SentencePiece-style ("llama": score-ordered merges,
// byte fallback) and byte-level BPE ("gpt2": ranked merges after a pre-tokenizer
// split), with special tokens matched in the text first. Immutable and cheap to
// copy (shared state); safe to use from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocab.h"

namespace channel {

class GgufFile;

class Tokenizer {
 public:
  // Reads the tokenizer.ggml.* keys. Throws channel::Error for an unknown
  // tokenizer.ggml.model or pre-tokenizer, missing keys, short arrays or bad ids.
  static Tokenizer from_gguf(const GgufFile& file);
  // Validates a hand-built vocabulary the same way.
  static Tokenizer from_vocab(Vocab vocab);

  // parse_special: CONTROL tokens written in the text (e.g. "<start_of_turn>") become
  // their ids. USER_DEFINED tokens are always matched, as llama.cpp does.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;

  // The whole text: CONTROL and UNKNOWN tokens render as nothing, byte tokens as their
  // byte, U+2581 as a space; with add_space_prefix the first token's leading space is
  // dropped, and gpt2/llama-bpe vocabularies get llama.cpp's " ," / " 's" clean-up.
  // Throws channel::Error for an id outside the vocabulary.
  std::string decode(std::span<const int32_t> ids) const;

  // The raw bytes of one token: byte tokens give their byte, U+2581 becomes a space,
  // byte-level BPE text is mapped back to bytes. render_special = false gives "" for
  // CONTROL and UNKNOWN tokens (what decode() uses). Throws for a bad id.
  std::string token_to_piece(int32_t id, bool render_special = true) const;

  int32_t n_vocab() const;
  int32_t bos_id() const;  // kNoToken (-1) when the vocabulary has none
  int32_t eos_id() const;
  int32_t unk_id() const;
  bool is_end_of_generation(int32_t id) const;  // eos, eot, eom, <end_of_turn>, <|eot_id|>, ...
  bool add_bos_default() const;                 // tokenizer.ggml.add_bos_token
  bool is_control(int32_t id) const;            // CONTROL or UNKNOWN: not printed by decode()

  TokenizerModel model() const;
  PreTokenizer pre_tokenizer() const;
  const std::string& token_text(int32_t id) const;  // as stored in the vocabulary
  TokenType token_type(int32_t id) const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Turns a stream of generated ids into text that is always complete UTF-8: bytes
// of a multibyte character split across tokens are held back until it completes.
// Bytes that can never form valid UTF-8 are passed through as they are, so the
// concatenated output equals the concatenated pieces.
class TextStreamDecoder {
 public:
  explicit TextStreamDecoder(const Tokenizer& tokenizer, bool render_special = false)
      : tokenizer_(tokenizer), render_special_(render_special) {}
  std::string push(int32_t id);  // text that became complete with this token
  std::string flush();           // whatever is still held back (an incomplete tail)

 private:
  Tokenizer tokenizer_;
  bool render_special_;
  std::string pending_;  // [< 4] bytes of an incomplete UTF-8 character
};

}  // namespace channel
