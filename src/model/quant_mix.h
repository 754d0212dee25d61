// quant_mix.h: which type each tensor of a model gets when it is quantized to a llama.cpp
// file type (`channel quantize IN OUT TYPE`), following llama-quantize's per-tensor rules for
// the K-quant mixes (_S, _M, _L): attn_v and ffn_down get more bits in some layers, the
// output matrix (or a tied token_embd) Q6_K, and where a row is not a multiple of 256 the
// K types fall back to Q5_0 (for Q4_K), Q5_1 (Q5_K), Q8_0 (Q6_K) and Q4_1 (Q2_K / Q3_K,
// where llama.cpp uses IQ4_NL, a type Channel does not implement).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"

namespace channel {

class GgufFile;

enum class QuantMixKind { uniform, k_s, k_m, k_l };

struct QuantMix {
  std::string name;      // as given: "q4_k_m", "q8_0", ...
  GgmlType base;         // the type most weights get
  QuantMixKind kind;     // for the K types: which mix
  uint32_t llama_ftype;  // general.file_type
};

// Parses a type name (case-insensitive): f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k,
// q3_k_s, q3_k_m (= q3_k), q3_k_l, q4_k_s, q4_k_m (= q4_k), q5_k_s, q5_k_m (= q5_k), q6_k.
std::optional<QuantMix> parse_quant_mix(std::string_view name);
std::vector<std::string> quant_mix_names();

// The model-wide facts the rules depend on.
struct QuantMixModel {
  int n_attn_v = 0;         // tensors named *attn_v.weight
  int n_ffn_down = 0;       // tensors named *ffn_down.weight
  bool has_output = false;  // output.weight exists (else token_embd is the output)
  int n_gqa = 1;            // query heads per KV head
};
QuantMixModel quant_mix_model(const GgufFile& gguf);

// Assigns types in file order: call once per tensor, in the order of the file.
class QuantMixPlanner {
 public:
  QuantMixPlanner(QuantMix mix, QuantMixModel model) : mix_(std::move(mix)), model_(model) {}
  // The type for a 2-D weight `name` with rows of ne0 elements.
  GgmlType next(const std::string& name, int64_t ne0);

 private:
  QuantMix mix_;
  QuantMixModel model_;
  int i_attn_v_ = 0, i_ffn_down_ = 0;
};

}  // namespace channel
