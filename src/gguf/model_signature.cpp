// The model signature of a GGUF: shapes from its metadata and a fingerprint of its weights.
#include "gguf/model_signature.h"

#include <algorithm>

#include "gguf/gguf_reader.h"
#include "util/error.h"
#include "util/hash.h"

namespace channel {

std::string model_signature(const GgufFile& g) {
  const std::string arch = g.get_string_or("general.architecture", "");
  auto key = [&](const char* suffix) { return g.get_uint_or(arch + "." + suffix, 0); };
  const GgufKv* tokens = g.find("tokenizer.ggml.tokens");
  uint64_t tensor_bytes = 0;
  // Weights fingerprint: FNV-1a 64 over the name and the first 4 KiB of every tensor, in file
  // order, so fine-tunes of one architecture differ without reading gigabytes.
  uint64_t fp = kFnv1a64Basis;
  auto mix = [&](std::string_view bytes) { fp = fnv1a64(bytes, fp); };
  for (const TensorInfo& t : g.tensors()) {
    tensor_bytes += t.n_bytes;
    mix(t.name);
    mix(std::string_view(reinterpret_cast<const char*>(t.data), std::min<size_t>(t.n_bytes, 4096)));
  }
  const uint64_t heads = key("attention.head_count");
  const uint64_t hidden = key("embedding_length");
  const uint64_t head_dim =
      g.get_uint_or(arch + ".attention.key_length", heads ? hidden / heads : 0);
  return fmt::format(
      "channel-episodic-v1;arch={};layers={};hidden={};heads={};kv_heads={};head_dim={};"
      "vocab={};tensors={};tensor_bytes={};weights_fnv={:016x}",
      arch, key("block_count"), hidden, heads,
      g.get_uint_or(arch + ".attention.head_count_kv", heads), head_dim,
      tokens ? tokens->array_len : 0, g.tensors().size(), tensor_bytes, fp);
}

uint64_t model_id_hash(const GgufFile& g) {
  return fnv1a64(model_signature(g));
}

}  // namespace channel
