// Speculative greedy generation on the slot ring (StreamSession): a drafter proposes the next
// tokens, one tentative feed checks the current token and its drafts (StreamSession::
// feed_tentative, at most the ring's probe reserve), and the longest agreeing prefix is kept
// (keep_tentative): the rest is rolled back as if never fed. Spans, evictions, the session's
// state and the text are those of generate_stream with greedy sampling; only the number of
// forwards changes. runtime/speculative.h is the same loop on a plain SessionBase.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/generate_stream.h"
#include "runtime/speculative.h"
#include "runtime/stream_session.h"

namespace channel {

// Generates at most max_tokens tokens (< 0: no limit) as generate_stream(stream, max_tokens,
// EogPolicy::stop, callbacks) would with a greedy sampler, drafting from `history` (the tokens
// before the stream's current logits that the caller knows, e.g. the prompt; the generated
// tokens are appended to it). Each verify keeps at most draft_max drafts; draft_max + 1 must
// fit the ring's probe reserve (channel::Error otherwise, before any work). The sampler must
// be greedy with nothing that edits the logits (no penalties, no logit bias): channel::Error
// otherwise. callbacks.before_token runs before each verify, not each token;
// callbacks.allowed and span_type must be empty. on_token gets each kept token in order once
// the verify has decided how many agree (StreamSession::keep_tentative); when it returns
// false the tokens after it are rolled back too.
StreamGenerateResult generate_stream_speculative(StreamSession& stream, int64_t max_tokens,
                                                 Drafter* drafter, int draft_max,
                                                 std::vector<int32_t> history,
                                                 const StreamGenerateCallbacks& callbacks,
                                                 SpeculativeStats* stats = nullptr);

}  // namespace channel
