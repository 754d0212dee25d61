// SessionBase: the token checks, threads and logits every session shares.
#include "runtime/session_base.h"

#include <algorithm>
#include <thread>

#include "util/error.h"

namespace channel {

int resolve_threads(int n) {
  if (n < 0) throw_error("session: n_threads must be >= 0, got {}", n);
  return n > 0 ? n : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

SessionBase::SessionBase(std::shared_ptr<const Model> model, int32_t n_vocab, int n_threads)
    : model_(std::move(model)),
      pool_(resolve_threads(n_threads)),
      logits_own_(static_cast<size_t>(n_vocab)),
      logits_(logits_own_) {}

SessionBase::~SessionBase() = default;

void SessionBase::use_logits_memory(float* row) {
  std::copy(logits_.begin(), logits_.end(), row);
  logits_ = std::span<float>(row, logits_.size());
  logits_own_ = {};
}

void SessionBase::reset() {
  throw Error("this session cannot be reset (a slot ring)");
}

void SessionBase::hidden_states(std::span<const int32_t>, std::vector<float>&) {
  throw Error("this session does not compute hidden states (a slot ring)");
}

void SessionBase::check_tokens(std::span<const int32_t> tokens) const {
  check_token_ids(tokens, n_vocab());
  check_room(tokens.size());
}

std::span<const float> SessionBase::decode(std::span<const int32_t> tokens) {
  before_decode();
  check_tokens(tokens);
  run(tokens, nullptr);
  return logits_;
}

std::span<const float> SessionBase::decode_all(std::span<const int32_t> tokens) {
  before_decode();
  check_tokens(tokens);
  const size_t n_vocab = logits_.size();
  if (all_logits_.size() < tokens.size() * n_vocab) all_logits_.resize(tokens.size() * n_vocab);
  run(tokens, all_logits_.data());
  const auto last = all_logits_.begin() + static_cast<std::ptrdiff_t>((tokens.size() - 1) * n_vocab);
  std::copy(last, last + static_cast<std::ptrdiff_t>(n_vocab), logits_.begin());
  return {all_logits_.data(), tokens.size() * n_vocab};
}

}  // namespace channel
