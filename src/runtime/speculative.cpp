// Speculative greedy decoding: n-gram and model drafters, and the verify/accept/rollback loop.
#include "runtime/speculative.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "bounded/bounded_state.h"
#include "util/error.h"

namespace channel {

namespace {

int32_t argmax(const float* logits, size_t n) {
  return static_cast<int32_t>(std::max_element(logits, logits + n) - logits);
}

}  // namespace

NgramDrafter::NgramDrafter(int max_ngram, int min_ngram)
    : max_ngram_(std::max(1, max_ngram)), min_ngram_(std::clamp(min_ngram, 1, max_ngram_)) {}

std::vector<int32_t> NgramDrafter::draft(std::span<const int32_t> h, int max_tokens) {
  const int64_t len = static_cast<int64_t>(h.size());
  for (int n = max_ngram_; n >= min_ngram_; --n) {
    if (len <= n) continue;
    const auto suffix = h.subspan(static_cast<size_t>(len - n));
    for (int64_t start = len - n - 1; start >= 0; --start) {  // latest occurrence first
      if (!std::equal(suffix.begin(), suffix.end(), h.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t count = std::min<int64_t>(max_tokens, len - from);
      return std::vector<int32_t>(h.begin() + from, h.begin() + from + count);
    }
  }
  return {};
}

ModelDrafter::ModelDrafter(std::shared_ptr<const Model> draft_model, const Model& target,
                           SessionConfig config)
    : ModelDrafter(std::make_unique<Session>(std::move(draft_model), config), target) {}

ModelDrafter::ModelDrafter(std::unique_ptr<SessionBase> session, const Model& target)
    : session_(std::move(session)),
      n_ctx_(static_cast<size_t>(std::max<int64_t>(0, session_->room()))) {
  if (session_->model().hparams().n_vocab != target.hparams().n_vocab)
    throw_error("draft model: vocabulary of {} tokens, the target has {}",
                session_->model().hparams().n_vocab, target.hparams().n_vocab);
}

std::vector<int32_t> ModelDrafter::draft(std::span<const int32_t> h, int max_tokens) {
  const size_t n_ctx = n_ctx_;
  max_tokens = std::min(max_tokens, UNDO_DEPTH);
  if (max_tokens <= 0 || h.empty()) return {};
  // The draft session holds h[from_, from_ + fed_.size()). Start again when the history was
  // rewritten or the rest of it plus the drafts would overflow the context: from a suffix of
  // half the context, so drafting goes on however long the stream runs.
  const bool kept = from_ + fed_.size() <= h.size() &&
                    std::equal(fed_.begin(), fed_.end(), h.begin() + static_cast<int64_t>(from_));
  if (!kept || h.size() - from_ + static_cast<size_t>(max_tokens) - 1 > n_ctx) {
    session_->reset();
    fed_.clear();
    from_ = h.size() - std::min(h.size(), std::max<size_t>(1, n_ctx / 2));
  }
  max_tokens = static_cast<int>(
      std::min<size_t>(static_cast<size_t>(max_tokens), n_ctx + 1 - (h.size() - from_)));
  if (max_tokens <= 0 || h.size() == from_ + fed_.size()) return {};
  const auto fresh = h.subspan(from_ + fed_.size());
  std::span<const float> logits = session_->decode(fresh);
  fed_.insert(fed_.end(), fresh.begin(), fresh.end());
  std::vector<int32_t> out;
  while (true) {
    const int32_t t = argmax(logits.data(), logits.size());
    out.push_back(t);
    if (static_cast<int>(out.size()) == max_tokens) break;
    logits = session_->decode(std::span<const int32_t>(&t, 1));
  }
  session_->truncate_last(static_cast<int>(out.size()) - 1);  // keep only the history
  return out;
}

// The most tokens the next verify may take: the current token plus drafts, within the room
// left and what truncate_last can cut back (at least the current token alone).
namespace {

int max_verify(const SessionBase& s) {
  return static_cast<int>(std::min<int64_t>(s.room(), std::max(1, s.verify_capacity())));
}

}  // namespace

std::vector<int32_t> generate_greedy_speculative(SessionBase& s,
                                                 std::span<const int32_t> prompt, int n_predict,
                                                 Drafter* drafter, int draft_max,
                                                 const std::function<bool(int32_t)>& is_end,
                                                 SpeculativeStats* stats,
                                                 const std::function<bool(int32_t)>& on_token) {
  using Clock = std::chrono::steady_clock;
  if (draft_max < 0 || draft_max > UNDO_DEPTH)
    throw_error("speculative: --draft-max {} must be in [0, {}]", draft_max, UNDO_DEPTH);
  if (drafter != nullptr && draft_max > 0 && draft_max + 1 > s.verify_capacity())
    throw_error(
        "speculative: --draft-max {} needs {} tokens per verify, this session takes at most {} "
        "({})",
        draft_max, draft_max + 1, s.verify_capacity(), s.verify_capacity_hint());
  if (n_predict < 0) n_predict = std::numeric_limits<int>::max();
  SpeculativeStats local;
  SpeculativeStats& st = stats ? *stats : local;
  const size_t n_vocab = static_cast<size_t>(s.n_vocab());
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  std::vector<int32_t> out;
  const auto t0 = Clock::now();
  const std::span<const float> first = s.decode(prompt);
  const auto t1 = Clock::now();
  st.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();
  st.stop = StopReason::max_tokens;
  // Takes one output token; false when generation ends with it or before it.
  const auto emit = [&](int32_t t) {
    if (is_end && is_end(t)) {
      st.stop = StopReason::end_of_generation;
      return false;
    }
    out.push_back(t);
    history.push_back(t);
    if (on_token && !on_token(t)) {
      st.stop = StopReason::cancelled;
      return false;
    }
    return static_cast<int>(out.size()) < n_predict;
  };
  int32_t next = argmax(first.data(), n_vocab);  // predicted, not yet decoded
  while (n_predict > 0 && emit(next)) {
    const int capacity = max_verify(s);  // `next` plus the draft must fit
    if (capacity <= 0) {
      st.stop = StopReason::context_full;
      break;
    }
    const int room = std::min(capacity - 1, n_predict - static_cast<int>(out.size()));
    std::vector<int32_t> draft;
    if (drafter != nullptr && draft_max > 0 && room > 0)
      draft = drafter->draft(history, std::min(draft_max, room));
    std::vector<int32_t> batch = {next};
    batch.insert(batch.end(), draft.begin(), draft.end());
    const std::span<const float> logits = s.decode_all(batch);  // [1 + d][n_vocab]
    ++st.verify_steps;
    st.drafted += static_cast<int>(draft.size());
    size_t accepted = 0;
    int32_t pred = argmax(logits.data(), n_vocab);
    bool go_on = true;
    while (accepted < draft.size() && pred == draft[accepted]) {
      ++accepted;
      go_on = emit(pred);
      if (!go_on) break;
      pred = argmax(logits.data() + accepted * n_vocab, n_vocab);
    }
    if (!go_on && st.stop == StopReason::end_of_generation) --accepted;  // the end token: not kept
    st.accepted += static_cast<int>(accepted);
    s.truncate_last(static_cast<int>(draft.size() - accepted));  // rejected drafts
    if (!go_on) break;
    next = pred;
  }
  st.generated = static_cast<int>(out.size());
  st.generate_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return out;
}

}  // namespace channel
