// `channel mkmodel`: writes a deterministic random-weight llama, gemma3 or qwen3 GGUF (weights
// N(0, 0.02), norms 1 + N(0, 0.1)) with a synthetic SentencePiece vocabulary, for tests and
// benchmarks. The same flags and seed always give the same bytes; llama.cpp loads the file.
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "cli_common.h"
#include "command.h"
#include "gguf/gguf_writer.h"
#include "model/random_model.h"

namespace channel::cli {
namespace {

const std::map<std::string, GgmlType>& writable_types() {
  static const std::map<std::string, GgmlType> kTypes = {
      {"f32", GgmlType::F32},   {"f16", GgmlType::F16},   {"bf16", GgmlType::BF16},
      {"q8_0", GgmlType::Q8_0}, {"q4_0", GgmlType::Q4_0}, {"q4_1", GgmlType::Q4_1},
      {"q5_0", GgmlType::Q5_0}, {"q5_1", GgmlType::Q5_1}, {"q2_k", GgmlType::Q2_K},
      {"q3_k", GgmlType::Q3_K}, {"q4_k", GgmlType::Q4_K}, {"q5_k", GgmlType::Q5_K},
      {"q6_k", GgmlType::Q6_K}};
  return kTypes;
}

std::vector<std::string> writable_type_names() {
  std::vector<std::string> names;
  for (const auto& [name, type] : writable_types()) names.push_back(name);
  return names;
}

struct MkmodelArgs {
  std::string arch;
  std::string type = "f32";
  std::string output;
  RandomModelSpec spec;
  int threads = 1;
};

int run_mkmodel(MkmodelArgs args) {
  args.spec.arch = args.arch == "gemma3"    ? Arch::gemma3
                   : args.arch == "qwen3"   ? Arch::qwen3
                   : args.arch == "bounded" ? Arch::bounded
                                            : Arch::llama;
  args.spec.type = writable_types().at(args.type);
  validate(args.spec);

  const auto start = std::chrono::steady_clock::now();
  ThreadPool pool(args.threads);
  GgufWriter writer;
  write_random_model(args.spec, writer, pool);
  writer.write_file(args.output);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "channel: wrote %s (%s %s, %d layers, hidden %d, vocab %d) in %.1f s\n",
               args.output.c_str(), args.arch.c_str(), args.type.c_str(), args.spec.layers,
               args.spec.hidden, args.spec.vocab, seconds);
  return 0;
}

const CommandRegistrar registrar(
    "mkmodel",
    "Write a deterministic random-weight model (llama, gemma3, qwen3, bounded) for tests",
    [](CLI::App& sub) -> std::function<int()> {
      auto args = std::make_shared<MkmodelArgs>();
      RandomModelSpec& s = args->spec;
      sub.add_option("--arch", args->arch, "Architecture")
          ->required()
          ->check(CLI::IsMember({"llama", "gemma3", "qwen3", "bounded"}));
      sub.add_option("--type", args->type,
                     "Type of the 2-D weights (norms stay f32; K-quants need rows of 256)")
          ->check(CLI::IsMember(writable_type_names()))
          ->capture_default_str();
      sub.add_option("--hidden", s.hidden, "Embedding size")->capture_default_str();
      sub.add_option("--layers", s.layers, "Transformer blocks")->capture_default_str();
      sub.add_option("--heads", s.heads, "Query heads")->capture_default_str();
      sub.add_option("--kv-heads", s.kv_heads, "Key/value heads")->capture_default_str();
      sub.add_option("--head-dim", s.head_dim, "Size of one head")->capture_default_str();
      sub.add_option("--ffn", s.ffn, "Feed-forward size")->capture_default_str();
      sub.add_option("--window", s.window, "Sliding window (gemma3; every 6th layer is global)")
          ->capture_default_str();
      sub.add_option("--rope-dims", s.rope_dims,
                     "bounded: rotary dims per head (even, <= head-dim)")
          ->capture_default_str();
      sub.add_option("--sinks", s.sinks, "bounded: learned sinks per KV head")
          ->capture_default_str();
      sub.add_option("--global-every", s.global_every,
                     "bounded: every Nth layer is global softmax, the others swa_sink_v1")
          ->capture_default_str();
      sub.add_option("--vocab", s.vocab, "Vocabulary size (>= 261)")->capture_default_str();
      sub.add_option("--ctx", s.context, "Context length written to the metadata")
          ->check(CLI::Range(1, 1 << 24))
          ->capture_default_str();
      sub.add_option("--seed", s.seed, "Random seed")->capture_default_str();
      sub.add_option("--retrieval-dim", s.retrieval_dim,
                     "Add a random retrieval head of this dim (channel.retrieval.* metadata; 0: "
                     "none)")
          ->check(CLI::Range(0, 4096))
          ->capture_default_str();
      sub.add_option("-o,--output", args->output, "Output GGUF file")->required();
      add_threads_option(sub, args->threads);
      return [args] { return run_mkmodel(*args); };
    });

}  // namespace
}  // namespace channel::cli
