#include "model/quant_mix.h"

#include <algorithm>
#include <cctype>

#include "gguf/gguf_reader.h"

namespace channel {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// llama.cpp's choice of layers that get more bits: the first and last eighth, and every
// third layer in between.
bool use_more_bits(int i, int n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

bool is_k(GgmlType t) {
  return t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::Q4_K || t == GgmlType::Q5_K ||
         t == GgmlType::Q6_K;
}

}  // namespace

std::optional<QuantMix> parse_quant_mix(std::string_view name) {
  std::string n(name);
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  struct Entry {
    const char* name;
    GgmlType base;
    QuantMixKind kind;
    uint32_t ftype;
  };
  using K = QuantMixKind;
  static const Entry kEntries[] = {
      {"f32", GgmlType::F32, K::uniform, 0},    {"f16", GgmlType::F16, K::uniform, 1},
      {"bf16", GgmlType::BF16, K::uniform, 32}, {"q8_0", GgmlType::Q8_0, K::uniform, 7},
      {"q4_0", GgmlType::Q4_0, K::uniform, 2},  {"q4_1", GgmlType::Q4_1, K::uniform, 3},
      {"q5_0", GgmlType::Q5_0, K::uniform, 8},  {"q5_1", GgmlType::Q5_1, K::uniform, 9},
      {"q2_k", GgmlType::Q2_K, K::k_m, 10},     {"q3_k_s", GgmlType::Q3_K, K::k_s, 11},
      {"q3_k_m", GgmlType::Q3_K, K::k_m, 12},   {"q3_k", GgmlType::Q3_K, K::k_m, 12},
      {"q3_k_l", GgmlType::Q3_K, K::k_l, 13},   {"q4_k_s", GgmlType::Q4_K, K::k_s, 14},
      {"q4_k_m", GgmlType::Q4_K, K::k_m, 15},   {"q4_k", GgmlType::Q4_K, K::k_m, 15},
      {"q5_k_s", GgmlType::Q5_K, K::k_s, 16},   {"q5_k_m", GgmlType::Q5_K, K::k_m, 17},
      {"q5_k", GgmlType::Q5_K, K::k_m, 17},     {"q6_k", GgmlType::Q6_K, K::uniform, 18},
  };
  for (const Entry& e : kEntries)
    if (n == e.name) return QuantMix{e.name, e.base, e.kind, e.ftype};
  return std::nullopt;
}

std::vector<std::string> quant_mix_names() {
  return {"f32",    "f16",    "bf16",   "q8_0",   "q4_0",   "q4_1",   "q5_0",   "q5_1", "q2_k",
          "q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s", "q4_k_m", "q5_k_s", "q5_k_m", "q6_k"};
}

QuantMixModel quant_mix_model(const GgufFile& gguf) {
  QuantMixModel m;
  for (const TensorInfo& t : gguf.tensors()) {
    if (ends_with(t.name, "attn_v.weight")) ++m.n_attn_v;
    if (ends_with(t.name, "ffn_down.weight")) ++m.n_ffn_down;
    if (t.name == "output.weight") m.has_output = true;
  }
  if (gguf.find("general.architecture")) {
    const std::string arch = gguf.get_string("general.architecture");
    const uint64_t heads = gguf.get_uint_or(arch + ".attention.head_count", 1);
    const uint64_t kv = gguf.get_uint_or(arch + ".attention.head_count_kv", heads);
    if (kv > 0 && heads >= kv) m.n_gqa = static_cast<int>(heads / kv);
  }
  return m;
}

GgmlType QuantMixPlanner::next(const std::string& name, int64_t ne0) {
  const GgmlType base = mix_.base;
  GgmlType t = base;
  const bool k_mix = is_k(base);
  const bool q2 = base == GgmlType::Q2_K, q3 = base == GgmlType::Q3_K;
  const bool q4 = base == GgmlType::Q4_K, q5 = base == GgmlType::Q5_K;
  const QuantMixKind kind = mix_.kind;
  if (name == "output.weight" || (!model_.has_output && name == "token_embd.weight")) {
    if (k_mix || base == GgmlType::Q4_0 || base == GgmlType::Q4_1 || base == GgmlType::Q5_0 ||
        base == GgmlType::Q5_1) {
      t = ne0 % 256 != 0 ? GgmlType::Q8_0 : GgmlType::Q6_K;
    }
  } else if (ends_with(name, "attn_v.weight")) {
    const int i = i_attn_v_++, n = model_.n_attn_v;
    if (q2) {
      t = model_.n_gqa >= 4 ? GgmlType::Q4_K : GgmlType::Q3_K;
    } else if (q3 && kind == QuantMixKind::k_m) {
      t = i < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
    } else if (q3 && kind == QuantMixKind::k_l) {
      t = GgmlType::Q5_K;
    } else if ((q4 || q5) && kind == QuantMixKind::k_m && use_more_bits(i, n)) {
      t = GgmlType::Q6_K;
    } else if (q4 && kind == QuantMixKind::k_s && i < 4) {
      t = GgmlType::Q5_K;
    }
  } else if (ends_with(name, "ffn_down.weight")) {
    const int i = i_ffn_down_++, n = model_.n_ffn_down;
    if (q2) {
      t = GgmlType::Q3_K;
    } else if (q3 && kind == QuantMixKind::k_m) {
      t = i < n / 16 ? GgmlType::Q5_K : GgmlType::Q4_K;
    } else if (q3 && kind == QuantMixKind::k_l) {
      t = GgmlType::Q5_K;
    } else if ((q4 || q5) && kind == QuantMixKind::k_m && use_more_bits(i, n)) {
      t = GgmlType::Q6_K;
    } else if (q4 && kind == QuantMixKind::k_s && i < n / 8) {
      t = GgmlType::Q5_K;
    }
  } else if (ends_with(name, "attn_output.weight")) {
    if (q2) {
      t = GgmlType::Q3_K;
    } else if (q3 && kind == QuantMixKind::k_m) {
      t = GgmlType::Q4_K;
    } else if (q3 && kind == QuantMixKind::k_l) {
      t = GgmlType::Q5_K;
    }
  }
  if (is_k(t) && ne0 % 256 != 0) {  // rows that are not whole super-blocks
    switch (t) {
      case GgmlType::Q4_K:
        t = GgmlType::Q5_0;
        break;
      case GgmlType::Q5_K:
        t = GgmlType::Q5_1;
        break;
      case GgmlType::Q6_K:
        t = GgmlType::Q8_0;
        break;
      default:  // Q2_K, Q3_K: llama.cpp's IQ4_NL, not implemented here
        t = GgmlType::Q4_1;
        break;
    }
  }
  const int64_t block = ggml_type_traits(static_cast<uint32_t>(t))->block_elems;
  if (ne0 % block != 0) t = GgmlType::F16;
  return t;
}

}  // namespace channel
