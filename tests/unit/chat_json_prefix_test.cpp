// JsonPrefix: what response_format json_object (and json_schema) lets generation write.
#include <gtest/gtest.h>

#include "chat/json_prefix.h"

namespace channel {
namespace {

bool accepts(const std::string& text, bool* complete = nullptr) {
  JsonPrefix j;
  const bool ok = j.push(text);
  if (complete) *complete = j.complete();
  return ok;
}

TEST(JsonPrefix, AcceptsPrefixesOfObjects) {
  const std::string doc =
      R"({"a": [1, -2.5e+3, true, false, null, "x\"\u00e9"], "b": {"c": {}}, "d": []})";
  for (size_t n = 0; n <= doc.size(); ++n) EXPECT_TRUE(accepts(doc.substr(0, n))) << doc.substr(0, n);
  bool complete = false;
  EXPECT_TRUE(accepts(doc, &complete));
  EXPECT_TRUE(complete);
  EXPECT_TRUE(accepts(R"({"k": "v"})", &complete));
  EXPECT_TRUE(complete);
  EXPECT_TRUE(accepts(R"({"k": 12)", &complete));
  EXPECT_FALSE(complete);
}

TEST(JsonPrefix, RefusesWhatCannotBecomeAnObject) {
  for (const char* bad : {"[1]", "\"s\"", "12", "{a", "{\"a\" 1", "{\"a\": tru e", "{\"a\": 01",
                          "{\"a\": 1,}", "{\"a\": [1,]", "{\"a\": 1]", "{} x", "{\"a\": \"\\q\"",
                          "{\"a\": -}", "{\"a\": \"\n\"}", "{,", " {}", "{}\n",
                          "{\"a\":                  1}"}) {
    EXPECT_FALSE(accepts(bad)) << bad;
  }
  JsonPrefix j;
  ASSERT_TRUE(j.push("{\"a\": 1"));
  EXPECT_FALSE(j.push("x"));
  EXPECT_TRUE(j.push("}"));  // a refused push left the state as it was
  EXPECT_TRUE(j.complete());
}

// A schema's checks, character by character: every prefix of a valid object passes, the
// first character that breaks a keyword is refused (and leaves the state as it was).
const OrderedJson kPerson = OrderedJson::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "age": {"type": "integer"},
    "score": {"type": ["number", "null"]},
    "tags": {"type": "array", "items": {"type": "string"}},
    "kind": {"enum": ["cat", "cow"]},
    "home": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
             "additionalProperties": false},
    "ok": {"type": "boolean"},
    "free": {}
  },
  "required": ["name", "kind"],
  "additionalProperties": false
})");

// The longest prefix of `text` the schema lets through.
size_t accepted_prefix(const OrderedJson& schema, const std::string& text,
                       bool* complete = nullptr) {
  JsonPrefix j(&schema);
  size_t n = 0;
  while (n < text.size() && j.push(text.substr(n, 1))) ++n;
  if (complete) *complete = j.complete();
  return n;
}

TEST(JsonSchemaPrefix, AcceptsWhatTheSchemaAccepts) {
  for (const std::string doc :
       {R"({"name": "Ann", "kind": "cow"})",
        R"({"kind": "cat", "age": -12, "score": 1.5e3, "tags": ["a", "b\"c"], "name": "x\u00e9"})",
        R"({"name": "", "kind": "cow", "score": null, "home": {"city": "Oslo"}, "ok": false,
            "free": [1, {"any": "thing"}], "tags": []})"}) {
    bool complete = false;
    EXPECT_EQ(accepted_prefix(kPerson, doc, &complete), doc.size()) << doc;
    EXPECT_TRUE(complete) << doc;
  }
}

TEST(JsonSchemaPrefix, RefusesAtTheFirstCharacterThatBreaksIt) {
  // {text, how much of it passes}
  for (const auto& [text, ok] : std::vector<std::pair<std::string, std::string>>{
           {R"({"nam" )", R"({"nam)"},          // not a key of a closed object
           {R"({"xyz": 1})", R"({")"},          // no key starts with 'x'
           {R"({"name": 3)", R"({"name": )"},   // a string, not a number
           {R"({"age": 3.5)", R"({"age": 3)"},  // an integer
           {R"({"age": 1e3)", R"({"age": 1)"},
           {R"({"kind": "cax")", R"({"kind": "ca)"},           // one of the enum
           {R"({"kind": "ca")", R"({"kind": "ca)"},            // a whole one
           {R"({"kind": 1)", R"({"kind": )"},                  // an enum of strings
           {R"({"name": "x"})", R"({"name": "x")"},            // kind is required
           {R"({"name": "x", "name")", R"({"name": "x", ")"},  // each key once
           {R"({"tags": [1)", R"({"tags": [)"},                // items are strings
           {R"({"tags": {)", R"({"tags": )"},
           {R"({"score": "s")", R"({"score": )"},  // a number or null
           {R"({"score": true)", R"({"score": )"},
           {R"({"ok": null)", R"({"ok": )"},
           {R"({"home": {"city": "a", "zip": 1)", R"({"home": {"city": "a")"},  // all used
           {R"({"home": {}})", R"({"home": {)"},          // city is required inside
           {R"({"kind": "c\u0061t")", R"({"kind": "c)"},  // no escapes in an enum value
           {R"(["x"])", ""}}) {
    EXPECT_EQ(accepted_prefix(kPerson, text), ok.size()) << text;
  }
  // Every key of a closed object used: only its end may follow.
  const OrderedJson one = OrderedJson::parse(
      R"({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false})");
  JsonPrefix k(&one);
  ASSERT_TRUE(k.push(R"({"a": 1)"));
  EXPECT_FALSE(k.push(","));  // no key left to follow a comma: a dead end otherwise
  EXPECT_TRUE(k.push("}"));
  EXPECT_TRUE(k.complete());
}

TEST(JsonSchemaPrefix, OpenObjectsTakeOtherKeysWithTheirSchema) {
  const OrderedJson counts = OrderedJson::parse(
      R"({"type": "object", "properties": {"n": {"type": "string"}},
          "additionalProperties": {"type": "integer"}})");
  bool complete = false;
  const std::string good = R"({"n": "x", "apples": 3, "pears": -1})";
  EXPECT_EQ(accepted_prefix(counts, good, &complete), good.size());
  EXPECT_TRUE(complete);
  EXPECT_EQ(accepted_prefix(counts, R"({"apples": "3")"), std::string(R"({"apples": )").size());
  // A key once per object; the same letters may still grow into another key.
  const std::string twice = R"({"apples": 3, "apples")";
  EXPECT_EQ(accepted_prefix(counts, twice), twice.size() - 1);
  const std::string longer = R"({"apples": 3, "apples2": 4})";
  EXPECT_EQ(accepted_prefix(counts, longer, &complete), longer.size());
  const OrderedJson any = OrderedJson::parse(R"({"type": "object"})");
  const std::string free = R"({"x": [1, "a", {"b": null}], "y": 2.5})";
  EXPECT_EQ(accepted_prefix(any, free, &complete), free.size());
  EXPECT_TRUE(complete);
}

// What schema generators write (pydantic's model_json_schema, zod-to-json-schema): nested
// models behind local references, Optional fields as anyOf with null, enums of other kinds.
const OrderedJson kOrder = OrderedJson::parse(R"({
  "$defs": {
    "Item": {"type": "object", "title": "Item",
             "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
             "required": ["sku", "qty"], "additionalProperties": false},
    "Size": {"enum": [1, 2, 10, 2.5], "title": "Size"},
    "Node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
             "additionalProperties": false}
  },
  "type": "object",
  "properties": {
    "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "minItems": 1, "maxItems": 2},
    "note": {"anyOf": [{"type": "string", "enum": ["rush", "gift"]}, {"type": "null"}],
             "default": null, "title": "Note"},
    "size": {"allOf": [{"$ref": "#/$defs/Size"}], "description": "a size"},
    "paid": {"const": true},
    "who": {"oneOf": [{"type": "object", "properties": {"id": {"type": "integer"}},
                       "required": ["id"], "additionalProperties": false},
                      {"type": "string"}]},
    "tree": {"$ref": "#/$defs/Node"}
  },
  "required": ["items"],
  "additionalProperties": false
})");

TEST(JsonSchemaPrefix, FollowsReferencesAndBranches) {
  EXPECT_EQ(json_schema_constraint_problem(kOrder), "");
  for (const std::string doc :
       {R"({"items": [{"sku": "a", "qty": 2}]})",
        R"({"items": [{"sku": "a", "qty": 2}, {"qty": 1, "sku": "b"}], "note": "gift", "size": 10,
            "paid": true, "who": {"id": 7}, "tree": {"kids": [{"kids": []}, {}]}})",
        R"({"note": null, "size": 2.5, "who": "ann", "items": [{"sku": "", "qty": -1}]})"}) {
    bool complete = false;
    EXPECT_EQ(accepted_prefix(kOrder, doc, &complete), doc.size()) << doc;
    EXPECT_TRUE(complete) << doc;
  }
  for (const auto& [text, ok] : std::vector<std::pair<std::string, std::string>>{
           {R"({"items": [{"sku": "a"}]})", R"({"items": [{"sku": "a")"},       // Item's required
           {R"({"items": [{"sku": "a", "x")", R"({"items": [{"sku": "a", ")"},  // Item is closed
           {R"({"items": []})", R"({"items": [)"},                              // minItems 1
           {R"({"items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 1}, {)",
            R"({"items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 1})"},  // maxItems 2
           {R"({"note": "rusk")", R"({"note": "rus)"},  // the string branch's enum
           {R"({"note": 1)", R"({"note": )"},           // neither branch is a number
           {R"({"size": 3)", R"({"size": )"},           // written as the enum writes it
           {R"({"size": 25)", R"({"size": 2)"},
           {R"({"size": 2.0)", R"({"size": 2.)"},       // 2.5's prefix, but not 2.0
           {R"({"size": 1, "x")", R"({"size": 1, ")"},  // "1" is whole ("10" could follow)
           {R"({"paid": false)", R"({"paid": )"},
           {R"({"who": {"id": "7")", R"({"who": {"id": )"},  // the object branch's schema
           {R"({"who": [)", R"({"who": )"},
           {R"({"tree": {"kids": [{"kids": [{"leaf")", R"({"tree": {"kids": [{"kids": [{")"}}) {
    EXPECT_EQ(accepted_prefix(kOrder, text), ok.size()) << text;
  }
  // pydantic's tagged union: oneOf beside a discriminator (a hint) still picks a branch.
  const OrderedJson tagged = OrderedJson::parse(R"({"type": "object", "properties": {"pet":
      {"oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
       "discriminator": {"propertyName": "kind"}}}, "required": ["pet"],
      "additionalProperties": false,
      "$defs": {"Cat": {"type": "object", "properties": {"kind": {"const": "cat"}},
                        "required": ["kind"], "additionalProperties": false},
                "Dog": {"type": "object", "properties": {"kind": {"const": "dog"}},
                        "required": ["kind"], "additionalProperties": false}}})");
  EXPECT_EQ(accepted_prefix(tagged, R"({"pet": {"kind": "dog")"),
            std::string(R"({"pet": {"kind": ")").size());  // the first branch: a cat
  // A root that is a reference (zod-to-json-schema's "$ref" + "definitions").
  const OrderedJson by_ref = OrderedJson::parse(R"({"$ref": "#/definitions/A",
      "definitions": {"A": {"type": "object", "properties": {"a": {"type": "boolean"}},
                            "required": ["a"], "additionalProperties": false}}})");
  EXPECT_EQ(json_schema_constraint_problem(by_ref), "");
  bool complete = false;
  EXPECT_EQ(accepted_prefix(by_ref, R"({"a": 1)"), std::string(R"({"a": )").size());
  const std::string good = R"({"a": false})";
  EXPECT_EQ(accepted_prefix(by_ref, good, &complete), good.size());
  EXPECT_TRUE(complete);
}

TEST(JsonSchemaPrefix, NumbersStayWithinTheirBoundsAndStringsTheirLengths) {
  const OrderedJson schema = OrderedJson::parse(R"({"type": "object", "properties": {
      "stars": {"type": "integer", "minimum": 1, "maximum": 5},
      "year": {"type": "integer", "minimum": 1900, "exclusiveMaximum": 2100},
      "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
      "temp": {"type": "number", "minimum": -40.5, "maximum": 60},
      "code": {"type": "string", "minLength": 2, "maxLength": 4}},
      "additionalProperties": false})");
  EXPECT_EQ(json_schema_constraint_problem(schema), "");
  for (const std::string doc :
       {R"({"stars": 5, "year": 1999, "ratio": 0.25, "temp": -40.5, "code": "ab"})",
        R"({"stars": 1, "year": 2099, "ratio": 1, "temp": 60, "code": "\u00e9\"cd"})",
        R"({"ratio": 1.0, "temp": -3, "code": "日本語"})"}) {
    bool complete = false;
    EXPECT_EQ(accepted_prefix(schema, doc, &complete), doc.size()) << doc;
    EXPECT_TRUE(complete) << doc;
  }
  for (const auto& [text, ok] : std::vector<std::pair<std::string, std::string>>{
           {R"({"stars": 0)", R"({"stars": )"},    // below 1
           {R"({"stars": 6)", R"({"stars": )"},    // above 5
           {R"({"stars": 12)", R"({"stars": 1)"},  // 1 is fine, 12 is not
           {R"({"stars": -)", R"({"stars": )"},
           {R"({"year": 21)", R"({"year": 2)"},        // 21xx is past 2100
           {R"({"year": 2099.)", R"({"year": 2099)"},  // an integer
           {R"({"year": 19,)", R"({"year": 19)"},      // 19 is below 1900: it must go on
           {R"({"year": 3)", R"({"year": )"},
           {R"({"ratio": 0,)", R"({"ratio": 0)"},  // 0 is excluded, 0.x is not
           {R"({"ratio": 1.5)", R"({"ratio": 1.)"},
           {R"({"ratio": 2)", R"({"ratio": )"},
           {R"({"ratio": 1e-1)", R"({"ratio": 1)"},  // bounded: no exponent
           {R"({"temp": -41)", R"({"temp": -4)"},
           {R"({"temp": -40.6)", R"({"temp": -40.)"},
           {R"({"temp": 61)", R"({"temp": 6)"},
           {R"({"code": "a")", R"({"code": "a)"},         // minLength 2
           {R"({"code": "abcde")", R"({"code": "abcd)"},  // maxLength 4
           {R"({"code": "日本語です")", R"({"code": "日本語で)"}}) {
    EXPECT_EQ(accepted_prefix(schema, text), ok.size()) << text;
  }
  for (const char* bad :
       {R"({"type": "object", "properties": {"a": {"minimum": "1"}}})",
        R"({"type": "object", "properties": {"a": {"minimum": 3, "maximum": 2}}})",
        R"({"type": "object", "properties": {"a": {"exclusiveMinimum": 2, "maximum": 2}}})",
        R"({"type": "object", "properties": {"a": {"maxLength": -1}}})",
        R"({"type": "object", "properties": {"a": {"minLength": 3, "maxLength": 2}}})"})
    EXPECT_NE(json_schema_constraint_problem(OrderedJson::parse(bad)), "") << bad;
}

TEST(JsonSchemaPrefix, ReferencesThatLeadNowhereAreNamed) {
  for (const char* bad :
       {R"({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}})",
        R"({"type": "object", "properties": {"a": {"$ref": "other.json#/A"}}})",
        R"({"type": "object", "properties": {"a": {"$ref": 3}}})",
        R"({"type": "object", "properties": {"a": {"$ref": "#/$defs/B"}},
            "$defs": {"B": {"$ref": "#/$defs/B"}}})",
        R"({"type": "object", "properties": {"a": {"anyOf": []}}})",
        R"({"type": "object", "properties": {"a": {"oneOf": [{"type": 1}]}}})",
        R"({"type": "object", "$defs": []})",
        R"({"type": "object", "properties": {"a": {"minItems": -1}}})",
        R"({"type": "object", "properties": {"a": {"minItems": 3, "maxItems": 2}}})",
        R"({"$ref": "#/definitions/A", "definitions": {"A": {"type": "string"}}})"}) {
    EXPECT_NE(json_schema_constraint_problem(OrderedJson::parse(bad)), "") << bad;
  }
}

TEST(JsonSchemaPrefix, SchemasThatCannotConstrainAreNamed) {
  EXPECT_EQ(json_schema_constraint_problem(kPerson), "");
  for (const char* bad :
       {R"([1])", R"({"type": "array"})", R"({"properties": {}})",
        R"({"type": "object", "properties": []})", R"({"type": "object", "required": [1]})",
        R"({"type": "object", "properties": {"a": {"type": 3}}})",
        R"({"type": "object", "properties": {"a": {"enum": []}}})",
        R"({"type": "object", "additionalProperties": "no"})",
        R"({"type": "object", "properties": {"a": {"items": {"type": {}}}}})",
        R"({"type": "object", "properties": {"a": {}}, "required": ["b"],
            "additionalProperties": false})",
        R"({"type": "object", "properties": {"a": {"enum": ["x\"y"]}}})",
        R"({"type": "object", "properties": {"a": {"const": "back\\slash"}}})",
        R"({"type": "object", "properties": {"q\"": {}}})"}) {
    EXPECT_NE(json_schema_constraint_problem(OrderedJson::parse(bad)), "") << bad;
  }
  std::string deep = R"({"type": "object", "properties": {"a": )";
  for (int i = 0; i < 70; ++i) deep += R"({"type": "object", "properties": {"a": )";
  deep += "{}";
  for (int i = 0; i < 71; ++i) deep += "}}";
  EXPECT_NE(json_schema_constraint_problem(OrderedJson::parse(deep)), "");
}

TEST(JsonSchemaPrefix, ToolParametersAreClosedWhereTheySayNothing) {
  const OrderedJson open = OrderedJson::parse(R"({"type": "object",
      "properties": {"w": {"type": "string"},
                     "o": {"type": "object", "properties": {"x": {}}},
                     "l": {"type": "array", "items": {"properties": {"y": {}}}},
                     "f": {"type": "object", "properties": {}, "additionalProperties": true}},
      "required": ["w"]})");
  const OrderedJson closed = with_closed_objects(open);
  EXPECT_EQ(closed["additionalProperties"], false);
  EXPECT_EQ(closed["properties"]["o"]["additionalProperties"], false);
  EXPECT_EQ(closed["properties"]["l"]["items"]["additionalProperties"], false);
  EXPECT_EQ(closed["properties"]["f"]["additionalProperties"], true);        // said: kept
  EXPECT_FALSE(closed["properties"]["w"].contains("additionalProperties"));  // no properties
  const OrderedJson refs = with_closed_objects(OrderedJson::parse(R"({"type": "object",
      "properties": {"a": {"anyOf": [{"properties": {"x": {}}}, {"type": "null"}]}},
      "$defs": {"D": {"properties": {"y": {}}}}})"));
  EXPECT_EQ(refs["properties"]["a"]["anyOf"][0]["additionalProperties"], false);
  EXPECT_EQ(refs["$defs"]["D"]["additionalProperties"], false);
  // Open, a small model may write any key; closed, only the named ones.
  EXPECT_EQ(accepted_prefix(open, R"({"class": 1)"), std::string(R"({"class": 1)").size());
  EXPECT_EQ(accepted_prefix(closed, R"({"class": 1)"), std::string(R"({")").size());
  bool complete = false;
  const std::string call = R"({"w": "lamp", "o": {"x": [1]}})";
  EXPECT_EQ(accepted_prefix(closed, call, &complete), call.size());
  EXPECT_TRUE(complete);
}

}  // namespace
}  // namespace channel
