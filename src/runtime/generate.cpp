#include "runtime/generate.h"

#include <chrono>

#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace channel {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

std::string_view stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::end_of_generation:
      return "end of generation";
    case StopReason::max_tokens:
      return "token limit";
    case StopReason::context_full:
      return "context full";
    case StopReason::cancelled:
      return "cancelled";
  }
  return "unknown";
}

GenerateStats generate_tokens(LogitSource& model, Sampler& sampler, std::span<const int32_t> prompt,
                              int32_t n_predict, const GenerateCallbacks& callbacks) {
  if (prompt.empty()) throw_error("generate: the prompt has no tokens");
  const int64_t room = int64_t{model.n_ctx()} - model.n_past();
  if (static_cast<int64_t>(prompt.size()) > room) {
    throw_error("prompt is {} tokens, longer than the {} the context has room for (context {})",
                prompt.size(), room, model.n_ctx());
  }

  GenerateStats stats;
  stats.n_prompt = static_cast<int32_t>(prompt.size());
  for (int32_t t : prompt) sampler.accept(t);

  auto start = Clock::now();
  std::span<const float> logits = model.decode(prompt);
  stats.prompt_seconds = seconds_since(start);

  const auto loop_start = Clock::now();
  stats.stop = StopReason::max_tokens;
  while (n_predict < 0 || stats.n_generated < n_predict) {
    const int32_t token = sampler.sample(logits);
    sampler.accept(token);
    if (callbacks.is_end_of_generation && callbacks.is_end_of_generation(token)) {
      stats.stop = StopReason::end_of_generation;
      break;
    }
    stats.n_generated++;
    if (callbacks.on_token && !callbacks.on_token(token)) {
      stats.stop = StopReason::cancelled;
      break;
    }
    if (n_predict >= 0 && stats.n_generated >= n_predict) break;  // the last one stays pending
    if (model.n_past() >= model.n_ctx()) {
      stats.stop = StopReason::context_full;
      break;
    }
    start = Clock::now();
    logits = model.decode(std::span<const int32_t>(&token, 1));
    stats.decode_seconds += seconds_since(start);
    stats.n_decoded++;
  }
  stats.generate_seconds = seconds_since(loop_start);
  return stats;
}

GenerateStats generate_text(LogitSource& model, const Tokenizer& tokenizer, Sampler& sampler,
                            std::span<const int32_t> prompt, int32_t n_predict,
                            const std::function<bool(std::string_view text)>& on_text) {
  TextStreamDecoder text(tokenizer);
  bool keep_going = true;
  GenerateCallbacks callbacks;
  callbacks.is_end_of_generation = [&](int32_t t) { return tokenizer.is_end_of_generation(t); };
  callbacks.on_token = [&](int32_t t) {
    const std::string piece = text.push(t);
    if (!piece.empty()) keep_going = on_text(piece);
    return keep_going;
  };
  GenerateStats stats = generate_tokens(model, sampler, prompt, n_predict, callbacks);
  const std::string tail = text.flush();
  if (keep_going && !tail.empty()) on_text(tail);
  return stats;
}

}  // namespace channel
