// The slow, obviously-correct reference for the KV geometry, for tests (including the
// model-level ring-vs-oracle test). It keeps every token ever appended, re-derives which
// ones a query sees by scanning them (same policy as SlotRing + virtual_positions.h, written
// independently), names an explicit position for every (query, key) pair, and computes
// attention from unrotated keys in double precision.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kv/slot_ring.h"
#include "kv/virtual_positions.h"
#include "ops/rope.h"

namespace channel {

// One key a query sees. For anchors and window tokens `stored_pos` is the token's clock;
// for recall tokens it is the episode's stored position + i (and `episode` its id).
struct OracleKey {
  SlotGroup group = SlotGroup::window;
  uint64_t episode = 0;
  uint64_t stored_pos = 0;
  int64_t position = 0;  // the key's position for this query
};

struct OracleView {
  int64_t query_pos = 0;
  std::vector<OracleKey> keys;  // [anchors][recall in activation order][window by clock]
};

class OracleTimeline {
 public:
  explicit OracleTimeline(const RingConfig& config);

  void begin_span(SpanType type);
  void append_token();
  void seal();
  void evict_oldest_span();
  void activate_recall(uint64_t id, uint32_t n_tokens, uint64_t stored_pos);
  void deactivate_recall(uint64_t id);
  void begin_probe();
  void rollback();  // forgets every token since begin_probe()

  uint64_t clock() const { return tokens_.size(); }
  // Global layers: anchors, live recall and the live window tokens up to query_clock.
  OracleView global_view(uint64_t query_clock) const;
  // Sliding layers: every token with clock in (query_clock - window, query_clock].
  OracleView local_view(uint64_t query_clock, uint32_t window) const;
  // Every eviction so far (whole spans and cut pieces), oldest first.
  const std::vector<SemanticSpan>& evictions() const { return evictions_; }

 private:
  struct Token {
    uint64_t span_seq;
    SpanType type;
    bool live;
  };
  struct Episode {
    uint64_t id;
    uint32_t count;
    uint64_t stored_pos;
  };
  struct Mark {
    uint64_t clock, seq;
    std::optional<SpanType> pending;
    bool open;
  };
  bool is_window(uint64_t clock) const { return sealed_ && clock >= n_sys_; }
  uint64_t live_window() const;
  void evict_oldest(bool allow_cut);

  RingConfig config_;
  bool sealed_ = false;
  uint64_t n_sys_ = 0;
  std::vector<Token> tokens_;  // [clock]
  uint64_t seq_ = 0;           // span sequence number of the newest span
  std::optional<SpanType> pending_;
  bool open_ = false;
  std::vector<Episode> episodes_;
  std::vector<SemanticSpan> evictions_;
  std::optional<Mark> probe_;
};

// A visible key for oracle_attention: its unrotated K and its V (each [n_head_kv][head_dim])
// and the position it is rotated at for this query.
struct OracleKv {
  const float* k = nullptr;
  const float* v = nullptr;
  double position = 0;
};

// out_h = softmax_j(scale * R(query_pos) q_h . R(position_j) k_j) v_j in double precision,
// GQA as in slot_attention.h. q: [n_head][head_dim] unrotated; out: [n_head][head_dim].
void oracle_attention(uint32_t n_head, uint32_t n_head_kv, uint32_t head_dim, const RopeFreqs& rope,
                      const float* q, double query_pos, std::span<const OracleKv> keys, float scale,
                      float* out);

}  // namespace channel
