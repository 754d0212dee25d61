// EpisodicStore's centroid queries: the cosine top-k of spec 003, by a full FP16 scan or
// through the int8 centroid sketch (docs/memory-format.md, "Recall").
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "backend/cpu/thread_pool.h"
#include "memory/centroid_sketch.h"
#include "memory/episodic_store_impl.h"
#include "memory/memory_kernels.h"

namespace channel {

namespace {

// The exact score: both query paths compute it with this one expression, so they agree bit for
// bit.
inline float cosine(float dot, float norm2, float q_norm) {
  const float denom = q_norm * std::sqrt(norm2);
  return denom > 0.0f ? dot / denom : 0.0f;
}

// Best first: higher score, then lower id; NaN scores last. A strict total order on distinct
// ids, so every selection over the same hits picks the same ones.
bool better(const RecallHit& a, const RecallHit& b) {
  const bool a_nan = std::isnan(a.score), b_nan = std::isnan(b.score);
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && a.score != b.score) return a.score > b.score;
  return a.episode_id < b.episode_id;
}

std::vector<RecallHit> best_k(std::vector<RecallHit> hits, size_t k) {
  k = std::min(k, hits.size());
  std::partial_sort(hits.begin(), hits.begin() + static_cast<std::ptrdiff_t>(k), hits.end(),
                    better);
  hits.resize(k);
  return hits;
}

// Calls fn(begin, end) for each run of consecutive live slots in [begin, end).
template <typename Fn>
void for_live_runs(const std::vector<SlotState>& states, int64_t begin, int64_t end, Fn&& fn) {
  int64_t s = begin;
  while (s < end) {
    if (states[static_cast<size_t>(s)] != SlotState::live) {
      ++s;
      continue;
    }
    int64_t e = s;
    while (e < end && states[static_cast<size_t>(e)] == SlotState::live) ++e;
    fn(static_cast<size_t>(s), static_cast<size_t>(e));
    s = e;
  }
}

void run_split(ThreadPool* pool, int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (pool && pool->size() > 1) {
    pool->parallel_for(n, fn);
  } else {
    fn(0, n, 0);
  }
}

}  // namespace

static float query_norm(const std::string& path, const StoreLayout& L, std::span<const float> q) {
  if (q.size() != L.hidden_size) {
    throw_error("episodic: {}: query has {} values, hidden_size is {}", path, q.size(),
                L.hidden_size);
  }
  double qn = 0.0;
  for (float x : q) qn += static_cast<double>(x) * x;
  return static_cast<float>(std::sqrt(qn));
}

std::vector<RecallHit> EpisodicStore::query_full_scan(std::span<const float> q, size_t k,
                                                      ThreadPool* pool) const {
  const Impl& m = *impl_;
  const float q_norm = query_norm(m.path, m.L, q);
  std::shared_lock lock(m.state_mu);
  Impl::UnmapAfter unmap{[&] { m.unmap_index(); }};
  return m.full_scan(q, q_norm, k, pool, nullptr);
}

std::vector<RecallHit> EpisodicStore::query(std::span<const float> q, size_t k,
                                            ThreadPool* pool) const {
  const Impl& m = *impl_;
  const StoreLayout& L = m.L;
  const float q_norm = query_norm(m.path, L, q);
  const std::optional<SketchQuery> sq = quantize_query(q);
  std::shared_lock lock(m.state_mu);
  Impl::UnmapAfter unmap{[&] { m.unmap_index(); }};  // the centroids rescored below
  if (!sq || k == 0) return m.full_scan(q, q_norm, k, pool, nullptr);
  if (!m.sketch_ready.load(std::memory_order_acquire) &&
      m.queries_seen.fetch_add(1, std::memory_order_relaxed) == 0)
    return m.full_scan(q, q_norm, k, pool, nullptr);
  if (!m.sketch_ready.load(std::memory_order_acquire)) {
    std::lock_guard build_lock(m.sketch_mu);
    if (!m.sketch_ready.load(std::memory_order_acquire)) {
      // This query scans the FP16 centroids anyway: quantize them on the way.
      std::unique_ptr<CentroidSketch> sketch;
      try {
        sketch = std::make_unique<CentroidSketch>(L.max_episodes, L.hidden_size);
      } catch (const std::bad_alloc&) {
        return m.full_scan(q, q_norm, k, pool, nullptr);  // no room: try again next time
      }
      std::vector<RecallHit> hits = m.full_scan(q, q_norm, k, pool, sketch.get());
      m.sketch = std::move(sketch);
      m.sketch_ready.store(true, std::memory_order_release);
      return hits;
    }
  }
  const CentroidSketch& sketch = *m.sketch;
  const size_t n = L.max_episodes;
  // 1. Upper bounds of every live row's exact cosine, from the int8 scan.
  std::vector<double> upper(n);  // [max_episodes], set for live slots
  run_split(pool, static_cast<int64_t>(n), [&](int64_t begin, int64_t end, int) {
    for_live_runs(m.states, begin, end,
                  [&](size_t s, size_t e) { sketch.upper_bounds(*sq, s, e, upper.data()); });
  });
  const size_t n_live = m.slot_of_id.size();
  if (n_live == 0) return {};
  k = std::min(k, n_live);
  auto exact = [&](std::span<const uint32_t> slots, std::vector<RecallHit>& out) {
    const size_t at = out.size();
    out.resize(at + slots.size());
    auto rescore = [&](int64_t begin, int64_t end, int) {
      for (int64_t i = begin; i < end; ++i) {
        const uint32_t slot = slots[static_cast<size_t>(i)];
        float dot = 0.0f, norm2 = 0.0f;
        centroid_dots(m.entry(slot) + 64, L.entry_bytes, 1, q.data(), L.hidden_size, &dot, &norm2);
        out[at + static_cast<size_t>(i)] = {m.header_at(slot).episode_id, slot,
                                            cosine(dot, norm2, q_norm)};
      }
    };
    // A few rows are faster on this thread than a pool dispatch.
    run_split(slots.size() >= 64 ? pool : nullptr, static_cast<int64_t>(slots.size()), rescore);
  };
  // 2. theta = the k-th best exact score among the k0 rows of highest bound (a min-heap on
  // the bound, filled in one pass). Every row of the true top-k has an exact score >= theta,
  // so its bound is >= theta too.
  const size_t k0 = std::min(n_live, k + std::max<size_t>(k, 8));
  std::vector<uint32_t> first;  // [k0] slots, a heap whose front has the lowest bound
  first.reserve(k0);
  auto higher = [&](uint32_t a, uint32_t b) { return upper[a] > upper[b]; };
  for (uint32_t s = 0; s < n; ++s) {
    if (m.states[s] != SlotState::live) continue;
    if (first.size() < k0) {
      first.push_back(s);
      std::push_heap(first.begin(), first.end(), higher);
    } else if (upper[s] > upper[first.front()]) {
      std::pop_heap(first.begin(), first.end(), higher);
      first.back() = s;
      std::push_heap(first.begin(), first.end(), higher);
    }
  }
  std::vector<RecallHit> hits;
  exact(first, hits);
  std::vector<RecallHit> ranked = hits;
  std::nth_element(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(k - 1),
                   ranked.end(), better);
  const float theta = ranked[k - 1].score;
  for (uint32_t s : first) upper[s] = std::numeric_limits<double>::quiet_NaN();  // done
  // 3. Rescore every other live row that could reach theta (all of them if theta is NaN).
  std::vector<uint32_t> more;  // slots, in file order
  for (uint32_t s = 0; s < n; ++s) {
    if (m.states[s] != SlotState::live || std::isnan(upper[s])) continue;
    if (std::isnan(theta) || upper[s] >= static_cast<double>(theta)) more.push_back(s);
  }
  exact(more, hits);
  return best_k(std::move(hits), k);
}

std::vector<RecallHit> EpisodicStore::Impl::full_scan(std::span<const float> q, float q_norm,
                                                      size_t k, ThreadPool* pool,
                                                      CentroidSketch* build) const {
  const Impl& m = *this;
  const StoreLayout& L = m.L;
  const size_t n = L.max_episodes;
  std::vector<float> dots(n), norms2(n);  // [max_episodes]
  // Chunk by chunk, each unmapped once read: the scan never holds the whole index table.
  auto rows = [&](int64_t begin, int64_t end) {
    for_live_runs(m.states, begin, end, [&](size_t s, size_t e) {
      const uint8_t* first = m.entry(static_cast<uint32_t>(s)) + 64;
      centroid_dots(first, L.entry_bytes, e - s, q.data(), L.hidden_size, &dots[s], &norms2[s]);
      if (build) {
        for (size_t r = s; r < e; ++r) {
          build->quantize_into(r,
                               reinterpret_cast<const uint16_t*>(first + (r - s) * L.entry_bytes));
        }
      }
    });
  };
  run_split(pool, static_cast<int64_t>(n), [&](int64_t begin, int64_t end, int) {
    const auto chunk = static_cast<int64_t>(Impl::kScanChunk);
    for (int64_t c = begin; c < end; c += chunk) {
      const int64_t ce = std::min(end, c + chunk);
      rows(c, ce);
      m.unmap_entry_run(static_cast<uint32_t>(c), static_cast<uint32_t>(ce - 1));
    }
  });
  std::vector<RecallHit> hits;
  hits.reserve(m.slot_of_id.size());
  for (const auto& [id, slot] : m.slot_of_id) {
    hits.push_back({id, slot, cosine(dots[slot], norms2[slot], q_norm)});
  }
  return best_k(std::move(hits), k);
}

}  // namespace channel
