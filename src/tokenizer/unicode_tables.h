// The generated code point category table (unicode_tables.cpp, made by
// scripts/gen_unicode_tables.py); unicode.h is the interface to use.
#pragma once

#include <cstddef>
#include <cstdint>

namespace channel::unicode {

struct CodepointRange {
  uint32_t first;  // first code point of the range; it lasts until the next range's first
  uint8_t flags;   // CodepointFlag bits (unicode.h)
};

extern const CodepointRange kCodepointRanges[];  // [kCodepointRangeCount], sorted by first
extern const size_t kCodepointRangeCount;

}  // namespace channel::unicode
