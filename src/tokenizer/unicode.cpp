// Lenient UTF-8, the category lookup and the GPT-2 byte mapping (see unicode.h).
#include "tokenizer/unicode.h"

#include <array>
#include <cassert>

#include "tokenizer/unicode_tables.h"

namespace channel::unicode {

namespace {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// Direct table over every code point, expanded once from the range list: a
// lookup is one load, which keeps pre-tokenizing CJK text cheap.
const std::vector<uint8_t>& flags_table() {
  static const std::vector<uint8_t> table = [] {
    std::vector<uint8_t> t(kMaxCodepoint + 1, 0);  // [0x110000]
    for (size_t i = 0; i < kCodepointRangeCount; ++i) {
      const uint32_t first = kCodepointRanges[i].first;
      const uint32_t end =
          i + 1 < kCodepointRangeCount ? kCodepointRanges[i + 1].first : kMaxCodepoint + 1;
      for (uint32_t c = first; c < end; ++c) t[c] = kCodepointRanges[i].flags;
    }
    return t;
  }();
  return table;
}

bool is_continuation(std::string_view text, size_t i) {
  return i < text.size() && (static_cast<uint8_t>(text[i]) & 0xC0) == 0x80;
}

struct ByteMaps {
  std::array<uint32_t, 256> byte_to_cpt;  // [byte]
  std::array<int16_t, 324> cpt_to_byte;   // [code point < 324], -1 when unmapped
};

const ByteMaps& byte_maps() {
  static const ByteMaps maps = [] {
    ByteMaps m{};
    m.cpt_to_byte.fill(-1);
    uint32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      m.byte_to_cpt[b] = printable ? static_cast<uint32_t>(b) : next_extra++;
      m.cpt_to_byte[m.byte_to_cpt[b]] = static_cast<int16_t>(b);
    }
    assert(next_extra == 324);
    return m;
  }();
  return maps;
}

}  // namespace

uint8_t codepoint_flags(uint32_t cpt) {
  return cpt <= kMaxCodepoint ? flags_table()[cpt] : 0;
}

uint32_t decode_utf8(std::string_view text, size_t& offset) {
  const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(text[i])); };
  const uint32_t lead = b(offset);
  if (lead < 0x80) {
    offset += 1;
    return lead;
  }
  size_t len = 0;
  uint32_t cpt = 0;
  if ((lead & 0xE0) == 0xC0) {
    len = 2, cpt = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    len = 3, cpt = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    len = 4, cpt = lead & 0x07;
  }
  bool ok = len != 0;
  for (size_t i = 1; ok && i < len; ++i) {
    ok = is_continuation(text, offset + i);
    if (ok) cpt = (cpt << 6) | (b(offset + i) & 0x3F);
  }
  if (!ok || cpt > kMaxCodepoint) {
    offset += 1;
    return kReplacementChar;
  }
  offset += len;
  return cpt;
}

std::vector<uint32_t> decode_utf8(std::string_view text) {
  std::vector<uint32_t> cpts;  // [n_codepoints]
  cpts.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) cpts.push_back(decode_utf8(text, offset));
  return cpts;
}

void append_utf8(std::string& out, uint32_t cpt) {
  if (cpt < 0x80) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

uint32_t byte_to_codepoint(uint8_t byte) {
  return byte_maps().byte_to_cpt[byte];
}

int codepoint_to_byte(uint32_t cpt) {
  return cpt < byte_maps().cpt_to_byte.size() ? byte_maps().cpt_to_byte[cpt] : -1;
}

}  // namespace channel::unicode
