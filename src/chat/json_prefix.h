// JsonPrefix: checks, character by character, that text is a prefix of one JSON object
// (response_format json_object): generation may only take tokens that keep it so, and
// may end only once the object is complete. The object must start at once ('{' first) and
// whitespace between tokens comes in runs of at most 16, so constrained sampling cannot
// idle on blanks.
//
// With a JSON schema (response_format json_schema) the object must also be one the schema
// accepts, as far as these keywords say: `type` (one or a list; "integer" refuses a fraction
// or an exponent), `properties`, `required` (the object closes only once they are all there),
// `additionalProperties: false` (only the named keys), `additionalProperties` as a schema,
// `items`, `minItems` / `maxItems`, `minLength` / `maxLength` (characters; an escape is
// one), `minimum` / `maximum` and their exclusive forms (a bounded number takes no exponent,
// and each digit must leave a way to end within the bounds), `enum` / `const` (a string or a
// number is written as one
// of them is; true, false or null is one of them; an object or an array only of that kind),
// local `$ref`s ("#/$defs/Name", "#/definitions/Name", "#"), an `allOf` of one schema, and
// `anyOf` / `oneOf`: a value follows the first branch that allows its first character
// (`{`, `[`, `"`, a digit, t/f/n), so a union of two object shapes writes the first. No
// object takes a key twice. Other keywords (`pattern`, `format`, `multipleOf`, an `allOf` of
// several, branches beside other constraints, ...) are not enforced: their values
// may be anything the keywords above allow. Constrained strings (closed keys, enum values)
// take no escapes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_message.h"

namespace channel {

class JsonPrefix {
 public:
  JsonPrefix() = default;
  // The schema must outlive this (and every copy); null: any object.
  explicit JsonPrefix(const OrderedJson* schema)
      : root_(schema), value_schema_(schema), schema_(schema != nullptr) {}

  // False (and the state unchanged) when `text` cannot continue a JSON object prefix.
  bool push(std::string_view text);
  bool complete() const { return done_; }

 private:
  // A container being read: its schema (null: anything), for an object the keys so far and
  // the key whose value comes next, for an array how many items it has begun.
  struct Frame {
    const OrderedJson* schema = nullptr;
    std::vector<std::string> seen;
    std::string key;
    size_t items = 0;
  };
  bool push_char(char c);
  bool end_number();
  bool start_value(char c);
  bool string_char(char c, bool starts_character);
  bool end_string();
  // The strings a string being read must be one of (a closed object's unused keys, an
  // enum); false when it is free.
  bool string_choices(std::vector<std::string>& out) const;
  std::vector<Frame> frames_;                  // parallel to stack_
  const OrderedJson* root_ = nullptr;          // where `$ref`s point
  const OrderedJson* value_schema_ = nullptr;  // the next value's (null: anything)
  std::string text_;                           // the string being read, as written
  size_t string_chars_ = 0;                    // characters of the value string being read
  bool integer_ = false;                       // the number being read must be an integer
  bool schema_ = false;                        // constructed with a schema
  enum class Expect : uint8_t { value, key, colon, comma_or_end, key_or_end, value_or_end };
  std::vector<char> stack_;  // '{' or '['
  Expect expect_ = Expect::value;
  bool started_ = false, done_ = false;
  bool in_string_ = false, escape_ = false, string_is_key_ = false;
  int unicode_left_ = 0;
  int ws_run_ = 0;  // whitespace in a row outside strings (bounded, so output cannot stall)
  std::string number_, literal_;  // a number or true/false/null being read
};

// A 400-style reason why `schema` cannot constrain a reply (its root is not an object
// schema, a keyword has the wrong shape), or "" when it can.
std::string json_schema_constraint_problem(const OrderedJson& schema);

// `schema` with every object schema that names properties and says nothing of others closed
// (additionalProperties: false), as strict function calling reads a tool's parameters: a
// call's arguments are its signature, and an open object lets a small model write other keys
// forever instead of the required ones.
OrderedJson with_closed_objects(OrderedJson schema);

}  // namespace channel
