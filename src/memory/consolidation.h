// consolidation.h: turning a staged episode into a stored one (spec 003 §3: salience ||Δx||,
// the unit-normalised centroid, lineage, summary) and the background thread that does it.
// The caller only enqueues: generation never waits on the disk. A full queue drops the
// episode (counted in the stats) rather than block.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "memory/episodic_store.h"
#include "memory/retrieval_features.h"
#include "memory/staging.h"

namespace channel {

// Unit-normalised mean of n hidden states ([n][dim]); all zeros when the mean is zero.
// Text cues are encoded the same way: the mean of the cue's hidden states.
std::vector<float> centroid_of(std::span<const float> hidden, size_t dim);

// ||Δx|| with Δx = x_last - x_before, x_before being the hidden state of the token before the
// episode (the first token's own state when the episode starts a stream).
float salience_of(const StagedEpisode& e, size_t dim);

// [n][L][2][kv_dim] (staging order) -> [L][2][n][kv_dim] (slab order).
void staged_kv_to_slab_order(std::span<const float> staged, size_t n, size_t num_layers,
                             size_t kv_dim, std::span<float> out);

struct WorkerConfig {
  size_t queue_capacity = 4;  // episodes waiting; beyond it submit() waits (or drops, below)
  // true: submit() waits for room, so an episode is never lost to a writer that falls behind
  // (a busy machine slows the stream instead of making it forget); false: it drops.
  bool block_when_full = true;
  uint64_t first_parent = kNoEpisode;  // parent of the first episode written
  // Summary text of the episode's tokens (the detokenizer); cut to 256 bytes. Optional.
  std::function<std::string(std::span<const int32_t>)> summarize;
  // A version 2 store's retrieval data (memory/retrieval_features.h); required when the store
  // keeps representative keys or projected vectors.
  std::shared_ptr<const RetrievalFeatureConfig> features;
};

struct WorkerStats {
  uint64_t submitted = 0;
  uint64_t written = 0;
  uint64_t dropped = 0;  // queue full (block_when_full = false)
  uint64_t waits = 0;    // submits that waited for room (block_when_full = true)
  uint64_t failed = 0;   // the append threw (disk full, ...): the episode is lost
  uint64_t last_episode_id = kNoEpisode;
  std::string last_error;
};

class ConsolidationWorker {
 public:
  ConsolidationWorker(EpisodicStore& store, WorkerConfig config);
  ~ConsolidationWorker();  // writes what is queued, then stops
  ConsolidationWorker(const ConsolidationWorker&) = delete;
  ConsolidationWorker& operator=(const ConsolidationWorker&) = delete;

  // Queues an episode for writing; returns false (and drops it) when the queue is full.
  // Holds a mutex only for the queue operation, never across disk I/O.
  bool submit(StagedEpisode&& episode);
  // Blocks until every queued episode is written (tests, shutdown, `channel mem` tools).
  void drain();
  WorkerStats stats() const;

 private:
  void run();
  void write(StagedEpisode& e);

  EpisodicStore& store_;
  WorkerConfig config_;
  mutable std::mutex mu_;
  std::condition_variable cv_;       // work arrived or stop
  std::condition_variable idle_cv_;  // queue empty and nothing in flight
  std::condition_variable room_cv_;  // the queue has room (submit() waits on it)
  std::deque<StagedEpisode> queue_;
  bool busy_ = false;
  bool stop_ = false;
  WorkerStats stats_;
  uint64_t parent_;
  std::thread thread_;
};

}  // namespace channel
