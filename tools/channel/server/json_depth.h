// How deep a request's JSON nests, measured without recursion. Schemas, tool arguments and
// the like are copied and printed recursively later (nlohmann's dump), so a value nested a
// million levels deep (it fits in a 1 MiB body, or in one string of it) would overflow the
// stack there: such a value is a 400 first.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "server/api_error.h"

namespace channel::server {

// The most arrays and objects a request's JSON may nest.
inline constexpr size_t kMaxJsonDepth = 128;

// 400 (naming param) when `j` (nlohmann::json or ordered_json) nests deeper than kMaxJsonDepth.
template <typename Json>
void check_json_depth(const Json& j, const std::string& what, const std::string& param = "") {
  std::vector<std::pair<const Json*, size_t>> todo{{&j, 1}};
  while (!todo.empty()) {
    const auto [v, depth] = todo.back();
    todo.pop_back();
    if (!v->is_structured()) continue;
    if (depth > kMaxJsonDepth)
      bad_request(what + " nests arrays and objects more than " + std::to_string(kMaxJsonDepth) +
                      " levels deep",
                  param);
    for (const Json& child : *v) todo.emplace_back(&child, depth + 1);
  }
}

}  // namespace channel::server
