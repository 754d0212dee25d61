// The generation loop of a stream (StreamSession, generation on the slot ring): samples,
// feeds each token into its sentence span at once and hands it to a callback, until an
// end-of-generation token (EogPolicy::stop), the token budget, or a callback says stop. The
// CLI (`channel run` on the ring), chat and serve replies (chat/generation_loop.h) and the
// C API (channel_session_generate) all generate through it.
//
// It is the one per-token loop of the ring; runtime/generate.h generate_tokens is the one of
// a plain SessionBase. They share the sampling step (sample_token) but not the loop, because
// their contracts differ where callers see it: generate_tokens prefills the prompt, checks
// the context's room and leaves the last generated token undecoded (the caller feeds it back
// to continue), while a stream has no end of context and feeds every token as it is sampled
// (StreamSession::next: into a response_sentence or tool_call span cut at sentence ends), so
// its logits are always ready and it can be saved or continued after any token.
#pragma once

#include <cstdint>
#include <functional>

#include "runtime/generate.h"
#include "runtime/stream_session.h"

namespace channel {

struct StreamGenerateCallbacks {
  // Before each token (a background recall lands, a signal is checked); return false to stop
  // (StopReason::cancelled) before sampling.
  std::function<bool()> before_token;
  // Only tokens it accepts are sampled (constrained output, StreamSession::next); empty: any.
  std::function<bool(int32_t token)> allowed;
  // The span type of the next generated token; empty: response_sentence.
  std::function<SpanType()> span_type;
  // Each generated token (with EogPolicy::turn_end, end-of-generation tokens too) after it was
  // fed; return false to stop (StopReason::cancelled).
  std::function<bool(const GeneratedToken& token)> on_token;
};

struct StreamGenerateResult {
  int64_t n_generated = 0;  // tokens handed to on_token
  StopReason stop = StopReason::max_tokens;
};

// Generates at most max_tokens tokens (< 0: no limit) on `stream`, whose last appended token's
// logits are the first to sample from (throws channel::Error when nothing was appended).
// With EogPolicy::stop an end-of-generation token ends the loop (StopReason::
// end_of_generation) without being fed or counted; with EogPolicy::turn_end it is fed as a
// turn_end span and generation goes on.
StreamGenerateResult generate_stream(StreamSession& stream, int64_t max_tokens, EogPolicy eog,
                                     const StreamGenerateCallbacks& callbacks);

}  // namespace channel
