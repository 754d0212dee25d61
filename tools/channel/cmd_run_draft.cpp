// `channel run --draft`: a drafter (n-gram prompt lookup or a draft model) and the target's
// greedy verify loop; the text streams to stdout, statistics go to stderr.
#include <cstdio>
#include <memory>

#include "backend/device.h"
#include "cli_common.h"
#include "model/model.h"
#include "run_draft.h"
#include "runtime/context_device.h"
#include "runtime/speculative.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace channel::cli {

namespace {

bool write_text(std::string_view text) {
  if (text.empty()) return true;
  return std::fwrite(text.data(), 1, text.size(), stdout) == text.size() &&
         std::fflush(stdout) == 0;
}

}  // namespace

std::unique_ptr<Drafter> make_drafter(const std::string& draft, const Model& target,
                                      const DeviceSpec& device, int n_ctx, int threads,
                                      LoadedModel* draft_model) {
  if (draft == "ngram") return std::make_unique<NgramDrafter>(3, 1);
  *draft_model = load_model(draft);
  if (n_ctx <= 0) {  // its training context, at most 4,096 (it restarts when outgrown)
    const int train = draft_model->model->hparams().n_ctx_train;
    n_ctx = train > 0 ? std::min(train, 4096) : 4096;
  }
  try {  // the draft model's own contiguous context, on the target's device
    return std::make_unique<ModelDrafter>(
        context_session_for(draft_model->model, device, n_ctx, threads).session, target);
  } catch (const Error& e) {
    throw_error("--draft {}: {}", draft, e.what());
  }
}

void print_draft_stats(const std::string& draft, int draft_max, const SpeculativeStats& stats) {
  std::fprintf(stderr,
               "channel: draft %s, draft-max %d | %d verify steps, %d drafted, %d accepted "
               "(%.1f%%) | %.2f tokens per verify\n",
               draft.c_str(), draft_max, stats.verify_steps, stats.drafted, stats.accepted,
               100.0 * stats.acceptance(),
               stats.verify_steps > 0
                   ? static_cast<double>(stats.accepted + stats.verify_steps) / stats.verify_steps
                   : 0.0);
}

int run_with_draft(const DraftRunArgs& args) {
  const LoadedModel loaded = load_model(args.model);
  const std::shared_ptr<const Model>& model = loaded.model;
  const Tokenizer& tokenizer = model->tokenizer();
  const int train_ctx = model->hparams().n_ctx_train;
  const int n_ctx = args.n_ctx > 0  ? args.n_ctx
                    : train_ctx > 0 ? std::min(train_ctx, args.max_ctx)
                                    : args.max_ctx;
  const std::vector<int32_t> prompt =
      tokenizer.encode(args.prompt, tokenizer.add_bos_default(), /*parse_special=*/true);
  if (prompt.empty()) throw Error("the prompt is empty and the model adds no BOS token");
  if (static_cast<int64_t>(prompt.size()) > n_ctx)
    throw_error("prompt is {} tokens, longer than the context of {} tokens (raise --ctx)",
                prompt.size(), n_ctx);

  const DeviceSpec device = parse_device(args.device);
  // The target and the draft model both on the device: a contiguous context each.
  auto make_session = [&](const std::shared_ptr<const Model>& m) {
    return context_session_for(m, device, n_ctx, args.threads).session;
  };
  const std::unique_ptr<SessionBase> session = make_session(model);
  LoadedModel draft_model;
  const std::unique_ptr<Drafter> drafter =
      make_drafter(args.draft, *model, device, n_ctx, args.threads, &draft_model);
  print_loaded(loaded);
  if (draft_model.model) print_loaded(draft_model);
  if (device.is_cuda())
    std::fprintf(stderr, "channel: running on %s (target%s)\n", device.name().c_str(),
                 draft_model.model ? " and draft model" : "");

  bool output_ok = args.no_echo || write_text(args.prompt);
  TextStreamDecoder text(tokenizer);
  SpeculativeStats stats;
  generate_greedy_speculative(
      *session, prompt, args.n_predict, drafter.get(), args.draft_max,
      [&](int32_t t) { return tokenizer.is_end_of_generation(t); }, &stats,
      [&](int32_t t) { return output_ok = write_text(text.push(t)); });
  if (output_ok) output_ok = write_text(text.flush());
  if (output_ok) write_text("\n");

  std::fprintf(stderr,
               "channel: prompt %zu tokens in %.3f s (%.2f tok/s) | generation %d tokens, "
               "%.2f tok/s | stop: %s\n",
               prompt.size(), stats.prompt_seconds,
               stats.prompt_seconds > 0 ? prompt.size() / stats.prompt_seconds : 0.0,
               stats.generated, stats.tok_per_s(),
               std::string(stop_reason_name(stats.stop)).c_str());
  print_draft_stats(args.draft, args.draft_max, stats);
  return 0;
}

}  // namespace channel::cli
