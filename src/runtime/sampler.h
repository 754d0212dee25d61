// Sampler: turns one position's logits into a token id. The filter chain and its
// order follow llama.cpp's default (repetition penalty -> top-k -> top-p -> min-p ->
// temperature -> draw); temperature 0 is greedy. Draws come from Rng, a fixed,
// documented PRNG, so one seed gives the same tokens on every machine.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace channel {

// xoshiro256** 1.0 (Blackman & Vigna, 2018), state seeded by four steps of
// splitmix64 from the 64-bit seed. Doubles take the top 53 bits: u = (x >> 11) * 2^-53.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next_u64();
  double next_double();  // uniform in [0, 1)

  // The four state words, for session files. set_state throws channel::Error for the
  // all-zero state (xoshiro would only ever return 0 from it).
  std::array<uint64_t, 4> state() const { return {s_[0], s_[1], s_[2], s_[3]}; }
  void set_state(const std::array<uint64_t, 4>& state);

 private:
  uint64_t s_[4];
};

// A logit bias's change: delta added to the logit of token id (ids outside the vocabulary
// are ignored).
struct LogitEdit {
  int32_t id;
  float delta;
};

struct SamplerConfig {
  float temperature = 0.8f;     // 0 = greedy (argmax after the penalty)
  int32_t top_k = 40;           // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off; > 1 discourages the last repeat_last_n tokens
  int32_t repeat_last_n = 64;   // how many recent tokens the penalties look at; 0: off
  uint64_t seed = 42;
  // OpenAI's penalties over the same recent tokens (llama.cpp's convention): a token seen c
  // times there loses c * frequency_penalty + presence_penalty (c > 0) from its logit, after
  // the repetition penalty. 0: off.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // Added to these tokens' logits before everything else (OpenAI's logit_bias).
  std::vector<LogitEdit> logit_bias;
  // Session files keep the fields above seed only: a loaded session has these off.
};

// Throws channel::Error naming the first out-of-range field (e.g. a negative temperature).
void validate(const SamplerConfig& config);

// One entry of the candidate list that the filters narrow down.
struct TokenCandidate {
  int32_t id;
  float logit;
  float p;  // probability, valid after a filter that computes it (top-p, draw)
};

// The candidates' order: logit descending, then id ascending. It is total, so sorting gives
// the same list on every standard library.
inline bool ranks_before(const TokenCandidate& a, const TokenCandidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Candidates plus whether they are sorted by ranks_before.
struct CandidateList {
  std::vector<TokenCandidate> items;
  bool sorted = false;

  // Fills from logits; NaN logits become -inf so that they are never chosen.
  void assign(std::span<const float> logits);
};

// The filters, in chain order. Each keeps at least one candidate.
// llama.cpp's convention: a recent token's logit is divided by the penalty when
// positive and multiplied by it when negative (or zero).
void apply_repeat_penalty(CandidateList& c, std::span<const int32_t> recent, float penalty);
void apply_top_k(CandidateList& c, int32_t k);
void apply_top_p(CandidateList& c, float p);      // keeps the smallest prefix with mass >= p
void apply_min_p(CandidateList& c, float min_p);  // keeps p_i >= min_p * p_max
void apply_temperature(CandidateList& c, float temperature);  // <= 0: keep the argmax only
// Softmax over the survivors, then the first candidate whose cumulative mass exceeds u * total.
int32_t draw(CandidateList& c, Rng& rng);

class Sampler {
 public:
  explicit Sampler(const SamplerConfig& config);  // validates

  // Applies the chain to logits ([n_vocab]) and returns the chosen id. It does not
  // record the token: call accept() for every token that enters the sequence
  // (prompt tokens too, as llama.cpp does) so the repetition penalty sees it.
  int32_t sample(std::span<const float> logits);
  void accept(int32_t token);

  // A logit bias applied before the chain on every sample() (e.g. an attached store's recall
  // copy, MemoryAttachment::recalled_bonus): given the vocabulary's size it appends the ids to
  // raise or lower and by how much. The sampler applies them to a copy, never the caller's
  // logits, and copies nothing on the steps it asks for none (most steps: a megabyte at
  // Gemma's vocabulary). What it captures must outlive its use: clear it (an empty function)
  // before that goes. reconfigured() keeps it; session files do not hold it.
  using LogitBias = std::function<void(size_t n_vocab, std::vector<LogitEdit>& edits)>;
  void set_logit_bias(LogitBias bias) { bias_ = std::move(bias); }
  const LogitBias& logit_bias() const { return bias_; }
  // Forgets the history and restarts the RNG from the seed.
  void reset();

  const SamplerConfig& config() const { return config_; }
  // The recent tokens that the penalty applies to, oldest first.
  std::vector<int32_t> recent_tokens() const;

  // Session files: the RNG and the penalty history. restore() continues exactly where the
  // saved sampler was; it throws channel::Error, state unchanged, for an all-zero RNG state
  // or more recent tokens than repeat_last_n.
  const Rng& rng() const { return rng_; }
  void restore(const std::array<uint64_t, 4>& rng_state, std::span<const int32_t> recent);

  // A sampler with another configuration that goes on from this one (a resumed session run
  // with new sampling flags): the same RNG stream when `config.seed` is this one's seed, else
  // a fresh one from `config.seed`, and the newest history tokens that fit its repeat_last_n.
  // Throws channel::Error for an invalid configuration.
  Sampler reconfigured(const SamplerConfig& config) const;

 private:
  int32_t sample_greedy(std::span<const float> logits);
  // The logits with the repetition, presence and frequency penalties applied (a copy in
  // scratch_), or as given.
  std::span<const float> penalized(std::span<const float> logits);

  SamplerConfig config_;
  Rng rng_;
  std::vector<int32_t> history_;  // ring of the last repeat_last_n accepted tokens
  size_t history_next_ = 0;       // where the next accepted token goes once the ring is full
  CandidateList candidates_;      // scratch, reused between calls
  std::vector<float> scratch_;    // [n_vocab] penalised logits (penalized)
  std::vector<int32_t> seen_;     // scratch: the history sorted (penalized)
  LogitBias bias_;                // optional, see set_logit_bias
  std::vector<LogitEdit> edits_;  // scratch: what bias_ asks for
  std::vector<float> biased_;     // [n_vocab] the logits after bias_'s edits
};

}  // namespace channel
