// JSON object prefix checking (json_prefix.h).
#include "chat/json_prefix.h"

#include <cctype>

namespace channel {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Scans `s` as a JSON number (RFC 8259: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][-+]?[0-9]+)?).
// With `prefix`, true when `s` could still grow into one. A small state machine rather than
// std::regex, which GCC 12 warns about (maybe-uninitialized) in sanitizer builds.
bool scan_number(const std::string& s, bool prefix) {
  enum { start, minus, zero, int_digits, dot, frac_digits, exp_mark, exp_sign, exp_digits } st = start;
  for (const char c : s) {
    const bool digit = c >= '0' && c <= '9';
    const bool exp = c == 'e' || c == 'E';
    switch (st) {
      case start:
      case minus:
        if (c == '-' && st == start) st = minus;
        else if (c == '0') st = zero;
        else if (digit) st = int_digits;
        else return false;
        break;
      case zero:
      case int_digits:
        if (digit && st == int_digits) break;
        if (c == '.') st = dot;
        else if (exp) st = exp_mark;
        else return false;
        break;
      case dot:
        if (!digit) return false;
        st = frac_digits;
        break;
      case frac_digits:
        if (digit) break;
        if (!exp) return false;
        st = exp_mark;
        break;
      case exp_mark:
        if (c == '+' || c == '-') st = exp_sign;
        else if (digit) st = exp_digits;
        else return false;
        break;
      case exp_sign:
      case exp_digits:
        if (!digit) return false;
        st = exp_digits;
        break;
    }
  }
  return prefix || st == zero || st == int_digits || st == frac_digits || st == exp_digits;
}

// A complete JSON number.
bool valid_number(const std::string& s) { return scan_number(s, false); }

// Could `s` still grow into a JSON number?
bool number_prefix(const std::string& s) { return scan_number(s, true); }

}  // namespace

bool JsonPrefix::push(std::string_view text) {
  const JsonPrefix saved = *this;
  for (char c : text) {
    if (!push_char(c)) {
      *this = saved;
      return false;
    }
  }
  return true;
}

bool JsonPrefix::end_number() {
  if (number_.empty()) return true;
  if (!valid_number(number_)) return false;
  number_.clear();
  expect_ = Expect::comma_or_end;
  return true;
}

bool JsonPrefix::push_char(char c) {
  if (done_) return false;  // nothing follows the object
  if (in_string_) {
    const auto u = static_cast<unsigned char>(c);
    if (unicode_left_ > 0) {
      if (!std::isxdigit(u)) return false;
      --unicode_left_;
    } else if (escape_) {
      escape_ = false;
      if (c == 'u') {
        unicode_left_ = 4;
      } else if (std::string_view("\"\\/bfnrt").find(c) == std::string_view::npos) {
        return false;
      }
    } else if (c == '\\') {
      escape_ = true;
    } else if (c == '"') {
      in_string_ = false;
      expect_ = string_is_key_ ? Expect::colon : Expect::comma_or_end;
    } else if (u < 0x20) {
      return false;
    }
    return true;
  }
  if (!literal_.empty()) {
    literal_ += c;
    for (const char* word : {"true", "false", "null"}) {
      const std::string_view w(word);
      if (w == literal_) {
        literal_.clear();
        expect_ = Expect::comma_or_end;
        return true;
      }
      if (w.substr(0, literal_.size()) == literal_) return true;
    }
    return false;
  }
  if (!number_.empty()) {
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' ||
        c == '-') {
      number_ += c;
      return number_prefix(number_);
    }
    if (!end_number()) return false;
  }
  if (is_ws(c)) {
    if (!started_ || ++ws_run_ > 16) return false;
    return true;
  }
  ws_run_ = 0;
  const auto close = [&](char open) {
    if (stack_.empty() || stack_.back() != open) return false;
    stack_.pop_back();
    expect_ = Expect::comma_or_end;
    if (stack_.empty()) done_ = true;
    return true;
  };
  switch (expect_) {
    case Expect::value:
    case Expect::value_or_end:
      if (expect_ == Expect::value_or_end && c == ']') return close('[');
      if (!started_) {
        if (c != '{') return false;  // a JSON object, not any value
        started_ = true;
      }
      if (c == '{') {
        stack_.push_back('{');
        expect_ = Expect::key_or_end;
      } else if (c == '[') {
        stack_.push_back('[');
        expect_ = Expect::value_or_end;
      } else if (c == '"') {
        in_string_ = true;
        string_is_key_ = false;
      } else if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
        number_ = std::string(1, c);
      } else if (c == 't' || c == 'f' || c == 'n') {
        literal_ = std::string(1, c);
      } else {
        return false;
      }
      return true;
    case Expect::key:
    case Expect::key_or_end:
      if (expect_ == Expect::key_or_end && c == '}') return close('{');
      if (c != '"') return false;
      in_string_ = true;
      string_is_key_ = true;
      return true;
    case Expect::colon:
      if (c != ':') return false;
      expect_ = Expect::value;
      return true;
    case Expect::comma_or_end:
      if (c == ',') {
        expect_ = stack_.back() == '{' ? Expect::key : Expect::value;
        return true;
      }
      if (c == '}') return close('{');
      if (c == ']') return close('[');
      return false;
  }
  return false;
}

}  // namespace channel
