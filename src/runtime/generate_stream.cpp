// The generation loop of a stream (generate_stream.h).
#include "runtime/generate_stream.h"

namespace channel {

StreamGenerateResult generate_stream(StreamSession& stream, int64_t max_tokens, EogPolicy eog,
                                     const StreamGenerateCallbacks& callbacks) {
  StreamGenerateResult r;
  while (max_tokens < 0 || r.n_generated < max_tokens) {
    if (callbacks.before_token && !callbacks.before_token()) {
      r.stop = StopReason::cancelled;
      return r;
    }
    const SpanType type = callbacks.span_type ? callbacks.span_type() : SpanType::response_sentence;
    const GeneratedToken g = stream.next(eog, callbacks.allowed, type);
    if (g.end_of_generation && eog == EogPolicy::stop) {
      r.stop = StopReason::end_of_generation;
      return r;
    }
    ++r.n_generated;
    if (callbacks.on_token && !callbacks.on_token(g)) {
      r.stop = StopReason::cancelled;
      return r;
    }
  }
  r.stop = StopReason::max_tokens;
  return r;
}

}  // namespace channel
