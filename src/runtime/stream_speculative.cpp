// Speculative greedy generation on the slot ring (stream_speculative.h).
#include "runtime/stream_speculative.h"

#include <algorithm>
#include <chrono>

#include "bounded/bounded_state.h"
#include "runtime/top_tokens.h"
#include "util/error.h"

namespace channel {

namespace {

// Greedy with nothing that edits the logits: the argmax of a row is then what
// StreamSession::next() samples from it.
void check_plain_greedy(const Sampler& sampler) {
  const SamplerConfig& c = sampler.config();
  const bool penalties =
      (c.repeat_penalty != 1.0f || c.presence_penalty != 0.0f || c.frequency_penalty != 0.0f) &&
      c.repeat_last_n != 0;
  if (c.temperature > 0.0f || penalties || !c.logit_bias.empty() || sampler.logit_bias())
    throw_error(
        "speculative: needs greedy decoding with no penalties or logit bias (temperature {})",
        c.temperature);
}

}  // namespace

StreamGenerateResult generate_stream_speculative(StreamSession& stream, int64_t max_tokens,
                                                 Drafter* drafter, int draft_max,
                                                 std::vector<int32_t> history,
                                                 const StreamGenerateCallbacks& callbacks,
                                                 SpeculativeStats* stats) {
  using Clock = std::chrono::steady_clock;
  const uint32_t reserve = stream.ring_session().max_truncate();
  if (draft_max < 0 || draft_max > UNDO_DEPTH)
    throw_error("speculative: --draft-max {} must be in [0, {}]", draft_max, UNDO_DEPTH);
  if (static_cast<uint32_t>(draft_max) + 1 > reserve)
    throw_error(
        "speculative: --draft-max {} needs {} tokens per verify, this ring takes at most {} (its "
        "probe reserve)",
        draft_max, draft_max + 1, reserve);
  if (callbacks.allowed || callbacks.span_type)
    throw_error("speculative: constrained output and other span types are not supported");
  check_plain_greedy(stream.sampler());
  if (stream.clock() == 0) throw_error("generate: no tokens appended yet, so there are no logits");

  SpeculativeStats local;
  SpeculativeStats& st = stats ? *stats : local;
  const auto t0 = Clock::now();
  const Tokenizer& tok = stream.tokenizer();
  StreamGenerateResult r;
  std::vector<int32_t> batch;
  while (max_tokens < 0 || r.n_generated < max_tokens) {
    if (callbacks.before_token && !callbacks.before_token()) {
      r.stop = StopReason::cancelled;
      break;
    }
    const auto next = static_cast<int32_t>(argmax_logit(stream.logits()));
    if (tok.is_end_of_generation(next)) {
      (void)stream.next(EogPolicy::stop);  // not fed: as generate_stream leaves it
      r.stop = StopReason::end_of_generation;
      break;
    }
    history.push_back(next);
    int room = draft_max;
    if (max_tokens >= 0)
      room = static_cast<int>(std::min<int64_t>(room, max_tokens - r.n_generated - 1));
    batch.assign(1, next);
    if (drafter != nullptr && room > 0) {
      const std::vector<int32_t> draft = drafter->draft(history, room);
      batch.insert(batch.end(), draft.begin(),
                   draft.begin() + std::min<size_t>(draft.size(), room));
    }
    const size_t n_vocab = stream.logits().size();
    const std::span<const float> all =
        stream.feed_tentative(SpanType::response_sentence, batch);  // [batch][n_vocab]
    ++st.verify_steps;
    st.drafted += static_cast<int>(batch.size() - 1);
    // Draft i + 1 is kept when the logits after token i choose it and it ends nothing.
    size_t keep = 1;
    while (keep < batch.size()) {
      const auto pred =
          static_cast<int32_t>(argmax_logit(all.subspan((keep - 1) * n_vocab, n_vocab)));
      if (pred != batch[keep] || tok.is_end_of_generation(pred)) break;
      ++keep;
    }
    st.accepted += static_cast<int>(keep - 1);
    bool go_on = true;
    const size_t kept = stream.keep_tentative(keep, [&](const GeneratedToken& g) {
      ++r.n_generated;
      go_on = !callbacks.on_token || callbacks.on_token(g);
      return go_on;
    });
    history.insert(history.end(), batch.begin() + 1,
                   batch.begin() + static_cast<std::ptrdiff_t>(kept));
    if (!go_on) {
      r.stop = StopReason::cancelled;
      break;
    }
  }
  st.generated = static_cast<int>(r.n_generated);
  st.stop = r.stop;
  st.generate_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

}  // namespace channel
