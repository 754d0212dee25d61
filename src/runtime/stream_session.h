// StreamSession: generation on the KV slot geometry with no context limit. It owns a
// RingSession, its Sampler and the span state of the text stream, which together are
// everything a session file holds (runtime/session_file.h). Text is cut into spans at
// sentence ends (kv/sentence_split.h): generated text into response_sentence spans, fed
// text into spans of its own type. Every sampled token is fed back at once, so the next
// logits are always ready and a stream can continue (or be saved) after any token.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "kv/sentence_split.h"
#include "runtime/ring_session.h"
#include "runtime/sampler.h"
#include "runtime/top_tokens.h"
#include "tokenizer/tokenizer.h"

namespace channel {

// What happens to a sampled end-of-generation token (eos, <end_of_turn>, ...).
enum class EogPolicy : uint8_t {
  stop,      // not fed: the caller ends the reply; the next reply opens a new span
  turn_end,  // fed as a one-token turn_end span, and the stream goes on
};

struct GeneratedToken {
  int32_t token = 0;
  bool end_of_generation = false;
  bool new_span = false;  // it was fed as the first token of a new span
  std::string text;       // the UTF-8 this token completed (control tokens: none)
  // With set_logprobs(n >= 0): its log-probability under the model's distribution (the raw
  // logits' softmax, before biases, penalties, temperature and filters) and the n likeliest.
  std::optional<StepLogprobs> logprobs;
};

// The span state of the text stream, saved in session files: which span the next fed or
// generated token may continue, and the sentence splitter's view of the text before it.
struct StreamSpanState {
  std::optional<SpanType> open;  // the newest span was cut by text of this type
  SentenceSplitter::State splitter;
  bool operator==(const StreamSpanState&) const = default;
};

class StreamSession {
 public:
  // Allocates the ring session (throws channel::Error for a bad geometry or sampler config).
  StreamSession(std::shared_ptr<const Model> model, const RingSessionConfig& config,
                const SamplerConfig& sampling);

  // One span of `type` holding `tokens`; before seal() these are anchors. The next fed or
  // generated token begins a new span. Every token enters the sampler's history.
  std::span<const float> append(SpanType type, std::span<const int32_t> tokens);
  // Text tokens (a file, a long message) cut into spans of `type` at sentence ends: a span
  // begins at each sentence start, and at the first token unless the newest span is text
  // of the same type (so text fed in pieces continues its sentence).
  std::span<const float> feed(SpanType type, std::span<const int32_t> tokens);
  // Appends to the newest span (an error when none was begun); the next fed or generated
  // token begins a new span.
  std::span<const float> decode(std::span<const int32_t> tokens);
  void seal() { ring_->seal(); }

  // Samples from the current logits, accepts the token and feeds it: into the current
  // response_sentence span, or a new one at a sentence start or after other input.
  // Throws channel::Error before any token was appended.
  // `type`: the span type of generated text (a tool call being written: tool_call).
  GeneratedToken next(EogPolicy eog = EogPolicy::stop, SpanType type = SpanType::response_sentence);
  // As next(), sampling only among tokens `allowed` accepts (constrained output such as
  // JSON): a refused sample is masked out and sampling repeats; after 32 refusals the
  // allowed token of highest logit is taken. Throws channel::Error when none is allowed.
  GeneratedToken next(EogPolicy eog, const std::function<bool(int32_t)>& allowed,
                      SpanType type = SpanType::response_sentence);

  // A speculative verify (runtime/stream_speculative.h): feeds `tokens`, the next generated
  // token and its drafts, as next() would feed them one by one into spans of `type`, but
  // tentatively, and returns every token's logits [n][n_vocab]. At most
  // ring_session().max_truncate() tokens. keep_tentative must follow before any other call.
  std::span<const float> feed_tentative(SpanType type, std::span<const int32_t> tokens);
  // Keeps the first `keep` tokens of the feed_tentative just made and rolls the others back:
  // the session is then as if next() had generated the kept tokens (spans, sampler history,
  // text). on_token (if set) first sees each of them in order as next() would have returned
  // it (the ring still holding the whole feed); when it returns false, the tokens after that
  // one are rolled back too. Returns how many were kept. Throws channel::Error, state
  // unchanged, for a keep larger than that feed.
  size_t keep_tentative(size_t keep,
                        const std::function<bool(const GeneratedToken&)>& on_token = {});

  // Replaces the sampler (its RNG restarts from the new seed and the history empties); the
  // logit bias (Sampler::set_logit_bias) stays.
  void set_sampler(const SamplerConfig& sampling) {
    Sampler fresh(sampling);
    fresh.set_logit_bias(sampler_.logit_bias());
    sampler_ = std::move(fresh);
  }

  // next() fills GeneratedToken::logprobs with this many alternatives (-1: off, the default;
  // the whole row's softmax costs about a millisecond at Gemma's vocabulary).
  void set_logprobs(int top_n) { logprobs_top_ = top_n; }

  RingSession& ring_session() { return *ring_; }
  const RingSession& ring_session() const { return *ring_; }
  const Sampler& sampler() const { return sampler_; }
  Sampler& sampler() { return sampler_; }
  StreamSpanState span_state() const { return {open_, splitter_.state()}; }
  const Tokenizer& tokenizer() const { return ring_->model().tokenizer(); }
  // The logits of the last token appended ([n_vocab]); zeros before the first.
  std::span<const float> logits() const { return ring_->logits(); }
  // Clocks / tokens appended since creation (anchors included).
  uint64_t clock() const { return ring_->ring().clock(); }

  // For session files: replaces the span state (throws channel::Error, state unchanged,
  // for a bad splitter state).
  void restore_span_state(const StreamSpanState& state);

 private:
  void accept_all(std::span<const int32_t> tokens);

  std::unique_ptr<RingSession> ring_;
  Sampler sampler_;
  std::optional<SpanType> open_;  // see StreamSpanState
  SentenceSplitter splitter_;
  TextStreamDecoder text_;       // generated text only
  std::vector<uint8_t> starts_;  // [tokens of one feed] 1 where a span begins (scratch)
  std::vector<float> masked_;    // [n_vocab] logits of a constrained step (scratch)
  int logprobs_top_ = -1;        // set_logprobs
  // The feed_tentative waiting for keep_tentative: its tokens, span starts and type.
  std::vector<int32_t> tentative_;
  std::vector<uint8_t> tentative_starts_;
  SpanType tentative_type_ = SpanType::response_sentence;
  // The span starts of `tokens` fed as text of `type` now (feed()'s rule), into starts_;
  // returns the splitter as it would be after them.
  SentenceSplitter span_starts(SpanType type, std::span<const int32_t> tokens);
  GeneratedToken take(int32_t token, EogPolicy eog, SpanType type);
};

}  // namespace channel
