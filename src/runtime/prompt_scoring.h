// The log-probabilities of a prompt's own tokens (OpenAI completions' `echo` with
// `logprobs`, how evaluation harnesses score a continuation): token i's log-probability
// given tokens 0..i-1, with the top_n most likely alternatives there, through a contiguous
// session over the whole prompt (full attention, as a ring holds a prompt that fits its
// window).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/top_tokens.h"

namespace channel {

class Model;
class SessionBase;

// [n] entries; entry 0 has no context to be scored in and stays empty (logprob 0, no top).
// Throws channel::Error for an id outside the vocabulary.
std::vector<StepLogprobs> score_prompt(std::shared_ptr<const Model> model,
                                       std::span<const int32_t> tokens, size_t top_n,
                                       int n_threads);
// The same through `session`, a contiguous context (on a device, say) that is reset first and
// must hold tokens.size() - 1 tokens.
std::vector<StepLogprobs> score_prompt(SessionBase& session, std::span<const int32_t> tokens,
                                       size_t top_n);

}  // namespace channel
