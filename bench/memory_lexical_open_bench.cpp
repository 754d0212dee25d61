// Episodic memory benchmark, the first recall of a fresh process: open a store of 15,600
// episodes of 64 tokens (the geometry `channel stream --memory` writes for
// models/channel-bounded.gguf: 2 layers, hidden 384, kv_dim 128, R 8, d_r 64) and run one
// keys + lexical query, as `channel run --memory` does at its question. Version 2 builds the
// lexical index from every episode's record (one pread per episode); version 3 reads its
// lexical section (contiguous reads of 1 MiB). Both stores hold the same episodes; each is
// measured with its pages in the page cache (warm) and dropped from it (cold: fdatasync, then
// POSIX_FADV_DONTNEED over the file, so every read goes to the disk). Compare the v2 and v3
// lines of one run: the machine's load moves both.
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "memory/episodic_store.h"

namespace channel {
namespace {

constexpr uint32_t kEpisodes = 15600, kTokens = 64;

StoreGeometry geometry(bool lexical) {
  StoreGeometry g;
  g.num_layers = 2;
  g.hidden_size = 384;
  g.kv_dim = 128;
  g.max_episodes = 16384;
  g.max_tokens = kTokens;
  g.ext_kinds = kRetrievalKeys | kRetrievalProj;
  g.head_dim = 64;
  g.keys_per_head = 8;
  g.proj_dim = 64;
  g.lexical = lexical;
  return g;
}

// Both stores, made once per process under the temp directory and removed at exit.
struct Stores {
  std::string dir, v2, v3;
  Stores() {
    dir = (std::filesystem::temp_directory_path() /
           ("channel_lexical_open_bench_" + std::to_string(::getpid())))
              .string();
    std::filesystem::create_directories(dir);
    v2 = dir + "/v2.mem";
    v3 = dir + "/v3.mem";
    StoreOptions o;
    o.durable = false;
    EpisodicStore a = EpisodicStore::create(v2, geometry(false), 1, o);
    EpisodicStore b = EpisodicStore::create(v3, geometry(true), 1, o);
    const StoreLayout& L = a.layout();
    std::mt19937 rng(5);
    std::normal_distribution<float> nd;
    // Token ids with a long tail, as text has: most from a few hundred common ids.
    auto token = [&] {
      const uint32_t u = rng() % 100;
      return static_cast<int32_t>(u < 60 ? rng() % 400 : u < 90 ? rng() % 4000 : rng() % 32000);
    };
    EpisodeRecord r;
    std::vector<int32_t> tokens(kTokens);
    std::vector<float> centroid(L.hidden_size), kv(L.kv_bytes(kTokens) / L.row_bytes * L.kv_dim),
        keys(L.keys_values()), proj(size_t{kTokens} * L.proj_dim);
    for (auto& x : kv) x = nd(rng);
    for (auto& x : keys) x = nd(rng);
    for (auto& x : proj) x = nd(rng);
    for (uint32_t e = 0; e < kEpisodes; ++e) {
      for (auto& t : tokens) t = token();
      for (auto& x : centroid) x = nd(rng);
      r.tokens = tokens;
      r.centroid = centroid;
      r.kv = kv;
      r.rep_keys = keys;
      r.proj = proj;
      r.start_clock = uint64_t{e} * kTokens;
      a.append(r);
      b.append(r);
    }
    a.sync();
    b.sync();
  }
  ~Stores() { std::filesystem::remove_all(dir); }
};

const Stores& stores() {
  static const Stores s;
  return s;
}

void drop_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// One fresh open and its first keys query, with the lexical half (range 2 = 1) or without it
// (0: the dense scan alone, which both versions share; the difference is the lexical index).
void BM_FirstLexicalRecall(benchmark::State& state) {
  const bool v3 = state.range(0) == 3, cold = state.range(1) != 0, lexical = state.range(2) != 0;
  const std::string& path = v3 ? stores().v3 : stores().v2;
  const std::vector<int32_t> cue{17, 230, 4711, 12001, 31337, 5, 99};
  std::vector<float> q(2 * 2 * 64, 0.1f);
  StoreOptions o;
  o.read_only = true;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      drop_cache(path);
      state.ResumeTiming();
    }
    const EpisodicStore s = EpisodicStore::open(path, o);
    RetrievalCue c;
    c.method = RecallMethod::keys;
    c.queries = q;
    if (lexical) {
      c.tokens = cue;
      c.lexical = 8.0f;
    }
    benchmark::DoNotOptimize(s.query_retrieval(c, 3));
  }
  state.SetLabel(std::string(v3 ? "v3 lexical section" : "v2 from records") +
                 (cold ? ", cold page cache" : ", warm page cache") +
                 (lexical ? "" : ", no lexical half"));
}
BENCHMARK(BM_FirstLexicalRecall)
    ->Args({2, 0, 0})
    ->Args({2, 0, 1})
    ->Args({3, 0, 0})
    ->Args({3, 0, 1})
    ->Args({2, 1, 0})
    ->Args({2, 1, 1})
    ->Args({3, 1, 0})
    ->Args({3, 1, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);

}  // namespace
}  // namespace channel
