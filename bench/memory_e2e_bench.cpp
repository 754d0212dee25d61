// End to end episodic memory (slow: about 10^5 tokens through a real model). Facts in the
// format Channel's models were trained on ("Remember this: the access code of Vera Okafor
// is 48213.") are planted in a long stream of filler text that wraps the 4096-slot window
// many times; everything evicted is consolidated into a store. Then, for each fact, a cue
// that paraphrases it as a question ("Question: What is the access code of Vera Okafor?")
// is encoded and the store queried: recall@1 and recall@3 of the episode that holds the
// fact (each fact is told as a user turn of its own, so it is cut into an episode of its own).
// Finally the model is asked the question (greedy, through probes) with no recall,
// with the top 3 episodes recalled into tier 3, and with the right episode recalled.
//
// Runs once per model: models/channel-default.gguf and models/channel-bounded.gguf (skipped
// with a message while the session cannot run it). Filler text: the files named in
// CHANNEL_E2E_TEXT (colon-separated), else this repository's docs and sources.
// CHANNEL_E2E_TOKENS overrides the stream length (at least 3 x 4096 + a few hundred).
// A per-fact table goes to stderr; the counters carry the totals.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <unistd.h>

#include "memory/consolidation.h"
#include "memory/memory_attachment.h"
#include "memory/text_cue.h"
#include "model/model.h"
#include "runtime/ring_session.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace channel {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string filler_text() {
  std::vector<fs::path> files;
  if (const char* env = std::getenv("CHANNEL_E2E_TEXT")) {
    std::stringstream ss(env);
    std::string item;
    while (std::getline(ss, item, ':'))
      if (!item.empty()) files.emplace_back(item);
  } else {
    const fs::path root(CHANNEL_SOURCE_DIR);
    for (const char* dir : {"docs", "src"})
      for (const auto& e : fs::recursive_directory_iterator(root / dir))
        if (e.is_regular_file()) files.push_back(e.path());
    files.push_back(root / "README.md");
    std::sort(files.begin(), files.end());
  }
  std::string all;
  for (const auto& f : files) all += read_file(f) + "\n\n";
  return all;
}

// Sentences (cut after ". " or at a blank line), each at most 48 tokens.
std::vector<std::vector<int32_t>> filler_spans(const Tokenizer& tok, const std::string& text) {
  std::vector<std::vector<int32_t>> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = start;
    while (end < text.size()) {
      if (text.compare(end, 2, ". ") == 0) {
        end += 2;
        break;
      }
      if (text.compare(end, 2, "\n\n") == 0) {
        end += 2;
        break;
      }
      ++end;
    }
    const auto ids = tok.encode(std::string_view(text).substr(start, end - start), false, false);
    for (size_t i = 0; i < ids.size(); i += 48)
      out.emplace_back(ids.begin() + i, ids.begin() + std::min(ids.size(), i + 48));
    start = end;
  }
  return out;
}

struct Fact {
  std::string entity, attribute, value, text, cue;
  uint64_t clock_begin = 0, clock_end = 0;
};

// The recall task's vocabulary (train/tokenize_corpus.py), with another seed.
std::vector<Fact> make_facts(size_t n) {
  const char* first[] = {"Alice", "Bruno", "Chloe", "Dmitri", "Elena", "Farid", "Grace", "Hugo",
                         "Ines",  "Jonas", "Keiko", "Liam",   "Maya",  "Olga",  "Pedro", "Rosa"};
  const char* last[] = {"Abbott", "Baker", "Castillo", "Dunn",  "Ellis", "Fischer", "Garcia",
                        "Hale",   "Novak", "Okafor",   "Price", "Reyes", "Tanaka",  "Weber"};
  const char* attr[] = {"secret code",   "room number",  "locker number",  "access code",
                        "ticket number", "order number", "account number", "serial number"};
  const char* templ[] = {"Remember this: the %s of %s is %s.",
                         "For the record, the %s of %s is %s.", "Important: the %s for %s is %s."};
  std::mt19937_64 rng(2024);
  std::set<std::string> used;
  std::vector<Fact> facts;
  while (facts.size() < n) {
    Fact f;
    f.entity = std::string(first[rng() % std::size(first)]) + " " + last[rng() % std::size(last)];
    f.attribute = attr[rng() % std::size(attr)];
    if (!used.insert(f.entity).second) continue;  // one fact per person
    f.value = std::to_string(1000 + rng() % 90000);
    char buf[256];
    std::snprintf(buf, sizeof buf, templ[facts.size() % std::size(templ)], f.attribute.c_str(),
                  f.entity.c_str(), f.value.c_str());
    f.text = "\n" + std::string(buf) + "\n";
    f.cue = "\nQuestion: What is the " + f.attribute + " of " + f.entity + "?\nAnswer:";
    facts.push_back(f);
  }
  return facts;
}

// Greedy continuation of `prompt` through probes (the session is left as it was).
std::string greedy_answer(RingSession& s, const Tokenizer& tok,
                          const std::vector<int32_t>& prompt) {
  std::vector<int32_t> ids = prompt;
  std::string text;
  for (int step = 0; step < 8; ++step) {
    const std::vector<float> logits = s.probe(ids, SpanType::user);
    const auto best =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (tok.is_end_of_generation(best)) break;
    const std::string piece = tok.token_to_piece(best, false);
    if (piece.find('\n') != std::string::npos || piece.find('.') != std::string::npos) break;
    text += piece;
    ids.push_back(best);
  }
  return text;
}

void BM_EpisodicEndToEnd(benchmark::State& state, const char* model_file) {
  const std::string path = std::string(CHANNEL_SOURCE_DIR) + "/models/" + model_file;
  const auto model = Model::load(path);
  const Tokenizer& tok = model->tokenizer();
  RingSessionConfig cfg;
  cfg.ring.n_slots = 4096;
  cfg.ring.n_recall = 192;
  cfg.ring.probe_reserve = 64;
  // At most one thread per core: the pool's workers spin.
  cfg.n_threads = std::min(static_cast<int>(state.range(0)),
                           static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  cfg.n_batch = 64;
  std::unique_ptr<RingSession> session;
  try {
    session = std::make_unique<RingSession>(model, cfg);
  } catch (const Error& e) {
    state.SkipWithError(e.what());
    for (auto _ : state) {
    }
    return;
  }
  RingSession& s = *session;
  const std::string store_path =
      (fs::temp_directory_path() / ("channel_e2e_" + std::to_string(::getpid()) + ".episodic.mem"))
          .string();
  fs::remove(store_path);
  const auto spans = filler_spans(tok, filler_text());
  auto facts = make_facts(24);
  const char* tokens_env = std::getenv("CHANNEL_E2E_TOKENS");  // a shorter run, for a check
  const uint64_t total =
      tokens_env ? std::strtoull(tokens_env, nullptr, 10) : static_cast<uint64_t>(state.range(1));
  for (auto _ : state) {
    EpisodicStore store = open_or_create_store(store_path, *model, 16384, 64);
    MemoryConfig mc;
    mc.queue_capacity = 4096;
    mc.summarize = [&](std::span<const int32_t> t) { return tok.decode(t); };
    MemoryAttachment mem(s, store, mc);
    std::vector<int32_t> sys = {tok.bos_id()};
    const auto sys_text = tok.encode("The following is a long technical document.\n", false, false);
    sys.insert(sys.end(), sys_text.begin(), sys_text.end());
    s.append(SpanType::system, sys);
    s.seal();
    // Facts every `gap` tokens, the last one at least two windows before the end.
    const uint64_t gap = (total - 3 * cfg.ring.n_slots) / facts.size();
    size_t next_fact = 0, span_i = 0;
    const std::vector<int32_t> newline = tok.encode("\n", false, false);
    const auto t0 = std::chrono::steady_clock::now();
    while (s.ring().clock() < total) {
      if (next_fact < facts.size() && s.ring().clock() >= 2000 + next_fact * gap) {
        // The fact is a user turn of its own: turn_end spans around it, so that the staging
        // buffer cuts the episode at its boundaries (trigger A).
        Fact& f = facts[next_fact++];
        const auto ids = tok.encode(f.text, false, false);
        s.append(SpanType::turn_end, newline);
        f.clock_begin = s.ring().clock();
        s.append(SpanType::user, ids);
        f.clock_end = s.ring().clock();
        s.append(SpanType::turn_end, newline);
        continue;
      }
      s.append(SpanType::user, spans[span_i++ % spans.size()]);
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    mem.flush();
    const MemoryStats st = mem.stats();
    // The episodes that hold each fact's tokens.
    const auto eps = store.list();
    int at1 = 0, at3 = 0, ctx_at1 = 0, ctx_at3 = 0, said_none = 0, said_top3 = 0, said_right = 0;
    int hits_on_facts = 0;  // of the 3 x facts top-3 hits, how many are some fact's episode
    std::set<uint64_t> fact_episodes;
    for (const Fact& f : facts)
      for (const auto& h : eps)
        if (h.start_clock < f.clock_end && f.clock_begin < h.start_clock + h.token_count)
          fact_episodes.insert(h.episode_id);
    std::fprintf(stderr,
                 "\n%s: %llu tokens in %.1f s (%.0f tok/s), %llu evicted spans, %llu "
                 "episodes written, %llu dropped\n",
                 model_file, static_cast<unsigned long long>(s.ring().clock()), secs,
                 static_cast<double>(s.ring().clock()) / secs,
                 static_cast<unsigned long long>(s.ring().evicted_spans()),
                 static_cast<unsigned long long>(st.worker.written),
                 static_cast<unsigned long long>(st.worker.dropped));
    std::fprintf(stderr, "%-28s %-15s %5s %5s  %-10s %-10s %-10s\n", "fact", "value", "rank", "ctx",
                 "no recall", "top-3", "right ep.");
    for (const Fact& f : facts) {
      std::set<uint64_t> right;
      for (const auto& h : eps)
        if (h.start_clock < f.clock_end && f.clock_begin < h.start_clock + h.token_count)
          right.insert(h.episode_id);
      const auto rank_of = [&](const std::vector<RecallHit>& hits) {
        for (size_t i = 0; i < hits.size(); ++i)
          if (right.count(hits[i].episode_id)) return static_cast<int>(i) + 1;
        return 0;
      };
      const std::vector<float> cue = text_cue(*model, f.cue, cfg.n_threads);
      const auto hits = mem.query(cue, 3);
      const int rank = rank_of(hits);
      for (const RecallHit& h : hits) hits_on_facts += fact_episodes.count(h.episode_id) ? 1 : 0;
      at1 += rank == 1;
      at3 += rank >= 1 && rank <= 3;
      const auto cue_ids = tok.encode(f.cue, false, false);
      const auto ctx_hits = mem.query(mem.encode_in_context(cue_ids), 3);
      const int ctx_rank = rank_of(ctx_hits);
      ctx_at1 += ctx_rank == 1;
      ctx_at3 += ctx_rank >= 1 && ctx_rank <= 3;

      mem.release_all();
      const std::string a_none = greedy_answer(s, tok, cue_ids);
      for (auto it = hits.rbegin(); it != hits.rend(); ++it) mem.recall(it->episode_id, it->score);
      const std::string a_top3 = greedy_answer(s, tok, cue_ids);
      mem.release_all();
      for (uint64_t id : right) mem.recall(id);
      const std::string a_right = greedy_answer(s, tok, cue_ids);
      mem.release_all();
      const auto has = [&](const std::string& a) { return a.find(f.value) != std::string::npos; };
      said_none += has(a_none);
      said_top3 += has(a_top3);
      said_right += has(a_right);
      std::fprintf(stderr, "%-28s %-15s %5d %5d  %-10s %-10s %-10s\n",
                   (f.entity + " " + f.attribute.substr(0, 6)).c_str(), f.value.c_str(), rank,
                   ctx_rank, a_none.substr(0, 10).c_str(), a_top3.substr(0, 10).c_str(),
                   a_right.substr(0, 10).c_str());
    }
    const double n = static_cast<double>(facts.size());
    state.counters["tokens"] = static_cast<double>(s.ring().clock());
    state.counters["stream_tok_s"] = static_cast<double>(s.ring().clock()) / secs;
    state.counters["episodes"] = static_cast<double>(st.worker.written);
    state.counters["dropped"] = static_cast<double>(st.worker.dropped);
    state.counters["recall_at_1"] = at1 / n;
    state.counters["top3_hits_on_fact_episodes"] = hits_on_facts / (3 * n);
    state.counters["recall_at_3"] = at3 / n;
    state.counters["ctx_recall_at_1"] = ctx_at1 / n;
    state.counters["ctx_recall_at_3"] = ctx_at3 / n;
    state.counters["said_no_recall"] = said_none / n;
    state.counters["said_top3_recall"] = said_top3 / n;
    state.counters["said_right_recall"] = said_right / n;
  }
  fs::remove(store_path);
}

BENCHMARK_CAPTURE(BM_EpisodicEndToEnd, default_model, "channel-default.gguf")
    ->Args({4, 100000})
    ->Iterations(1)
    ->Unit(benchmark::kSecond);
BENCHMARK_CAPTURE(BM_EpisodicEndToEnd, bounded_model, "channel-bounded.gguf")
    ->Args({4, 100000})
    ->Iterations(1)
    ->Unit(benchmark::kSecond);

}  // namespace
}  // namespace channel
