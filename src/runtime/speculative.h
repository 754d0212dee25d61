// Speculative greedy decoding: a drafter proposes the next few tokens, the target model
// checks them all in one batched forward, the longest agreeing prefix is kept and the rest is
// rolled back with Session::truncate_last (ring slots on bounded layers, n_past elsewhere).
// The output is the target's own greedy output; only the number of forwards changes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

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
class ModelDrafter : public Drafter {
 public:
  // Throws channel::Error when the vocabularies differ in size.
  ModelDrafter(std::shared_ptr<const Model> draft_model, const Model& target, SessionConfig config);
  std::vector<int32_t> draft(std::span<const int32_t> history, int max_tokens) override;

 private:
  Session session_;
  std::vector<int32_t> fed_;  // tokens the draft session holds (a prefix of the history)
};

struct SpeculativeStats {
  int verify_steps = 0;  // batched target forwards after the prompt
  int drafted = 0;       // draft tokens proposed
  int accepted = 0;      // draft tokens the target agreed with
  double acceptance() const { return drafted > 0 ? static_cast<double>(accepted) / drafted : 0; }
};

// Greedy generation of up to n_predict tokens after `prompt` (session must be fresh or hold
// the context the prompt continues). drafter == nullptr or draft_max == 0: one token per
// forward. Stops early at a token for which is_end returns true (not included). draft_max is
// capped by UNDO_DEPTH (throws channel::Error above it) and by the room left in the context.
// The session ends holding the prompt and the output; the last output token is decoded only
// when it was an accepted draft (n_past is prompt + output or one less).
std::vector<int32_t> generate_greedy_speculative(Session& session, std::span<const int32_t> prompt,
                                                 int n_predict, Drafter* drafter, int draft_max,
                                                 const std::function<bool(int32_t)>& is_end = {},
                                                 SpeculativeStats* stats = nullptr);

}  // namespace channel
