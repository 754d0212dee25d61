// auto_recall.h: recall that fires by itself (issue 12; spec 003's passive resonance). Any
// front end with an attached store (run, stream, the C API, later chat and serve) uses it:
//   - at a turn boundary (the end of a user turn or prompt, before the reply; a `turn_end`
//     span) the current context is the cue: recall_now() with the last token's state, or,
//     for a prompt whose reply must already see the recall, recall_for(probe_cue(last token))
//     before that token is fed (docs/kv-geometry.md, "Automatic recall");
//   - when the final hidden state moves sharply (condition C: ||x_t - x_{t-1}|| above a
//     threshold, at most once per cool-down), a background thread scores the store and reads
//     the chosen records, and poll() puts them in tier 3 between decode steps: the decode
//     loop never waits on the disk.
// Tier 3 is a cache: episodes still in the new top-k (and their recalled neighbours) stay,
// pinned episodes stay, the others are released; new hits are recalled best last.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "memory/memory_attachment.h"

namespace channel {

class StreamSession;

enum class RecallReason : uint8_t { turn, velocity, explicit_call };
const char* recall_reason_name(RecallReason r);

// Measured end to end (docs/models.md, run 12, "The lexical weight and the gate"): a cue that
// names a person or a code finds its episode by those tokens far better than by a 29M model's
// vectors (recall@1 at 10^6 tokens 92 % at weight 8, 99 % at 64), and then a look-alike that
// shares a name scores close to the best, so the gate is stricter than it was at weight 8.
inline constexpr float kDefaultLexicalWeight = 64.0f;
inline constexpr float kDefaultMinScoreRatio = 0.9f;

struct AutoRecallConfig {
  RecallMethod method = RecallMethod::automatic;
  size_t k = 2;                    // episodes in the top-k
  uint32_t neighbours = 0;         // temporal neighbours (parent, child) per hit, when room
  // Weight of the lexical half of hybrid recall (RetrievalCue::lexical), in standard
  // deviations of the method's scores; 0: the model's vectors alone.
  float lexical = kDefaultLexicalWeight;
  // Condition C fires when ||x_t - x_{t-1}|| exceeds velocity_factor times its running mean
  // (an exponential average over the stream, after 32 tokens): scale-free, so one setting
  // fits every model. <= 0: off.
  float velocity_factor = 0.0f;
  uint64_t cooldown_tokens = 256;  // tokens between two condition-C recalls
  // A hit after the best one goes into tier 3 only when its score is at least this share of
  // the best's (when the best is positive): a weak match beside a strong one is a distractor
  // the model may copy from, not a memory it needs. Two hits of similar score both stay.
  // 0: every hit of the top-k is placed.
  float min_score_ratio = kDefaultMinScoreRatio;
};

// What one recall did; front ends print it (channel stream's JSON "recall" lines).
struct RecallEvent {
  RecallReason reason = RecallReason::turn;
  uint64_t clock = 0;  // session clock when the cue was taken
  RecallMethod method = RecallMethod::centroid;
  std::vector<RecallHit> hits;          // the top-k, best first
  std::vector<uint64_t> below_gate;     // hits not placed: under min_score_ratio of the best
  std::vector<uint64_t> recalled;       // newly placed in tier 3
  std::vector<uint64_t> kept;           // already in tier 3 and still wanted (or pinned)
  std::vector<uint64_t> released;       // taken out of tier 3
  std::vector<uint64_t> neighbours;     // recalled as a hit's parent or child
  std::vector<uint64_t> skipped;        // damaged records: skipped with a warning
  double query_ms = 0.0, recall_ms = 0.0;
};

class AutoRecall {
 public:
  // The attachment must outlive this object. Installs the attachment's observer (condition C).
  AutoRecall(MemoryAttachment& memory, AutoRecallConfig config);
  ~AutoRecall();  // stops the background thread; a query in flight is discarded
  AutoRecall(const AutoRecall&) = delete;
  AutoRecall& operator=(const AutoRecall&) = delete;

  // A boundary: cue = the last token's state; foreground (the caller's thread).
  RecallEvent recall_now(RecallReason reason = RecallReason::turn);
  // The same with a given cue (MemoryAttachment::probe_cue of a prompt's last token).
  RecallEvent recall_for(const CueState& cue, RecallReason reason = RecallReason::turn);
  // The same with the query and the record reads on the background thread; poll() lands it.
  // For boundaries no reply waits on (a fed text's turns). Dropped when a query is in flight.
  void recall_async(RecallReason reason = RecallReason::turn);
  // Between decode steps: lands a background recall whose query finished; nullopt when none.
  std::optional<RecallEvent> poll();
  // Every event (recall_now, recall_for, poll) is also passed here; optional.
  void set_listener(std::function<void(const RecallEvent&)> listener) {
    listener_ = std::move(listener);
  }
  const AutoRecallConfig& config() const { return config_; }
  RecallMethod method() const { return method_; }  // resolved
  MemoryAttachment& memory() { return memory_; }

 private:
  void on_batch(const TokenBatch& b);
  void worker();
  // Tier 3 update from a finished query; runs on the caller's (decode) thread.
  RecallEvent apply(RecallReason reason, uint64_t clock, std::vector<RecallHit> hits,
                    std::vector<uint64_t> skipped, double query_ms);

  MemoryAttachment& memory_;
  AutoRecallConfig config_;
  RecallMethod method_;
  std::function<void(const RecallEvent&)> listener_;
  // Condition C.
  std::vector<float> prev_x_;
  double mean_dx_ = 0.0;
  uint64_t seen_dx_ = 0;
  uint64_t last_fire_clock_ = 0;
  bool fired_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, busy_ = false;
  std::optional<CueState> cue_;  // handed to the worker
  uint64_t cue_clock_ = 0;
  RecallReason cue_reason_ = RecallReason::velocity;
  void post(CueState cue, uint64_t clock, RecallReason reason);  // caller holds mu_
  struct Landed {
    RecallReason reason;
    uint64_t clock;
    std::vector<RecallHit> hits;
    std::vector<uint64_t> skipped;
    double query_ms;
  };
  std::optional<Landed> landed_;  // from the worker, taken by poll()
  std::thread thread_;
};

// A user turn fed so that the reply already sees the recall: tokens[0, n-1) are fed, the cue
// is the state of tokens[n-1] taken by a probe (when the free window has room; otherwise the
// state of the token before it), recall_for() runs, then tokens[n-1] is fed. `centroid`,
// when not empty, replaces the cue's centroid (a prompt's text cue). Returns the event.
RecallEvent feed_turn_with_recall(StreamSession& stream, AutoRecall& recall,
                                  std::span<const int32_t> tokens, SpanType type,
                                  std::vector<float> centroid = {});

}  // namespace channel
