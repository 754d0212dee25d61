// The generation loop: prompt tokens -> one batched prefill -> sample / decode one
// token at a time, handing each new token to a callback, until an end-of-generation
// token, the token budget, the end of the context, or the callback says stop. It
// times the prefill and the decode steps separately (the CLI, bench and C API print them).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "runtime/sampler.h"
#include "runtime/session.h"

namespace channel {

class Tokenizer;

// What generation needs from a model: append tokens, get the last position's logits.
class LogitSource {
 public:
  virtual ~LogitSource() = default;
  // Appends tokens at positions n_past().. and returns the logits ([n_vocab]) of the
  // last one; the span stays valid until the next call.
  virtual std::span<const float> decode(std::span<const int32_t> tokens) = 0;
  virtual int32_t n_past() const = 0;
  virtual int32_t n_ctx() const = 0;
};

// The LogitSource of a Session.
class SessionLogits final : public LogitSource {
 public:
  explicit SessionLogits(Session& session) : session_(session) {}
  std::span<const float> decode(std::span<const int32_t> tokens) override {
    return session_.decode(tokens);
  }
  int32_t n_past() const override { return session_.n_past(); }
  int32_t n_ctx() const override { return session_.n_ctx(); }

 private:
  Session& session_;
};

enum class StopReason { end_of_generation, max_tokens, context_full, cancelled };
std::string_view stop_reason_name(StopReason reason);

struct GenerateStats {
  int32_t n_prompt = 0;           // tokens prefilled in one batch
  double prompt_seconds = 0.0;    // time of that decode
  int32_t n_generated = 0;        // tokens handed to the callback
  int32_t n_decoded = 0;          // single-token decodes after the prefill
  double decode_seconds = 0.0;    // their total time (llama.cpp's "eval time")
  double generate_seconds = 0.0;  // wall time from the prefill's end to the loop's end
  StopReason stop = StopReason::max_tokens;

  double prompt_tok_per_s() const { return prompt_seconds > 0 ? n_prompt / prompt_seconds : 0; }
  double gen_tok_per_s() const { return decode_seconds > 0 ? n_decoded / decode_seconds : 0; }
};

struct GenerateCallbacks {
  // True for tokens that end the generation (they are neither passed on nor decoded).
  std::function<bool(int32_t token)> is_end_of_generation;
  // Receives each generated token in order; return false to stop.
  std::function<bool(int32_t token)> on_token;
};

// Prefills `prompt` (which must be non-empty and fit in the context after n_past()),
// then samples at most n_predict tokens (n_predict < 0: no limit but the context).
// Every prompt and generated token is accepted into the sampler's history. The last
// generated token is not decoded, so model.n_past() ends at prompt + generated - 1;
// feed it back to continue. Throws channel::Error when the prompt does not fit.
GenerateStats generate_tokens(LogitSource& model, Sampler& sampler, std::span<const int32_t> prompt,
                              int32_t n_predict, const GenerateCallbacks& callbacks);

// generate_tokens with the tokenizer's end-of-generation tokens, streaming text: each
// call of on_text gets the complete UTF-8 that the newest token finished (bytes of a
// character split across tokens wait for the rest); return false to stop. Control
// tokens print nothing. The prompt is not echoed.
GenerateStats generate_text(LogitSource& model, const Tokenizer& tokenizer, Sampler& sampler,
                            std::span<const int32_t> prompt, int32_t n_predict,
                            const std::function<bool(std::string_view text)>& on_text);

}  // namespace channel
