// PreTokenizer: the regex-like word splitting that byte-level BPE runs before
// merging, hand-written over the Unicode category table (no std::regex). Each
// kind reproduces llama.cpp's splitter of the same `tokenizer.ggml.pre` name.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace channel {

enum class PreTokenizer {
  standard,  // "default" (or absent): punctuation runs, then GPT-2, then digit runs in 3s
  gpt2,      // "gpt-2": 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  llama3,    // "llama-bpe": contractions (any case), [^\r\n\p{L}\p{N}]?\p{L}+, \p{N}{1,3}, ...
  qwen2,     // "qwen2": as llama-bpe but digits one at a time
};

// Maps a tokenizer.ggml.pre value; throws channel::Error for names we do not implement.
PreTokenizer pre_tokenizer_from_name(std::string_view name);
std::string_view pre_tokenizer_name(PreTokenizer kind);

// Splits code points into words; returns each word's length in code points, in order
// (the lengths add up to cpts.size()).
std::vector<size_t> pre_tokenize(PreTokenizer kind, std::span<const uint32_t> cpts);

// Convenience for tests: the words as UTF-8 strings (invalid input bytes become U+FFFD).
std::vector<std::string> pre_tokenize_words(PreTokenizer kind, std::string_view text);

}  // namespace channel
