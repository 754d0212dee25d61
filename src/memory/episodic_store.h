// EpisodicStore: one `.episodic.mem` file, memory-mapped read-only for queries and slab reads,
// written with pwrite in a crash-safe order (docs/memory-format.md, ".episodic.mem", "Write
// ordering"): record first, made durable, then published by the 16-byte {total_episodes,
// write_head} update. Thread-safe: one appender at a time; queries, reads and access updates
// run concurrently with an append and never wait for its disk syncs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_rows.h"
#include "memory/episodic_format.h"
#include "memory/recall_method.h"
#include "memory/rerotate.h"
#include "util/error.h"

namespace channel {

class ThreadPool;

// Thrown to a reader (StoreOptions::read_only) for an episode that the process writing the
// store evicted or replaced after this reader opened it: gone, not damaged.
class EpisodeReplaced : public Error {
 public:
  using Error::Error;
};

struct StoreOptions {
  // No lock, no writes: inspection, and readers sharing the file with one writer. A reader
  // sees the episodes published when it opened the store (less those the writer evicts
  // meanwhile); record_access() does nothing.
  bool read_only = false;
  bool durable = true;     // fdatasync at each step of an append; off only for scratch stores
  std::optional<uint64_t> model_hash;  // when set, a store of another model is refused
};

// What append() writes. Spans must stay valid for the call only.
struct EpisodeRecord {
  uint64_t parent_episode_id = kNoEpisode;
  uint64_t created_timestamp = 0;  // ms since the epoch; 0 = now
  uint64_t start_clock = 0;
  float salience_norm = 0.0f;
  uint32_t continuation_token = kNoContinuation;
  uint16_t flags = 0;               // interrupted / has_tool / pinned
  std::string_view summary;         // cut to <= 256 bytes at a UTF-8 character boundary
  std::span<const int32_t> tokens;  // [n], 1 <= n <= max_tokens
  std::span<const float> centroid;  // [hidden_size], stored as f16
  std::span<const float> kv;        // [num_layers][2 (K, V)][n][kv_dim]
  // Version 2 stores (docs/memory-format.md, "Retrieval section"), stored as f16:
  std::span<const float> rep_keys;  // with keys: [num_layers][key_heads][R][head_dim], pre-RoPE
  std::span<const float> proj;      // with proj: [n][proj_dim], unit vectors
};

// A whole episode read back (for tools and tests; recall uses rehydrate()).
struct Episode {
  EpisodeHeader header{};
  uint32_t slot = 0;
  std::string summary;
  std::vector<int32_t> tokens;  // [n]
  std::vector<float> centroid;  // [hidden_size]
  std::vector<float> kv;        // [num_layers][2][n][kv_dim]
};

struct RehydrateOptions {
  bool verify = true;  // check the record checksum first
  // Precomputed angles, one per RotaryDims given (built from it): no sin/cos per call.
  // Empty: std::cos/sin of Δ·θ_i.
  std::span<const RotationTable> tables;
  // An episode of at least kParallelBytes of K/V is split over it by layer and K/V plane.
  ThreadPool* pool = nullptr;
  // Into an f16 target: read with preadv even when the pages are cached (the path a cold
  // record takes), for tests and benchmarks.
  bool always_pread = false;
  static constexpr uint64_t kParallelBytes = 1 << 20;
};

struct RecallHit {
  uint64_t episode_id = 0;
  uint32_t slot = 0;
  float score = 0.0f;  // cosine similarity, or the method's score (query_retrieval)
};

// A cue for query_retrieval; what the method needs must be set (RecallMethod says what).
struct RetrievalCue {
  RecallMethod method = RecallMethod::centroid;  // not automatic: resolve it first
  std::span<const float> centroid;  // centroid, hybrid: [hidden_size] (any length scale)
  // keys, hybrid: the cue token's queries at every stored layer, after q-norm and before RoPE,
  // [num_layers][key_heads][group][head_dim] (query head h reads KV head h / group).
  std::span<const float> queries;
  uint32_t group = 1;
  float scale = 1.0f;          // the attention scale applied to q.k
  std::span<const float> proj;  // proj: [proj_dim], normalize(W_query x_cue)
  // Hybrid dense + sparse recall (keys, proj, hybrid): with lexical > 0 and cue tokens, the
  // ranking score is z(method score) + lexical * the LexicalIndex score of `tokens` (0..1).
  std::span<const int32_t> tokens;
  float lexical = 0.0f;
};

class EpisodicStore {
 public:
  // Creates a new store; refuses to replace an existing file. The file is built under a
  // temporary name and linked into place once its header is durable.
  static EpisodicStore create(const std::string& path, const StoreGeometry& geometry,
                              uint64_t model_hash, const StoreOptions& options = {});
  // Opens and validates (header, index structure; checksums are checked on read and by
  // verify). Any problem throws channel::Error and leaves the file untouched.
  static EpisodicStore open(const std::string& path, const StoreOptions& options = {});

  EpisodicStore(EpisodicStore&&) noexcept;
  EpisodicStore& operator=(EpisodicStore&&) noexcept;
  ~EpisodicStore();

  const std::string& path() const;
  const StoreLayout& layout() const;
  FileHeader header() const;  // a snapshot
  uint64_t total_episodes() const;
  uint64_t live_count() const;

  std::vector<EpisodeHeader> list() const;  // live episodes, by id
  std::optional<EpisodeHeader> find(uint64_t episode_id) const;

  // Writes and publishes one episode; returns its id. The slot is write_head, or the next
  // slot after it that does not hold a pinned episode; the episode there (if any) is evicted.
  // The parent's child_count is incremented when the parent is still stored.
  uint64_t append(const EpisodeRecord& record);

  // Every field; checks the record checksum first (throws channel::Error on a mismatch).
  Episode read(uint64_t episode_id) const;
  // The episode's token ids alone, without reading its K/V or checking the record checksum
  // (recall's text evidence, memory/recall_copy.h, after rehydrate() verified the record).
  // Throws channel::Error for an unknown id or a record replaced while it was read.
  std::vector<int32_t> read_tokens(uint64_t episode_id) const;

  // Recall: the episode's K and V as f32, keys re-rotated by `delta` positions, written to
  // `out` (kv/kv_rows.h: any strided layout, e.g. a session's recall slots) in one pass per
  // row: read, convert, rotate, store. rope: one RotaryDims for every layer, or one per layer;
  // its n_heads x head_dim split every row of K and V. Throws channel::Error (nothing written)
  // for an unknown id, a checksum mismatch, or a target of the wrong shape or too few rows.
  void rehydrate(uint64_t episode_id, std::span<const RotaryDims> rope, double delta,
                 const KvRowTarget& out, const RehydrateOptions& options = {}) const;
  // The same into an f16 recall tier (kv/kv_rows.h KvRowsF16): keys rotated in f32 and rounded
  // back to f16 (nearest even), values copied. An FP16 store whose K/V pages are all cached is
  // read through the mapping in one pass per row; otherwise (a cold record) the planes are
  // read with preadv straight into the target and the keys are rotated there, so the disk sees
  // exactly the reads a plain pread would make; its checksum (options.verify) is then computed over
  // the bytes read, so a mismatch is found after the rows were written (a session deactivates the
  // episode: they are never attended). A Q8_0 store dequantizes each row first. Otherwise the same
  // errors as above.
  void rehydrate(uint64_t episode_id, std::span<const RotaryDims> rope, double delta,
                 const KvRowsF16& out, const RehydrateOptions& options = {}) const;
  // The f16 K/V of episode `id` as stored, handed to fn (kv/kv_rows.h StoredKvF16) while the
  // slot is held against rewrites: for a device that copies the planes straight from the
  // store's pages and checks them where they land (source.verify: the whole record against
  // the planes' CRC-32C). Returns false without calling fn for a Q8_0 store. Errors as
  // rehydrate; a reader also finds a record the writer replaced meanwhile.
  bool with_stored_kv(uint64_t episode_id, const std::function<void(const StoredKvF16&)>& fn) const;
  // Drops the episode's K/V pages from this process's mapping and asks the kernel to drop
  // them from the page cache (advisory: pages another process maps, or still being written
  // back, stay): for cold-recall benchmarks, or a caller done with a large episode.
  void evict_pages(uint64_t episode_id) const;
  // The same into dense k_out, v_out: [num_layers][n][kv_dim]. With verify, the checksum is
  // checked first.
  void rehydrate(uint64_t episode_id, std::span<const RotaryDims> rope, double delta, float* k_out,
                 float* v_out, bool verify = true) const;

  // Cosine top-k of `query` ([hidden_size]) over the live centroids, best first (ties: lower
  // id first; a NaN score, possible only for a centroid holding inf/NaN, ranks last). Scores
  // are those of the FP16 scan below, bit for bit: the first query runs that scan, the second
  // runs it too and builds an int8 sketch of the centroids on the way (centroid_sketch.h, held
  // in RAM: max_episodes x hidden_size bytes); later ones scan the sketch and rescore exactly
  // only the rows that could make the top-k. The scan is split over `pool` when given. (While
  // the sketch is built, tens of ms for 16k x 3840, an append's publish waits for it.)
  std::vector<RecallHit> query(std::span<const float> query, size_t k,
                               ThreadPool* pool = nullptr) const;
  // The same answer from a scan of every live FP16 centroid, without the sketch.
  std::vector<RecallHit> query_full_scan(std::span<const float> query, size_t k,
                                         ThreadPool* pool = nullptr) const;

  // Top-k of the live episodes under cue.method, best first (ties: lower id first). centroid is
  // query(). keys, proj and hybrid scan the retrieval section (a version 2 store with that
  // kind; otherwise channel::Error): every entry is scored, and an entry's checksum is verified
  // (once per open) when it ranks among the top k; a damaged one is dropped from the ranking,
  // skipped from then on, and reported once on stderr. hybrid = z(centroid cosine) + z(keys score), each standardised over the episodes
  // scored. Split over `pool` when given.
  std::vector<RecallHit> query_retrieval(const RetrievalCue& cue, size_t k,
                                         ThreadPool* pool = nullptr) const;
  // Episodes whose retrieval entry was found damaged so far (each reported once).
  uint64_t damaged_retrieval_entries() const;

  // access_count += 1 and last_accessed = now_ms (in place; synced with the next append).
  // Nothing on a read-only store.
  void record_access(uint64_t episode_id, uint64_t now_ms);
  // Drops the episode (its slot becomes empty: one 4-byte write, synced, as an eviction);
  // every other record is left as it was. Throws for an unknown id.
  void remove(uint64_t episode_id);
  void set_pinned(uint64_t episode_id, bool pinned);
  void sync() const;  // fdatasync

  // Bytes of the store's file mapping resident in this process now (the Rss of the mapping in
  // /proc/self/smaps; 0 where that cannot be read). Every read through the mapping unmaps its
  // pages again, so this stays under a bound that does not grow with the episodes read.
  uint64_t mapped_resident_bytes() const;

 private:
  struct Impl;
  explicit EpisodicStore(std::unique_ptr<Impl> impl);
  // query_retrieval's last stage: the top k of the raw scores (with the centroid cosines and
  // lexical scores where given), each of them verified, ranked again without the damaged.
  std::vector<RecallHit> rank_verified(std::span<const float> raw, std::span<const float> cos,
                                       std::span<const float> lex, float lexical,
                                       std::span<const uint32_t> slots,
                                       std::span<const uint64_t> ids, size_t k) const;
  std::unique_ptr<Impl> impl_;
  friend void read_consistent_index(Impl& m, size_t size);
};

// Cuts a string to at most max_bytes without splitting a UTF-8 character.
std::string_view utf8_prefix(std::string_view s, size_t max_bytes);

// Milliseconds since the Unix epoch.
uint64_t now_ms();

}  // namespace channel
