#include "gguf/ggml_type.h"

#include <array>
#include <string>

namespace channel {

std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type_id) {
  switch (static_cast<GgmlType>(type_id)) {
    case GgmlType::F32:
      return GgmlTypeTraits{"f32", 1, 4};
    case GgmlType::F16:
      return GgmlTypeTraits{"f16", 1, 2};
    case GgmlType::BF16:
      return GgmlTypeTraits{"bf16", 1, 2};
    case GgmlType::Q8_0:
      return GgmlTypeTraits{"q8_0", 32, 34};  // f16 scale + 32 int8
    case GgmlType::Q4_0:
      return GgmlTypeTraits{"q4_0", 32, 18};  // f16 scale + 16 bytes of nibbles
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return ggml_type_layout(type_id);
  }
  return std::nullopt;
}

namespace {

// llama.cpp's names for the ids it has defined, so errors about unsupported types are precise.
constexpr std::array<const char*, 43> kNames = {
    "f32",   "f16",        "q4_0",       "q4_1",       "q4_2",     "q4_3",     "q5_0",
    "q5_1",  "q8_0",       "q8_1",       "q2_K",       "q3_K",     "q4_K",     "q5_K",
    "q6_K",  "q8_K",       "iq2_xxs",    "iq2_xs",     "iq3_xxs",  "iq1_s",    "iq4_nl",
    "iq3_s", "iq2_s",      "iq4_xs",     "i8",         "i16",      "i32",      "i64",
    "f64",   "iq1_m",      "bf16",       "q4_0_4_4",   "q4_0_4_8", "q4_0_8_8", "tq1_0",
    "tq2_0", "iq4_nl_4_4", "iq4_nl_4_8", "iq4_nl_8_8", "mxfp4",    "nvfp4",    "q1_0",
    "q2_0"};

// {elements, bytes} per block for each id; {0, 0} marks removed ids. Sizes follow the block
// structs of ggml (QK_K = 256 for the K and IQ families).
struct Block {
  int64_t elems, bytes;
};
constexpr std::array<Block, 43> kBlocks = {{
    {1, 4},    {1, 2},    {32, 18},  {32, 20},   {0, 0},     {0, 0},     {32, 22},   {32, 24},
    {32, 34},  {32, 36},  {256, 84}, {256, 110}, {256, 144}, {256, 176}, {256, 210}, {256, 292},
    {256, 66}, {256, 74}, {256, 98}, {256, 50},  {32, 18},   {256, 110}, {256, 82},  {256, 136},
    {1, 1},    {1, 2},    {1, 4},    {1, 8},     {1, 8},     {256, 56},  {1, 2},     {0, 0},
    {0, 0},    {0, 0},    {256, 54}, {256, 66},  {0, 0},     {0, 0},     {0, 0},     {32, 17},
    {64, 36},  {128, 18}, {64, 18},
}};

}  // namespace

std::optional<GgmlTypeTraits> ggml_type_layout(uint32_t type_id) {
  if (type_id >= kBlocks.size() || kBlocks[type_id].elems == 0) return std::nullopt;
  return GgmlTypeTraits{kNames[type_id], kBlocks[type_id].elems, kBlocks[type_id].bytes};
}

std::string ggml_type_name(uint32_t type_id) {
  if (type_id < kNames.size()) return kNames[type_id];
  return "type " + std::to_string(type_id);
}

}  // namespace channel
