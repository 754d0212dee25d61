// `channel quantize IN OUT TYPE`: converts an f32/f16/bf16 GGUF to a llama.cpp file type
// with llama-quantize's per-tensor rules for the K-quant mixes (model/quant_mix.h).
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "backend/cpu/thread_pool.h"
#include "cli_common.h"
#include "command.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "model/quantize_model.h"
#include "util/error.h"

namespace channel::cli {
namespace {

struct QuantizeArgs {
  std::string input, output, type;
  int threads = 1;
  bool verbose = false;
};

int run_quantize(const QuantizeArgs& args) {
  const auto mix = parse_quant_mix(args.type);
  if (!mix) throw_error("quantize: unknown type '{}'", args.type);
  const auto start = std::chrono::steady_clock::now();
  const GgufFile in = GgufFile::open(args.input);
  ThreadPool pool(args.threads);
  GgufWriter out(static_cast<uint32_t>(in.alignment()));
  std::map<std::string, int> counts;
  const QuantizeReport r =
      quantize_model(in, *mix, out, pool, [&](const std::string& name, GgmlType type) {
        const std::string tn = ggml_type_name(static_cast<uint32_t>(type));
        ++counts[tn];
        if (args.verbose) std::fprintf(stderr, "  %-32s %s\n", name.c_str(), tn.c_str());
      });
  out.write_file(args.output);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string mixdesc;
  for (const auto& [name, n] : counts)
    mixdesc += (mixdesc.empty() ? "" : ", ") + name + " " + std::to_string(n);
  std::fprintf(stderr,
               "channel: wrote %s (%s: %d tensors converted, %d copied; %s) %.1f MB -> %.1f MB in "
               "%.1f s\n",
               args.output.c_str(), mix->name.c_str(), r.n_quantized, r.n_copied, mixdesc.c_str(),
               static_cast<double>(r.bytes_in) / 1e6, static_cast<double>(r.bytes_out) / 1e6,
               seconds);
  return 0;
}

const CommandRegistrar registrar(
    "quantize",
    "Convert an f32/f16/bf16 GGUF to a quantized type, with llama-quantize's _S/_M/_L mixes",
    [](CLI::App& sub) -> std::function<int()> {
      auto args = std::make_shared<QuantizeArgs>();
      sub.add_option("input", args->input, "Input GGUF (f32, f16 or bf16 weights)")->required();
      sub.add_option("output", args->output, "Output GGUF")->required();
      std::string names;
      for (const std::string& n : quant_mix_names()) names += (names.empty() ? "" : ", ") + n;
      sub.add_option("type", args->type, "Target type: " + names)->required();
      sub.add_flag("-v,--verbose", args->verbose, "List each tensor's type");
      add_threads_option(sub, args->threads);
      return [args] { return run_quantize(*args); };
    });

}  // namespace
}  // namespace channel::cli
