// StreamSession: spans cut at sentence ends, and sampling with every token fed back.
#include "runtime/stream_session.h"

#include <limits>

#include "util/error.h"

namespace channel {

StreamSession::StreamSession(std::shared_ptr<const Model> model, const RingSessionConfig& config,
                             const SamplerConfig& sampling)
    : ring_(std::make_unique<RingSession>(model, config)),
      sampler_(sampling),
      text_(model->tokenizer()) {}

// The checks RingSession makes per call, made once for the whole input, so that a feed cut
// into several calls fails before the first one (state unchanged).
void StreamSession::check_tokens(std::span<const int32_t> tokens) const {
  if (tokens.empty()) throw_error("session: no tokens given");
  const int n_vocab = ring_->model().hparams().n_vocab;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= n_vocab)
      throw_error("session: token id {} at index {} is outside the vocabulary (n_vocab {})",
                  tokens[i], i, n_vocab);
  const SlotRing& ring = ring_->ring();
  if (!ring.sealed()) {
    const RingConfig& c = ring.config();
    const uint32_t limit = SlotGeometry::max_anchors(c.n_slots, c.n_recall, 1 + c.probe_reserve);
    if (ring.clock() + tokens.size() > limit)
      throw_error("session: anchors too long for the geometry: {} + {} tokens, at most {} fit",
                  ring.clock(), tokens.size(), limit);
  }
}

void StreamSession::accept_all(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) sampler_.accept(t);
}

std::span<const float> StreamSession::append(SpanType type, std::span<const int32_t> tokens) {
  check_tokens(tokens);
  const std::span<const float> logits = ring_->append(type, tokens);
  accept_all(tokens);
  open_.reset();
  return logits;
}

std::span<const float> StreamSession::decode(std::span<const int32_t> tokens) {
  check_tokens(tokens);
  const std::span<const float> logits = ring_->decode(tokens);
  accept_all(tokens);
  open_.reset();
  return logits;
}

std::span<const float> StreamSession::feed(SpanType type, std::span<const int32_t> tokens) {
  check_tokens(tokens);
  const Tokenizer& tok = tokenizer();
  SentenceSplitter splitter = splitter_;  // committed once the tokens are in
  bool continues = open_ == type;
  if (!continues) splitter.reset();
  starts_.assign(tokens.size(), 0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool starts = splitter.feed(tok.token_to_piece(tokens[i], /*render_special=*/false));
    starts_[i] = (i == 0 && !continues) || starts;
  }
  // One call for all the spans: the forward chunks run across sentence ends.
  const std::span<const float> logits = ring_->feed(type, tokens, starts_);
  accept_all(tokens);
  splitter_ = std::move(splitter);
  open_ = type;
  return logits;
}

GeneratedToken StreamSession::next(EogPolicy eog, SpanType type) {
  if (clock() == 0) throw_error("generate: no tokens appended yet, so there are no logits");
  return take(sampler_.sample(ring_->logits()), eog, type);
}

GeneratedToken StreamSession::next(EogPolicy eog, const std::function<bool(int32_t)>& allowed,
                                   SpanType type) {
  if (clock() == 0) throw_error("generate: no tokens appended yet, so there are no logits");
  const std::span<const float> logits = ring_->logits();
  masked_.assign(logits.begin(), logits.end());
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  for (int attempt = 0; attempt < 32; ++attempt) {
    const int32_t t = sampler_.sample(masked_);
    if (allowed(t)) return take(t, eog, type);
    masked_[static_cast<size_t>(t)] = kMasked;
  }
  int32_t best = -1;
  for (size_t t = 0; t < masked_.size(); ++t) {
    if (masked_[t] == kMasked || (best >= 0 && masked_[t] <= masked_[static_cast<size_t>(best)])) continue;
    if (allowed(static_cast<int32_t>(t))) best = static_cast<int32_t>(t);
  }
  if (best < 0) throw Error("generate: the constraint allows no token");
  return take(best, eog, type);
}

GeneratedToken StreamSession::take(int32_t token, EogPolicy eog, SpanType type) {
  GeneratedToken out;
  out.token = token;
  if (tokenizer().is_end_of_generation(out.token)) {
    out.end_of_generation = true;
    if (eog == EogPolicy::turn_end) {
      append(SpanType::turn_end, {&out.token, 1});
      out.new_span = true;
    } else {
      sampler_.accept(out.token);
      open_.reset();
    }
    out.text = text_.flush();
    return out;
  }
  feed(type, {&out.token, 1});
  out.new_span = starts_[0] != 0;
  out.text = text_.push(out.token);
  return out;
}

void StreamSession::restore_span_state(const StreamSpanState& state) {
  SentenceSplitter splitter;
  splitter.restore(state.splitter);
  splitter_ = std::move(splitter);
  open_ = state.open;
}

}  // namespace channel
