// Speculative greedy decoding: a drafter proposes the next few tokens, the target model
// checks them all in one batched forward, the longest agreeing prefix is kept and the rest is
// rolled back with truncate_last (SessionBase; Session: bounded rings undo, n_past elsewhere;
// RingSession: the slot ring is restored and the kept tokens re-appended, ring_session.h). The output
// is the target's own greedy output; only the number of forwards changes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "runtime/generate.h"
#include "runtime/session.h"
#include "runtime/session_base.h"

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
  // Throws channel::Error when the vocabularies differ in size. The draft model in a CPU
  // Session of `config`,
  ModelDrafter(std::shared_ptr<const Model> draft_model, const Model& target, SessionConfig config);
  // or in a fresh session of any kind that reset() starts over (a context on a CUDA device).
  ModelDrafter(std::unique_ptr<SessionBase> session, const Model& target);
  std::vector<int32_t> draft(std::span<const int32_t> history, int max_tokens) override;

 private:
  std::unique_ptr<SessionBase> session_;
  size_t n_ctx_;              // the tokens session_ holds at most
  size_t from_ = 0;           // history index of the draft session's first token
  std::vector<int32_t> fed_;  // tokens the draft session holds: history[from_, from_ + size)
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

// Greedy generation of up to n_predict tokens after `prompt`, on any session (the session
// must be fresh or hold the context the prompt continues; on a RingSession, begin_span first
// opens the prompt's span). drafter == nullptr or draft_max == 0: one token per forward.
// Stops early at a token for which is_end returns true (not included). Throws channel::Error
// when draft_max is outside [0, UNDO_DEPTH] or draft_max + 1 exceeds the session's
// verify_capacity() (a ring needs probe_reserve >= draft_max + 1); each draft is also capped
// by the room left. n_predict < 0: until an end token or a full session. on_token receives
// each output token as soon as it is known; returning false stops (StopReason::cancelled).
// The session ends holding the prompt and the output; the last output token is decoded only
// when it was an accepted draft (prompt + output tokens held, or one less).
std::vector<int32_t> generate_greedy_speculative(SessionBase& session,
                                                 std::span<const int32_t> prompt, int n_predict,
                                                 Drafter* drafter, int draft_max,
                                                 const std::function<bool(int32_t)>& is_end = {},
                                                 SpeculativeStats* stats = nullptr,
                                                 const std::function<bool(int32_t)>& on_token = {});

}  // namespace channel
