// Vocab: everything the tokenizer is built from, as plain data. from_gguf fills it
// from the tokenizer.ggml.* metadata; tests build small ones by hand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace channel {

// tokenizer.ggml.model: "llama" (SentencePiece-style) or "gpt2" (byte-level BPE).
enum class TokenizerModel { spm, bpe };

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

constexpr int32_t kNoToken = -1;

struct Vocab {
  TokenizerModel model = TokenizerModel::spm;
  std::string pre = "default";      // tokenizer.ggml.pre (byte-level BPE only)
  std::vector<std::string> tokens;  // [n_vocab] token texts
  std::vector<float> scores;        // [n_vocab], or empty for all 0 (SPM merge priority)
  std::vector<TokenType> types;     // [n_vocab], or empty for all normal
  std::vector<std::string> merges;  // [n_merges] "left right", rank = index (BPE only)

  int32_t bos_id = kNoToken;
  int32_t eos_id = kNoToken;
  int32_t eot_id = kNoToken;  // end of turn; found by text (<|eot_id|>, <end_of_turn>...) if absent
  int32_t eom_id = kNoToken;  // end of message (<|eom_id|>)
  int32_t unk_id = kNoToken;
  int32_t pad_id = kNoToken;

  bool add_bos = false;  // tokenizer.ggml.add_bos_token
  // tokenizer.ggml.add_space_prefix: SPM encoding prepends a space to the text, and
  // decoding drops the first token's leading space (llama.cpp's SPM default: true).
  bool add_space_prefix = false;
};

}  // namespace channel
