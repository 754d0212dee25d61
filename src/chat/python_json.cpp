// Python-compatible JSON writer (see python_json.h).
#include "chat/python_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace channel {
namespace {

void write_string(std::string& out, const std::string& s) {
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;  // ensure_ascii=False: UTF-8 passes through
        }
    }
  }
  out += '"';
}

// Python's float repr: the shortest digits that round-trip, fixed notation for decimal
// exponents in [-4, 16), otherwise d.ddde+XX with at least two exponent digits.
void write_float(std::string& out, double v) {
  if (std::isnan(v)) { out += "NaN"; return; }
  if (std::isinf(v)) { out += v > 0 ? "Infinity" : "-Infinity"; return; }
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  std::string sign;
  if (!sci.empty() && sci[0] == '-') { sign = "-"; sci.erase(0, 1); }
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  const int exp10 = std::stoi(sci.substr(e + 1));
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int n = static_cast<int>(digits.size());
  out += sign;
  if (exp10 >= -4 && exp10 < 16) {
    if (exp10 >= 0) {
      if (n <= exp10 + 1) {
        out += digits + std::string(static_cast<size_t>(exp10 + 1 - n), '0') + ".0";
      } else {
        out += digits.substr(0, static_cast<size_t>(exp10 + 1)) + "." +
               digits.substr(static_cast<size_t>(exp10 + 1));
      }
    } else {
      out += "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
    }
  } else {
    out += digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  }
}

void write(std::string& out, const OrderedJson& v, int indent, int depth) {
  const auto newline = [&](int d) {
    out += '\n';
    out.append(static_cast<size_t>(indent * d), ' ');
  };
  switch (v.type()) {
    case OrderedJson::value_t::null: out += "null"; break;
    case OrderedJson::value_t::boolean: out += v.get<bool>() ? "true" : "false"; break;
    case OrderedJson::value_t::number_integer: out += std::to_string(v.get<int64_t>()); break;
    case OrderedJson::value_t::number_unsigned: out += std::to_string(v.get<uint64_t>()); break;
    case OrderedJson::value_t::number_float: write_float(out, v.get<double>()); break;
    case OrderedJson::value_t::string: write_string(out, v.get_ref<const std::string&>()); break;
    case OrderedJson::value_t::array: {
      if (v.empty()) { out += "[]"; break; }
      out += '[';
      bool first = true;
      for (const auto& item : v) {
        if (!first) out += indent >= 0 ? "," : ", ";
        first = false;
        if (indent >= 0) newline(depth + 1);
        write(out, item, indent, depth + 1);
      }
      if (indent >= 0) newline(depth);
      out += ']';
      break;
    }
    case OrderedJson::value_t::object: {
      if (v.empty()) { out += "{}"; break; }
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += indent >= 0 ? "," : ", ";
        first = false;
        if (indent >= 0) newline(depth + 1);
        write_string(out, it.key());
        out += ": ";
        write(out, it.value(), indent, depth + 1);
      }
      if (indent >= 0) newline(depth);
      out += '}';
      break;
    }
    default: out += "null"; break;  // binary / discarded values never come from parsing
  }
}

}  // namespace

std::string python_json_dumps(const OrderedJson& value, int indent) {
  std::string out;
  write(out, value, indent, 0);
  return out;
}

}  // namespace channel
