// Consolidation: salience, centroid, slab ordering, and the background writer thread.
#include "memory/consolidation.h"

#include <unistd.h>

#include <cmath>
#include <cstring>

#include "util/error.h"

namespace channel {

std::vector<float> centroid_of(std::span<const float> hidden, size_t dim) {
  std::vector<double> mean(dim, 0.0);  // [dim]
  const size_t n = dim ? hidden.size() / dim : 0;
  for (size_t t = 0; t < n; ++t) {
    for (size_t i = 0; i < dim; ++i) mean[i] += hidden[t * dim + i];
  }
  double norm2 = 0.0;
  for (double m : mean) norm2 += m * m;
  std::vector<float> c(dim, 0.0f);
  if (norm2 > 0.0 && std::isfinite(norm2)) {
    const double inv = 1.0 / std::sqrt(norm2);  // the 1/n of the mean cancels here
    for (size_t i = 0; i < dim; ++i) c[i] = static_cast<float>(mean[i] * inv);
  }
  return c;
}

float salience_of(const StagedEpisode& e, size_t dim) {
  if (e.size() == 0) return 0.0f;
  const float* last = e.hidden.data() + (e.size() - 1) * dim;
  const float* before = e.x_before.size() == dim ? e.x_before.data() : e.hidden.data();
  double d2 = 0.0;
  for (size_t i = 0; i < dim; ++i) {
    const double d = static_cast<double>(last[i]) - before[i];
    d2 += d * d;
  }
  const float s = static_cast<float>(std::sqrt(d2));
  return std::isfinite(s) ? s : 0.0f;
}

void staged_kv_to_slab_order(std::span<const float> staged, size_t n, size_t num_layers,
                             size_t kv_dim, std::span<float> out) {
  for (size_t t = 0; t < n; ++t) {
    for (size_t l = 0; l < num_layers; ++l) {
      for (size_t kv = 0; kv < 2; ++kv) {
        const float* src = staged.data() + ((t * num_layers + l) * 2 + kv) * kv_dim;
        float* dst = out.data() + ((l * 2 + kv) * n + t) * kv_dim;
        std::memcpy(dst, src, kv_dim * sizeof(float));
      }
    }
  }
}

ConsolidationWorker::ConsolidationWorker(EpisodicStore& store, WorkerConfig config)
    : store_(store), config_(std::move(config)), parent_(config_.first_parent) {
  if (config_.queue_capacity == 0) throw_error("consolidation: queue_capacity must be >= 1");
  thread_ = std::thread([this] { run(); });
}

ConsolidationWorker::~ConsolidationWorker() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  room_cv_.notify_all();
  thread_.join();
}

bool ConsolidationWorker::submit(StagedEpisode&& episode) {
  {
    std::unique_lock lock(mu_);
    ++stats_.submitted;
    if (queue_.size() >= config_.queue_capacity) {
      if (!config_.block_when_full) {
        ++stats_.dropped;
        return false;
      }
      ++stats_.waits;
      room_cv_.wait(lock, [&] { return stop_ || queue_.size() < config_.queue_capacity; });
    }
    queue_.push_back(std::move(episode));
  }
  cv_.notify_one();
  return true;
}

void ConsolidationWorker::drain() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

WorkerStats ConsolidationWorker::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void ConsolidationWorker::run() {
  // The writer keeps the process's priority: submit() waits for it when the queue is full,
  // so a writer starved by a lower priority (nice 10 was tried) stalled the stream on a busy
  // machine, and before submit() waited, made it drop episodes. Its work is a few percent of
  // a decode step's.
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ with nothing left to write
    StagedEpisode e = std::move(queue_.front());
    queue_.pop_front();
    room_cv_.notify_one();
    busy_ = true;
    lock.unlock();
    std::string error;
    bool ok = true;
    try {
      write(e);
    } catch (const std::exception& ex) {  // disk full, I/O error: lose this episode, not the run
      ok = false;
      error = ex.what();
    }
    lock.lock();
    busy_ = false;
    if (ok) {
      ++stats_.written;
      stats_.last_episode_id = parent_;
    } else {
      ++stats_.failed;
      stats_.last_error = error;
    }
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

void ConsolidationWorker::write(StagedEpisode& e) {
  const StoreLayout& L = store_.layout();
  const size_t n = e.size();
  std::vector<float> kv(2ull * L.num_layers * n * L.kv_dim);  // [L][2][n][kv_dim]
  staged_kv_to_slab_order(e.kv, n, L.num_layers, L.kv_dim, kv);
  const std::vector<float> centroid = centroid_of(e.hidden, L.hidden_size);
  const std::string summary = config_.summarize ? config_.summarize(e.tokens) : std::string();
  EpisodeRecord r;
  r.parent_episode_id = parent_;
  r.start_clock = e.start_clock;
  r.salience_norm = salience_of(e, L.hidden_size);
  r.continuation_token = e.continuation_token;
  r.flags = e.flags;
  if (e.reason == CutReason::discontinuity) r.flags |= kEpisodeInterrupted;
  r.summary = summary;
  r.tokens = e.tokens;
  r.centroid = centroid;
  r.kv = kv;
  std::vector<float> keys, proj;
  if (L.ext_kinds != 0) {
    if (!config_.features)
      throw_error("episodic: {}: the store keeps retrieval data but none is computed",
                  store_.path());
    if (L.has_keys()) keys = representative_keys(*config_.features, e);
    if (L.has_proj()) {
      if (!config_.features->head)
        throw_error("episodic: {}: the store keeps projected vectors but the model has no "
                    "retrieval head",
                    store_.path());
      proj = projected_tokens(*config_.features->head, e);
    }
  }
  r.rep_keys = keys;
  r.proj = proj;
  parent_ = store_.append(r);
}

}  // namespace channel
