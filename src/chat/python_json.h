// JSON text exactly as Python's json.dumps(value, ensure_ascii=False, indent=...) writes it:
// ", " and ": " separators inline, "," and newlines with an indent, keys in insertion order,
// floats in Python's repr. Chat templates serialize tools and arguments with `tojson`, which
// Hugging Face defines as that call, so a formatter must write the same bytes.
#pragma once

#include <string>

#include "chat/chat_message.h"

namespace channel {

// indent < 0: one line (Python's indent=None).
std::string python_json_dumps(const OrderedJson& value, int indent = -1);

}  // namespace channel
