// JSON object prefix checking (json_prefix.h).
#include "chat/json_prefix.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>

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

// Schema keywords (json_prefix.h). A missing keyword, or a schema that is not an object,
// constrains nothing.
const OrderedJson* keyword(const OrderedJson* s, const char* name) {
  if (!s || !s->is_object()) return nullptr;
  const auto it = s->find(name);
  return it == s->end() ? nullptr : &*it;
}

// Whether `type` is one the schema's `type` names (any, without the keyword).
bool has_type(const OrderedJson* s, std::string_view type) {
  const OrderedJson* t = keyword(s, "type");
  if (!t) return true;
  if (t->is_string()) return t->get_ref<const std::string&>() == type;
  if (t->is_array())
    for (const OrderedJson& x : *t)
      if (x.is_string() && x.get_ref<const std::string&>() == type) return true;
  return !t->is_string() && !t->is_array();  // a malformed keyword constrains nothing
}

// The values `enum` (or `const`) allows, or null when the schema has neither.
const OrderedJson* enum_of(const OrderedJson* s, OrderedJson& scratch) {
  if (const OrderedJson* e = keyword(s, "enum"); e && e->is_array()) return e;
  if (const OrderedJson* c = keyword(s, "const")) {
    scratch = OrderedJson::array({*c});
    return &scratch;
  }
  return nullptr;
}

// Does the enum hold a value of this JSON kind?
template <typename Pred>
bool enum_has(const OrderedJson* e, Pred pred) {
  for (const OrderedJson& x : *e)
    if (pred(x)) return true;
  return false;
}

bool closed_object(const OrderedJson* s) {
  const OrderedJson* a = keyword(s, "additionalProperties");
  return a && a->is_boolean() && !a->get<bool>();
}

// The schema of member `key` of an object of schema s (null: anything).
const OrderedJson* member_of(const OrderedJson* s, const std::string& key) {
  if (const OrderedJson* p = keyword(s, "properties"); p && p->is_object()) {
    const auto it = p->find(key);
    if (it != p->end()) return &*it;
  }
  const OrderedJson* a = keyword(s, "additionalProperties");
  return a && a->is_object() ? a : nullptr;
}

const OrderedJson* items_of(const OrderedJson* s) {
  const OrderedJson* i = keyword(s, "items");
  return i && i->is_object() ? i : nullptr;
}

// The schema a `$ref` names: a JSON pointer into the schema itself ("#", "#/$defs/Name");
// null when it names nothing there (only local references are read).
const OrderedJson* ref_target(const OrderedJson* root, const OrderedJson& ref) {
  if (!root || !ref.is_string()) return nullptr;
  const std::string& r = ref.get_ref<const std::string&>();
  if (r == "#") return root;
  if (r.size() < 2 || r[0] != '#' || r[1] != '/') return nullptr;
  try {
    const OrderedJson::json_pointer ptr(r.substr(1));
    return root->contains(ptr) ? &root->at(ptr) : nullptr;
  } catch (const OrderedJson::exception&) {
    return nullptr;
  }
}

// `s` with its references followed: `$ref`, and an `allOf` of one schema (how generators
// attach a description to a reference). Null (anything) when a reference leads nowhere or
// only to more references.
const OrderedJson* resolve(const OrderedJson* root, const OrderedJson* s) {
  for (int hops = 0; hops < 64; ++hops) {
    if (!s || !s->is_object()) return s;
    if (const auto r = s->find("$ref"); r != s->end()) {
      s = ref_target(root, *r);
    } else if (const auto a = s->find("allOf"); a != s->end() && a->is_array() && a->size() == 1) {
      s = &(*a)[0];
    } else {
      return s;
    }
  }
  return nullptr;
}

// Keywords that describe a schema without constraining its values.
bool annotation(const std::string& k) {
  for (const char* a : {"title", "description", "default", "examples", "$comment", "$schema", "$id",
                        "$defs", "definitions", "deprecated", "readOnly", "writeOnly",
                        "discriminator"})  // OpenAPI's (pydantic's tagged unions): a hint
    if (k == a) return true;
  return false;
}

// The branches of `anyOf` / `oneOf`, when `s` says nothing else that constrains (with other
// keywords beside them the branches are not enforced: json_prefix.h); null otherwise.
const OrderedJson* branches_of(const OrderedJson* s) {
  if (!s || !s->is_object()) return nullptr;
  const OrderedJson* out = nullptr;
  for (const auto& [k, v] : s->items()) {
    if ((k == "anyOf" || k == "oneOf") && v.is_array() && !v.empty() && !out) {
      out = &v;
    } else if (!annotation(k)) {
      return nullptr;
    }
  }
  return out;
}

// A number schema's bounds: minimum / maximum, exclusiveMinimum / exclusiveMaximum (as
// numbers, or draft 4's booleans beside minimum / maximum).
struct Bounds {
  double lo = -HUGE_VAL, hi = HUGE_VAL;
  bool lo_open = false, hi_open = false;
  bool any() const { return lo != -HUGE_VAL || hi != HUGE_VAL; }
};

Bounds bounds_of(const OrderedJson* s) {
  Bounds b;
  const auto num = [&](const char* k) {
    const OrderedJson* v = keyword(s, k);
    return v && v->is_number() ? v : nullptr;
  };
  const auto flag = [&](const char* k) {
    const OrderedJson* v = keyword(s, k);
    return v && v->is_boolean() && v->get<bool>();
  };
  if (const OrderedJson* v = num("minimum")) {
    b.lo = v->get<double>();
    b.lo_open = flag("exclusiveMinimum");
  }
  if (const OrderedJson* v = num("maximum")) {
    b.hi = v->get<double>();
    b.hi_open = flag("exclusiveMaximum");
  }
  if (const OrderedJson* v = num("exclusiveMinimum"); v && v->get<double>() >= b.lo) {
    b.lo = v->get<double>();
    b.lo_open = true;
  }
  if (const OrderedJson* v = num("exclusiveMaximum"); v && v->get<double>() <= b.hi) {
    b.hi = v->get<double>();
    b.hi_open = true;
  }
  return b;
}

bool within(double v, const Bounds& b) {
  return (b.lo_open ? v > b.lo : v >= b.lo) && (b.hi_open ? v < b.hi : v <= b.hi);
}

// Can the number being written (`text`, no exponent: bounds refuse one) still end within the
// bounds? Its digits so far leave the magnitude in ranges: "12" is 12 itself or 120-129,
// 1200-1299, ... (an integer), or [12, 13], [120, 130], ... (a number, with a fraction);
// "1.5" is [1.5, 1.6]; "0" cannot grow; "-" is any negative. One range must meet the bounds.
bool can_end_within(const std::string& text, bool integer, const Bounds& b) {
  const bool neg = !text.empty() && text[0] == '-';
  const std::string body = text.substr(neg ? 1 : 0);
  const size_t dot = body.find('.');
  const std::string digits = body.substr(0, dot);
  const auto meets = [&](double lo, double hi) {  // magnitudes [lo, hi], signed, against b
    const double a = neg ? -hi : lo, z = neg ? -lo : hi;
    return (b.hi_open ? a < b.hi : a <= b.hi) && (b.lo_open ? z > b.lo : z >= b.lo);
  };
  if (digits.empty()) return !neg || meets(0, HUGE_VAL);
  if (dot != std::string::npos) {
    const double v = std::strtod(body.c_str(), nullptr);
    const size_t frac = body.size() - dot - 1;
    return meets(v, v + std::pow(10.0, -static_cast<double>(frac)));
  }
  const double one = integer ? 0.0 : 1.0;  // a number may still take a fraction
  if (digits == "0") return meets(0, one);
  const double d = std::strtod(digits.c_str(), nullptr);
  const double far = std::max(std::fabs(b.lo), std::fabs(b.hi));
  for (double scale = 1; scale < 1e300; scale *= 10) {
    const double lo = d * scale, hi = (d + 1) * scale - (integer ? 1 : 0);
    if (meets(lo, hi)) return true;
    if (lo > far) break;  // only larger from here
  }
  return false;
}

// A string schema's minLength / maxLength in characters (0 / no bound without them).
size_t length_bound(const OrderedJson* s, const char* name, size_t none) {
  const OrderedJson* b = keyword(s, name);
  return b && b->is_number_unsigned() ? b->get<size_t>() : none;
}

// Can a value of schema `s` (references followed, no branches) start with `c`?
bool starts_as(const OrderedJson* s, char c) {
  OrderedJson scratch;
  const OrderedJson* e = enum_of(s, scratch);
  if (c == '{' || c == '[') {
    const bool object = c == '{';
    return has_type(s, object ? "object" : "array") &&
           (!e || enum_has(e, [&](const OrderedJson& x) {
             return object ? x.is_object() : x.is_array();
           }));
  }
  if (c == '"')
    return has_type(s, "string") &&
           length_bound(s, "minLength", 0) <= length_bound(s, "maxLength", SIZE_MAX) &&
           (!e || enum_has(e, [](const OrderedJson& x) { return x.is_string(); }));
  if (c == '-' || (c >= '0' && c <= '9')) {
    const bool number = has_type(s, "number");
    if (!number && !has_type(s, "integer")) return false;
    if (const Bounds b = bounds_of(s); b.any() && !can_end_within(std::string(1, c), !number, b))
      return false;
    return !e ||
           enum_has(e, [&](const OrderedJson& x) { return x.is_number() && x.dump()[0] == c; });
  }
  const bool boolean = c == 't' || c == 'f';
  if (!has_type(s, boolean ? "boolean" : "null")) return false;
  return !e || enum_has(e, [&](const OrderedJson& x) {
    return boolean ? x.is_boolean() && x.get<bool>() == (c == 't') : x.is_null();
  });
}

// The schema a value starting with `c` is read under (`out`), or false when the schema allows
// no such value. Of `anyOf` / `oneOf` branches it is the first that allows it: a value one
// branch accepts satisfies anyOf, and oneOf's branches are meant not to overlap.
bool schema_for_start(const OrderedJson* root, const OrderedJson* s, char c, int depth,
                      const OrderedJson*& out) {
  s = resolve(root, s);
  if (const OrderedJson* branches = branches_of(s); branches && depth < 16) {
    for (const OrderedJson& b : *branches)
      if (schema_for_start(root, &b, c, depth + 1, out)) return true;
    return false;
  }
  out = s;
  return starts_as(s, c);
}

// A number under an enum is written as the enum writes it: `text` is (with `whole`: is all
// of) one of its numbers.
bool enum_number(const OrderedJson* s, const std::string& text, bool whole) {
  OrderedJson scratch;
  const OrderedJson* e = enum_of(s, scratch);
  return !e || enum_has(e, [&](const OrderedJson& x) {
    if (!x.is_number()) return false;
    const std::string d = x.dump();
    return whole ? d == text : d.compare(0, text.size(), text) == 0;
  });
}

// An array schema's minItems / maxItems (`none` without it).
size_t item_bound(const OrderedJson* s, const char* name, size_t none) {
  const OrderedJson* b = keyword(s, name);
  return b && b->is_number_unsigned() ? b->get<size_t>() : none;
}

// A string a constrained string must spell out: no escapes there (json_prefix.h).
bool plain_string(const std::string& s) {
  for (const char c : s)
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) return false;
  return true;
}

std::string shape_problem(const OrderedJson& root, const OrderedJson& s, const std::string& at,
                          int depth) {
  if (depth > 64) return at + ": nested more than 64 levels";
  if (!s.is_object()) return s.is_boolean() ? "" : at + ": a schema must be an object";
  if (const auto r = s.find("$ref"); r != s.end()) {
    if (!ref_target(&root, *r))
      return at + ".$ref: names nothing in this schema (only \"#/...\" references are read)";
    if (!resolve(&root, &s)) return at + ".$ref: references that lead only to references";
  }
  for (const char* k : {"anyOf", "oneOf", "allOf"})
    if (const auto b = s.find(k); b != s.end()) {
      if (!b->is_array() || b->empty())
        return at + "." + k + ": must be a non-empty list of schemas";
      for (size_t i = 0; i < b->size(); ++i) {
        const std::string problem =
            shape_problem(root, (*b)[i], at + "." + k + "[" + std::to_string(i) + "]", depth + 1);
        if (!problem.empty()) return problem;
      }
    }
  for (const char* k : {"$defs", "definitions"})
    if (const auto d = s.find(k); d != s.end()) {
      if (!d->is_object()) return at + "." + k + ": must be an object of schemas";
      for (const auto& [name, sub] : d->items()) {
        const std::string problem = shape_problem(root, sub, at + "." + k + "." + name, depth + 1);
        if (!problem.empty()) return problem;
      }
    }
  for (const char* k : {"minItems", "maxItems"})
    if (const auto n = s.find(k); n != s.end() && !n->is_number_unsigned())
      return at + "." + k + ": must be a non-negative integer";
  if (item_bound(&s, "minItems", 0) > item_bound(&s, "maxItems", SIZE_MAX))
    return at + ": minItems is above maxItems";
  for (const char* k : {"minLength", "maxLength"})
    if (const auto n = s.find(k); n != s.end() && !n->is_number_unsigned())
      return at + "." + k + ": must be a non-negative integer";
  if (length_bound(&s, "minLength", 0) > length_bound(&s, "maxLength", SIZE_MAX))
    return at + ": minLength is above maxLength";
  for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
    if (const auto n = s.find(k);
        n != s.end() && !n->is_number() && !(n->is_boolean() && k[0] == 'e'))
      return at + "." + k + ": must be a number";
  if (const Bounds b = bounds_of(&s); b.lo > b.hi || (b.lo == b.hi && (b.lo_open || b.hi_open)))
    return at + ": no number lies within its minimum and maximum";
  if (const auto t = s.find("type"); t != s.end()) {
    bool ok = t->is_string();
    if (t->is_array()) {
      ok = !t->empty();
      for (const OrderedJson& x : *t) ok = ok && x.is_string();
    }
    if (!ok) return at + ".type: a type name or a list of them";
  }
  if (const auto p = s.find("properties"); p != s.end()) {
    if (!p->is_object()) return at + ".properties: must be an object";
    for (const auto& [name, sub] : p->items()) {
      if (!plain_string(name))
        return at + ".properties: a name with a quote, a backslash or a control character";
      const std::string problem = shape_problem(root, sub, at + ".properties." + name, depth + 1);
      if (!problem.empty()) return problem;
    }
  }
  if (const auto r = s.find("required"); r != s.end()) {
    bool ok = r->is_array();
    if (ok)
      for (const OrderedJson& x : *r) ok = ok && x.is_string();
    if (!ok) return at + ".required: must be a list of names";
    // A closed object that requires a key it does not name could never end.
    const auto a = s.find("additionalProperties");
    const auto p = s.find("properties");
    if (a != s.end() && a->is_boolean() && !a->get<bool>())
      for (const OrderedJson& x : *r)
        if (p == s.end() || !p->is_object() || !p->contains(x.get<std::string>()))
          return at + ".required: '" + x.get<std::string>() + "' is not one of its properties";
  }
  if (const auto a = s.find("additionalProperties"); a != s.end()) {
    if (!a->is_boolean() && !a->is_object())
      return at + ".additionalProperties: a boolean or a schema";
    if (a->is_object()) {
      const std::string problem = shape_problem(root, *a, at + ".additionalProperties", depth + 1);
      if (!problem.empty()) return problem;
    }
  }
  if (const auto i = s.find("items"); i != s.end() && i->is_object()) {
    const std::string problem = shape_problem(root, *i, at + ".items", depth + 1);
    if (!problem.empty()) return problem;
  }
  if (const auto e = s.find("enum"); e != s.end() && (!e->is_array() || e->empty()))
    return at + ".enum: must be a non-empty list";
  for (const char* k : {"enum", "const"})
    if (const auto e = s.find(k); e != s.end())
      for (const OrderedJson& x :
           e->is_array() && std::string_view(k) == "enum" ? *e : OrderedJson::array({*e}))
        if (x.is_string() && !plain_string(x.get<std::string>()))
          return at + "." + k + ": a string with a quote, a backslash or a control character";
  return "";
}

}  // namespace

std::string json_schema_constraint_problem(const OrderedJson& schema) {
  if (!schema.is_object()) return "the schema must be a JSON object";
  const std::string problem = shape_problem(schema, schema, "schema", 0);
  if (!problem.empty()) return problem;
  const OrderedJson* root = resolve(&schema, &schema);  // the root may be a reference
  if (!root || !root->is_object()) return "the schema's root must be {\"type\": \"object\", ...}";
  const auto t = root->find("type");
  if (t == root->end() || !t->is_string() || t->get_ref<const std::string&>() != "object")
    return "the schema's root must be {\"type\": \"object\", ...}";
  return "";
}

OrderedJson with_closed_objects(OrderedJson schema) {
  // Iterative (a stack of nodes still to visit), so a deep schema cannot exhaust the stack.
  std::vector<OrderedJson*> todo{&schema};
  while (!todo.empty()) {
    OrderedJson* s = todo.back();
    todo.pop_back();
    if (!s->is_object()) continue;
    const auto p = s->find("properties");
    if (p != s->end() && p->is_object()) {
      if (!s->contains("additionalProperties")) (*s)["additionalProperties"] = false;
      for (auto& [name, sub] : s->find("properties")->items()) todo.push_back(&sub);
    }
    if (const auto i = s->find("items"); i != s->end()) todo.push_back(&*i);
    if (const auto a = s->find("additionalProperties"); a != s->end()) todo.push_back(&*a);
    for (const char* k : {"anyOf", "oneOf", "$defs", "definitions"})
      if (const auto b = s->find(k); b != s->end())
        for (auto& sub : *b) todo.push_back(&sub);
    if (const auto a = s->find("allOf"); a != s->end() && a->is_array() && a->size() == 1)
      todo.push_back(&(*a)[0]);  // several are merged by validators: closing each would clash
  }
  return schema;
}

bool JsonPrefix::string_choices(std::vector<std::string>& out) const {
  out.clear();
  if (string_is_key_) {
    const Frame& f = frames_.back();
    if (!closed_object(f.schema)) return false;
    if (const OrderedJson* p = keyword(f.schema, "properties"); p && p->is_object())
      for (const auto& [name, sub] : p->items())
        if (std::find(f.seen.begin(), f.seen.end(), name) == f.seen.end()) out.push_back(name);
    return true;
  }
  OrderedJson scratch;
  const OrderedJson* e = enum_of(value_schema_, scratch);
  if (!e) return false;
  for (const OrderedJson& x : *e)
    if (x.is_string()) out.push_back(x.get<std::string>());
  return true;
}

// A character inside a string (not its closing quote): a constrained string must stay a
// prefix of one of its choices; a key is kept to find its value's schema.
bool JsonPrefix::string_char(char c, bool starts_character) {
  if (!string_is_key_ && starts_character &&
      ++string_chars_ > length_bound(value_schema_, "maxLength", SIZE_MAX))
    return false;  // a character over maxLength (an escape counts as one)
  std::vector<std::string> choices;
  if (!string_choices(choices)) {
    if (string_is_key_) text_ += c;
    return true;
  }
  if (c == '\\') return false;
  text_ += c;
  for (const std::string& s : choices)
    if (s.compare(0, text_.size(), text_) == 0) return true;
  return false;
}

// The first character of a value, against the schema of the value expected.
bool JsonPrefix::start_value(char c) {
  const OrderedJson* s = nullptr;
  if (!schema_for_start(root_, value_schema_, c, 0, s)) return false;
  value_schema_ = s;  // a string's or a number's enum is read from here
  if (c == '{' || c == '[') {
    frames_.push_back(Frame{s, {}, {}, 0});
    value_schema_ = c == '[' ? items_of(s) : nullptr;
  } else if (c == '"') {
    text_.clear();
    string_chars_ = 0;
  } else if (c == '-' || (c >= '0' && c <= '9')) {
    integer_ = !has_type(s, "number");
  }
  return true;
}

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
  if (schema_ && !enum_number(value_schema_, number_, true)) return false;
  if (schema_) {
    const Bounds b = bounds_of(value_schema_);
    if (b.any() && !within(std::strtod(number_.c_str(), nullptr), b)) return false;
  }
  number_.clear();
  expect_ = Expect::comma_or_end;
  return true;
}

// The closing quote of a string under a schema: a constrained one is whole; a key is noted,
// and never twice in one object (an open object's key may still grow into another).
bool JsonPrefix::end_string() {
  if (!string_is_key_ && string_chars_ < length_bound(value_schema_, "minLength", 0)) return false;
  std::vector<std::string> choices;
  if (string_choices(choices) && std::find(choices.begin(), choices.end(), text_) == choices.end())
    return false;
  if (string_is_key_) {
    const std::vector<std::string>& seen = frames_.back().seen;
    if (std::find(seen.begin(), seen.end(), text_) != seen.end()) return false;
    frames_.back().key = text_;
    frames_.back().seen.push_back(text_);
  }
  return true;
}

bool JsonPrefix::push_char(char c) {
  if (done_) return false;  // nothing follows the object
  if (in_string_) {
    const auto u = static_cast<unsigned char>(c);
    // Whether c begins a character of the string's value (not a UTF-8 continuation byte,
    // nor the rest of an escape).
    const bool starts_character = !escape_ && unicode_left_ == 0 && (u & 0xC0) != 0x80;
    if (c == '"' && !escape_ && unicode_left_ == 0) {
      if (schema_ && !end_string()) return false;
      in_string_ = false;
      expect_ = string_is_key_ ? Expect::colon : Expect::comma_or_end;
      return true;
    }
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
    } else if (u < 0x20) {
      return false;
    }
    return !schema_ || string_char(c, starts_character);
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
      if (schema_ && integer_ && (c == '.' || c == 'e' || c == 'E')) return false;
      const Bounds b = schema_ ? bounds_of(value_schema_) : Bounds{};
      if (b.any() && (c == 'e' || c == 'E')) return false;  // bounded: plain digits only
      number_ += c;
      return number_prefix(number_) && (!schema_ || enum_number(value_schema_, number_, false)) &&
             (!b.any() || can_end_within(number_, integer_, b));
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
    if (schema_) {  // an object closes once its required members are there
      const Frame& f = frames_.back();
      if (const OrderedJson* r = keyword(f.schema, "required"); open == '{' && r && r->is_array())
        for (const OrderedJson& name : *r)
          if (name.is_string() &&
              std::find(f.seen.begin(), f.seen.end(), name.get<std::string>()) == f.seen.end())
            return false;
      if (open == '[' && f.items < item_bound(f.schema, "minItems", 0)) return false;
      frames_.pop_back();
    }
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
      if (c != '{' && c != '[' && c != '"' && c != '-' &&
          !std::isdigit(static_cast<unsigned char>(c)) && c != 't' && c != 'f' && c != 'n')
        return false;
      if (schema_ && !stack_.empty() && stack_.back() == '[' &&
          ++frames_.back().items > item_bound(frames_.back().schema, "maxItems", SIZE_MAX))
        return false;
      if (schema_ && !start_value(c)) return false;
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
      } else {
        literal_ = std::string(1, c);
      }
      return true;
    case Expect::key:
    case Expect::key_or_end:
      if (expect_ == Expect::key_or_end && c == '}') return close('{');
      if (c != '"') return false;
      in_string_ = true;
      string_is_key_ = true;
      if (schema_) {  // a closed object with every key used takes no other
        text_.clear();
        std::vector<std::string> choices;
        if (string_choices(choices) && choices.empty()) {
          in_string_ = false;
          return false;
        }
      }
      return true;
    case Expect::colon:
      if (c != ':') return false;
      expect_ = Expect::value;
      if (schema_) value_schema_ = member_of(frames_.back().schema, frames_.back().key);
      return true;
    case Expect::comma_or_end:
      if (c == ',') {
        if (schema_ && stack_.back() == '{') {  // a closed object with every key used ends
          std::vector<std::string> choices;
          const bool was_key = string_is_key_;
          string_is_key_ = true;
          const bool none_left = string_choices(choices) && choices.empty();
          string_is_key_ = was_key;
          if (none_left) return false;
        }
        if (schema_ && stack_.back() == '[' &&  // an array at its maxItems ends
            frames_.back().items >= item_bound(frames_.back().schema, "maxItems", SIZE_MAX))
          return false;
        expect_ = stack_.back() == '{' ? Expect::key : Expect::value;
        if (schema_ && stack_.back() == '[') value_schema_ = items_of(frames_.back().schema);
        return true;
      }
      if (c == '}') return close('{');
      if (c == ']') return close('[');
      return false;
  }
  return false;
}

}  // namespace channel
