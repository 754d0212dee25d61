// `channel perplexity`: perplexity of a text file, with llama-perplexity's convention so the
// numbers are comparable: the text is tokenized once (with BOS when the model adds one), cut
// into floor(N / ctx) non-overlapping chunks of ctx tokens, each chunk's first token is
// replaced by BOS (when the model adds one) and evaluated from an empty cache at positions
// 0..ctx-1, and only the second half is scored: the logits at positions ctx/2 .. ctx-2
// predict tokens ctx/2+1 .. ctx-1, i.e. ctx - ctx/2 - 1 tokens per chunk.
// ppl = exp(mean negative log-likelihood over all scored tokens).
// SIGINT / SIGTERM stop it at the next score batch: the chunks already scored are reported
// (the one under way is dropped) and it exits 130 / 143 (cli_signals.h).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include "backend/device.h"
#include "cli_common.h"
#include "cli_files.h"
#include "cli_progress.h"
#include "cli_signals.h"
#include "command.h"
#include "model/model.h"
#include "runtime/context_device.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace channel::cli {
namespace {

struct PerplexityArgs {
  std::string model;
  std::string file;
  int ctx = 512;
  int chunks = -1;  // < 0: all
  int threads = 1;
  std::string device = "cpu";
};

// -log softmax(logits)[target], in double.
double negative_log_likelihood(std::span<const float> logits, int32_t target) {
  float max = logits[0];
  for (float l : logits) max = std::max(max, l);
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
  return -(static_cast<double>(logits[static_cast<size_t>(target)]) - max - std::log(sum));
}

int run_perplexity(const PerplexityArgs& args) {
  const std::string text = read_input_text("-f", args.file);
  const LoadedModel loaded = load_model(args.model);
  const Tokenizer& tok = loaded.model->tokenizer();
  const bool add_bos = tok.add_bos_default() && tok.bos_id() >= 0;
  std::vector<int32_t> tokens = tok.encode(text, add_bos, /*parse_special=*/false);
  const int ctx = args.ctx;
  if (tokens.size() < 2 * static_cast<size_t>(ctx))
    throw_error("{} tokenizes to {} tokens; perplexity with --ctx {} needs at least {}", args.file,
                tokens.size(), ctx, 2 * ctx);
  print_loaded(loaded);

  const size_t n_vocab = static_cast<size_t>(loaded.model->hparams().n_vocab);
  const int n_chunk_max = static_cast<int>(tokens.size() / static_cast<size_t>(ctx));
  const int n_chunk = args.chunks < 0 ? n_chunk_max : std::min(args.chunks, n_chunk_max);
  const int first = ctx / 2;
  constexpr int kScoreBatch = 64;  // tokens whose logits are held at once
  const DeviceSpec device = parse_device(args.device);
  ContextSession context = context_session_for(loaded.model, device, ctx, args.threads);
  if (device.is_cuda()) std::fprintf(stderr, "channel: running on %s\n", context.where.c_str());
  const std::unique_ptr<SessionBase> session = std::move(context.session);
  double nll = 0.0;
  int64_t count = 0;
  // A terminal gets one redrawn line; a log gets one line per chunk.
  const bool tty = isatty(STDERR_FILENO) == 1;
  Progress progress("perplexity");
  catch_stop_signals();
  int scored = 0;  // whole chunks
  for (int c = 0; c < n_chunk && !stop_signal(); ++c) {
    std::vector<int32_t> chunk(tokens.begin() + static_cast<std::ptrdiff_t>(c) * ctx,
                               tokens.begin() + static_cast<std::ptrdiff_t>(c + 1) * ctx);
    if (add_bos) chunk[0] = tok.bos_id();
    session->reset();
    session->decode(std::span<const int32_t>(chunk).first(static_cast<size_t>(first)));
    // Positions first .. ctx-2 predict chunk[pos + 1].
    double chunk_nll = 0.0;
    int64_t chunk_count = 0;
    for (int pos = first; pos < ctx - 1 && !stop_signal(); pos += kScoreBatch) {
      const int n = std::min(kScoreBatch, ctx - 1 - pos);
      const std::span<const float> logits =
          session->decode_all(std::span<const int32_t>(chunk).subspan(static_cast<size_t>(pos),
                                                                      static_cast<size_t>(n)));
      for (int i = 0; i < n; ++i) {
        chunk_nll += negative_log_likelihood(
            std::span<const float>(logits).subspan(static_cast<size_t>(i) * n_vocab, n_vocab),
            chunk[static_cast<size_t>(pos + i + 1)]);
        ++chunk_count;
      }
    }
    if (stop_signal()) break;  // a chunk scored in part is not counted
    nll += chunk_nll;
    count += chunk_count;
    ++scored;
    const double ppl = std::exp(nll / static_cast<double>(count));
    if (!std::isfinite(ppl))
      throw_error("perplexity: chunk {}: the score is not finite ({})", c + 1, ppl);
    const double eta = progress.seconds() * (n_chunk - c - 1) / (c + 1);
    if (tty) {
      progress.update(static_cast<double>(c + 1) / n_chunk,
                      fmt::format("chunk {}/{}: ppl {:.4f}", c + 1, n_chunk, ppl));
    } else {
      std::fprintf(stderr, "channel: perplexity: chunk %d/%d: ppl %.4f, ETA %s\n", c + 1, n_chunk,
                   ppl, c + 1 < n_chunk ? Progress::duration_text(eta).c_str() : "0 s");
    }
  }
  progress.clear();
  if (stop_signal()) {
    std::fprintf(stderr, "channel: perplexity: interrupted (%s) after %d of %d chunks\n",
                 stop_signal_name(), scored, n_chunk);
    if (count == 0) return stopped_exit_code();
  }
  nlohmann::json out = {{"ppl", std::exp(nll / static_cast<double>(count))},
                        {"tokens", count},
                        {"chunks", scored}};
  if (stop_signal()) out["interrupted"] = true;
  std::printf("%s\n", out.dump().c_str());
  return stopped_exit_code();
}

const CommandRegistrar registrar(
    "perplexity",
    "Perplexity of a text file over non-overlapping --ctx chunks (second half of each scored, "
    "as llama-perplexity does)",
    [](CLI::App& sub) -> std::function<int()> {
      auto args = std::make_shared<PerplexityArgs>();
      add_model_option(sub, args->model);
      sub.add_option("-f,--file", args->file, "Text file to score ('-': standard input)")
          ->required()
          ->check(non_empty("a text file"));
      sub.add_option("-c,--ctx", args->ctx, "Tokens per chunk")
          ->check(integer_in(4, 1 << 20))
          ->capture_default_str();
      sub.add_option("--chunks", args->chunks, "Score only the first N chunks (default: all)")
          ->check(integer_in(1, 1 << 30));
      add_threads_option(sub, args->threads);
      add_device_option(sub, args->device);
      return [args] { return run_perplexity(*args); };
    });

}  // namespace
}  // namespace channel::cli
