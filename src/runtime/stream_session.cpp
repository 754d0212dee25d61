// StreamSession: spans cut at sentence ends, and sampling with every token fed back.
#include "runtime/stream_session.h"


#include "runtime/generate.h"
#include "util/error.h"

namespace channel {

StreamSession::StreamSession(std::shared_ptr<const Model> model, const RingSessionConfig& config,
                             const SamplerConfig& sampling)
    : ring_(std::make_unique<RingSession>(model, config)),
      sampler_(sampling),
      text_(model->tokenizer()) {}

void StreamSession::accept_all(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) sampler_.accept(t);
}

std::span<const float> StreamSession::append(SpanType type, std::span<const int32_t> tokens) {
  ring_->check_tokens(tokens);  // the whole input, before the first call
  const std::span<const float> logits = ring_->append(type, tokens);
  accept_all(tokens);
  open_.reset();
  return logits;
}

std::span<const float> StreamSession::decode(std::span<const int32_t> tokens) {
  ring_->check_tokens(tokens);  // the whole input, before the first call
  const std::span<const float> logits = ring_->decode(tokens);
  accept_all(tokens);
  open_.reset();
  return logits;
}

SentenceSplitter StreamSession::span_starts(SpanType type, std::span<const int32_t> tokens) {
  const Tokenizer& tok = tokenizer();
  SentenceSplitter splitter = splitter_;
  const bool continues = open_ == type;
  if (!continues) splitter.reset();
  starts_.assign(tokens.size(), 0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool starts = splitter.feed(tok.token_to_piece(tokens[i], /*render_special=*/false));
    starts_[i] = (i == 0 && !continues) || starts;
  }
  return splitter;
}

std::span<const float> StreamSession::feed_tentative(SpanType type,
                                                     std::span<const int32_t> tokens) {
  ring_->check_tokens(tokens);
  if (tokens.size() > ring_->max_truncate())
    throw_error("generate: a verify of {} tokens is longer than the ring's probe reserve ({})",
                tokens.size(), ring_->max_truncate());
  (void)span_starts(type, tokens);  // the splitter and open_ change only with keep_tentative
  const std::span<const float> all = ring_->feed_all(type, tokens, starts_);
  tentative_.assign(tokens.begin(), tokens.end());
  tentative_starts_.assign(starts_.begin(), starts_.end());
  tentative_type_ = type;
  return all;
}

size_t StreamSession::keep_tentative(size_t keep,
                                     const std::function<bool(const GeneratedToken&)>& on_token) {
  if (keep > tentative_.size())
    throw_error("generate: cannot keep {} tokens of a verify of {}", keep, tentative_.size());
  TextStreamDecoder text = text_;  // committed with the tokens kept
  for (size_t i = 0; i < keep; ++i) {
    GeneratedToken g;
    g.token = tentative_[i];
    g.new_span = tentative_starts_[i] != 0;
    g.text = text.push(g.token);
    if (on_token && !on_token(g)) {
      keep = i + 1;
      break;
    }
  }
  ring_->truncate_last(static_cast<int>(tentative_.size() - keep));
  if (keep > 0) {
    const std::span<const int32_t> kept(tentative_.data(), keep);
    splitter_ = span_starts(tentative_type_, kept);  // the splitter after the kept tokens
    open_ = tentative_type_;
    accept_all(kept);
    for (const int32_t t : kept) (void)text_.push(t);
  }
  tentative_.clear();
  return keep;
}

std::span<const float> StreamSession::feed(SpanType type, std::span<const int32_t> tokens) {
  ring_->check_tokens(tokens);                            // the whole input, before the first call
  SentenceSplitter splitter = span_starts(type, tokens);  // committed once the tokens are in
  // One call for all the spans: the forward chunks run across sentence ends.
  const std::span<const float> logits = ring_->feed(type, tokens, starts_);
  accept_all(tokens);
  splitter_ = std::move(splitter);
  open_ = type;
  return logits;
}

GeneratedToken StreamSession::next(EogPolicy eog, SpanType type) {
  return next(eog, {}, type);
}

GeneratedToken StreamSession::next(EogPolicy eog, const std::function<bool(int32_t)>& allowed,
                                   SpanType type) {
  if (clock() == 0) throw_error("generate: no tokens appended yet, so there are no logits");
  const std::span<const float> logits = ring_->logits();
  const int32_t token = sample_token(sampler_, logits, allowed, masked_);
  std::optional<StepLogprobs> logprobs;  // before take() feeds the token over these logits
  if (logprobs_top_ >= 0)
    logprobs = step_logprobs(logits, token, static_cast<size_t>(logprobs_top_));
  GeneratedToken out = take(token, eog, type);
  out.logprobs = std::move(logprobs);
  return out;
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
