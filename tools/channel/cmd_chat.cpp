// `channel chat`: an interactive terminal chat on the slot ring that goes on forever. Lines
// typed (or piped) are user messages; a line ending in \ continues on the next, and a """
// line opens and closes a multi-line block. Replies stream as they are generated; Ctrl-C
// interrupts a reply (or drops the line being typed) without ending the chat; Ctrl-D,
// /quit or the end of a pipe ends it. Commands: /save [FILE], /load FILE, /stats, /memory,
// /tool NAME RESULT, /help. With --session FILE the conversation is resumed from FILE and
// saved to it after every reply. SIGTERM stops the reply under way, saves the session and
// exits 143.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <filesystem>

#include "chat/python_json.h"
#include "chat_flags.h"
#include "cli_common.h"
#include "cli_signals.h"
#include "command.h"
#include "memory/episodic_store.h"
#include "model/model.h"
#include "util/error.h"

namespace channel::cli {
namespace {

std::atomic<bool> g_interrupt{false};

void on_sigint(int) { g_interrupt = true; }

struct ChatArgs {
  ChatFlags flags;
  std::string session;
};

// Lines from stdin with read(2), so that Ctrl-C (EINTR) reaches the caller at once.
class LineReader {
 public:
  enum class Result { line, interrupted, end };
  Result read(std::string& line) {
    line.clear();
    for (;;) {
      const size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return Result::line;
      }
      if (eof_) {
        if (buf_.empty()) return Result::end;
        line.swap(buf_);
        return Result::line;
      }
      char chunk[4096];
      const ssize_t n = ::read(0, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) {
        if (g_interrupt.exchange(false)) {
          buf_.clear();
          return Result::interrupted;
        }
        continue;
      }
      if (n <= 0) {
        eof_ = true;
        continue;
      }
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  std::string buf_;
  bool eof_ = false;
};

void out(std::string_view s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

void print_stats(const ChatSession& s) {
  const ChatStats st = s.stats();
  std::printf(
      "clock %llu | slots %u: anchors %u, window %u/%u, recall %u/%u (%u episodes) | spans: %llu "
      "anchor, %llu window, %llu evicted | turns %llu\n",
      static_cast<unsigned long long>(st.clock), st.n_slots, st.anchors, st.window_live,
      st.window_capacity, st.recall_used, st.recall_slots, st.recall_episodes,
      static_cast<unsigned long long>(st.anchor_spans),
      static_cast<unsigned long long>(st.window_spans),
      static_cast<unsigned long long>(st.evicted_spans), static_cast<unsigned long long>(st.turns));
  if (st.memory) {
    std::printf("memory: %llu episodes stored, %llu written this session, %llu recalls\n",
                static_cast<unsigned long long>(st.episodes_stored),
                static_cast<unsigned long long>(st.episodes_written),
                static_cast<unsigned long long>(st.recalls));
  }
  std::fflush(stdout);
}

void print_memory(ChatSession& s) {
  const EpisodicStore* store = s.store();
  if (!store) {
    out("no memory attached (start with --memory FILE)\n");
    return;
  }
  if (s.memory()) s.memory()->flush();
  const std::vector<EpisodeHeader> eps = store->list();
  std::printf("%zu episodes in %s\n", eps.size(), s.config().memory_path.c_str());
  const size_t first = eps.size() > 10 ? eps.size() - 10 : 0;
  for (size_t i = first; i < eps.size(); ++i) {
    std::string summary = store->read(eps[i].episode_id).summary;
    for (char& c : summary) {
      if (c == '\n') c = ' ';
    }
    if (summary.size() > 70) summary = summary.substr(0, 70) + "...";
    std::printf("  #%llu  %u tokens, recalled %u times: %s\n",
                static_cast<unsigned long long>(eps[i].episode_id), eps[i].token_count,
                eps[i].access_count, summary.c_str());
  }
  const auto recalls = s.last_recalls();
  if (recalls.empty()) {
    out("last recall: none\n");
  } else {
    for (RecallNote r : recalls) {
      for (char& c : r.summary) {
        if (c == '\n') c = ' ';
      }
      std::printf("last recall (%s): #%llu (score %.3f) for \"%s\": %s\n", r.reason.c_str(),
                  static_cast<unsigned long long>(r.episode_id), r.score, r.cue.c_str(),
                  r.summary.substr(0, 60).c_str());
    }
  }
  std::fflush(stdout);
}

// Generates and streams one reply; returns false when the output is gone.
void run_reply(ChatSession& s, const ChatArgs& args, bool tty) {
  g_interrupt = false;
  ReplyOptions o;
  o.max_tokens = args.flags.max_tokens;
  o.interrupt = &g_interrupt;
  bool started = false;
  o.on_text = [&](std::string_view t) {
    // Channel's answers begin with the space after "Answer:".
    if (!started) {
      const size_t b = t.find_first_not_of(' ');
      if (b == std::string_view::npos) return true;
      t = t.substr(b);
      started = true;
    }
    out(t);
    return true;
  };
  const ChatReply r = s.reply(o);
  if (r.finish == FinishReason::interrupted) out(" [interrupted]");
  out("\n");
  for (const ToolCall& c : r.parsed.tool_calls) {
    out("[tool call " + c.id + "] " + c.name + " " + python_json_dumps(c.arguments) +
        "  (answer with /tool " + c.name + " RESULT)\n");
  }
  if (tty) {
    std::fprintf(stderr, "(%d tokens, %.1f tok/s, %s)\n", r.n_tokens,
                 r.seconds > 0 ? r.n_tokens / r.seconds : 0.0, finish_reason_name(r.finish));
  }
  g_interrupt = false;
}

constexpr const char* kHelp =
    "Type a message and press Enter. End a line with \\ to continue it, or put \"\"\" on a line "
    "of its own to start and end a multi-line message.\n"
    "/save [FILE]  save the conversation (default: the --session file)\n"
    "/load FILE    resume a saved conversation\n"
    "/stats        the ring: tiers, spans, evictions, recalls\n"
    "/memory       the episodic store: episodes, what was recalled and why\n"
    "/tool NAME RESULT   give a tool's result to the model, which then replies\n"
    "/quit         leave (so does Ctrl-D); Ctrl-C interrupts a reply\n";

int run_chat(ChatArgs& args) {
  validate_chat_flags(args.flags);
  const LoadedModel loaded = load_model(args.flags.model);
  ChatConfig config = make_chat_config(args.flags, *loaded.model);
  std::unique_ptr<ChatSession> s;
  const bool resume = !args.session.empty() && std::filesystem::exists(args.session);
  if (resume) {
    s = ChatSession::load(loaded.model, config, args.session);
    if (!args.flags.sampling.given.empty())
      s->stream().set_sampler(args.flags.sampling.over(s->stream().sampler().config()));
  } else {
    s = std::make_unique<ChatSession>(loaded.model, config);
  }
  print_loaded(loaded);
  std::fprintf(stderr, "channel: chat template %s, %zu tools, %u anchor tokens%s%s\n",
               config.chat_template.name.c_str(), config.system.tools.size(), s->stats().anchors,
               resume ? ", resumed " : "", resume ? args.session.c_str() : "");

  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked read returns EINTR
  sigaction(SIGINT, &sa, nullptr);
  // SIGTERM ends the chat: the reply under way stops, the session is saved, exit 143.
  catch_stop_signal_term(&g_interrupt);
  std::signal(SIGPIPE, SIG_IGN);

  const bool tty = ::isatty(0) && ::isatty(1);
  if (tty) std::fprintf(stderr, "Type /help for commands, Ctrl-D to leave.\n");
  LineReader reader;
  std::string line, message;
  bool in_block = false;
  const auto save = [&](const std::string& path) {
    s->save(path);
    return path;
  };
  for (;;) {
    if (stop_signal()) break;
    if (tty) out(in_block || !message.empty() ? "... " : "> ");
    const LineReader::Result res = reader.read(line);
    if (res == LineReader::Result::end || stop_signal()) break;
    if (res == LineReader::Result::interrupted) {
      message.clear();
      in_block = false;
      out("\n(Ctrl-C: input dropped; /quit or Ctrl-D leaves)\n");
      continue;
    }
    if (line == "\"\"\"") {
      in_block = !in_block;
      if (in_block) continue;
    } else if (in_block) {
      message += line + "\n";
      continue;
    } else if (!line.empty() && line.back() == '\\') {
      message += line.substr(0, line.size() - 1) + "\n";
      continue;
    } else {
      message += line;
    }
    std::string text = std::move(message);
    message.clear();
    if (!in_block && text.empty()) continue;
    if (text[0] == '/') {
      const size_t sp = text.find(' ');
      const std::string cmd = text.substr(0, sp);
      std::string rest = sp == std::string::npos ? "" : std::string(trim_whitespace(text.substr(sp + 1)));
      try {
        if (cmd == "/quit" || cmd == "/exit") {
          break;
        } else if (cmd == "/help") {
          out(kHelp);
        } else if (cmd == "/stats") {
          print_stats(*s);
        } else if (cmd == "/memory") {
          print_memory(*s);
        } else if (cmd == "/save") {
          if (rest.empty()) rest = args.session;
          if (rest.empty()) throw Error("/save needs a FILE (or start with --session FILE)");
          out("saved " + save(rest) + "\n");
        } else if (cmd == "/load") {
          if (rest.empty()) throw Error("/load needs a FILE");
          auto next = ChatSession::load(loaded.model, config, rest);
          s.reset();  // the old session's memory flushes before the new one attaches
          s = std::move(next);
          out("loaded " + rest + " at clock " + std::to_string(s->stats().clock) + "\n");
        } else if (cmd == "/tool") {
          const size_t sp2 = rest.find(' ');
          if (rest.empty() || sp2 == std::string::npos) throw Error("/tool needs NAME and RESULT");
          s->add_tool_result(rest.substr(0, sp2), trim_whitespace(rest.substr(sp2 + 1)));
          run_reply(*s, args, tty);
          if (!args.session.empty()) save(args.session);
        } else {
          throw Error("unknown command " + cmd + " (/help lists them)");
        }
      } catch (const Error& e) {
        std::fprintf(stderr, "channel: error: %s\n", e.what());
      }
      continue;
    }
    s->add_user(text);
    run_reply(*s, args, tty);
    if (!args.session.empty()) save(args.session);
  }
  if (!args.session.empty()) {
    save(args.session);
    std::fprintf(stderr, "channel: saved %s at clock %llu\n", args.session.c_str(),
                 static_cast<unsigned long long>(s->stats().clock));
  }
  if (stop_signal()) std::fprintf(stderr, "channel: chat ended by %s\n", stop_signal_name());
  return stopped_exit_code();
}

const CommandRegistrar registrar{
    "chat", "Interactive chat on the slot ring (never hits a context limit)", [](CLI::App& sub) {
      auto args = std::make_shared<ChatArgs>();
      add_chat_options(sub, args->flags);
      sub.add_option("--session", args->session,
                     "Keep the conversation in FILE: resumed from it when it exists, saved to it "
                     "after every reply");
      CLI::App* app = &sub;
      return [args, app] {
        note_given(*app, args->flags.sampling);
        return run_chat(*args);
      };
    }};

}  // namespace
}  // namespace channel::cli
