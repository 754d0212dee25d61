// `channel logits`: runs a token-id sequence through the model in one batch and prints the
// last position's top-K logits as JSON; --dump writes all of them as raw little-endian f32.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <numeric>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "command.h"
#include "model/model.h"
#include "backend/device.h"
#include "runtime/session.h"
#include "util/error.h"
#if defined(CHANNEL_HAS_CUDA)
#include "backend/cuda/cuda_session.h"
#endif

namespace channel::cli {
namespace {

struct LogitsArgs {
  std::string model;
  std::string ids;
  int top = 10;
  std::string dump;
  int threads = 1;
  std::string device;
};

void write_f32(const std::string& path, std::span<const float> values) {
  static_assert(std::endian::native == std::endian::little,
                "raw dump assumes a little-endian host");
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw_error("--dump: cannot open '{}' for writing", path);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size_bytes()));
  out.close();
  if (!out) throw_error("--dump: cannot write '{}'", path);
}

int run_logits(const LogitsArgs& args) {
  const std::vector<int32_t> ids = parse_id_list(args.ids, "--ids");
  const LoadedModel loaded = load_model(args.model);
  const int n_vocab = loaded.model->hparams().n_vocab;
  check_ids_in_vocab(ids, n_vocab);
  const int n_ctx_train = loaded.model->hparams().n_ctx_train;
  if (ids.size() > static_cast<size_t>(n_ctx_train))
    throw_error("--ids: {} tokens exceed the model's context length {}", ids.size(), n_ctx_train);
  const DeviceSpec device = parse_device(args.device);
  print_loaded(loaded);

  std::vector<float> logits;
  if (!device.is_cuda()) {
    Session session(loaded.model,
                    SessionConfig{.n_ctx = static_cast<int>(ids.size()), .n_threads = args.threads});
    const std::span<const float> l = session.decode(ids);
    logits.assign(l.begin(), l.end());
  } else {
#if defined(CHANNEL_HAS_CUDA)
    cuda::CudaSession session(cuda::CudaWeights::upload(loaded.model, device.index),
                              cuda::CudaSessionConfig{.n_ctx = static_cast<int>(ids.size())});
    const std::span<const float> l = session.decode(ids);
    logits.assign(l.begin(), l.end());
#endif
  }

  // Top K by logit, ties to the lower id.
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t k = std::min(static_cast<size_t>(args.top), order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](int32_t a, int32_t b) {
                      const float la = logits[static_cast<size_t>(a)];
                      const float lb = logits[static_cast<size_t>(b)];
                      return la > lb || (la == lb && a < b);
                    });
  nlohmann::json top = nlohmann::json::array();
  for (size_t i = 0; i < k; ++i) top.push_back({order[i], logits[static_cast<size_t>(order[i])]});
  if (!args.dump.empty()) write_f32(args.dump, logits);
  const nlohmann::json out = {{"n_vocab", n_vocab}, {"top", top}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

const CommandRegistrar registrar(
    "logits", "Print the last position's logits of a token-id sequence as JSON",
    [](CLI::App& sub) -> std::function<int()> {
      auto args = std::make_shared<LogitsArgs>();
      add_model_option(sub, args->model);
      sub.add_option("--ids", args->ids, "Comma-separated token ids, e.g. 2,5,9")->required();
      sub.add_option("--top", args->top, "How many of the largest logits to print")
          ->check(CLI::Range(1, 1 << 30))
          ->capture_default_str();
      sub.add_option("--dump", args->dump,
                     "Also write all last-position logits to FILE as raw little-endian f32");
      add_threads_option(sub, args->threads);
      add_device_option(sub, args->device);
      return [args] { return run_logits(*args); };
    });

}  // namespace
}  // namespace channel::cli
