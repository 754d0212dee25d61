// The state of a conversation on the ring as JSON, for GET /v1/sessions/{name} and the web
// view: tiers (anchors, window, recall), every span with its type, tier and clocks, what the
// last turn evicted, recall slots, and the memory store.
#pragma once

#include <nlohmann/json.hpp>

#include "chat/chat_session.h"

namespace channel::server {

struct SpanRecord {
  std::string type;
  uint64_t start = 0, end = 0;
  bool operator==(const SpanRecord&) const = default;
};

// `previous`: the window spans of the last state; the spans gone since are "last_evicted".
// It is replaced by the current window spans.
nlohmann::json session_state_json(const ChatSession& chat, std::vector<SpanRecord>& previous);

}  // namespace channel::server
