// JsonPrefix: checks, character by character, that text is a prefix of one JSON object
// (response_format json_object): generation may only take tokens that keep it so, and
// may end only once the object is complete. The object must start at once ('{' first) and
// whitespace between tokens comes in runs of at most 16, so constrained sampling cannot
// idle on blanks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace channel {

class JsonPrefix {
 public:
  // False (and the state unchanged) when `text` cannot continue a JSON object prefix.
  bool push(std::string_view text);
  bool complete() const { return done_; }

 private:
  bool push_char(char c);
  bool end_number();
  enum class Expect : uint8_t { value, key, colon, comma_or_end, key_or_end, value_or_end };
  std::vector<char> stack_;  // '{' or '['
  Expect expect_ = Expect::value;
  bool started_ = false, done_ = false;
  bool in_string_ = false, escape_ = false, string_is_key_ = false;
  int unicode_left_ = 0;
  int ws_run_ = 0;  // whitespace in a row outside strings (bounded, so output cannot stall)
  std::string number_, literal_;  // a number or true/false/null being read
};

}  // namespace channel
