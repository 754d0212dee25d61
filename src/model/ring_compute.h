// RingCompute: the forward of a slot-ring session (runtime/ring_session.h) on a device other
// than the CPU. The session keeps everything that is metadata on the host (the SlotRing, the
// spans, evictions, recall episodes, probes, the tentative decode_all); a RingCompute owns
// the model's weights and every layer's K/V on its device (a bounded layer's ring mirrors the
// session's host BoundedState), allocated once, and per forward
// chunk gets only integers: the tokens, their clocks and slots, and each query's runs of the
// active-slot table (kv/virtual_positions.h). It stores each token's keys rotated at its
// clock and attends each query through its runs, rotating the query once per run by the
// run's rope_pos, exactly as the CPU's RingSession::Backend does.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bounded/bounded_state.h"
#include "kv/kv_rows.h"
#include "kv/virtual_positions.h"
#include "model/forward.h"
#include "model/model.h"
#include "ops/rope.h"

namespace channel {

// The geometry a RingCompute allocates for, fixed for the session.
struct RingComputeShape {
  // [n_layer] slots of each layer's K/V on the device: a global layer all n_slots of the
  // ring (its recall tier at slots recall_begin .. n_slots - 1), a sliding layer the
  // LocalRing's, a bounded layer 0.
  std::vector<uint32_t> layer_slots;
  uint32_t recall_begin = 0;
  int n_batch = 1;                      // most tokens per forward chunk
  uint32_t max_runs = 2;                // most global runs of one query (n_recall + 2)
  uint32_t table_slots = 0;             // most distinct slot ids a chunk's runs can point at
  RopeFreqs rope_global, rope_sliding;  // keys rotated at their clock by these (f64 angles)
};

// One forward chunk, as RingSession::run_chunk prepares it for the CPU forward.
struct RingChunk {
  std::span<const int32_t> tokens;             // [n]
  std::span<const uint64_t> clocks;            // [n] the rope position of each token's keys
  std::span<const uint32_t> global_slots;      // [n] where its K/V goes in global layers
  std::span<const uint32_t> local_slots;       // [n] ... in sliding layers (empty if none)
  std::span<const std::vector<SlotRun>> runs;  // [n] what query t sees in global layers
  std::span<const SlotRun> local_runs;         // [n] ... in sliding layers (empty if none)
  // [n] PerHeadAttention::segment_end: tokens [a, segment_end[a]) store their K/V before
  // queries a.. attend (a later token may overwrite a slot an earlier query still sees).
  std::span<const int> segment_end;
  LogitsFor which = LogitsFor::last;
  float* logits = nullptr;    // [n_vocab] (last) or [n][n_vocab] (all)
  float* residual = nullptr;  // null, or [n][n_embd]: every token's last residual
  // null, or [n][n_global][n_head * head_dim]: the global layers' queries after q-norm,
  // before rope (TokenBatch::queries)
  float* queries = nullptr;
  // Bounded (swa_sink_v1) layers: the positions every one of them held before the chunk, and
  // where the chunk's normed keys and values of each come back, [n_bounded][n][2][n_head_kv *
  // head_dim] (bounded layers in layer order): the session's BoundedState stays the source of
  // truth (undo history, probes, session files) and the device ring mirrors it. Null without
  // bounded layers.
  uint64_t bounded_seen = 0;
  float* bounded_kv = nullptr;
};

class RingCompute {
 public:
  virtual ~RingCompute() = default;
  // Runs the chunk: stores every token's K/V in its slots and writes what `which` asks.
  // Throws channel::Error (a device error, non-finite logits) with the K/V of the chunk's
  // slots undefined.
  virtual void forward(const RingChunk& chunk) = 0;
  // Head h's K and V rows (head_dim floats) of `slot` in non-bounded layer il, and the
  // converse (rounded to the device's storage type). kv_row skips a null k or v.
  virtual void kv_row(int il, uint32_t slot, int h, float* k, float* v) const = 0;
  virtual void set_kv_row(int il, uint32_t slot, int h, const float* k, const float* v) = 0;
  // Every KV head's rows of each of `slots`, k and v: [slots.size()][n_head_kv][head_dim]
  // (a device reads each run of consecutive slots with one copy each).
  virtual void kv_slots(int il, std::span<const uint32_t> slots, float* k, float* v) const = 0;
  // The converse of kv_slots (rounded to the device's storage type).
  virtual void set_kv_slots(int il, std::span<const uint32_t> slots, const float* k,
                            const float* v) = 0;
  // An episode's rows of global layers into their recall tiers: staged [layers.size()][2]
  // [n_tokens][row] f16 bits (row = n_head_kv * head_dim, token-major; layer g's keys, then
  // its values, as RingSession::recall_k/recall_v), into n_tokens consecutive slots from `slot`
  // of each layer layers[g]. With rotate_by != 0 the keys are first turned by rotate_by
  // positions (the rope of global layers, f64 angles rounded to f32, rotated in f32, rounded
  // back to f16).
  virtual void write_recall_f16(std::span<const int> layers, uint32_t slot, uint32_t n_tokens,
                                size_t row, const uint16_t* staged, double rotate_by) = 0;
  // Called as runs of planes of an episode staged in recall_staging's memory are filled (plane
  // p: its values [p * plane_values, (p + 1) * plane_values), layer p / 2's keys or values),
  // from any thread: a device starts copying them while the rest is still read.
  // write_recall_f16 then sends only what was not sent this way.
  virtual void recall_planes_ready(size_t first_plane, size_t n_planes, size_t plane_values) {}
  // Whether write_recall_stored takes `source` from where it is stored at full speed (a device
  // page-locks those pages once, within a budget); when not, the caller reads the rows into
  // recall_staging itself and calls write_recall_f16.
  virtual bool takes_stored(const StoredKvF16& source) { return false; }
  // An episode straight from the memory it is stored in (source: planes laid out as
  // write_recall_f16's staged rows): copied, then checked with source.verify against each
  // plane's CRC-32C (a damaged record throws; the session leaves the episode inactive, so what
  // reached its free slots is never attended), written as write_recall_f16. This default
  // copies into recall_staging and checks before writing; a device copies from the store's
  // pages and checks on the device while it writes.
  virtual void write_recall_stored(std::span<const int> layers, uint32_t slot, uint32_t n_tokens,
                                   const StoredKvF16& source, double rotate_by);
  // Host memory once handed over as a StoredKvF16 region goes away (its store closes): a
  // device unlocks what it page-locked of it.
  virtual void forget_host_region(const void* region) {}
  // Host memory for n_values f16 values of an episode's rows on their way to write_recall_f16
  // (page-locked on a device, so the copy is a plain DMA), valid until the next call; null:
  // the session stages in its own memory.
  virtual uint16_t* recall_staging(size_t n_values) { return nullptr; }
  // Host memory for one row of logits (n_vocab floats) that forward fills itself, without a
  // copy, when chunk.logits points at it with LogitsFor::last (a device's page-locked row);
  // valid for the compute's lifetime. Null: none (forward copies to chunk.logits).
  virtual float* logits_memory() { return nullptr; }
  // Replaces bounded layer il's ring on the device by `state`'s (RingSession calls it before
  // the next forward after a truncate_last, a probe's rollback or a session file's load).
  virtual void load_bounded(int il, const BoundedState& state) = 0;
  virtual size_t kv_bytes() const = 0;
  virtual std::string device_name() const = 0;

 protected:
  // Throws unless `source` holds n_tokens tokens of every layer of `layers` (K and V planes).
  static void check_stored(std::span<const int> layers, uint32_t n_tokens,
                           const StoredKvF16& source);
};

// Makes the RingCompute of a session of `model` with `shape` (uploading the weights); a
// one-line channel::Error when the device cannot run it.
using RingComputeFactory = std::function<std::unique_ptr<RingCompute>(
    std::shared_ptr<const Model> model, const RingComputeShape& shape)>;

}  // namespace channel
