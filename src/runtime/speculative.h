// Speculative greedy decoding: a drafter proposes the next few tokens, the target model
// checks them all in one batched forward, the longest agreeing prefix is kept and the rest is
// rolled back with truncate_last (Session: bounded rings undo, n_past elsewhere; RingSession:
// the slot ring is restored and the kept tokens re-appended, see ring_session.h). The output
// is the target's own greedy output; only the number of forwards changes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "runtime/generate.h"
#include "runtime/ring_session.h"
#include "runtime/session.h"

namespace channel {

// Proposes up to max_tokens tokens that may follow `history` (prompt + generated so far).
class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::vector<int32_t> draft(std::span<const int32_t> history, int max_tokens) = 0;
};

// Prompt lookup: finds the latest earlier occurrence of the history's last n tokens (n from
// max_ngram down to min_ngram) and proposes the tokens that followed it.
class NgramDrafter : public Drafter {
 public:
  explicit NgramDrafter(int max_ngram = 3, int min_ngram = 1);
  std::vector<int32_t> draft(std::span<const int32_t> history, int max_tokens) override;

 private:
  int max_ngram_;
  int min_ngram_;
};

// A smaller model with the same vocabulary drafts greedily in its own session, which keeps
// exactly the accepted history (its draft tokens are truncated again after each proposal).
// When the history outgrows that session's context, it restarts from the last half-context
// of it, so a stream of any length keeps getting drafts.
class ModelDrafter : public Drafter {
 public:
  // Throws channel::Error when the vocabularies differ in size.
  ModelDrafter(std::shared_ptr<const Model> draft_model, const Model& target, SessionConfig config);
  std::vector<int32_t> draft(std::span<const int32_t> history, int max_tokens) override;

 private:
  Session session_;
  size_t from_ = 0;           // history index of the draft session's first token
  std::vector<int32_t> fed_;  // tokens the draft session holds: history[from_, from_ + size)
};

// What the verify loop needs from a session; SessionTarget and RingTarget below.
class SpeculativeTarget {
 public:
  virtual ~SpeculativeTarget() = default;
  virtual const Model& model() const = 0;
  // Appends the prompt; returns its last token's logits [n_vocab].
  virtual std::span<const float> prefill(std::span<const int32_t> prompt) = 0;
  // Appends tokens; returns every token's logits [n][n_vocab] (valid until the next call).
  virtual std::span<const float> decode_all(std::span<const int32_t> tokens) = 0;
  // Drops the last k tokens of the decode_all just made (k = 0 keeps them all).
  virtual void truncate_last(int k) = 0;
  // The most tokens the next decode_all may take so that truncate_last can drop all but one
  // (0: the session is full).
  virtual int max_verify() const = 0;
  // The same without the room left: what a verify can ever hold (checked against draft_max).
  virtual int verify_capacity() const = 0;
  virtual const char* capacity_hint() const = 0;  // which setting bounds verify_capacity
};

// A plain Session: prompt and output at positions n_past...
class SessionTarget final : public SpeculativeTarget {
 public:
  explicit SessionTarget(Session& s) : s_(s) {}
  const Model& model() const override { return s_.model(); }
  std::span<const float> prefill(std::span<const int32_t> prompt) override;
  std::span<const float> decode_all(std::span<const int32_t> tokens) override;
  void truncate_last(int k) override { s_.truncate_last(k); }
  int max_verify() const override;
  int verify_capacity() const override { return UNDO_DEPTH + 1; }
  const char* capacity_hint() const override { return "UNDO_DEPTH + 1"; }

 private:
  Session& s_;
  std::vector<float> all_;  // [n][n_vocab] of the last decode_all
};

// A RingSession: the prompt is appended as a span of `prompt_type` and the output continues
// it. Speculating needs probe_reserve >= draft_max + 1 (RingSession::max_truncate).
class RingTarget final : public SpeculativeTarget {
 public:
  RingTarget(RingSession& s, SpanType prompt_type) : s_(s), prompt_type_(prompt_type) {}
  const Model& model() const override { return s_.model(); }
  std::span<const float> prefill(std::span<const int32_t> prompt) override {
    return s_.append(prompt_type_, prompt);
  }
  std::span<const float> decode_all(std::span<const int32_t> tokens) override {
    return s_.decode_all(tokens);
  }
  void truncate_last(int k) override { s_.truncate_last(k); }
  int max_verify() const override { return std::max(1, static_cast<int>(s_.max_truncate())); }
  int verify_capacity() const override { return static_cast<int>(s_.max_truncate()); }
  const char* capacity_hint() const override { return "the ring's probe_reserve"; }

 private:
  RingSession& s_;
  SpanType prompt_type_;
};

struct SpeculativeStats {
  int verify_steps = 0;         // batched target forwards after the prompt
  int drafted = 0;              // draft tokens proposed
  int accepted = 0;             // draft tokens the target agreed with
  int generated = 0;            // output tokens
  double prompt_seconds = 0;    // the prompt's forward
  double generate_seconds = 0;  // everything after it (drafting included)
  StopReason stop = StopReason::max_tokens;
  double acceptance() const { return drafted > 0 ? static_cast<double>(accepted) / drafted : 0; }
  double tok_per_s() const { return generate_seconds > 0 ? generated / generate_seconds : 0; }
};

// Greedy generation of up to n_predict tokens after `prompt` (the session must be fresh or
// hold the context the prompt continues). drafter == nullptr or draft_max == 0: one token per
// forward. Stops early at a token for which is_end returns true (not included). Throws
// channel::Error when draft_max is outside [0, UNDO_DEPTH] or draft_max + 1 exceeds the
// target's verify_capacity(); each draft is also capped by the room left (max_verify).
// n_predict < 0: until an end token or a full session. on_token receives each output token
// as soon as it is known; returning false stops (StopReason::cancelled).
// The session ends holding the prompt and the output; the last output token is decoded only
// when it was an accepted draft (prompt + output tokens held, or one less).
std::vector<int32_t> generate_greedy_speculative(SpeculativeTarget& target,
                                                 std::span<const int32_t> prompt, int n_predict,
                                                 Drafter* drafter, int draft_max,
                                                 const std::function<bool(int32_t)>& is_end = {},
                                                 SpeculativeStats* stats = nullptr,
                                                 const std::function<bool(int32_t)>& on_token = {});
// The same on a plain Session (through SessionTarget).
std::vector<int32_t> generate_greedy_speculative(Session& session, std::span<const int32_t> prompt,
                                                 int n_predict, Drafter* drafter, int draft_max,
                                                 const std::function<bool(int32_t)>& is_end = {},
                                                 SpeculativeStats* stats = nullptr,
                                                 const std::function<bool(int32_t)>& on_token = {});

}  // namespace channel
