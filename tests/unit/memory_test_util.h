// Helpers for the episodic memory tests: scratch directories and deterministic episodes.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "memory/episodic_store.h"

namespace channel::test {

// A fresh directory removed at scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("channel_memory_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// The content of a synthetic episode, a pure function of (seed, n): tokens, centroid, kv.
struct SyntheticEpisode {
  std::vector<int32_t> tokens;  // [n]
  std::vector<float> centroid;  // [hidden]
  std::vector<float> kv;        // [L][2][n][kv_dim]
  std::vector<float> keys;      // version 2 with keys: [L][key_heads][R][head_dim]
  std::vector<float> proj;      // version 2 with proj: [n][proj_dim]
  std::string summary;

  SyntheticEpisode(const StoreLayout& L, uint64_t seed, size_t n) {
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    tokens.resize(n);
    for (auto& t : tokens) t = static_cast<int32_t>(rng() % 50000);
    centroid.resize(L.hidden_size);
    for (auto& c : centroid) c = nd(rng);
    kv.resize(2ull * L.num_layers * n * L.kv_dim);
    for (auto& x : kv) x = nd(rng);
    keys.resize(L.has_keys() ? L.keys_values() : 0);
    for (auto& x : keys) x = nd(rng);
    proj.resize(L.has_proj() ? n * L.proj_dim : 0);
    for (auto& x : proj) x = nd(rng);
    summary = "episode " + std::to_string(seed) + " \xC3\xA9t\xC3\xA9";
  }

  EpisodeRecord record(uint64_t start_clock = 0, uint64_t parent = kNoEpisode) const {
    EpisodeRecord r;
    r.parent_episode_id = parent;
    r.created_timestamp = 1700000000000ull;
    r.start_clock = start_clock;
    r.salience_norm = 1.5f;
    r.summary = summary;
    r.tokens = tokens;
    r.centroid = centroid;
    r.kv = kv;
    r.rep_keys = keys;
    r.proj = proj;
    return r;
  }
};

// Store options for a scratch store: no fsync (a test's store need not survive a crash).
inline StoreOptions not_durable() {
  StoreOptions o;
  o.durable = false;
  return o;
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

}  // namespace channel::test
