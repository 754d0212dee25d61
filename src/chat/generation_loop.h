// A reply, shared by chat and plain completions: generates on a StreamSession through the
// stream's one generation loop (runtime/generate_stream.h) until an end-of-generation token,
// a stop string, a token limit, an interrupt or a closed client; streams text as it comes,
// holding back what may begin a stop string; optionally starts from a forced prefix (a tool
// call's opening) or keeps the output a JSON object (response_format json_object).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_message.h"
#include "runtime/stream_session.h"

namespace channel {

enum class FinishReason : uint8_t { stop, length, tool_calls, interrupted };
const char* finish_reason_name(FinishReason r);

// One sampled token's logprobs (ReplyOptions::logprobs) and where its text begins in the
// reply (GenerationResult::text, the prefix included).
struct ReplyLogprob {
  int32_t token = 0;
  size_t offset = 0;
  StepLogprobs logprobs;
};

struct ReplyOptions {
  int max_tokens = 512;
  std::vector<std::string> stop;                 // besides the template's own
  const std::atomic<bool>* interrupt = nullptr;  // set: the reply ends after the next token
  // Each piece of text as it is generated; return false to stop (a closed client).
  std::function<bool(std::string_view)> on_text;
  std::optional<SamplerConfig> sampling;  // this reply only (OpenAI temperature, seed, ...)
  std::string prefix;        // fed before sampling and part of the reply (forced tool call)
  bool json_object = false;  // only tokens that keep the reply a prefix of a JSON object
                             // (after `prefix`)
  // With json_object: the object must also be one this schema accepts (JsonPrefix's keywords).
  std::shared_ptr<const OrderedJson> json_schema;
  std::string suffix;        // with json_object: fed and appended once the object is whole
  // Text that opens a tool call (the template's marker): once the reply contains it, the
  // tokens after it are stored as a tool_call span instead of response sentences.
  std::string tool_marker;
  bool prefix_is_call = false;  // `prefix` opens a tool call (a forced tool_choice)
  std::function<void()> between_tokens;  // before each token (a background recall lands)
  // >= 0 with logprobs_out set: each sampled token's ReplyLogprob, with this many alternatives,
  // appended to *logprobs_out as it comes (before on_text sees its text). Tokens a stop string
  // cut off are there too: their offset is at or past the reply's end.
  int logprobs = -1;
  std::vector<ReplyLogprob>* logprobs_out = nullptr;
};

struct GenerationResult {
  std::string text;  // prefix included, stop string cut off
  FinishReason finish = FinishReason::length;
  int n_tokens = 0;
  bool template_stop = false;  // ended by one of `template_stops` (its text was generated)
  std::string stop_string;     // the caller's stop string that ended it ("" when none did)
};

GenerationResult run_generation(StreamSession& stream, const ReplyOptions& options,
                                std::span<const std::string> template_stops);

}  // namespace channel
