#include "runtime/session.h"

#include <algorithm>
#include <numeric>

#include "util/error.h"

namespace channel {

namespace {

const SessionConfig& checked(const SessionConfig& c) {
  if (c.n_ctx < 1) throw_error("session: n_ctx must be at least 1, got {}", c.n_ctx);
  if (c.n_batch < 1) throw_error("session: n_batch must be at least 1, got {}", c.n_batch);
  if (c.n_threads < 0) throw_error("session: n_threads must be >= 0, got {}", c.n_threads);
  return c;
}

}  // namespace

Session::Session(std::shared_ptr<const Model> model, SessionConfig config)
    : SessionBase(model, model->hparams().n_vocab, checked(config).n_threads),
      config_(config),
      attention_(*model_, config.n_ctx, std::min(config.n_batch, config.n_ctx), pool_.size()),
      bounded_(*model_),
      layers_(layer_attention(model_->hparams(), bounded_, attention_)),
      scratch_(model_->hparams(), std::min(config.n_batch, config.n_ctx)),
      slot_ids_(static_cast<size_t>(config.n_ctx)) {
  std::iota(slot_ids_.begin(), slot_ids_.end(), 0);
}

void Session::check_room(size_t n) const {
  if (n > static_cast<size_t>(config_.n_ctx - n_past_))
    throw_error("context full: {} tokens already held + {} new exceed n_ctx {}", n_past_, n,
                config_.n_ctx);
}

void Session::run_chunk(std::span<const int32_t> tokens, LogitsFor which, float* logits) {
  const int n = static_cast<int>(tokens.size());
  const std::span<const int32_t> positions(slot_ids_.data() + n_past_, static_cast<size_t>(n));
  const ModelHparams& hp = model_->hparams();
  attention_.set_batch(positions, positions /* slot == position */, [&](int il, int t) {
    const int p = positions[static_cast<size_t>(t)];
    const int window = hp.window_of(il);
    const int first = window > 0 ? std::max(0, p - window + 1) : 0;
    return std::span<const int32_t>(slot_ids_.data() + first, static_cast<size_t>(p - first + 1));
  });
  forward(*model_, ForwardBatch{tokens, layers_}, which, scratch_, pool_, logits);
  n_past_ += n;
}

void Session::run(std::span<const int32_t> tokens, float* all) {
  const size_t n_vocab = logits_.size();
  const size_t step = static_cast<size_t>(scratch_.max_batch);
  for (size_t i = 0; i < tokens.size(); i += step)
    run_chunk(tokens.subspan(i, std::min(step, tokens.size() - i)),
              all ? LogitsFor::all : LogitsFor::last, all ? all + i * n_vocab : logits_.data());
}

void Session::hidden_states(std::span<const int32_t> tokens, std::vector<float>& rows) {
  before_decode();
  check_tokens(tokens);
  const size_t n_embd = static_cast<size_t>(model_->hparams().n_embd);
  rows.resize(tokens.size() * n_embd);
  const size_t step = static_cast<size_t>(scratch_.max_batch);
  for (size_t i = 0; i < tokens.size(); i += step) {
    const size_t n = std::min(step, tokens.size() - i);
    run_chunk(tokens.subspan(i, n), LogitsFor::hidden, nullptr);
    std::copy_n(scratch_.xn.begin(), n * n_embd,
                rows.begin() + static_cast<std::ptrdiff_t>(i * n_embd));
  }
}

void Session::truncate(int k) {
  if (k < 0 || k > n_past_)
    throw_error("truncate: cannot drop {} tokens of the {} held", k, n_past_);
  const ModelHparams& hp = model_->hparams();
  for (int il = 0; il < hp.n_layer; ++il) {  // check every layer before changing any
    if (hp.is_bounded(il) && bounded_.state(il).undo_available() < k)
      throw_error(
          "truncate: cannot drop {} tokens: bounded layer {} keeps undo history for {} "
          "(UNDO_DEPTH {})",
          k, il, bounded_.state(il).undo_available(), UNDO_DEPTH);
  }
  for (int il = 0; il < hp.n_layer; ++il) {
    if (hp.is_bounded(il)) bounded_.state(il).truncate_last(k);
  }
  n_past_ -= k;
}

}  // namespace channel
