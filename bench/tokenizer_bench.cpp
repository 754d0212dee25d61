// Tokenizer throughput on ~1 MB of English-like text with the real Gemma 3 (SPM) and
// Llama 3 (byte-level BPE) vocabularies. Needs the reference data: set
// CHANNEL_TESTDATA_DIR, or run from the build directory next to ../shared/testdata.
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include <benchmark/benchmark.h>

#include "gguf/gguf_reader.h"
#include "tokenizer/tokenizer.h"

namespace {

std::string testdata(const std::string& rel) {
  const char* env = std::getenv("CHANNEL_TESTDATA_DIR");
  return (std::filesystem::path(env ? env : "../../shared/testdata") / rel).string();
}

// Deterministic pseudo-English: common words, punctuation, numbers and paragraphs.
std::string english_text(size_t bytes) {
  static const char* kWords[] = {
      "the",   "of",       "and",     "to",       "a",      "in",      "is",        "that",
      "for",   "it",       "as",      "was",      "with",   "be",      "by",        "on",
      "not",   "he",       "this",    "are",      "or",     "his",     "from",      "at",
      "which", "but",      "have",    "an",       "had",    "they",    "you",       "were",
      "their", "one",      "all",     "we",       "can",    "her",     "has",       "there",
      "been",  "if",       "more",    "when",     "will",   "would",   "who",       "so",
      "time",  "people",   "little",  "children", "garden", "morning", "remember",  "quickly",
      "river", "mountain", "library", "question", "answer", "village", "evening",   "Tokenizer",
      "don't", "it's",     "they're", "London",   "Mary",   "however", "beautiful", "understand"};
  std::mt19937 rng(7);
  std::string s;
  s.reserve(bytes + 64);
  bool capital = true;
  while (s.size() < bytes) {
    const size_t start = s.size();
    s.append(kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))]);
    if (capital) s[start] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[start])));
    capital = false;
    const unsigned r = rng() % 100;
    if (r < 6) {
      s += ". ";
      capital = true;
    } else if (r < 10) {
      s += ", ";
    } else if (r < 11) {
      s.push_back(' ');
      s.append(std::to_string(rng() % 100000));
      s.push_back(' ');
    } else if (r < 12) {
      s += ".\n\n";
      capital = true;
    } else {
      s += " ";
    }
  }
  return s;
}

void run(benchmark::State& state, const char* vocab) {
  const std::string path = testdata(vocab);
  if (!std::filesystem::exists(path)) {
    state.SkipWithError("reference data not found: set CHANNEL_TESTDATA_DIR");
    return;
  }
  const channel::Tokenizer tok = channel::Tokenizer::from_gguf(channel::GgufFile::open(path));
  const std::string text = english_text(1 << 20);
  size_t n_tokens = 0;
  for (auto _ : state) {
    const auto ids = tok.encode(text, true, true);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n_tokens);
}

void BM_EncodeGemma3Spm1MB(benchmark::State& state) {
  run(state, "tokenizer/gemma3-vocab.gguf");
}
void BM_EncodeLlama3Bpe1MB(benchmark::State& state) {
  run(state, "tokenizer/llama3-vocab.gguf");
}
void BM_EncodeStories260KSpm1MB(benchmark::State& state) {
  run(state, "stories260K/stories260K.gguf");
}

BENCHMARK(BM_EncodeGemma3Spm1MB)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeLlama3Bpe1MB)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeStories260KSpm1MB)->Unit(benchmark::kMillisecond);

}  // namespace
