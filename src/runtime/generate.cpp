#include "runtime/generate.h"

#include <algorithm>
#include <chrono>
#include <limits>

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

int32_t sample_token(Sampler& sampler, std::span<const float> logits,
                     const std::function<bool(int32_t)>& allowed, std::vector<float>& masked) {
  if (!allowed) return sampler.sample(logits);
  masked.assign(logits.begin(), logits.end());
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  for (int attempt = 0; attempt < 32; ++attempt) {
    const int32_t t = sampler.sample(masked);
    if (allowed(t)) return t;
    masked[static_cast<size_t>(t)] = kMasked;
  }
  int32_t best = -1;
  for (size_t t = 0; t < masked.size(); ++t) {
    if (masked[t] == kMasked || (best >= 0 && masked[t] <= masked[static_cast<size_t>(best)]))
      continue;
    if (allowed(static_cast<int32_t>(t))) best = static_cast<int32_t>(t);
  }
  if (best < 0) throw Error("generate: the constraint allows no token");
  return best;
}

GenerateStats generate_tokens(SessionBase& model, Sampler& sampler, std::span<const int32_t> prompt,
                              int32_t n_predict, const GenerateCallbacks& callbacks) {
  if (prompt.empty()) throw_error("generate: the prompt has no tokens");
  const int64_t room = model.room();
  if (static_cast<int64_t>(prompt.size()) > room) {
    throw_error("prompt is {} tokens, longer than the {} the context has room for", prompt.size(),
                room);
  }

  GenerateStats stats;
  stats.n_prompt = static_cast<int32_t>(prompt.size());
  for (int32_t t : prompt) sampler.accept(t);

  auto start = Clock::now();
  std::span<const float> logits;
  const size_t chunk = callbacks.prefill_chunk > 0 ? callbacks.prefill_chunk : prompt.size();
  for (size_t done = 0; done < prompt.size();) {
    const size_t n = std::min(chunk, prompt.size() - done);
    logits = model.decode(prompt.subspan(done, n));
    done += n;
    if (callbacks.on_prefill && chunk < prompt.size()) callbacks.on_prefill(done, prompt.size());
  }
  stats.prompt_seconds = seconds_since(start);
  std::vector<float> masked;

  const auto loop_start = Clock::now();
  stats.stop = StopReason::max_tokens;
  while (n_predict < 0 || stats.n_generated < n_predict) {
    const int32_t token = sample_token(sampler, logits, {}, masked);
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
    if (model.room() <= 0) {
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

GenerateStats generate_text(SessionBase& model, const Tokenizer& tokenizer, Sampler& sampler,
                            std::span<const int32_t> prompt, int32_t n_predict,
                            const std::function<bool(std::string_view text)>& on_text,
                            size_t prefill_chunk,
                            const std::function<void(size_t done, size_t total)>& on_prefill) {
  TextStreamDecoder text(tokenizer);
  bool keep_going = true;
  GenerateCallbacks callbacks;
  callbacks.is_end_of_generation = [&](int32_t t) { return tokenizer.is_end_of_generation(t); };
  callbacks.on_token = [&](int32_t t) {
    const std::string piece = text.push(t);
    if (!piece.empty()) keep_going = on_text(piece);
    return keep_going;
  };
  callbacks.prefill_chunk = prefill_chunk;
  callbacks.on_prefill = on_prefill;
  GenerateStats stats = generate_tokens(model, sampler, prompt, n_predict, callbacks);
  const std::string tail = text.flush();
  if (keep_going && !tail.empty()) on_text(tail);
  return stats;
}

}  // namespace channel
