// Semantic spans: names of the span types.
#include "kv/span.h"

namespace channel {

namespace {
constexpr const char* kNames[kSpanTypeCount] = {
    "system", "user", "thought", "tool_call", "tool_result", "response_sentence", "turn_end"};
}

const char* span_type_name(SpanType type) {
  const auto i = static_cast<unsigned>(type);
  return i < kSpanTypeCount ? kNames[i] : "?";
}

std::optional<SpanType> span_type_from_name(std::string_view name) {
  for (int i = 0; i < kSpanTypeCount; ++i)
    if (name == kNames[i]) return static_cast<SpanType>(i);
  return std::nullopt;
}

}  // namespace channel
