// The pre-tokenizer split cases: each text and the words llama.cpp's regex splitter made of
// it (a table of data, produced by llama.cpp; tokenizer_pretokenizer_test.cpp checks them).
#pragma once

#include <string>
#include <vector>

#include "tokenizer/pre_tokenizer.h"

namespace channel::test {

struct SplitCase {
  PreTokenizer kind;
  std::string text;
  std::vector<std::string> words;
};

inline const SplitCase kCases[] = {
    {PreTokenizer::gpt2, "Hello world", {"Hello", " world"}},
    {PreTokenizer::gpt2, " Hello  world ", {" Hello", " ", " world", " "}},
    {PreTokenizer::gpt2,
     "I'm you're HE'LL they've we'D it's",
     {"I", "'m", " you", "'re", " HE", "'", "LL", " they", "'ve", " we", "'", "D", " it", "'s"}},
    {PreTokenizer::gpt2, "don't'S", {"don", "'t", "'", "S"}},
    {PreTokenizer::gpt2, "3.14159 and 1234567", {"3", ".", "14159", " and", " 1234567"}},
    {PreTokenizer::gpt2, "a1b22c333d4444", {"a", "1", "b", "22", "c", "333", "d", "4444"}},
    {PreTokenizer::gpt2, "   leading", {"  ", " leading"}},
    {PreTokenizer::gpt2, "trailing   ", {"trailing", "   "}},
    {PreTokenizer::gpt2,
     "line one\nline two\r\n\r\nend",
     {"line", " one", "\n", "line", " two", "\r\n\r", "\n", "end"}},
    {PreTokenizer::gpt2, "x \t \n y", {"x", " \t \n", " y"}},
    {PreTokenizer::gpt2, "!!!???...,,, $+<=>^~|`_", {"!!!???...,,,", " $+<=>^~|`_"}},
    {PreTokenizer::gpt2,
     "(hi) [there] {you}",
     {"(", "hi", ")", " [", "there", "]", " {", "you", "}"}},
    {PreTokenizer::gpt2,
     "Caf\xC3"
     "\xA9"
     " na\xC3"
     "\xAF"
     "ve",
     {"Caf\xC3"
      "\xA9"
      "",
      " na\xC3"
      "\xAF"
      "ve"}},
    {PreTokenizer::gpt2,
     "\xE6"
     "\x97"
     "\xA5"
     "\xE6"
     "\x9C"
     "\xAC"
     "\xE8"
     "\xAA"
     "\x9E"
     "\xE3"
     "\x81"
     "\xAE"
     "\xE3"
     "\x83"
     "\x86"
     "\xE3"
     "\x82"
     "\xAD"
     "\xE3"
     "\x82"
     "\xB9"
     "\xE3"
     "\x83"
     "\x88"
     "",
     {"\xE6"
      "\x97"
      "\xA5"
      "\xE6"
      "\x9C"
      "\xAC"
      "\xE8"
      "\xAA"
      "\x9E"
      "\xE3"
      "\x81"
      "\xAE"
      "\xE3"
      "\x83"
      "\x86"
      "\xE3"
      "\x82"
      "\xAD"
      "\xE3"
      "\x82"
      "\xB9"
      "\xE3"
      "\x83"
      "\x88"
      ""}},
    {PreTokenizer::gpt2,
     "\xD9"
     "\xA3"
     "\xD9"
     "\xA4"
     " \xE2"
     "\x85"
     "\xAB"
     "",
     {"\xD9"
      "\xA3"
      "\xD9"
      "\xA4"
      "",
      " \xE2"
      "\x85"
      "\xAB"
      ""}},
    {PreTokenizer::gpt2,
     "a\xC2"
     "\xA0"
     "b\xE3"
     "\x80"
     "\x80"
     "c",
     {"a",
      "\xC2"
      "\xA0"
      "",
      "b",
      "\xE3"
      "\x80"
      "\x80"
      "",
      "c"}},
    {PreTokenizer::gpt2,
     "e\xCC"
     "\x81"
     "t\xC3"
     "\xA9"
     "",
     {"e",
      "\xCC"
      "\x81"
      "",
      "t\xC3"
      "\xA9"
      ""}},
    {PreTokenizer::gpt2,
     "\xF0"
     "\x9F"
     "\x98"
     "\x80"
     "\xF0"
     "\x9F"
     "\x91"
     "\x8D"
     "\xF0"
     "\x9F"
     "\x8F"
     "\xBD"
     " ok",
     {"\xF0"
      "\x9F"
      "\x98"
      "\x80"
      "\xF0"
      "\x9F"
      "\x91"
      "\x8D"
      "\xF0"
      "\x9F"
      "\x8F"
      "\xBD"
      "",
      " ok"}},
    {PreTokenizer::gpt2,
     "bad\xFF"
     "byte",
     {"bad",
      "\xEF"
      "\xBF"
      "\xBD"
      "",
      "byte"}},
    {PreTokenizer::gpt2, "\t\tindent", {"\t", "\t", "indent"}},
    {PreTokenizer::gpt2, "a\n\n\n", {"a", "\n\n\n"}},
    {PreTokenizer::gpt2, "  \n  x", {"  \n ", " x"}},
    {PreTokenizer::gpt2, "--help=yes", {"--", "help", "=", "yes"}},
    {PreTokenizer::gpt2, "$100 + 50% = ?", {"$", "100", " +", " 50", "%", " =", " ?"}},
    {PreTokenizer::gpt2, "#include <stdio.h>", {"#", "include", " <", "stdio", ".", "h", ">"}},
    {PreTokenizer::gpt2, "    return 0;", {"   ", " return", " 0", ";"}},
    {PreTokenizer::llama3, "Hello world", {"Hello", " world"}},
    {PreTokenizer::llama3, " Hello  world ", {" Hello", " ", " world", " "}},
    {PreTokenizer::llama3,
     "I'm you're HE'LL they've we'D it's",
     {"I", "'m", " you", "'re", " HE", "'LL", " they", "'ve", " we", "'D", " it", "'s"}},
    {PreTokenizer::llama3, "don't'S", {"don", "'t", "'S"}},
    {PreTokenizer::llama3,
     "3.14159 and 1234567",
     {"3", ".", "141", "59", " and", " ", "123", "456", "7"}},
    {PreTokenizer::llama3, "a1b22c333d4444", {"a", "1", "b", "22", "c", "333", "d", "444", "4"}},
    {PreTokenizer::llama3, "   leading", {"  ", " leading"}},
    {PreTokenizer::llama3, "trailing   ", {"trailing", "   "}},
    {PreTokenizer::llama3,
     "line one\nline two\r\n\r\nend",
     {"line", " one", "\n", "line", " two", "\r\n\r\n", "end"}},
    {PreTokenizer::llama3, "x \t \n y", {"x", " \t \n", " y"}},
    {PreTokenizer::llama3, "!!!???...,,, $+<=>^~|`_", {"!!!???...,,,", " $+<=>^~|`_"}},
    {PreTokenizer::llama3,
     "(hi) [there] {you}",
     {"(hi", ")", " [", "there", "]", " {", "you", "}"}},
    {PreTokenizer::llama3,
     "Caf\xC3"
     "\xA9"
     " na\xC3"
     "\xAF"
     "ve",
     {"Caf\xC3"
      "\xA9"
      "",
      " na\xC3"
      "\xAF"
      "ve"}},
    {PreTokenizer::llama3,
     "\xE6"
     "\x97"
     "\xA5"
     "\xE6"
     "\x9C"
     "\xAC"
     "\xE8"
     "\xAA"
     "\x9E"
     "\xE3"
     "\x81"
     "\xAE"
     "\xE3"
     "\x83"
     "\x86"
     "\xE3"
     "\x82"
     "\xAD"
     "\xE3"
     "\x82"
     "\xB9"
     "\xE3"
     "\x83"
     "\x88"
     "",
     {"\xE6"
      "\x97"
      "\xA5"
      "\xE6"
      "\x9C"
      "\xAC"
      "\xE8"
      "\xAA"
      "\x9E"
      "\xE3"
      "\x81"
      "\xAE"
      "\xE3"
      "\x83"
      "\x86"
      "\xE3"
      "\x82"
      "\xAD"
      "\xE3"
      "\x82"
      "\xB9"
      "\xE3"
      "\x83"
      "\x88"
      ""}},
    {PreTokenizer::llama3,
     "\xD9"
     "\xA3"
     "\xD9"
     "\xA4"
     " \xE2"
     "\x85"
     "\xAB"
     "",
     {"\xD9"
      "\xA3"
      "\xD9"
      "\xA4"
      "",
      " ",
      "\xE2"
      "\x85"
      "\xAB"
      ""}},
    {PreTokenizer::llama3,
     "a\xC2"
     "\xA0"
     "b\xE3"
     "\x80"
     "\x80"
     "c",
     {"a",
      "\xC2"
      "\xA0"
      "b",
      "\xE3"
      "\x80"
      "\x80"
      "c"}},
    {PreTokenizer::llama3,
     "e\xCC"
     "\x81"
     "t\xC3"
     "\xA9"
     "",
     {"e",
      "\xCC"
      "\x81"
      "t\xC3"
      "\xA9"
      ""}},
    {PreTokenizer::llama3,
     "\xF0"
     "\x9F"
     "\x98"
     "\x80"
     "\xF0"
     "\x9F"
     "\x91"
     "\x8D"
     "\xF0"
     "\x9F"
     "\x8F"
     "\xBD"
     " ok",
     {"\xF0"
      "\x9F"
      "\x98"
      "\x80"
      "\xF0"
      "\x9F"
      "\x91"
      "\x8D"
      "\xF0"
      "\x9F"
      "\x8F"
      "\xBD"
      "",
      " ok"}},
    {PreTokenizer::llama3,
     "bad\xFF"
     "byte",
     {"bad",
      "\xEF"
      "\xBF"
      "\xBD"
      "byte"}},
    {PreTokenizer::llama3, "\t\tindent", {"\t", "\tindent"}},
    {PreTokenizer::llama3, "a\n\n\n", {"a", "\n\n\n"}},
    {PreTokenizer::llama3, "  \n  x", {"  \n", " ", " x"}},
    {PreTokenizer::llama3, "--help=yes", {"--", "help", "=yes"}},
    {PreTokenizer::llama3, "$100 + 50% = ?", {"$", "100", " +", " ", "50", "%", " =", " ?"}},
    {PreTokenizer::llama3, "#include <stdio.h>", {"#include", " <", "stdio", ".h", ">"}},
    {PreTokenizer::llama3, "    return 0;", {"   ", " return", " ", "0", ";"}},
    {PreTokenizer::qwen2, "Hello world", {"Hello", " world"}},
    {PreTokenizer::qwen2, " Hello  world ", {" Hello", " ", " world", " "}},
    {PreTokenizer::qwen2,
     "I'm you're HE'LL they've we'D it's",
     {"I", "'m", " you", "'re", " HE", "'LL", " they", "'ve", " we", "'D", " it", "'s"}},
    {PreTokenizer::qwen2, "don't'S", {"don", "'t", "'S"}},
    {PreTokenizer::qwen2,
     "3.14159 and 1234567",
     {"3", ".", "1", "4", "1", "5", "9", " and", " ", "1", "2", "3", "4", "5", "6", "7"}},
    {PreTokenizer::qwen2,
     "a1b22c333d4444",
     {"a", "1", "b", "2", "2", "c", "3", "3", "3", "d", "4", "4", "4", "4"}},
    {PreTokenizer::qwen2, "   leading", {"  ", " leading"}},
    {PreTokenizer::qwen2, "trailing   ", {"trailing", "   "}},
    {PreTokenizer::qwen2,
     "line one\nline two\r\n\r\nend",
     {"line", " one", "\n", "line", " two", "\r\n\r\n", "end"}},
    {PreTokenizer::qwen2, "x \t \n y", {"x", " \t \n", " y"}},
    {PreTokenizer::qwen2, "!!!???...,,, $+<=>^~|`_", {"!!!???...,,,", " $+<=>^~|`_"}},
    {PreTokenizer::qwen2,
     "(hi) [there] {you}",
     {"(hi", ")", " [", "there", "]", " {", "you", "}"}},
    {PreTokenizer::qwen2,
     "Caf\xC3"
     "\xA9"
     " na\xC3"
     "\xAF"
     "ve",
     {"Caf\xC3"
      "\xA9"
      "",
      " na\xC3"
      "\xAF"
      "ve"}},
    {PreTokenizer::qwen2,
     "\xE6"
     "\x97"
     "\xA5"
     "\xE6"
     "\x9C"
     "\xAC"
     "\xE8"
     "\xAA"
     "\x9E"
     "\xE3"
     "\x81"
     "\xAE"
     "\xE3"
     "\x83"
     "\x86"
     "\xE3"
     "\x82"
     "\xAD"
     "\xE3"
     "\x82"
     "\xB9"
     "\xE3"
     "\x83"
     "\x88"
     "",
     {"\xE6"
      "\x97"
      "\xA5"
      "\xE6"
      "\x9C"
      "\xAC"
      "\xE8"
      "\xAA"
      "\x9E"
      "\xE3"
      "\x81"
      "\xAE"
      "\xE3"
      "\x83"
      "\x86"
      "\xE3"
      "\x82"
      "\xAD"
      "\xE3"
      "\x82"
      "\xB9"
      "\xE3"
      "\x83"
      "\x88"
      ""}},
    {PreTokenizer::qwen2,
     "\xD9"
     "\xA3"
     "\xD9"
     "\xA4"
     " \xE2"
     "\x85"
     "\xAB"
     "",
     {"\xD9"
      "\xA3"
      "",
      "\xD9"
      "\xA4"
      "",
      " ",
      "\xE2"
      "\x85"
      "\xAB"
      ""}},
    {PreTokenizer::qwen2,
     "a\xC2"
     "\xA0"
     "b\xE3"
     "\x80"
     "\x80"
     "c",
     {"a",
      "\xC2"
      "\xA0"
      "b",
      "\xE3"
      "\x80"
      "\x80"
      "c"}},
    {PreTokenizer::qwen2,
     "e\xCC"
     "\x81"
     "t\xC3"
     "\xA9"
     "",
     {"e",
      "\xCC"
      "\x81"
      "t\xC3"
      "\xA9"
      ""}},
    {PreTokenizer::qwen2,
     "\xF0"
     "\x9F"
     "\x98"
     "\x80"
     "\xF0"
     "\x9F"
     "\x91"
     "\x8D"
     "\xF0"
     "\x9F"
     "\x8F"
     "\xBD"
     " ok",
     {"\xF0"
      "\x9F"
      "\x98"
      "\x80"
      "\xF0"
      "\x9F"
      "\x91"
      "\x8D"
      "\xF0"
      "\x9F"
      "\x8F"
      "\xBD"
      "",
      " ok"}},
    {PreTokenizer::qwen2,
     "bad\xFF"
     "byte",
     {"bad",
      "\xEF"
      "\xBF"
      "\xBD"
      "byte"}},
    {PreTokenizer::qwen2, "\t\tindent", {"\t", "\tindent"}},
    {PreTokenizer::qwen2, "a\n\n\n", {"a", "\n\n\n"}},
    {PreTokenizer::qwen2, "  \n  x", {"  \n", " ", " x"}},
    {PreTokenizer::qwen2, "--help=yes", {"--", "help", "=yes"}},
    {PreTokenizer::qwen2,
     "$100 + 50% = ?",
     {"$", "1", "0", "0", " +", " ", "5", "0", "%", " =", " ?"}},
    {PreTokenizer::qwen2, "#include <stdio.h>", {"#include", " <", "stdio", ".h", ">"}},
    {PreTokenizer::qwen2, "    return 0;", {"   ", " return", " ", "0", ";"}},
    {PreTokenizer::standard, "Hello world", {"Hello", " world"}},
    {PreTokenizer::standard, " Hello  world ", {" Hello", " ", " world", " "}},
    {PreTokenizer::standard,
     "I'm you're HE'LL they've we'D it's",
     {"I", "'", "m", " you", "'", "re", " HE", "'", "LL", " they", "'", "ve", " we", "'", "D",
      " it", "'", "s"}},
    {PreTokenizer::standard, "don't'S", {"don", "'", "t", "'", "S"}},
    {PreTokenizer::standard,
     "3.14159 and 1234567",
     {"3", ".", "141", "59", " and", " ", "123", "456", "7"}},
    {PreTokenizer::standard, "a1b22c333d4444", {"a", "1", "b", "22", "c", "333", "d", "444", "4"}},
    {PreTokenizer::standard, "   leading", {"  ", " leading"}},
    {PreTokenizer::standard, "trailing   ", {"trailing", "   "}},
    {PreTokenizer::standard,
     "line one\nline two\r\n\r\nend",
     {"line", " one", "\n", "line", " two", "\r\n\r", "\n", "end"}},
    {PreTokenizer::standard, "x \t \n y", {"x", " \t \n", " y"}},
    {PreTokenizer::standard,
     "!!!???...,,, $+<=>^~|`_",
     {"!!!???...,,,", " ", "$+<=>^~|", "`", "_"}},
    {PreTokenizer::standard,
     "(hi) [there] {you}",
     {"(", "hi", ")", " ", "[", "there", "]", " ", "{", "you", "}"}},
    {PreTokenizer::standard,
     "Caf\xC3"
     "\xA9"
     " na\xC3"
     "\xAF"
     "ve",
     {"Caf\xC3"
      "\xA9"
      "",
      " na\xC3"
      "\xAF"
      "ve"}},
    {PreTokenizer::standard,
     "\xE6"
     "\x97"
     "\xA5"
     "\xE6"
     "\x9C"
     "\xAC"
     "\xE8"
     "\xAA"
     "\x9E"
     "\xE3"
     "\x81"
     "\xAE"
     "\xE3"
     "\x83"
     "\x86"
     "\xE3"
     "\x82"
     "\xAD"
     "\xE3"
     "\x82"
     "\xB9"
     "\xE3"
     "\x83"
     "\x88"
     "",
     {"\xE6"
      "\x97"
      "\xA5"
      "\xE6"
      "\x9C"
      "\xAC"
      "\xE8"
      "\xAA"
      "\x9E"
      "\xE3"
      "\x81"
      "\xAE"
      "\xE3"
      "\x83"
      "\x86"
      "\xE3"
      "\x82"
      "\xAD"
      "\xE3"
      "\x82"
      "\xB9"
      "\xE3"
      "\x83"
      "\x88"
      ""}},
    {PreTokenizer::standard,
     "\xD9"
     "\xA3"
     "\xD9"
     "\xA4"
     " \xE2"
     "\x85"
     "\xAB"
     "",
     {"\xD9"
      "\xA3"
      "\xD9"
      "\xA4"
      "",
      " ",
      "\xE2"
      "\x85"
      "\xAB"
      ""}},
    {PreTokenizer::standard,
     "a\xC2"
     "\xA0"
     "b\xE3"
     "\x80"
     "\x80"
     "c",
     {"a",
      "\xC2"
      "\xA0"
      "",
      "b",
      "\xE3"
      "\x80"
      "\x80"
      "",
      "c"}},
    {PreTokenizer::standard,
     "e\xCC"
     "\x81"
     "t\xC3"
     "\xA9"
     "",
     {"e",
      "\xCC"
      "\x81"
      "",
      "t\xC3"
      "\xA9"
      ""}},
    {PreTokenizer::standard,
     "\xF0"
     "\x9F"
     "\x98"
     "\x80"
     "\xF0"
     "\x9F"
     "\x91"
     "\x8D"
     "\xF0"
     "\x9F"
     "\x8F"
     "\xBD"
     " ok",
     {"\xF0"
      "\x9F"
      "\x98"
      "\x80"
      "\xF0"
      "\x9F"
      "\x91"
      "\x8D"
      "\xF0"
      "\x9F"
      "\x8F"
      "\xBD"
      "",
      " ok"}},
    {PreTokenizer::standard,
     "bad\xFF"
     "byte",
     {"bad",
      "\xEF"
      "\xBF"
      "\xBD"
      "",
      "byte"}},
    {PreTokenizer::standard, "\t\tindent", {"\t", "\t", "indent"}},
    {PreTokenizer::standard, "a\n\n\n", {"a", "\n\n\n"}},
    {PreTokenizer::standard, "  \n  x", {"  \n ", " x"}},
    {PreTokenizer::standard, "--help=yes", {"--", "help", "=", "yes"}},
    {PreTokenizer::standard,
     "$100 + 50% = ?",
     {"$", "100", " ", "+", " ", "50", "%", " ", "=", " ", "?"}},
    {PreTokenizer::standard,
     "#include <stdio.h>",
     {"#", "include", " ", "<", "stdio", ".", "h", ">"}},
    {PreTokenizer::standard, "    return 0;", {"   ", " return", " ", "0", ";"}},
};

}  // namespace channel::test
