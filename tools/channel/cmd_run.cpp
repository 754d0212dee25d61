// `channel run`: generate text from a prompt, streaming it to stdout as it comes;
// load progress and the prompt / generation speed go to stderr.
#include <csignal>
#include <cstdio>

#include "cli_common.h"
#include "command.h"
#include "model/model.h"
#include "runtime/generate.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace channel::cli {
namespace {

struct RunArgs {
  std::string model;
  std::string prompt;
  int n_predict = 256;
  int n_ctx = 0;  // 0: the model's training context, at most kDefaultMaxCtx
  int threads = 1;
  bool no_echo = false;
  SamplerConfig sampling;
};

constexpr int kDefaultMaxCtx = 4096;

bool write_out(std::string_view text) {
  if (text.empty()) return true;
  // A closed pipe (`channel run | head`) ends generation quietly instead of by SIGPIPE.
  return std::fwrite(text.data(), 1, text.size(), stdout) == text.size() &&
         std::fflush(stdout) == 0;
}

int run_run(const RunArgs& args) {
  validate(args.sampling);  // bad sampling flags fail before the model loads
  std::signal(SIGPIPE, SIG_IGN);

  const LoadedModel loaded = load_model(args.model);
  const std::shared_ptr<const Model>& model = loaded.model;
  const Tokenizer& tokenizer = model->tokenizer();
  const int train_ctx = model->hparams().n_ctx_train;
  const int n_ctx = args.n_ctx > 0  ? args.n_ctx
                    : train_ctx > 0 ? std::min(train_ctx, kDefaultMaxCtx)
                                    : kDefaultMaxCtx;

  const std::vector<int32_t> prompt =
      tokenizer.encode(args.prompt, tokenizer.add_bos_default(), /*parse_special=*/true);
  if (prompt.empty()) throw Error("the prompt is empty and the model adds no BOS token");
  if (static_cast<int64_t>(prompt.size()) > n_ctx) {
    throw_error("prompt is {} tokens, longer than the context of {} tokens (raise --ctx)",
                prompt.size(), n_ctx);
  }

  Session session(model, SessionConfig{.n_ctx = n_ctx, .n_threads = args.threads});
  SessionLogits source(session);
  Sampler sampler(args.sampling);
  print_loaded(loaded);

  bool output_ok = args.no_echo || write_out(args.prompt);
  const GenerateStats stats =
      generate_text(source, tokenizer, sampler, prompt, args.n_predict,
                    [&](std::string_view piece) { return output_ok = write_out(piece); });
  if (output_ok) write_out("\n");

  std::fprintf(stderr,
               "channel: prompt %d tokens in %.3f s (%.2f tok/s) | generation %d tokens, "
               "%.2f tok/s | stop: %s\n",
               stats.n_prompt, stats.prompt_seconds, stats.prompt_tok_per_s(), stats.n_generated,
               stats.gen_tok_per_s(), std::string(stop_reason_name(stats.stop)).c_str());
  return 0;
}

const CommandRegistrar registrar{
    "run", "Generate text from a prompt", [](CLI::App& sub) {
      auto args = std::make_shared<RunArgs>();
      SamplerConfig& s = args->sampling;
      add_model_option(sub, args->model);
      sub.add_option("-p,--prompt", args->prompt, "Prompt text");
      sub.add_option("-n,--n-predict", args->n_predict,
                     "Tokens to generate (-1: until end of text or a full context)")
          ->check(integer_in(-1, 1 << 30))
          ->capture_default_str();
      sub.add_option("--temp", s.temperature, "Temperature (0: greedy)")
          ->check(number_in(0.0, 1e6))
          ->capture_default_str();
      sub.add_option("--top-k", s.top_k, "Keep the K most likely tokens (0: off)")
          ->check(integer_in(0, 1 << 30))
          ->capture_default_str();
      sub.add_option("--top-p", s.top_p, "Keep the smallest set with probability mass P (1: off)")
          ->check(number_in(0.0, 1.0))
          ->capture_default_str();
      sub.add_option("--min-p", s.min_p, "Drop tokens below P x the top probability (0: off)")
          ->check(number_in(0.0, 1.0))
          ->capture_default_str();
      sub.add_option("--repeat-penalty", s.repeat_penalty,
                     "Penalise the last --repeat-last-n tokens (1: off)")
          ->check(number_in(1e-6, 1e6))
          ->capture_default_str();
      sub.add_option("--repeat-last-n", s.repeat_last_n, "Tokens the repeat penalty looks at")
          ->check(integer_in(0, 1 << 30))
          ->capture_default_str();
      sub.add_option("--seed", s.seed, "Random seed (the same seed gives the same text)")
          ->check(integer_in(0, INT64_MAX))
          ->capture_default_str();
      add_threads_option(sub, args->threads);
      sub.add_option("--ctx", args->n_ctx,
                     "Context size in tokens (default: the model's, at most 4096)")
          ->check(integer_in(1, 1 << 24));
      sub.add_flag("--no-echo", args->no_echo, "Print only the generated text, not the prompt");
      return [args] { return run_run(*args); };
    }};

}  // namespace
}  // namespace channel::cli
