// Semantic spans: the unit of eviction. A span is a run of consecutive clocks written under
// one SpanType (a user message, one thought, a tool result, one response sentence, ...).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace channel {

enum class SpanType : uint8_t {
  system = 0,
  user = 1,
  thought = 2,
  tool_call = 3,
  tool_result = 4,
  response_sentence = 5,
  turn_end = 6,
};

inline constexpr int kSpanTypeCount = 7;

const char* span_type_name(SpanType type);
std::optional<SpanType> span_type_from_name(std::string_view name);

// Clocks [start_clock, end_clock): end is exclusive, so slot_count == end_clock - start_clock.
// Window spans live in slots slot_of(start_clock + i), i < slot_count: consecutive in ring
// order, starting at start_slot (they may wrap from the window's end back to its start).
struct SemanticSpan {
  SpanType span_type = SpanType::system;
  uint64_t start_clock = 0;
  uint64_t end_clock = 0;
  uint32_t start_slot = 0;
  uint32_t slot_count = 0;

  bool operator==(const SemanticSpan&) const = default;
};

}  // namespace channel
