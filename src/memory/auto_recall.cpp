// AutoRecall: turn-boundary and condition-C recall into tier 3, managed as a cache.
#include "memory/auto_recall.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "runtime/stream_session.h"
#include "util/error.h"

namespace channel {

const char* recall_reason_name(RecallReason r) {
  switch (r) {
    case RecallReason::turn: return "turn";
    case RecallReason::velocity: return "velocity";
    case RecallReason::explicit_call: return "explicit";
  }
  return "?";
}

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
void warn_damaged(const EpisodicStore& store, uint64_t id, const char* what) {
  std::fprintf(stderr, "channel: warning: episodic: %s: episode %llu skipped: %s\n",
               store.path().c_str(), static_cast<unsigned long long>(id), what);
}
}  // namespace

AutoRecall::AutoRecall(MemoryAttachment& memory, AutoRecallConfig config)
    : memory_(memory), config_(config), method_(memory.resolve(config.method)) {
  const StoreLayout& L = memory_.store().layout();
  if (L.ext_kinds == 0)
    std::fprintf(stderr,
                 "channel: note: episodic: %s is a version 1 store (no retrieval section): recall "
                 "by centroid only\n",
                 memory_.store().path().c_str());
  if (config_.velocity_factor > 0.0f)
    memory_.set_observer([this](const TokenBatch& b) { on_batch(b); });
  thread_ = std::thread([this] { worker(); });
}

AutoRecall::~AutoRecall() {
  memory_.set_observer(nullptr);
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

RecallEvent AutoRecall::recall_now(RecallReason reason) {
  return recall_for(memory_.current_cue(), reason);
}

RecallEvent AutoRecall::recall_for(const CueState& cue, RecallReason reason) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<RecallHit> hits;
  if (config_.k > 0 && memory_.store().live_count() > 0)
    hits = memory_.query_state(cue, method_, config_.k, true, config_.lexical);
  return apply(reason, memory_.session().ring().clock(), std::move(hits), {}, ms_since(t0));
}

void AutoRecall::post(CueState cue, uint64_t clock, RecallReason reason) {
  cue_ = std::move(cue);
  cue_clock_ = clock;
  cue_reason_ = reason;
  cv_.notify_one();
}

void AutoRecall::recall_async(RecallReason reason) {
  CueState cue = memory_.current_cue();
  if (cue.empty() || config_.k == 0) return;
  std::lock_guard lock(mu_);
  if (busy_ || cue_) return;  // one in flight is enough; the next boundary asks again
  post(std::move(cue), memory_.session().ring().clock(), reason);
}

std::optional<RecallEvent> AutoRecall::poll() {
  std::optional<Landed> got;
  {
    std::lock_guard lock(mu_);
    if (!landed_) return std::nullopt;
    got = std::move(landed_);
    landed_.reset();
  }
  return apply(got->reason, got->clock, std::move(got->hits), std::move(got->skipped),
               got->query_ms);
}

RecallEvent AutoRecall::apply(RecallReason reason, uint64_t clock, std::vector<RecallHit> hits,
                              std::vector<uint64_t> skipped, double query_ms) {
  const auto t0 = std::chrono::steady_clock::now();
  const EpisodicStore& store = memory_.store();
  RingSession& session = memory_.session();
  RecallEvent ev;
  ev.reason = reason;
  ev.clock = clock;
  ev.method = method_;
  ev.query_ms = query_ms;
  ev.skipped = std::move(skipped);
  for (const RecallHit& h : hits)
    if (std::find(ev.skipped.begin(), ev.skipped.end(), h.episode_id) == ev.skipped.end())
      ev.hits.push_back(h);
  auto in = [](const std::vector<uint64_t>& v, uint64_t id) {
    return std::find(v.begin(), v.end(), id) != v.end();
  };
  // The score gate: hits far below the best stay reported but are not placed.
  std::vector<RecallHit> placed;
  const float best = ev.hits.empty() ? 0.0f : ev.hits.front().score;
  for (const RecallHit& h : ev.hits) {
    if (!placed.empty() && config_.min_score_ratio > 0.0f && best > 0.0f &&
        h.score < config_.min_score_ratio * best)
      ev.below_gate.push_back(h.episode_id);
    else
      placed.push_back(h);
  }
  // The halves of a sentence cut in two: an episode as long as the store allows was cut
  // inside a span (the staging cuts at a span boundary in its second half whenever one ends
  // there), so a fact it holds may end in its child or begin in its parent. That half comes
  // with the hit, just before or after it in tier 3 (so the sentence reads in order), whatever
  // config_.neighbours says, when every hit and half fit in the tier together.
  const uint32_t tier = session.ring().config().n_recall;
  const uint32_t full = store.layout().max_tokens;
  std::vector<uint64_t> head_half(placed.size(), kNoEpisode), tail_half(placed.size(), kNoEpisode);
  uint64_t need = 0;
  for (size_t i = 0; i < placed.size(); ++i) {
    const auto e = store.find(placed[i].episode_id);
    if (!e) continue;
    need += e->token_count;
    if (auto c = store.find(e->episode_id + 1);
        e->token_count >= full && c && c->parent_episode_id == e->episode_id &&
        c->start_clock == e->start_clock + e->token_count) {
      tail_half[i] = c->episode_id;
      need += c->token_count;
    }
    if (e->parent_episode_id == kNoEpisode) continue;
    if (auto p = store.find(e->parent_episode_id);
        p && p->token_count >= full && p->start_clock + p->token_count == e->start_clock) {
      head_half[i] = p->episode_id;
      need += p->token_count;
    }
  }
  if (need > tier) {
    std::fill(head_half.begin(), head_half.end(), kNoEpisode);
    std::fill(tail_half.begin(), tail_half.end(), kNoEpisode);
  }
  // Temporal neighbours of each hit: parents up the lineage, children down it (a child's
  // parent is the episode written just before it, so its id is the next one).
  std::vector<uint64_t> near;
  for (size_t i = 0; i < placed.size(); ++i) {
    if (head_half[i] != kNoEpisode) near.push_back(head_half[i]);
    if (tail_half[i] != kNoEpisode) near.push_back(tail_half[i]);
  }
  for (const RecallHit& h : placed) {
    uint64_t up = h.episode_id, down = h.episode_id;
    for (uint32_t i = 0; i < config_.neighbours; ++i) {
      if (auto e = store.find(up); e && e->parent_episode_id != kNoEpisode) {
        up = e->parent_episode_id;
        near.push_back(up);
      }
      if (auto c = store.find(down + 1); c && c->parent_episode_id == down) {
        down = down + 1;
        near.push_back(down);
      }
    }
  }
  std::vector<uint64_t> wanted;
  for (const RecallHit& h : placed) wanted.push_back(h.episode_id);
  auto active_ids = [&] {
    std::vector<uint64_t> ids;
    for (const RecallEpisode& e : session.ring().recall_episodes()) ids.push_back(e.id);
    return ids;
  };
  const std::vector<uint64_t> before = active_ids();
  // Tier 3 as a cache: keep what is still wanted or pinned, release the rest.
  for (uint64_t id : before) {
    const auto h = store.find(id);
    const bool pinned = h && (h->flags & kEpisodePinned);
    if (!in(wanted, id) && !in(near, id) && !pinned) memory_.release(id);
  }
  // Best last, so that the best is the most recent when the tier must make room; a hit's
  // halves just before and after it.
  std::vector<uint64_t> placed_near;
  auto place = [&](uint64_t id, float score, bool half) {
    if (id == kNoEpisode || (half && in(active_ids(), id))) return;
    const auto h = store.find(id);
    if (!h || h->token_count > tier) return;  // gone meanwhile, or longer than the tier
    try {
      memory_.recall(id, score);
      if (half) placed_near.push_back(id);
    } catch (const Error& e) {  // a damaged record: skip it, the conversation goes on
      warn_damaged(store, id, e.what());
      ev.skipped.push_back(id);
    }
  };
  for (size_t i = placed.size(); i-- > 0;) {
    place(head_half[i], 0.0f, true);
    place(placed[i].episode_id, placed[i].score, false);
    place(tail_half[i], 0.0f, true);
  }
  // Neighbours only where tier 3 has room: they never push out a hit.
  for (uint64_t id : near) {
    if (in(active_ids(), id)) continue;
    const auto h = store.find(id);
    if (!h || session.ring().recall_free_run() < h->token_count) continue;
    try {
      memory_.recall(id, 0.0f);
      placed_near.push_back(id);
    } catch (const Error& e) {
      warn_damaged(store, id, e.what());
      ev.skipped.push_back(id);
    }
  }
  // What changed, from the tier's state before and after (a hit pushed out again by a
  // better one when the tier is small is in neither list).
  const std::vector<uint64_t> after = active_ids();
  for (const RecallHit& h : placed)
    if (in(after, h.episode_id)) (in(before, h.episode_id) ? ev.kept : ev.recalled).push_back(h.episode_id);
  for (uint64_t id : after)
    if (in(before, id) && !in(wanted, id)) ev.kept.push_back(id);
  for (uint64_t id : placed_near)
    if (in(after, id)) ev.neighbours.push_back(id);
  for (uint64_t id : before)
    if (!in(after, id)) ev.released.push_back(id);
  ev.recall_ms = ms_since(t0);
  if (listener_) listener_(ev);
  return ev;
}

// Runs inside the session's forward (the token tap): only arithmetic and a hand-off.
void AutoRecall::on_batch(const TokenBatch& b) {
  const size_t E = b.tokens.empty() ? 0 : b.hidden.size() / b.tokens.size();
  if (E == 0) return;
  const size_t QR = b.queries.size() / b.tokens.size();
  for (size_t t = 0; t < b.tokens.size(); ++t) {
    const float* x = b.hidden.data() + t * E;
    if (prev_x_.size() == E) {
      double d2 = 0.0;
      for (size_t i = 0; i < E; ++i) {
        const double d = double{x[i]} - prev_x_[i];
        d2 += d * d;
      }
      const double dx = std::sqrt(d2);
      const bool warm = seen_dx_ >= 32;
      const bool cooled = !fired_ || b.clocks[t] >= last_fire_clock_ + config_.cooldown_tokens;
      if (warm && cooled && dx > config_.velocity_factor * mean_dx_) {
        std::lock_guard lock(mu_);
        if (!busy_ && !cue_ && !landed_) {
          CueState c;
          c.hidden.assign(x, x + E);
          if (QR > 0) c.queries.assign(b.queries.data() + t * QR, b.queries.data() + (t + 1) * QR);
          c.tokens = memory_.current_cue().tokens;
          post(std::move(c), b.clocks[t], RecallReason::velocity);
          fired_ = true;
          last_fire_clock_ = b.clocks[t];
        }
      }
      mean_dx_ = seen_dx_ == 0 ? dx : 0.99 * mean_dx_ + 0.01 * dx;
      ++seen_dx_;
    }
    prev_x_.assign(x, x + E);
  }
}

void AutoRecall::worker() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || cue_.has_value(); });
    if (stop_) return;
    CueState cue = std::move(*cue_);
    cue_.reset();
    const uint64_t clock = cue_clock_;
    const RecallReason reason = cue_reason_;
    busy_ = true;
    lock.unlock();
    Landed out{reason, clock, {}, {}, 0.0};
    const auto t0 = std::chrono::steady_clock::now();
    try {
      out.hits = memory_.query_state(cue, method_, config_.k, /*use_pool=*/false, config_.lexical);
      // Read and check each record here, off the decode thread: its pages are then cached,
      // and a damaged one is known before poll() would try it.
      for (const RecallHit& h : out.hits) {
        try {
          (void)memory_.store().read(h.episode_id);
        } catch (const Error& e) {
          warn_damaged(memory_.store(), h.episode_id, e.what());
          out.skipped.push_back(h.episode_id);
        }
      }
    } catch (const Error& e) {
      std::fprintf(stderr, "channel: warning: automatic recall failed: %s\n", e.what());
      out.hits.clear();
    }
    out.query_ms = ms_since(t0);
    lock.lock();
    busy_ = false;
    if (!stop_) landed_ = std::move(out);
  }
}

RecallEvent feed_turn_with_recall(StreamSession& stream, AutoRecall& recall,
                                  std::span<const int32_t> tokens, SpanType type,
                                  std::vector<float> centroid) {
  MemoryAttachment& mem = recall.memory();
  if (tokens.empty()) {
    CueState cue = mem.current_cue();
    if (!centroid.empty()) cue.centroid = std::move(centroid);
    return recall.recall_for(cue, RecallReason::turn);
  }
  const auto head = tokens.first(tokens.size() - 1);
  const auto last = tokens.last(1);
  if (!head.empty()) stream.feed(type, head);
  CueState cue;
  if (stream.ring_session().max_probe() >= 1) {
    cue = mem.probe_cue(last);
  } else {
    cue = mem.current_cue();  // no room for a probe: the state before the last token
  }
  // The lexical cue is this turn alone, not the text before it.
  const auto turn = tokens.last(std::min(tokens.size(), kCueTokens));
  cue.tokens.assign(turn.begin(), turn.end());
  if (!centroid.empty()) cue.centroid = std::move(centroid);
  RecallEvent ev = recall.recall_for(cue, RecallReason::turn);
  stream.feed(type, last);
  return ev;
}

}  // namespace channel
