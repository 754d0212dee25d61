// The generation loop: prompt tokens -> one batched prefill -> sample / decode one
// token at a time, handing each new token to a callback, until an end-of-generation
// token, the token budget, the end of the context, or the callback says stop. It runs on
// any session (runtime/session_base.h) and times the prefill and the decode steps
// separately (the CLI and bench print them). sample_token is the sampling step of every
// generation (this loop and StreamSession::next).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include <vector>

#include "runtime/sampler.h"
#include "runtime/session_base.h"

namespace channel {

class Tokenizer;

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
  // With prefill_chunk > 0, a prompt longer than that is decoded in chunks of prefill_chunk
  // tokens (bit-identical to one decode), and on_prefill gets the tokens done after each.
  size_t prefill_chunk = 0;
  std::function<void(size_t done, size_t total)> on_prefill;
};

// Samples a token from `logits` (without accepting it). With `allowed`, only among the
// tokens it accepts (constrained output such as JSON): a refused sample is masked out and
// sampling repeats; after 32 refusals the allowed token of highest logit is taken. Throws
// channel::Error when none is allowed. `masked`: scratch for the masked logits.
int32_t sample_token(Sampler& sampler, std::span<const float> logits,
                     const std::function<bool(int32_t)>& allowed, std::vector<float>& masked);

// Prefills `prompt` (which must be non-empty and fit in the session's room()), then samples
// at most n_predict tokens (n_predict < 0: no limit but the session's room).
// Every prompt and generated token is accepted into the sampler's history. The last
// generated token is not decoded, so the session ends holding prompt + generated - 1 more
// tokens; feed it back to continue. Throws channel::Error when the prompt does not fit.
GenerateStats generate_tokens(SessionBase& session, Sampler& sampler, std::span<const int32_t> prompt,
                              int32_t n_predict, const GenerateCallbacks& callbacks);

// generate_tokens with the tokenizer's end-of-generation tokens, streaming text: each
// call of on_text gets the complete UTF-8 that the newest token finished (bytes of a
// character split across tokens wait for the rest); return false to stop. Control
// tokens print nothing. The prompt is not echoed. prefill_chunk, on_prefill: as in
// GenerateCallbacks.
GenerateStats generate_text(SessionBase& session, const Tokenizer& tokenizer, Sampler& sampler,
                            std::span<const int32_t> prompt, int32_t n_predict,
                            const std::function<bool(std::string_view text)>& on_text,
                            size_t prefill_chunk = 0,
                            const std::function<void(size_t done, size_t total)>& on_prefill = {});

}  // namespace channel
