// `channel info`: what a model file holds: architecture, hyperparameters, every tensor (name,
// type, shape, size, file offset), the count by type, sizes. A model file is fully loaded and
// validated, so a bad file gets its error here; a vocabulary-only GGUF (no tensors) prints its
// metadata and tokenizer.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "command.h"
#include "gguf/ggml_type.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace channel::cli {
namespace {

struct InfoArgs {
  std::string model;
};

nlohmann::json tokenizer_json(const GgufFile& gguf, const Tokenizer& tok) {
  return {{"n_vocab", tok.n_vocab()},
          {"bos", tok.bos_id()},
          {"eos", tok.eos_id()},
          {"add_bos", tok.add_bos_default()},
          {"model", gguf.get_string_or("tokenizer.ggml.model", "")}};
}

// A GGUF with a vocabulary and no weights (tokenizer test files): metadata and tokenizer.
int run_info_vocab_only(const InfoArgs& args) {
  const GgufFile gguf = open_gguf(args.model);
  const Tokenizer tok = Tokenizer::from_gguf(gguf);
  const nlohmann::json out = {
      {"file", args.model},
      {"name", gguf.get_string_or("general.name", "")},
      {"gguf_version", gguf.version()},
      {"file_bytes", gguf.file_size()},
      {"architecture", gguf.get_string_or("general.architecture", "")},
      {"vocab_only", true},
      {"n_metadata", gguf.kvs().size()},
      {"tokenizer", tokenizer_json(gguf, tok)},
      {"n_tensors", 0},
      {"tensors", nlohmann::json::array()},
  };
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

bool is_vocab_only(const std::string& path) {
  if (path.empty()) return false;  // the built-in model has weights
  const GgufFile gguf = GgufFile::open(path);
  return gguf.tensors().empty() && gguf.find("tokenizer.ggml.tokens") != nullptr;
}

int run_info(const InfoArgs& args) {
  if (is_vocab_only(args.model)) return run_info_vocab_only(args);
  const LoadedModel loaded = load_model(args.model);
  const Model& model = *loaded.model;
  const ModelHparams& hp = model.hparams();
  const GgufFile& gguf = model.gguf();

  std::map<std::string, std::pair<int, uint64_t>> counts;  // type -> (tensors, bytes)
  uint64_t n_params = 0;
  nlohmann::json tensors = nlohmann::json::array();
  for (const TensorInfo& t : gguf.tensors()) {
    auto& [n, bytes] = counts[ggml_type_name(t.type_id)];
    ++n;
    bytes += t.n_bytes;
    n_params += static_cast<uint64_t>(t.n_elements());
    nlohmann::json shape = nlohmann::json::array();
    for (int d = 0; d < std::max(t.n_dims, 1); ++d) shape.push_back(t.ne[d]);
    tensors.push_back({{"name", t.name},
                       {"type", ggml_type_name(t.type_id)},
                       {"shape", shape},
                       {"bytes", t.n_bytes},
                       {"offset", gguf.data_offset() + t.offset}});
  }
  nlohmann::json by_type = nlohmann::json::object();
  for (const auto& [type, c] : counts) by_type[type] = {{"tensors", c.first}, {"bytes", c.second}};
  nlohmann::json hparams = {
      {"n_vocab", hp.n_vocab},
      {"n_embd", hp.n_embd},
      {"n_layer", hp.n_layer},
      {"n_head", hp.n_head},
      {"n_head_kv", hp.n_head_kv},
      {"head_dim", hp.head_dim},
      {"n_ff", hp.n_ff},
      {"n_ctx_train", hp.n_ctx_train},
      {"n_rot", hp.n_rot},
      {"rms_eps", hp.rms_eps},
      {"rope_style", hp.rope_style == RopeStyle::neox ? "neox" : "normal"},
      {"rope_freq_base", hp.rope_base},
      {"rope_freq_scale", hp.rope_freq_scale},
      {"attn_scale", hp.attn_scale},
      {"tied_output", model.weights().tied_output},
  };
  if (hp.arch_id == Arch::gemma3) {
    hparams["rope_freq_base_swa"] = hp.rope_base_swa;
    hparams["sliding_window"] = hp.sliding_window;
    hparams["sliding_window_pattern"] = hp.sliding_window_pattern;
    nlohmann::json global = nlohmann::json::array();
    for (int il = 0; il < hp.n_layer; ++il)
      if (!hp.is_sliding(il)) global.push_back(il);
    hparams["global_layers"] = global;
    hparams["final_logit_softcapping"] = hp.final_logit_softcap;
  }
  const Tokenizer& tok = model.tokenizer();
  const nlohmann::json out = {
      {"file", loaded.name},
      {"name", gguf.get_string_or("general.name", "")},
      {"gguf_version", gguf.version()},
      {"file_bytes", gguf.file_size()},
      {"architecture", hp.arch},
      {"hparams", hparams},
      {"tokenizer", tokenizer_json(gguf, tok)},
      {"n_tensors", gguf.tensors().size()},
      {"n_params", n_params},
      {"weight_bytes", model.weight_bytes()},
      {"weight_size", format_bytes(model.weight_bytes())},
      {"tensor_types", by_type},
      {"tensors", tensors},
  };
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

const CommandRegistrar registrar("info",
                                 "Print a model's architecture, hyperparameters, tensors (name, type, shape, "
                                 "size, offset) and sizes, as JSON; a vocabulary-only GGUF prints "
                                 "its metadata and tokenizer",
                                 [](CLI::App& sub) -> std::function<int()> {
                                   auto args = std::make_shared<InfoArgs>();
                                   add_model_option(sub, args->model);
                                   return [args] { return run_info(*args); };
                                 });

}  // namespace
}  // namespace channel::cli
