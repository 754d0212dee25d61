// StagingBuffer: the hippocampal staging of spec 003 §3. Per token it keeps the token id, its
// clock, its KV slot, the final hidden state x (the post-final-norm state the LM head reads)
// and a copy of its K/V rows of every layer, taken at push time so that the ring may reuse the
// slot at once. It cuts the stream into episodes on the configured triggers and hands each one
// to a sink (normally ConsolidationWorker::submit) without touching the disk.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "memory/episodic_format.h"

namespace channel {

enum class CutReason : uint8_t {
  turn_end,       // A: the token ended a turn (or flush() at a turn boundary)
  inactivity,     // A: poll() saw no token for inactivity_ms
  capacity,       // B: the buffer was full
  velocity,       // C: ||x_t - x_{t-1}|| exceeded the threshold
  discontinuity,  // the clock jumped (rollback or a new stream): tokens must be consecutive
  flush,          // explicit flush (shutdown)
};
const char* cut_reason_name(CutReason r);

struct StagingConfig {
  uint32_t capacity = 64;           // B: the most tokens per episode
  float velocity_threshold = 0.0f;  // C: cut before a token whose ||Δx|| exceeds it; <= 0: off
  uint64_t inactivity_ms = 0;       // A: poll() cuts after this long idle; 0: off
  bool cut_on_turn_end = true;      // A
  // B cuts at the last span boundary in the second half of the buffer, carrying the rest
  // into the next episode; without one it cuts the whole buffer.
  bool align_to_spans = true;
};

struct StagingDims {
  uint32_t num_layers = 0;
  uint32_t hidden_size = 0;
  uint32_t kv_dim = 0;
  uint32_t query_dim = 0;  // > 0: each token also keeps its queries, [num_layers][query_dim]
};

// One episode cut from the stream, owned.
struct StagedEpisode {
  uint64_t start_clock = 0;     // tokens have clocks start_clock, start_clock + 1, ...
  std::vector<int32_t> tokens;  // [n]
  std::vector<uint32_t> slots;  // [n] KV slot of each token when it was pushed
  std::vector<float> hidden;    // [n][hidden_size]
  std::vector<float> x_before;  // [hidden_size] x of the token before the episode; empty if none
  std::vector<float> kv;        // [n][num_layers][2 (K, V)][kv_dim]
  // [n][num_layers][query_dim] the tokens' queries (after q-norm, before RoPE) when staged
  // with StagingDims::query_dim > 0; empty otherwise.
  std::vector<float> queries;
  uint32_t continuation_token = kNoContinuation;
  uint16_t flags = 0;  // kEpisodeHasTool when a token was marked as tool output
  CutReason reason = CutReason::flush;
  size_t size() const { return tokens.size(); }
};

struct StagedToken {
  int32_t token = 0;
  uint64_t clock = 0;
  uint32_t slot = 0;
  std::span<const float> hidden;  // [hidden_size]
  std::span<const float> queries;  // [num_layers][query_dim] with query_dim > 0 (zeros: unknown)
  bool span_end = false;          // the token closes a semantic span (sentence, tool call)
  bool turn_end = false;          // the token closes a turn (<turn|>)
  bool tool = false;              // the token belongs to tool input/output
};

class StagingBuffer {
 public:
  using Sink = std::function<void(StagedEpisode&&)>;
  StagingBuffer(const StagingConfig& config, const StagingDims& dims, Sink sink);

  // Stages one token; k_rows[l] / v_rows[l] point at its K / V of layer l ([kv_dim] each).
  // May cut before the token (C, B, clock jump) and after it (turn end).
  void push(const StagedToken& t, std::span<const float* const> k_rows,
            std::span<const float* const> v_rows, uint64_t now_ms);
  // Trigger A by time: cuts when tokens are staged and the last push is inactivity_ms old.
  void poll(uint64_t now_ms);
  // Cuts whatever is staged (a turn boundary the caller detected, or shutdown).
  void flush(CutReason reason = CutReason::flush);

  size_t size() const { return cur_.tokens.size(); }
  const StagingConfig& config() const { return config_; }
  uint64_t episodes_cut() const { return episodes_cut_; }

 private:
  // Emits the first n staged tokens as an episode; the rest stay staged.
  void cut(size_t n, CutReason reason, uint32_t continuation);
  size_t span_cut_point() const;  // for B: tokens to cut

  StagingConfig config_;
  StagingDims dims_;
  Sink sink_;
  StagedEpisode cur_;
  static constexpr uint8_t kSpanEnd = 1, kTool = 2;
  std::vector<uint8_t> token_bits_;  // [n] kSpanEnd | kTool per staged token
  std::vector<float> x_prev_;        // [hidden_size] x of the last token cut, empty before any
  uint64_t last_push_ms_ = 0;
  uint64_t episodes_cut_ = 0;
};

}  // namespace channel
