// `channel stream`: one session that never ends, through the C API (include/channel.h). It
// feeds a text file (user spans cut at sentence ends) or the model's own generation through
// the KV slot geometry and prints one JSON line of geometry stats every K tokens on stdout.
// Generated text goes to stderr with --show-text; --session FILE resumes and saves;
// --memory FILE consolidates what leaves the window into an episodic store.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backend/device.h"
#include "channel.h"
#include "cli_common.h"
#include "cli_errors.h"
#include "cli_files.h"
#include "cli_progress.h"
#include "cli_signals.h"
#include "command.h"
#include "kv/slot_geometry.h"
#include "memory/auto_recall.h"
#include "recall_flags.h"
#include "sampling_flags.h"
#include "util/error.h"

namespace channel::cli {
namespace {

struct StreamArgs {
  std::string model;
  int64_t tokens = -1;  // < 0: the whole file with -f, kDefaultGenerate when generating
  int64_t slots = 4096;
  int64_t recall = SlotGeometry::kDefaultRecall;
  std::string system_file;
  int64_t stats_every = 256;
  std::string text_file;
  std::string session_file;
  std::string memory_file;
  int64_t memory_capacity = kDefaultStoreCapacity;
  bool show_text = false;
  // Automatic recall (with --memory)
  RecallFlags recall_flags;
  bool turns = false;  // -f: blank lines end turns
  int threads = 1;
  std::string device = "cpu";  // --device: where the session's forward and K/V live
  SamplingFlags sampling;
};

// The CLI has no logit-bias flag: the C API's bias stays empty.
channel_sampler_params to_c(const SamplerConfig& c) {
  return {c.temperature,       c.top_k,         c.top_p, c.min_p,
          c.repeat_penalty,    c.repeat_last_n, c.seed,  c.presence_penalty,
          c.frequency_penalty, nullptr,         0};
}
SamplerConfig from_c(const channel_sampler_params& p) {
  SamplerConfig c;
  c.temperature = p.temperature;
  c.top_k = p.top_k;
  c.top_p = p.top_p;
  c.min_p = p.min_p;
  c.repeat_penalty = p.repeat_penalty;
  c.repeat_last_n = p.repeat_last_n;
  c.seed = p.seed;
  c.presence_penalty = p.presence_penalty;
  c.frequency_penalty = p.frequency_penalty;
  return c;
}

constexpr int64_t kDefaultGenerate = 1024;
// -f text is fed at most this many tokens at a time (one forward batch of the session), so
// that an interrupt stops within one decode step.
constexpr size_t kFeedChunk = 64;

void check(channel_status status) {
  if (status != CHANNEL_OK) throw Error(channel_last_error());
}

std::vector<int32_t> tokenize(const channel_model* model, const std::string& text, int add_bos) {
  std::vector<int32_t> ids(text.size() + 2);
  size_t n = 0;
  channel_status st =
      channel_tokenize(model, text.data(), text.size(), add_bos, 0, ids.data(), ids.size(), &n);
  if (st == CHANNEL_ERR_BUFFER) {
    ids.resize(n);
    st = channel_tokenize(model, text.data(), text.size(), add_bos, 0, ids.data(), ids.size(), &n);
  }
  check(st);
  ids.resize(n);
  return ids;
}

// A piece of a -f text: user text, or the blank lines that end a turn.
struct TextPiece {
  std::string text;
  bool turn_end = false;
};

// --turns: paragraphs (user text) and the runs of blank lines between them (turn ends). A
// blank line is a newline followed by optional spaces/tabs and another newline; the turn end
// is every newline and blank from the first newline on, so the pieces concatenate back to the
// text exactly.
std::vector<TextPiece> split_turns(const std::string& text) {
  std::vector<TextPiece> out;
  size_t start = 0, i = 0;
  while (i < text.size()) {
    if (text[i] != '\n') {
      ++i;
      continue;
    }
    size_t j = i + 1, newlines = 1;
    while (j < text.size() &&
           (text[j] == '\n' || text[j] == ' ' || text[j] == '\t' || text[j] == '\r')) {
      newlines += text[j] == '\n';
      ++j;
    }
    if (newlines < 2) {
      i = j;
      continue;
    }
    // Trailing blanks of the last line before the next paragraph belong to that paragraph.
    size_t end = j;
    while (end > i && text[end - 1] != '\n') --end;
    if (i > start) out.push_back({text.substr(start, i - start), false});
    out.push_back({text.substr(i, end - i), true});
    start = i = end;
  }
  if (start < text.size()) out.push_back({text.substr(start), false});
  return out;
}

uint64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// The two parts of RSS from /proc/self/status: anonymous memory (heap, KV arenas) and mapped
// file pages (the model, the episodic store); 0 where a line is missing.
struct RssParts {
  uint64_t anon = 0, file = 0;
};
RssParts rss_parts() {
  std::ifstream f("/proc/self/status");
  RssParts r;
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (f >> key) {
    if (key == "RssAnon:" && f >> kib >> unit) r.anon = kib << 10;
    else if (key == "RssFile:" && f >> kib >> unit) r.file = kib << 10;
  }
  return r;
}

struct Handles {
  channel_model* model = nullptr;
  channel_session* session = nullptr;
  ~Handles() {
    channel_session_free(session);
    channel_model_free(model);
  }
};

// Counts streamed tokens and prints the stats line at every multiple of K.
class Stats {
 public:
  Stats(const channel_session* s, int64_t every) : s_(s), every_(every), last_(Clock::now()) {}

  void add(int64_t n) {
    count_ += n;
    if (count_ % every_ != 0) return;
    const auto now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    channel_geometry g;
    check(channel_session_get_geometry(s_, &g));
    const RssParts rss = rss_parts();
    std::printf(
        "{\"clock\":%llu,\"anchors\":%u,\"window_used\":%u,\"recall_used\":%u,\"spans\":%llu,"
        "\"evicted_spans\":%llu,\"max_distance\":%llu,\"rss_bytes\":%llu,\"rss_anon_bytes\":%llu,"
        "\"rss_file_bytes\":%llu,\"tok_per_s\":%.1f}\n",
        static_cast<unsigned long long>(g.clock), g.anchors, g.window_used, g.recall_used,
        static_cast<unsigned long long>(g.spans), static_cast<unsigned long long>(g.evicted_spans),
        static_cast<unsigned long long>(g.max_distance),
        static_cast<unsigned long long>(rss_bytes()), static_cast<unsigned long long>(rss.anon),
        static_cast<unsigned long long>(rss.file), seconds > 0 ? static_cast<double>(every_) / seconds : 0.0);
    std::fflush(stdout);
  }
  int64_t count() const { return count_; }
  // Tokens until the next stats line.
  int64_t to_next() const { return every_ - count_ % every_; }

 private:
  using Clock = std::chrono::steady_clock;
  const channel_session* s_;
  int64_t every_;
  int64_t count_ = 0;
  Clock::time_point last_;
};

struct GenerateContext {
  Stats* stats;
  bool show_text;
};

int on_token(int32_t, const char* text, size_t len, void* user) {
  auto* ctx = static_cast<GenerateContext*>(user);
  if (ctx->show_text && len > 0) {
    std::fwrite(text, 1, len, stderr);
    std::fflush(stderr);
  }
  try {
    ctx->stats->add(1);
  } catch (const Error&) {
    return 1;  // cannot happen for a valid session; ends the stream rather than throw in C
  }
  return stop_signal() ? 1 : 0;
}

void print_ids(const char* name, const uint64_t* ids, size_t n) {
  std::printf(",\"%s\":[", name);
  for (size_t i = 0; i < n; ++i)
    std::printf("%s%llu", i ? "," : "", static_cast<unsigned long long>(ids[i]));
  std::printf("]");
}

// One JSON line per recall event on stdout, beside the stats lines.
void print_recall_event(const channel_recall_event* e, void*) {
  std::printf("{\"event\":\"recall\",\"reason\":\"%s\",\"method\":\"%s\",\"clock\":%llu,"
              "\"hits\":[",
              e->reason, e->method, static_cast<unsigned long long>(e->clock));
  for (size_t i = 0; i < e->n_hits; ++i)
    std::printf("%s{\"id\":%llu,\"score\":%.6g}", i ? "," : "",
                static_cast<unsigned long long>(e->hit_ids[i]), e->hit_scores[i]);
  std::printf("]");
  print_ids("recalled", e->recalled, e->n_recalled);
  print_ids("kept", e->kept, e->n_kept);
  print_ids("released", e->released, e->n_released);
  print_ids("neighbours", e->neighbours, e->n_neighbours);
  print_ids("skipped", e->skipped, e->n_skipped);
  print_ids("below_gate", e->below_gate, e->n_below_gate);
  std::printf(",\"query_ms\":%.3f,\"recall_ms\":%.3f}\n", e->query_ms, e->recall_ms);
  std::fflush(stdout);
}

channel_recall_method recall_method_of(const std::string& s) {
  if (s == "centroid") return CHANNEL_RECALL_CENTROID;
  if (s == "keys") return CHANNEL_RECALL_KEYS;
  if (s == "proj") return CHANNEL_RECALL_PROJ;
  if (s == "hybrid") return CHANNEL_RECALL_HYBRID;
  return CHANNEL_RECALL_AUTO;
}

int run_stream(const StreamArgs& args) {
  // Input files are checked before the model loads, so that bad input costs nothing.
  if (args.turns && args.text_file.empty()) throw_usage("--turns: needs a text file (-f)");
  if (!args.session_file.empty()) {
    if (std::filesystem::exists(args.session_file))
      check_input_file("--session", args.session_file, "a session file");
    check_output_file("--session", args.session_file);
  }
  if (!args.memory_file.empty()) {
    if (std::filesystem::exists(args.memory_file))
      check_input_file("--memory", args.memory_file, "an episodic store");
    check_output_file("--memory", args.memory_file);
  }
  const std::string text = args.text_file.empty() ? "" : read_input_text("-f", args.text_file);
  const std::string system =
      args.system_file.empty() ? "" : read_input_text("--system", args.system_file);
  const bool resume = !args.session_file.empty() && std::filesystem::exists(args.session_file);

  Handles h;
  const auto t_load = std::chrono::steady_clock::now();
  {
    // The same progress line as the other commands' loads.
    Progress progress(Progress::load_label(args.model.empty() ? "(built-in model)" : args.model));
    channel_model_load_params load{};
    load.progress = [](float fraction, void* user) {
      try {
        static_cast<Progress*>(user)->update_load(fraction);
      } catch (...) {  // progress is best effort; nothing may unwind through the C API
      }
    };
    load.progress_user_data = &progress;
    if (args.model.empty()) {
      check(channel_model_load_default_ex(&load, &h.model));
    } else {
      check(channel_model_load_ex(args.model.c_str(), &load, &h.model));
    }
  }
  channel_model_info info;
  check(channel_model_get_info(h.model, &info));

  channel_session_params params = channel_session_default_params();
  params.n_slots = static_cast<uint32_t>(args.slots);
  params.n_recall = static_cast<uint32_t>(args.recall);
  params.n_threads = args.threads;
  params.device = args.device.c_str();
  // As `channel run`: a resumed session keeps its probe reserve, a new one with automatic
  // recall keeps one slot free, so that a later `run --session` can probe its prompt.
  params.probe_reserve = resume ? saved_probe_reserve(args.session_file)
                         : (!args.memory_file.empty() && !args.recall_flags.no_auto)
                             ? kAutoRecallProbeReserve
                             : 0;
  if (resume) {
    check(channel_session_load(h.model, args.session_file.c_str(), &params, &h.session));
    if (!args.sampling.given.empty()) {
      channel_sampler_params saved;
      check(channel_session_get_sampler(h.session, &saved));
      const channel_sampler_params merged = to_c(args.sampling.over(from_c(saved)));
      check(channel_session_update_sampler(h.session, &merged));
    }
  } else {
    const channel_sampler_params sampling = to_c(args.sampling.config);
    check(channel_session_create(h.model, &params, &sampling, &h.session));
    // Cold boot: BOS (when the model wants one) and the system prompt become the anchors.
    const std::vector<int32_t> anchors = tokenize(h.model, system, CHANNEL_ADD_BOS_DEFAULT);
    if (!anchors.empty())
      check(channel_session_append(h.session, CHANNEL_SPAN_SYSTEM, anchors.data(), anchors.size()));
    check(channel_session_seal(h.session));
  }
  // Before the first output line: a refused store is the only line on stderr.
  if (!args.memory_file.empty()) {
    check(channel_session_attach_memory(h.session, args.memory_file.c_str(),
                                        static_cast<uint32_t>(args.memory_capacity)));
    check(channel_session_set_recall_copy(h.session, static_cast<float>(args.recall_flags.copy)));
    if (args.recall_flags.automatic() && args.recall > 0) {
      channel_auto_recall_params ap = channel_auto_recall_default_params();
      const RecallFlags& f = args.recall_flags;
      ap.method = recall_method_of(f.method);
      ap.k = static_cast<uint32_t>(f.k);
      ap.neighbours = static_cast<uint32_t>(f.neighbours);
      ap.lexical = static_cast<float>(f.lexical);
      ap.min_score_ratio = static_cast<float>(f.min_ratio);
      ap.velocity_factor = f.velocity;
      ap.cooldown_tokens = static_cast<uint32_t>(f.cooldown);
      ap.callback = print_recall_event;
      check(channel_session_set_auto_recall(h.session, &ap));
    }
  }
  const bool auto_recall =
      !args.memory_file.empty() && args.recall_flags.automatic() && args.recall > 0;
  std::fprintf(stderr, "channel: loaded %s: %s, %d layers, vocab %d in %.2f s; %s\n",
               args.model.empty() ? "(built-in model)" : args.model.c_str(), info.arch,
               info.n_layer, info.n_vocab,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count(),
               resume ? ("resumed " + args.session_file).c_str() : "new session");
  if (parse_device(args.device).is_cuda())
    std::fprintf(stderr, "channel: running on %s\n", parse_device(args.device).name().c_str());
  if (resume && !system.empty())
    std::fprintf(stderr, "channel: --system ignored: the session already has its anchors\n");

  catch_stop_signals();
  Stats stats(h.session, args.stats_every);
  const auto t0 = std::chrono::steady_clock::now();
  if (!args.text_file.empty()) {
    const int64_t limit = args.tokens < 0 ? INT64_MAX : args.tokens;
    const std::string name = args.text_file == "-" ? "standard input" : args.text_file;
    Progress progress("stream");
    size_t bytes_before = 0;  // of the pieces already fed
    // Each piece is fed as user text, or (--turns) its blank lines as a turn_end span.
    for (const TextPiece& piece : args.turns ? split_turns(text) : std::vector<TextPiece>{{text}}) {
      if (stop_signal() || stats.count() >= limit) break;
      const std::vector<int32_t> ids = tokenize(h.model, piece.text, 0);
      const size_t total = std::min(ids.size(), static_cast<size_t>(limit - stats.count()));
      if (piece.turn_end && total > 0) {
        check(channel_session_append(h.session, CHANNEL_SPAN_TURN_END, ids.data(), total));
        stats.add(static_cast<int64_t>(total));
        // A turn boundary: the context is the cue. No reply waits on it, so the query runs
        // beside the stream and lands between the next chunks.
        if (auto_recall) check(channel_session_recall_turn(h.session, 1));
        bytes_before += piece.text.size();
        continue;
      }
      size_t done = 0;
      while (done < total && !stop_signal()) {
        // Pieces of at most kFeedChunk (64) tokens: an interrupt stops within one, and a
        // background recall lands between them (fed text continues its sentence across
        // pieces: same spans).
        const size_t n = std::min({total - done, static_cast<size_t>(stats.to_next()), kFeedChunk});
        if (auto_recall) check(channel_session_recall_poll(h.session));
        check(channel_session_feed(h.session, CHANNEL_SPAN_USER, ids.data() + done, n));
        done += n;
        stats.add(static_cast<int64_t>(n));
        // Done: the share of the file's bytes fed (or of --tokens, when it ends first).
        double fraction = (static_cast<double>(bytes_before) +
                           static_cast<double>(piece.text.size()) * static_cast<double>(done) /
                               static_cast<double>(std::max<size_t>(ids.size(), 1))) /
                          static_cast<double>(std::max<size_t>(text.size(), 1));
        if (limit != INT64_MAX)
          fraction = std::max(fraction, static_cast<double>(stats.count()) / static_cast<double>(limit));
        progress.update(fraction, fmt::format("{:.0f}% of {}, {} tokens, {:.0f} tok/s",
                                              fraction * 100.0, name, stats.count(),
                                              static_cast<double>(stats.count()) /
                                                  std::max(progress.seconds(), 1e-9)));
      }
      bytes_before += piece.text.size();
    }
  } else {
    const int64_t n = args.tokens < 0 ? kDefaultGenerate : args.tokens;
    GenerateContext ctx{&stats, args.show_text};
    if (n > 0)
      check(channel_session_generate(h.session, n, CHANNEL_EOG_TURN_END, on_token, &ctx, nullptr,
                                     nullptr));
    if (args.show_text) std::fputc('\n', stderr);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (!args.session_file.empty()) check(channel_session_save(h.session, args.session_file.c_str()));
  if (!args.memory_file.empty()) {
    // Without a session file the window ends here: it is consolidated too.
    check(channel_session_memory_flush(h.session, args.session_file.empty() ? 1 : 0));
    std::fprintf(stderr, "channel: memory %s: consolidated\n", args.memory_file.c_str());
  }
  channel_geometry g;
  check(channel_session_get_geometry(h.session, &g));
  const std::string interrupted =
      stop_signal() ? std::string(", interrupted (") + stop_signal_name() + ")" : "";
  std::fprintf(stderr,
               "channel: streamed %lld tokens in %.2f s (%.1f tok/s), clock %llu, RSS %s%s%s\n",
               static_cast<long long>(stats.count()), seconds,
               seconds > 0 ? static_cast<double>(stats.count()) / seconds : 0.0,
               static_cast<unsigned long long>(g.clock), format_bytes(rss_bytes()).c_str(),
               interrupted.c_str(),
               args.session_file.empty() ? "" : (", saved " + args.session_file).c_str());
  return stopped_exit_code();
}

const CommandRegistrar registrar{
    "stream", "Stream a text file or the model's own generation through one never-ending session",
    [](CLI::App& sub) {
      auto args = std::make_shared<StreamArgs>();
      add_model_option(sub, args->model);
      sub.add_option("--tokens", args->tokens,
                     "Tokens to stream (default: all of -f, or 1024 generated)")
          ->check(integer_in(0, int64_t{1} << 40));
      sub.add_option("--slots", args->slots, "KV slots per global layer")
          ->check(integer_in(1, 1 << 30))
          ->capture_default_str();
      sub.add_option("--recall-slots", args->recall, "Recall slots (tier 3)")
          ->check(integer_in(0, 1 << 30))
          ->capture_default_str();
      sub.add_option("--system", args->system_file, "System prompt file: the anchors")
          ->check(non_empty("a text file"));
      sub.add_option("--stats-every", args->stats_every, "Print a JSON stats line every K tokens")
          ->check(integer_in(1, int64_t{1} << 40))
          ->capture_default_str();
      sub.add_option("-f,--file", args->text_file,
                     "Feed this text file ('-': standard input; user spans cut at sentence ends) "
                     "instead of generating; a progress line shows how far it is")
          ->check(non_empty("a text file, or - for standard input"));
      sub.add_flag("--turns", args->turns,
                   "With -f: blank lines end turns (fed as turn_end spans), so that each "
                   "paragraph of the file is a turn and episodes end at paragraph ends");
      sub.add_option("--session", args->session_file,
                     "Resume from FILE if it exists (with its sampler, except the sampling flags "
                     "given); save the session to FILE at the end, or when interrupted by "
                     "SIGINT/SIGTERM")
          ->check(non_empty("a session file path"));
      sub.add_flag("--show-text", args->show_text, "Write the generated text to stderr");
      sub.add_option("--memory", args->memory_file,
                     "Consolidate what leaves the window into the episodic store FILE (created "
                     "for the model if missing)")
          ->check(non_empty("an episodic store path"));
      sub.add_option("--memory-capacity", args->memory_capacity,
                     "With --memory: episodes a new store holds")
          ->check(integer_in(1, 1 << 24))
          ->capture_default_str();
      add_recall_options(sub, args->recall_flags, "at each turn boundary");
      add_sampling_options(sub, args->sampling);
      add_threads_option(sub, args->threads);
      add_device_option(sub, args->device);
      CLI::App* app = &sub;
      return [args, app] {
        note_given(*app, args->sampling);
        return run_stream(*args);
      };
    }};

}  // namespace
}  // namespace channel::cli
