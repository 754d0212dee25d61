// `channel run`: generate text from a prompt, streaming it to stdout as it comes;
// load progress and the prompt / generation speed go to stderr. It runs on the KV slot
// ring (the 4096-slot geometry) by default, so no prompt or generation hits a context
// limit; --system FILE is prefilled as the anchors; --ctx N runs on a contiguous context of
// N tokens instead (as perplexity, logits and bench do). Either runs on the CPU or, with
// --device cuda, on a CUDA device. With --session FILE the
// conversation is resumed from / saved to FILE. With
// --memory FILE an episodic store is attached: the episodes closest to the prompt are
// recalled before it is fed, and what leaves the window is consolidated into FILE. A run on
// the slot geometry stops cleanly on SIGINT / SIGTERM: the session is saved and the memory
// flushed as after a normal end, then it exits 130 / 143 (cli_signals.h).
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "backend/device.h"
#include "chat/system_prompt.h"
#include "cli_common.h"
#include "cli_errors.h"
#include "cli_files.h"
#include "cli_progress.h"
#include "cli_signals.h"
#include "command.h"
#include "gguf/model_signature.h"
#include "memory/auto_recall.h"
#include "memory/memory_attachment.h"
#include "memory/text_cue.h"
#include "model/model.h"
#include "recall_flags.h"
#include "run_draft.h"
#include "runtime/context_device.h"
#include "runtime/generate.h"
#include "runtime/generate_stream.h"
#include "runtime/ring_device.h"
#include "runtime/session.h"
#include "runtime/session_file.h"
#include "runtime/stream_session.h"
#include "runtime/stream_speculative.h"
#include "sampling_flags.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace channel::cli {
namespace {

struct RunArgs {
  std::string model;
  std::string prompt;
  std::string prompt_file;  // -f FILE, "-" for stdin
  int n_predict = 256;
  int n_ctx = 0;  // 0: the model's training context, at most kDefaultMaxCtx
  std::string device = "cpu";  // cpu | cuda[:N]: where the ring (or the --ctx context) runs
  int threads = 1;
  bool no_echo = false;
  SamplingFlags sampling;
  std::string session;  // --session FILE: run on the slot geometry, resume and save
  int64_t slots = SlotGeometry::kDefaultSlots;
  int64_t recall = SlotGeometry::kDefaultRecall;
  std::string memory;  // --memory FILE: an episodic store attached to the session
  int64_t memory_capacity = kDefaultStoreCapacity;
  bool recall_only = false;  // --recall-only: recall from the store, store nothing
  std::string system;        // --system FILE: prefilled into the anchors of a new ring session
  RecallFlags recall_flags;
  std::vector<uint64_t> replay;  // --replay ID: fed before the prompt
  std::string draft;         // --draft ngram|MODEL: speculative greedy decoding (run_draft.h)
  int draft_max = 8;
};

constexpr int kDefaultMaxCtx = 4096;
// A prompt is fed in chunks of this many tokens, so that progress can be shown and an
// interrupt stops between two of them.
constexpr size_t kPromptChunk = 256;

std::string signal_stop_name() {
  return std::string("interrupted (") + stop_signal_name() + ")";
}

// Feeds a prompt into a session in chunks, with a progress line when it is long. Returns
// false when a stop signal came first (what was fed stays fed).
bool feed_prompt(StreamSession& s, std::span<const int32_t> prompt) {
  Progress progress("prompt");
  for (size_t done = 0; done < prompt.size();) {
    if (stop_signal()) return false;
    const size_t n = std::min(kPromptChunk, prompt.size() - done);
    s.feed(SpanType::user, prompt.subspan(done, n));
    done += n;
    if (prompt.size() > kPromptChunk)
      progress.update(static_cast<double>(done) / static_cast<double>(prompt.size()),
                      fmt::format("{}/{} prompt tokens, {:.0f} tok/s", done, prompt.size(),
                                  static_cast<double>(done) / std::max(progress.seconds(), 1e-9)));
  }
  return true;
}

// A store of `model` opened for reading only: no lock, no writes (recall counts included).
EpisodicStore open_store_read_only(const std::string& path, const Model& model) {
  StoreOptions o;
  o.read_only = true;
  o.model_hash = model_id_hash(model.gguf());
  EpisodicStore s = EpisodicStore::open(path, o);
  const StoreGeometry g = session_store_geometry(model, 1, 1);
  const StoreLayout& L = s.layout();
  if (L.num_layers != g.num_layers || L.hidden_size != g.hidden_size || L.kv_dim != g.kv_dim)
    throw_error(
        "episodic: {}: the store holds {} layers x kv_dim {} (hidden {}), a session of this model "
        "uses {} global layers x kv_dim {} (hidden {})",
        path, L.num_layers, L.kv_dim, L.hidden_size, g.num_layers, g.kv_dim, g.hidden_size);
  return s;
}

bool write_out(std::string_view text) {
  if (text.empty()) return true;
  // A closed pipe (`channel run | head`) ends generation quietly instead of by SIGPIPE.
  return std::fwrite(text.data(), 1, text.size(), stdout) == text.size() &&
         std::fflush(stdout) == 0;
}

// One turn of a conversation kept in a session file: the prompt is fed as user spans, the
// reply generated on the ring until an end-of-generation token or -n tokens.
int run_session(const RunArgs& args) {
  const LoadedModel loaded = load_model(args.model);
  const Tokenizer& tokenizer = loaded.model->tokenizer();
  RingSessionConfig config;
  config.ring.n_slots = static_cast<uint32_t>(args.slots);
  config.ring.n_recall = static_cast<uint32_t>(args.recall);
  config.n_threads = args.threads;
  config.compute = ring_compute_for(parse_device(args.device));
  const bool resume = !args.session.empty() && std::filesystem::exists(args.session);
  const bool drafting = !args.draft.empty();
  // A resumed session keeps the probe reserve it was saved with; a new one with automatic
  // recall keeps a slot free for the prompt's last token to run as a probe, and one that
  // drafts keeps room for a verify (the current token and its drafts).
  config.ring.probe_reserve = resume     ? saved_probe_reserve(args.session)
                              : drafting ? static_cast<uint32_t>(args.draft_max + 1)
                              : (!args.memory.empty() && !args.recall_flags.no_auto)
                                  ? kAutoRecallProbeReserve
                                  : 0;
  int draft_max = args.draft_max;
  if (drafting && resume && config.ring.probe_reserve < static_cast<uint32_t>(draft_max) + 1) {
    if (config.ring.probe_reserve < 2)
      throw_error(
          "--draft: {} was saved without room for a verify (probe reserve {}); a new "
          "session made with --draft has it",
          args.session, config.ring.probe_reserve);
    draft_max = static_cast<int>(config.ring.probe_reserve) - 1;
    std::fprintf(stderr, "channel: --draft-max %d: %s verifies at most %d tokens, so %d drafts\n",
                 args.draft_max, args.session.c_str(), config.ring.probe_reserve, draft_max);
  }
  // Drafting is greedy: the sampler picks the argmax, as every verify does.
  SamplerConfig sampling = args.sampling.config;
  if (drafting) sampling.temperature = 0.0f;
  // Everything is checked before any file is created: the geometry (the session allocates
  // it), the prompt, and only then the store (opened, or created last).
  std::unique_ptr<StreamSession> s;
  if (resume) {
    s = load_session_file(args.session, loaded.model, config);
    if (!args.sampling.given.empty() || drafting) {
      SamplerConfig c = args.sampling.over(s->sampler().config());
      if (drafting) {  // greedy, without the penalties the file may hold
        c.temperature = 0.0f;
        c.repeat_penalty = 1.0f;
        c.presence_penalty = c.frequency_penalty = 0.0f;
      }
      s->sampler() = s->sampler().reconfigured(c);
    }
  } else {
    s = std::make_unique<StreamSession>(loaded.model, config, sampling);
    // Cold boot: BOS (when the model wants one) and the system prompt are the anchors.
    std::vector<int32_t> anchors;
    if (tokenizer.add_bos_default() && tokenizer.bos_id() >= 0) anchors.push_back(tokenizer.bos_id());
    if (!args.system.empty()) {
      const SystemPrompt sp = read_system_prompt_file(args.system);
      if (!sp.tools.empty())
        throw_error("{}: run takes no tools (they are for channel chat and serve)", args.system);
      const std::vector<int32_t> text = tokenizer.encode(sp.text, false, true);
      anchors.insert(anchors.end(), text.begin(), text.end());
    }
    if (!anchors.empty()) s->append(SpanType::system, anchors);
    s->seal();
  }
  const std::vector<int32_t> prompt =
      tokenizer.encode(args.prompt, /*add_bos=*/false, /*parse_special=*/true);
  if (prompt.empty() && s->clock() == 0)
    throw Error("the prompt is empty and the session holds no tokens to continue from");
  // The store is opened (or created) last: a store of another model, or a damaged one, stops
  // the run here with both files as they were.
  std::unique_ptr<EpisodicStore> store;
  bool created = false;
  if (!args.memory.empty()) {
    if (args.recall_only) {
      store = std::make_unique<EpisodicStore>(open_store_read_only(args.memory, *loaded.model));
    } else {
      store = std::make_unique<EpisodicStore>(open_or_create_store(
          args.memory, *loaded.model, static_cast<uint32_t>(args.memory_capacity), 64, &created));
    }
    for (uint64_t id : args.replay)  // before anything is printed or fed
      if (!store->find(id)) throw_error("--replay: {}: no episode {}", args.memory, id);
    if (!args.recall_flags.no_auto)  // a method the store or the model cannot serve stops here
      (void)resolve_recall_method(
          *parse_recall_method(args.recall_flags.method), store->layout(),
          load_retrieval_head(loaded.model->gguf(), size_t(loaded.model->hparams().n_embd))
              .has_value(),
          args.memory);
  }
  LoadedModel draft_model;
  std::unique_ptr<Drafter> drafter;
  if (drafting)
    drafter = make_drafter(args.draft, *loaded.model, parse_device(args.device), 0, args.threads,
                           &draft_model);
  print_loaded(loaded);
  if (draft_model.model) print_loaded(draft_model);
  if (s->ring_session().on_device())
    std::fprintf(stderr, "channel: running on %s (%s)\n", parse_device(args.device).name().c_str(),
                 s->ring_session().device_name().c_str());
  if (!args.session.empty())
    std::fprintf(stderr, "channel: %s %s at clock %llu\n", resume ? "resumed" : "new session",
                 args.session.c_str(), static_cast<unsigned long long>(s->clock()));
  if (resume && !args.system.empty())
    std::fprintf(stderr, "channel: --system ignored: the session already has its anchors\n");
  std::unique_ptr<MemoryAttachment> mem;
  if (store) {
    MemoryConfig mc;
    mc.summarize = [&tokenizer](std::span<const int32_t> t) { return tokenizer.decode(t); };
    mc.query_threads = args.threads;
    mc.consolidate = !args.recall_only;
    mc.copy.bias = static_cast<float>(args.recall_flags.copy);
    mem = std::make_unique<MemoryAttachment>(s->ring_session(), *store, mc);
    s->sampler().set_logit_bias(
        [m = mem.get()](size_t n, std::vector<LogitEdit>& e) { m->recalled_bonus(n, e); });
  }
  struct ClearBias {  // before mem goes, the sampler forgets the bias that points into it
    StreamSession& s;
    ~ClearBias() { s.sampler().set_logit_bias({}); }
  } clear_bias{*s};
  if (store) {
    std::fprintf(stderr, "channel: memory %s: %s, %llu episodes\n", args.memory.c_str(),
                 created ? "created" : "opened",
                 static_cast<unsigned long long>(store->live_count()));
  }
  // Explicit foreground replay (seed 003): the episodes' tokens enter the main stream.
  for (uint64_t id : args.replay) {
    const Episode e = store->read(id);
    s->feed(SpanType::user, e.tokens);
    std::fprintf(stderr, "channel: memory %s: replayed episode %llu (%zu tokens)\n",
                 args.memory.c_str(), static_cast<unsigned long long>(id), e.tokens.size());
  }
  std::unique_ptr<AutoRecall> recall;
  if (mem && args.recall_flags.automatic() && s->ring_session().ring().config().n_recall > 0) {
    recall = std::make_unique<AutoRecall>(*mem, auto_recall_config(args.recall_flags));
    recall->set_listener([&](const RecallEvent& e) {
      std::string hits;
      for (const RecallHit& h : e.hits) hits += fmt::format(" {} ({:.3f})", h.episode_id, h.score);
      std::string skipped;
      for (uint64_t id : e.skipped) skipped += fmt::format(" {}", id);
      std::string gated;
      for (uint64_t id : e.below_gate) gated += fmt::format(" {}", id);
      for (uint64_t id : e.neighbours) hits += fmt::format(" {} (neighbour)", id);
      std::fprintf(stderr,
                   "channel: memory %s: %s recall (%s) at clock %llu:%s%s (query %.3f ms, tier 3 "
                   "%.3f ms%s%s%s%s)\n",
                   args.memory.c_str(), recall_reason_name(e.reason),
                   recall_method_name(e.method), static_cast<unsigned long long>(e.clock),
                   hits.empty() ? " none" : " recalled:", hits.c_str(), e.query_ms, e.recall_ms,
                   skipped.empty() ? "" : ", skipped damaged:", skipped.c_str(),
                   gated.empty() ? "" : ", not placed (below the score gate):", gated.c_str());
    });
  }

  catch_stop_signals();
  const auto t0 = std::chrono::steady_clock::now();
  bool prompt_fed = true;
  if (recall) {
    // The prompt is a user turn: the recall lands before its last token is computed, so the
    // reply's first token already sees it. The centroid cue stays the prompt's text cue.
    std::vector<float> centroid;
    if (!prompt.empty() && (recall->method() == RecallMethod::centroid ||
                            recall->method() == RecallMethod::hybrid))
      centroid = text_cue(*loaded.model, args.prompt, args.threads);
    feed_turn_with_recall(*s, *recall, prompt, SpanType::user, std::move(centroid));
    prompt_fed = !stop_signal();
  } else {
    prompt_fed = feed_prompt(*s, prompt);  // in chunks: progress, and an interrupt between
  }
  const double prompt_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bool output_ok = args.no_echo || write_out(args.prompt);
  int n = 0;
  std::string stop = prompt_fed ? "token limit" : signal_stop_name();
  SpeculativeStats draft_stats;
  const auto t1 = std::chrono::steady_clock::now();
  if (prompt_fed) {
    StreamGenerateCallbacks on;
    on.before_token = [&] {
      if (stop_signal()) {
        stop = signal_stop_name();
        return false;
      }
      if (recall) (void)recall->poll();  // a condition-C recall lands between tokens
      return true;
    };
    on.on_token = [&](const GeneratedToken& g) {
      if (output_ok) output_ok = write_out(g.text);
      if (!output_ok) stop = "output closed";
      return output_ok;
    };
    const StreamGenerateResult r =
        drafting ? generate_stream_speculative(*s, args.n_predict, drafter.get(), draft_max, prompt,
                                               on, &draft_stats)
                 : generate_stream(*s, args.n_predict, EogPolicy::stop, on);
    n = static_cast<int>(r.n_generated);
    if (r.stop == StopReason::end_of_generation) stop = "end of generation";
  }
  const double gen_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  if (output_ok) write_out("\n");
  if (!args.session.empty()) save_session_file(args.session, *s);
  if (mem && args.recall_only) {
    std::fprintf(stderr, "channel: memory %s: recall only, the file was not written\n",
                 args.memory.c_str());
  } else if (mem) {
    // Without a session file the window ends with this run: it is consolidated too.
    if (args.session.empty()) {
      mem->consolidate_window();
    } else {
      mem->flush();
    }
    const MemoryStats ms = mem->stats();
    std::fprintf(stderr,
                 "channel: memory %s: %llu episodes written (%llu dropped, %llu failed), %llu "
                 "stored\n",
                 args.memory.c_str(), static_cast<unsigned long long>(ms.worker.written),
                 static_cast<unsigned long long>(ms.worker.dropped),
                 static_cast<unsigned long long>(ms.worker.failed),
                 static_cast<unsigned long long>(store->live_count()));
    if (ms.worker.failed > 0)
      throw_error("memory {}: {} episodes could not be written: {}", args.memory, ms.worker.failed,
                  ms.worker.last_error);
  }
  std::fprintf(stderr,
               "channel: prompt %zu tokens in %.3f s (%.2f tok/s) | generation %d tokens, %.2f "
               "tok/s | stop: %s | clock %llu%s%s\n",
               prompt.size(), prompt_seconds,
               prompt_seconds > 0 ? static_cast<double>(prompt.size()) / prompt_seconds : 0.0, n,
               gen_seconds > 0 ? n / gen_seconds : 0.0, stop.c_str(),
               static_cast<unsigned long long>(s->clock()), args.session.empty() ? "" : ", saved ",
               args.session.c_str());
  if (drafting) print_draft_stats(args.draft, draft_max, draft_stats);
  return stopped_exit_code();
}

// Everything about the command line that can be checked before the model loads: flag
// combinations (usage errors, exit 2), then the files (readable inputs, writable outputs).
void check_run_args(const RunArgs& args) {
  try {
    validate(args.sampling.config);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (!args.draft.empty()) {
    if (!args.memory.empty())  // recall edits the logits a draft is checked against
      throw_usage("--draft: does not apply with --memory");
    if (args.sampling.was_given("--temp") && args.sampling.config.temperature > 0)
      throw_usage("--draft: needs greedy decoding (--temp 0), got --temp {}",
                  args.sampling.config.temperature);
    if (args.sampling.was_given("--repeat-penalty") && args.sampling.config.repeat_penalty != 1.0f)
      throw_usage("--draft: needs greedy decoding without --repeat-penalty");
    if (args.draft != "ngram") {
      std::error_code ec;
      if (!std::filesystem::exists(args.draft, ec))
        throw_usage("--draft: '{}' is neither 'ngram' nor an existing file (allowed: ngram, or "
                    "the path of a GGUF draft model)",
                    args.draft);
      check_input_file("--draft", args.draft, "ngram or a GGUF draft model");
    }
  }
  if (args.recall_only && args.memory.empty()) throw_usage("--recall-only: needs --memory FILE");
  if (!args.system.empty()) check_input_file("--system", args.system, "a system prompt file");
  if (!args.replay.empty() && args.memory.empty()) throw_usage("--replay: needs --memory FILE");
  if (!args.session.empty()) {
    if (std::filesystem::exists(args.session)) check_input_file("--session", args.session, "a session file");
    check_output_file("--session", args.session);
  }
  if (!args.memory.empty()) {
    const bool exists = std::filesystem::exists(args.memory);
    if (args.recall_only && !exists)
      throw_error("--recall-only: the store {} does not exist", args.memory);
    if (exists) check_input_file("--memory", args.memory, "an episodic store");
    if (!args.recall_only) check_output_file("--memory", args.memory);
  }
}

int run_run(RunArgs args) {
  check_run_args(args);
  std::signal(SIGPIPE, SIG_IGN);
  if (!args.prompt_file.empty()) args.prompt = read_input_text("-f", args.prompt_file);
  const DeviceSpec device = parse_device(args.device);
  // The slot ring is the engine (with --draft too): --ctx N asks for a contiguous context.
  if (args.n_ctx == 0) return run_session(args);
  if (!args.session.empty() || !args.memory.empty() || !args.system.empty())
    throw_usage("--ctx: runs on a contiguous context; --session, --memory and --system need the ring");
  if (!args.draft.empty()) {
    return run_with_draft({args.model, args.draft, args.draft_max, args.prompt, args.n_predict,
                           args.n_ctx, kDefaultMaxCtx, args.threads, args.no_echo, args.device});
  }

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

  ContextSession context = context_session_for(model, device, n_ctx, args.threads);
  if (device.is_cuda()) std::fprintf(stderr, "channel: running on %s\n", context.where.c_str());
  const std::unique_ptr<SessionBase> session = std::move(context.session);
  Sampler sampler(args.sampling.config);
  print_loaded(loaded);

  bool output_ok = args.no_echo || write_out(args.prompt);
  // A long prompt is fed in chunks with a progress line.
  std::optional<Progress> progress;
  if (prompt.size() > kPromptChunk) progress.emplace("prompt");
  const GenerateStats stats = generate_text(
      *session, tokenizer, sampler, prompt, args.n_predict,
      [&](std::string_view piece) { return output_ok = write_out(piece); },
      kPromptChunk, [&](size_t done, size_t total) {
        progress->update(static_cast<double>(done) / static_cast<double>(total),
                         fmt::format("{}/{} prompt tokens, {:.0f} tok/s", done, total,
                                     static_cast<double>(done) / std::max(progress->seconds(), 1e-9)));
        if (done == total) progress.reset();
      });
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
      add_model_option(sub, args->model);
      CLI::Option* prompt = sub.add_option("-p,--prompt", args->prompt, "Prompt text");
      sub.add_option("-f,--file", args->prompt_file,
                     "Read the prompt from FILE ('-': standard input), for prompts too long for "
                     "the command line")
          ->check(non_empty("a text file, or - for standard input"))
          ->excludes(prompt);
      sub.add_option("-n,--n-predict", args->n_predict,
                     "Tokens to generate (-1: until end of text or a full context)")
          ->check(integer_in(-1, 1 << 30))
          ->capture_default_str();
      add_sampling_options(sub, args->sampling);
      add_threads_option(sub, args->threads);
      sub.add_option("--ctx", args->n_ctx,
                     "Run on a contiguous context of N tokens instead of the slot ring (which "
                     "has no context limit)")
          ->check(integer_in(1, 1 << 24));
      add_device_option(sub, args->device);
      sub.add_flag("--no-echo", args->no_echo, "Print only the generated text, not the prompt");
      sub.add_option("--system", args->system,
                     "System prompt FILE, prefilled into the anchors (tier 1) of a new session, "
                     "where it never leaves (ignored on resume)")
          ->check(non_empty("a text file"));
      sub.add_option("--session", args->session,
                     "Keep the conversation in FILE: run on the KV slot geometry, resume from "
                     "FILE if it exists (with its sampler, except the sampling flags given), "
                     "save it after the reply, or when interrupted by SIGINT/SIGTERM")
          ->check(non_empty("a session file path"));
      sub.add_option("--slots", args->slots, "KV slots per global layer of the ring")
          ->check(integer_in(1, 1 << 30))
          ->capture_default_str();
      sub.add_option("--recall-slots", args->recall, "Recall slots of the ring (tier 3)")
          ->check(integer_in(0, 1 << 30))
          ->capture_default_str();
      sub.add_option("--memory", args->memory,
                     "Attach the episodic store FILE (created for this model if missing): the "
                     "episodes closest to the prompt are recalled, what leaves the window is "
                     "stored (runs on the KV slot geometry)")
          ->check(non_empty("an episodic store path"));
      add_recall_options(sub, args->recall_flags, "by the prompt");
      sub.add_option("--replay", args->replay,
                     "With --memory: feed episode ID's tokens into the conversation before the "
                     "prompt (explicit recollection; repeatable)");
      sub.add_option("--memory-capacity", args->memory_capacity,
                     "With --memory: episodes a new store holds")
          ->check(integer_in(1, 1 << 24))
          ->capture_default_str();
      sub.add_flag("--recall-only", args->recall_only,
                   "With --memory: recall from the store but store nothing of this run (a "
                   "question to the memory that does not become a memory). The store is opened "
                   "read-only and the file is not written at all: recalls are not counted in its "
                   "access counts, and it can be read while another process writes it");
      sub.add_option("--draft", args->draft,
                     "Speculative decoding, greedy only (--temp 0, the default with --draft): "
                     "draft with prompt lookup ('ngram') or a smaller GGUF model with the same "
                     "vocabulary; the output equals plain greedy decoding (on the ring, "
                     "--session too; not with --memory)")
          ->check(non_empty("ngram, or the path of a GGUF draft model"));
      sub.add_option("--draft-max", args->draft_max, "With --draft: draft tokens per verify")
          ->check(integer_in(1, 32))
          ->capture_default_str();
      CLI::App* app = &sub;
      return [args, app] {
        note_given(*app, args->sampling);
        return run_run(*args);
      };
    }};

}  // namespace
}  // namespace channel::cli
