// EpisodicStore::query_retrieval: top-k over the retrieval section of a version 2 store
// (representative keys, projected vectors, or keys mixed with the centroid cosine).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "backend/cpu/thread_pool.h"
#include "memory/episodic_store_impl.h"
#include "memory/memory_kernels.h"
#include "memory/recall_method.h"
#include "memory/retrieval_kernels.h"

namespace channel {

const char* recall_method_name(RecallMethod m) {
  switch (m) {
    case RecallMethod::automatic: return "auto";
    case RecallMethod::centroid: return "centroid";
    case RecallMethod::keys: return "keys";
    case RecallMethod::proj: return "proj";
    case RecallMethod::hybrid: return "hybrid";
  }
  return "?";
}

std::optional<RecallMethod> parse_recall_method(std::string_view s) {
  for (RecallMethod m : {RecallMethod::automatic, RecallMethod::centroid, RecallMethod::keys,
                         RecallMethod::proj, RecallMethod::hybrid})
    if (s == recall_method_name(m)) return m;
  return std::nullopt;
}

namespace {

// Mean and standard deviation of v (std 1 when v is constant, so z-scores stay finite).
void standardize(std::vector<float>& v) {
  if (v.empty()) return;
  double mean = 0.0, sq = 0.0;
  for (float x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (float x : v) sq += (x - mean) * (x - mean);
  double sd = std::sqrt(sq / static_cast<double>(v.size()));
  if (!(sd > 1e-12)) sd = 1.0;
  for (float& x : v) x = static_cast<float>((x - mean) / sd);
}

}  // namespace

uint64_t EpisodicStore::damaged_retrieval_entries() const {
  const Impl& m = *impl_;
  std::lock_guard lock(m.ext_mu);
  return static_cast<uint64_t>(std::count(m.ext_state.begin(), m.ext_state.end(), uint8_t{2}));
}

std::vector<RecallHit> EpisodicStore::query_retrieval(const RetrievalCue& cue, size_t k,
                                                      ThreadPool* pool) const {
  const Impl& m = *impl_;
  const StoreLayout& L = m.L;
  const RecallMethod method = cue.method;
  if (method == RecallMethod::centroid) return query(cue.centroid, k, pool);
  if (method == RecallMethod::automatic)
    throw_error("episodic: {}: query_retrieval: resolve the automatic method first", m.path);
  const bool use_keys = method == RecallMethod::keys || method == RecallMethod::hybrid;
  const bool use_proj = method == RecallMethod::proj;
  const bool use_centroid = method == RecallMethod::hybrid;
  if (use_keys && !L.has_keys())
    throw_error("episodic: {}: recall by keys: the store has no representative keys (version {})",
                m.path, L.version);
  if (use_proj && !L.has_proj())
    throw_error("episodic: {}: recall by proj: the store has no projected vectors (version {})",
                m.path, L.version);
  const uint64_t group = std::max<uint32_t>(1, cue.group);
  if (use_keys && cue.queries.size() != uint64_t{L.num_layers} * L.key_heads * group * L.head_dim)
    throw_error("episodic: {}: recall by keys: the cue has {} query values, expected {} x {} x {} "
                "x {}",
                m.path, cue.queries.size(), L.num_layers, L.key_heads, group, L.head_dim);
  if (use_proj && cue.proj.size() != L.proj_dim)
    throw_error("episodic: {}: recall by proj: the cue has {} values, the store's d_r is {}",
                m.path, cue.proj.size(), L.proj_dim);
  if (use_centroid && cue.centroid.size() != L.hidden_size)
    throw_error("episodic: {}: the centroid cue has {} values, hidden_size is {}", m.path,
                cue.centroid.size(), L.hidden_size);

  std::shared_lock lock(m.state_mu);
  // Everything below reads through the mapping: the retrieval entries, index headers and
  // centroids go out of it again at the end (also when something throws).
  Impl::UnmapAfter unmap{[&] {
    m.unmap_pages(L.ext_offset, 64 + uint64_t{L.max_episodes} * L.ext_entry_bytes);
    m.unmap_index();
  }};
  // Every live slot whose entry is not known to be damaged is scored; the checksum of an entry
  // is verified only when it ranks among the top k (rank_verified below), so a query costs one
  // pass over the section, not two. Until then an entry is read only through bounds that do
  // not depend on its bytes (at most max_tokens projected rows).
  std::vector<std::pair<uint32_t, uint64_t>> live;  // (slot, id), ascending
  live.reserve(m.slot_of_id.size());
  for (const auto& [id, slot] : m.slot_of_id) live.emplace_back(slot, id);
  std::sort(live.begin(), live.end());
  std::vector<uint32_t> slots;  // live, not known to be damaged
  std::vector<uint64_t> ids;    // their episodes
  {
    std::lock_guard ext_lock(m.ext_mu);
    for (const auto& [slot, id] : live) {
      if (m.ext_state[slot] == 2) continue;
      slots.push_back(slot);
      ids.push_back(id);
    }
  }
  const size_t n = slots.size();
  std::vector<float> score(n), cos(use_centroid ? n : 0);
  double q_norm = 0.0;
  if (use_centroid) {
    for (float x : cue.centroid) q_norm += double{x} * x;
    q_norm = std::sqrt(q_norm);
  }
  const size_t n_blocks = size_t{L.num_layers} * L.key_heads;
  auto scan = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const uint32_t slot = slots[static_cast<size_t>(i)];
      const uint8_t* entry = m.ext_entry(slot);
      if (use_keys) {
        score[i] = cue.scale * key_match_score(cue.queries.data(),
                                               reinterpret_cast<const uint16_t*>(entry + L.ext_keys),
                                               n_blocks, group, L.keys_per_head, L.head_dim);
      } else {
        const uint32_t tokens = std::min(m.header_at(slot).token_count, L.max_tokens);
        score[i] = proj_max_score(cue.proj.data(),
                                  reinterpret_cast<const uint16_t*>(entry + L.ext_proj), tokens,
                                  L.proj_dim);
      }
      if (use_centroid) {
        float dot = 0.0f, n2 = 0.0f;
        centroid_dots(m.entry(slot) + 64, 0, 1, cue.centroid.data(), L.hidden_size, &dot, &n2);
        const double den = q_norm * std::sqrt(double{n2});
        cos[i] = den > 0.0 ? static_cast<float>(dot / den) : 0.0f;
      }
    }
  };
  // Chunk by chunk, each unmapped once scored.
  auto work = [&](int64_t b, int64_t e, int) {
    for (int64_t c = b; c < e; c += static_cast<int64_t>(Impl::kScanChunk)) {
      const int64_t ce = std::min(e, c + static_cast<int64_t>(Impl::kScanChunk));
      scan(c, ce);
      const uint32_t first = slots[static_cast<size_t>(c)], last = slots[static_cast<size_t>(ce - 1)];
      m.unmap_ext_run(first, last);
      if (!use_keys || use_centroid) m.unmap_entry_run(first, last);
    }
  };
  if (pool && pool->size() > 1 && n >= 1024) {
    pool->parallel_for(static_cast<int64_t>(n), work);
  } else {
    work(0, static_cast<int64_t>(n), 0);
  }
  std::vector<float> lex;
  if (cue.lexical > 0.0f && !cue.tokens.empty() && n > 0) lex = m.lexical_scores(cue.tokens, slots, ids);
  return rank_verified(score, cos, lex, cue.lexical, slots, ids, k);
}

std::vector<RecallHit> EpisodicStore::rank_verified(std::span<const float> raw,
                                                    std::span<const float> cos,
                                                    std::span<const float> lex, float lexical,
                                                    std::span<const uint32_t> slots,
                                                    std::span<const uint64_t> ids,
                                                    size_t k) const {
  const Impl& m = *impl_;
  const size_t n = raw.size();
  // A non-finite score (only a damaged entry or cue makes one) takes no part: it would turn
  // every z-score into NaN.
  std::vector<uint8_t> usable(n);
  for (size_t i = 0; i < n; ++i)
    usable[i] = std::isfinite(raw[i]) && (cos.empty() || std::isfinite(cos[i]));
  auto better = [](const RecallHit& a, const RecallHit& b) {
    return a.score != b.score ? a.score > b.score : a.episode_id < b.episode_id;
  };
  // Rank, verify the top k, and rank again without what failed: the z-scores of the mixed
  // methods are taken over usable entries only, so one damaged entry with an absurd score
  // cannot flatten the others. Each pass drops at least one entry or ends.
  for (;;) {
    std::vector<size_t> at;  // indices of usable entries
    at.reserve(n);
    for (size_t i = 0; i < n; ++i)
      if (usable[i]) at.push_back(i);
    std::vector<float> score(at.size()), c(cos.empty() ? 0 : at.size());
    for (size_t j = 0; j < at.size(); ++j) {
      score[j] = raw[at[j]];
      if (!c.empty()) c[j] = cos[at[j]];
    }
    if (!c.empty()) {
      standardize(score);
      standardize(c);
      for (size_t j = 0; j < at.size(); ++j) score[j] += c[j];
    }
    if (!lex.empty()) {
      if (c.empty()) standardize(score);
      for (size_t j = 0; j < at.size(); ++j) score[j] += lexical * lex[at[j]];
    }
    std::vector<RecallHit> hits(at.size());
    for (size_t j = 0; j < at.size(); ++j) {
      const float s = std::isfinite(score[j]) ? score[j] : -std::numeric_limits<float>::infinity();
      hits[j] = RecallHit{ids[at[j]], slots[at[j]], s};
    }
    const size_t top = std::min(k, hits.size());
    std::partial_sort(hits.begin(), hits.begin() + static_cast<std::ptrdiff_t>(top), hits.end(),
                      better);
    hits.resize(top);
    bool dropped = false;
    {
      std::lock_guard ext_lock(m.ext_mu);
      for (const RecallHit& h : hits) {
        uint8_t& st = m.ext_state[h.slot];
        if (st == 0) {
          // read through the mapping: query_retrieval's UnmapAfter takes it out again
          const auto p = retrieval_entry_problem(m.L, m.map, h.slot);
          if (p) {
            std::fprintf(stderr, "channel: warning: episodic: %s: %s; recall skips it\n",
                         m.path.c_str(), p->c_str());
            st = 2;
          } else {
            st = 1;
          }
        }
        if (st == 2) {
          const size_t i = static_cast<size_t>(
              std::lower_bound(slots.begin(), slots.end(), h.slot) - slots.begin());
          usable[i] = 0;
          dropped = true;
        }
      }
    }
    if (!dropped) return hits;
  }
}

}  // namespace channel
