// CudaRing: a RingSession's forward and K/V on a CUDA device (see cuda_ring.h).
#include "backend/cuda/cuda_ring.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_bounded_layers.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_forward.h"
#include "backend/cuda/cuda_host_pins.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_ring_step.h"
#include "backend/cuda/cuda_weights_impl.h"
#include "ops/fp16.h"
#include "util/error.h"

namespace channel::cuda {

namespace {

class CudaRing final : public RingCompute {
 public:
  CudaRing(std::shared_ptr<const CudaWeights> weights, const RingComputeShape& shape, bool graphs);
  ~CudaRing() override {
    for (cudaGraphExec_t g : graph_)
      if (g) cudaGraphExecDestroy(g);
  }

  void forward(const RingChunk& c) override;
  void kv_row(int il, uint32_t slot, int h, float* k, float* v) const override;
  void set_kv_row(int il, uint32_t slot, int h, const float* k, const float* v) override;
  void kv_slots(int il, std::span<const uint32_t> slots, float* k, float* v) const override;
  void set_kv_slots(int il, std::span<const uint32_t> slots, const float* k,
                    const float* v) override;
  void write_recall_f16(std::span<const int> layers, uint32_t slot, uint32_t n_tokens, size_t row,
                        const uint16_t* staged, double rotate_by) override;
  void recall_planes_ready(size_t first_plane, size_t n_planes, size_t plane_values) override;
  bool takes_stored(const StoredKvF16& source) override;
  void write_recall_stored(std::span<const int> layers, uint32_t slot, uint32_t n_tokens,
                           const StoredKvF16& source, double rotate_by) override;
  void forget_host_region(const void* region) override { pins_.forget(region); }
  void load_bounded(int il, const BoundedState& state) override;
  uint16_t* recall_staging(size_t n_values) override;
  // The session's logits live in logits_h_, which the LM head or the step's copy fills.
  float* logits_memory() override { return logits_h_.as<float>(); }
  size_t kv_bytes() const override { return kv_.bytes() + bounded_.bytes(); }
  std::string device_name() const override { return w_->device_name(); }

 private:
  struct LayerKv {
    char* k = nullptr;
    char* v = nullptr;
    int64_t cap = 0;  // slots
  };
  const ModelHparams& hp() const { return w_->model().hparams(); }
  void build_step(const RingChunk& c);
  void upload_step();
  bool enqueue(const RingChunk& c, int n, int n_out);
  size_t row_offset(int il, uint32_t slot, int h) const;
  size_t pitch_of(int il) const {  // bytes from one KV head's rows to the next in layer il
    return static_cast<size_t>(layers_.at(static_cast<size_t>(il)).cap) * hp().head_dim * kv_elem_;
  }
  static bool select_device(const CudaWeights& w) {
    cuda::check(cudaSetDevice(w.device().index), "selecting the device");
    return true;
  }
  template <typename Fn>
  void each_run(int il, std::span<const uint32_t> slots, Fn&& fn) const;
  // Checks an episode's destinations (every layer global, the slots inside its arena) into
  // episode_dst_h_; throws otherwise.
  void episode_destinations(std::span<const int> layers, uint32_t slot, uint32_t n_tokens,
                            size_t row);
  // Enqueues the copy of episode_destinations() to the device, and write_episode_f16 from
  // episode_ into those arenas.
  void send_destinations(size_t n_layers);
  void launch_episode(size_t n_layers, uint32_t slot, uint32_t n_tokens, double rotate_by);
  // Makes episode_ hold at least `bytes` (grows to the largest episode, then stays).
  void reserve_episode(size_t bytes);
  void unpack(size_t run, float* out) const;
  void pack(size_t run, const float* in) const;

  std::shared_ptr<const CudaWeights> w_;
  // Selects the weights' device before the members below make streams and buffers on the
  // current one (a thread that did not upload the weights may have another current).
  bool on_device_ = select_device(*w_);
  RingComputeShape shape_;
  bool graphs_;
  Stream stream_;
  Stream check_stream_;            // a stored recall's checksums, beside its keys being turned
  Event copied_, checked_;         // ... after the copy, and before the recall returns
  bool stored_unsettled_ = false;  // a stored recall left before its wait (threw)
  // The device holds crc32c_planes' tables; else stored recalls take the staged path.
  bool checks_on_device_ = crc32c_planes_fit();
  int B_ = 0;
  int64_t q_dim_ = 0, kv_dim_ = 0, qkv_w_ = 0, attn_w_ = 0;
  bool kv_f32_ = false;
  size_t kv_elem_ = 2;
  size_t runs_cap_ = 0, table_cap_ = 0, pos_offset_ = 0, header_bytes_ = 0;
  DeviceBuffer kv_;
  std::vector<LayerKv> layers_;
  std::vector<int> global_index_;  // [n_layer] position among global layers, -1 for others
  int n_global_ = 0;
  BoundedLayers bounded_;  // the bounded layers' rings (f32, mirroring the session's states)
  PinnedBuffer recall_pinned_;  // an episode's rows on their way to the recall tier
  DeviceBuffer episode_;        // ... and on the device, every global layer's (write_recall_f16)
  std::vector<uint8_t> sent_;   // [2 n_layer] planes of the staged episode copied already
  std::thread::id staging_thread_;  // the session's thread, which asked for recall_staging
  DeviceBuffer episode_dst_;        // [n_layer] EpisodeDst: where write_episode_f16 puts them
  PinnedBuffer episode_dst_h_;
  HostPins pins_;           // the store's pages a stored recall copies from
  PinnedBuffer plane_crc_h_;  // [2 n_layer] a stored recall's planes' CRC-32C
  size_t seen_offset_ = 0;
  DeviceBuffer x_, xn_, qkv_, attn_, proj_, gu_, ff_, act_, part_, logits_;
  DeviceBuffer header_, runs_, table_, inv_freq_;
  PinnedBuffer header_h_, runs_h_, table_h_, logits_h_, resid_h_;
  PinnedBuffer queries_h_;  // [n_global][q_dim] one token's queries, copied by the graph
  PinnedBuffer nonfinite_;  // the logits' flags (nonfinite_flags), written by the step
  PinnedBuffer logits_bad_;    // the LM head's non-finite mark where it wrote logits_h_ itself
  // The one-token step's graphs, without and with the queries' copy (RingChunk::queries: the
  // episodic memory's tap asks for them every token), and whether each one's LM head writes
  // logits_h_ itself (host_logits).
  cudaGraphExec_t graph_[2] = {nullptr, nullptr};
  bool graph_direct_[2] = {false, false};
  RingRope rope_global_, rope_sliding_;
  size_t n_runs_ = 0, n_table_ = 0;
  std::vector<int> segment_end_;
  std::vector<RingStepRef> refs_;
  mutable std::vector<char> buf_;  // kv_slots / set_kv_slots staging of one run
};

CudaRing::CudaRing(std::shared_ptr<const CudaWeights> weights, const RingComputeShape& shape,
                   bool graphs)
    : w_(std::move(weights)), shape_(shape), graphs_(graphs) {
  const ModelHparams& h = hp();
  const DeviceInfo& info = w_->device();
  if (shape_.layer_slots.size() != static_cast<size_t>(h.n_layer))
    throw_error("cuda ring: {} layer slot counts for {} layers", shape_.layer_slots.size(),
                h.n_layer);
  if (h.head_dim != h.head_dim_v)
    throw_error("cuda ring: the slot geometry needs equal K and V head dims");
  B_ = std::max(1, shape_.n_batch);
  q_dim_ = static_cast<int64_t>(h.n_head) * h.head_dim;
  kv_dim_ = static_cast<int64_t>(h.n_head_kv) * h.head_dim;
  qkv_w_ = q_dim_ + 2 * kv_dim_;
  attn_w_ = q_dim_;
  kv_f32_ = w_->impl().w.layers.front().wq.type == GgmlType::F32;
  kv_elem_ = kv_f32_ ? 4 : 2;
  global_index_.assign(static_cast<size_t>(h.n_layer), -1);
  size_t kv_bytes = 0;
  const size_t bounded_bytes = BoundedLayers::device_bytes(w_->model());  // checks their shape
  for (int il = 0; il < h.n_layer; ++il) {
    if (h.is_bounded(il)) continue;
    if (!h.is_sliding(il)) global_index_[static_cast<size_t>(il)] = n_global_++;
    kv_bytes +=
        2 * static_cast<size_t>(kv_dim_) * shape_.layer_slots[static_cast<size_t>(il)] * kv_elem_;
  }
  int max_splits = 0;
  for (int n = 1; n <= B_; ++n)
    max_splits = std::max(max_splits, n * attention_splits(n, h.n_head_kv, info.sm_count));
  const auto B = static_cast<size_t>(B_);
  const size_t f = sizeof(float);
  const size_t widest = static_cast<size_t>(
      std::max({q_dim_, static_cast<int64_t>(h.n_embd), static_cast<int64_t>(h.n_ff)}));
  const size_t part_floats = attention_part_floats(1, h.n_head, h.head_dim, max_splits);
  runs_cap_ = B * (static_cast<size_t>(shape_.max_runs) + 1);
  table_cap_ = std::max<size_t>(shape_.table_slots, 1);
  pos_offset_ = (kIntRows * B * 4 + 7) / 8 * 8;
  seen_offset_ = pos_offset_ + B * 8;  // the bounded layers' positions before the chunk
  header_bytes_ = seen_offset_ + 8;
  // The largest episode's rows on the device (episode_, grown on the first recalls): the
  // recall tier of every global layer.
  size_t recall_rows = 0;
  for (int il = 0; il < h.n_layer && !shape_.layer_slots.empty(); ++il)
    if (global_index_[static_cast<size_t>(il)] >= 0)
      recall_rows += shape_.layer_slots[static_cast<size_t>(il)] - shape_.recall_begin;
  const size_t scratch = B * f * (2 * h.n_embd + qkv_w_ + attn_w_ + h.n_embd + 3 * h.n_ff) +
                         B * widest * f + part_floats * f + B * h.n_vocab * f + header_bytes_ +
                         runs_cap_ * sizeof(RingRun) + table_cap_ * 4 +
                         2 * recall_rows * kv_dim_ * 2 + bounded_bytes;
  require_device_memory(
      info, kv_bytes + scratch,
      fmt::format("a ring session of {} slots (K/V of every layer and activations)",
                  shape_.layer_slots.empty()
                      ? 0
                      : *std::max_element(shape_.layer_slots.begin(), shape_.layer_slots.end())));
  kv_ = DeviceBuffer(std::max<size_t>(kv_bytes, 1), "the ring's K/V");
  cuda::check(cudaMemset(kv_.get(), 0, kv_bytes), "clearing the ring's K/V");
  layers_.resize(static_cast<size_t>(h.n_layer));
  char* at = kv_.as<char>();
  for (int il = 0; il < h.n_layer; ++il) {
    LayerKv& L = layers_[static_cast<size_t>(il)];
    L.cap = shape_.layer_slots[static_cast<size_t>(il)];
    const size_t bytes = static_cast<size_t>(kv_dim_) * static_cast<size_t>(L.cap) * kv_elem_;
    L.k = at;
    L.v = at + bytes;
    at += 2 * bytes;
  }
  x_ = DeviceBuffer(B * h.n_embd * f, "activations");
  xn_ = DeviceBuffer(B * h.n_embd * f, "activations");
  qkv_ = DeviceBuffer(B * qkv_w_ * f, "activations");
  attn_ = DeviceBuffer(B * attn_w_ * f, "activations");
  proj_ = DeviceBuffer(B * h.n_embd * f, "activations");
  gu_ = DeviceBuffer(B * 2 * h.n_ff * f, "activations");
  ff_ = DeviceBuffer(B * h.n_ff * f, "activations");
  act_ = DeviceBuffer(B * widest * f, "activations");
  part_ = DeviceBuffer(part_floats * f, "attention partials");
  logits_ = DeviceBuffer(B * h.n_vocab * f, "logits");
  episode_dst_ = DeviceBuffer(h.n_layer * sizeof(EpisodeDst), "recall destinations");
  episode_dst_h_ = PinnedBuffer(h.n_layer * sizeof(EpisodeDst), "recall destinations");
  sent_.assign(2 * static_cast<size_t>(h.n_layer), 0);
  header_ = DeviceBuffer(header_bytes_, "step inputs");
  runs_ = DeviceBuffer(runs_cap_ * sizeof(RingRun), "the step's runs");
  table_ = DeviceBuffer(table_cap_ * 4, "the active-slot table");
  header_h_ = PinnedBuffer(header_bytes_, "step inputs");
  runs_h_ = PinnedBuffer(runs_cap_ * sizeof(RingRun), "the step's runs");
  table_h_ = PinnedBuffer(table_cap_ * 4, "the active-slot table");
  logits_h_ = PinnedBuffer(static_cast<size_t>(h.n_vocab) * f, "logits");
  nonfinite_ = PinnedBuffer(kNonfiniteBlocks * 4, "logits flags");
  logits_bad_ = PinnedBuffer(4, "logits flags");
  resid_h_ = PinnedBuffer(static_cast<size_t>(h.n_embd) * f, "residual");
  queries_h_ =
      PinnedBuffer(std::max<size_t>(static_cast<size_t>(n_global_ * q_dim_) * f, f), "queries");
  std::memset(header_h_.as<char>(), 0, header_bytes_);
  // The rope frequencies (f64) of global and sliding layers, uploaded once.
  const size_t ng = shape_.rope_global.inv_freq.size(), ns = shape_.rope_sliding.inv_freq.size();
  inv_freq_ = DeviceBuffer(std::max<size_t>((ng + ns) * sizeof(double), 8), "rope frequencies");
  std::vector<double> freqs(shape_.rope_global.inv_freq);
  freqs.insert(freqs.end(), shape_.rope_sliding.inv_freq.begin(),
               shape_.rope_sliding.inv_freq.end());
  cuda::check(cudaMemcpy(inv_freq_.get(), freqs.data(), freqs.size() * sizeof(double),
                         cudaMemcpyHostToDevice),
              "uploading the rope frequencies");
  rope_global_ = {shape_.rope_global.style == RopeStyle::neox,
                  static_cast<int>(shape_.rope_global.n_rot), inv_freq_.as<double>()};
  rope_sliding_ = {shape_.rope_sliding.style == RopeStyle::neox,
                   static_cast<int>(shape_.rope_sliding.n_rot), inv_freq_.as<double>() + ng};
  segment_end_.resize(B);
  bounded_ = BoundedLayers(*w_, B_);
}

uint16_t* CudaRing::recall_staging(size_t n_values) {
  stream_.sync("recall rows");                // copies of a previous, failed fill may still read it
  if (recall_pinned_.bytes() < n_values * 2)  // grows to the largest episode, then stays
    recall_pinned_ = PinnedBuffer(n_values * 2, "recall rows");
  reserve_episode(n_values * 2);  // its planes' copies land here (recall_plane_ready)
  std::fill(sent_.begin(), sent_.end(), 0);
  staging_thread_ = std::this_thread::get_id();
  return recall_pinned_.as<uint16_t>();
}

// Runs the session's own thread read are copied at once (each in one copy: the store hands
// over runs of at least 512 KiB); those of the store's pool threads wait for
// write_recall_f16. Copies issued from 16 pool threads at once contended in the driver: on
// the H200 a 12.6 MB recall took 824 us against 177 for the store's read alone.
void CudaRing::recall_planes_ready(size_t first_plane, size_t n_planes, size_t plane_values) {
  const size_t bytes = plane_values * 2, at = first_plane * bytes, run = n_planes * bytes;
  if (std::this_thread::get_id() != staging_thread_ || first_plane + n_planes > sent_.size() ||
      at + run > episode_.bytes() || at + run > recall_pinned_.bytes())
    return;  // write_recall_f16 sends them
  cuda::check(cudaMemcpyAsync(episode_.as<char>() + at, recall_pinned_.as<char>() + at, run,
                              cudaMemcpyHostToDevice, stream_.get()),
              "recall rows");
  std::fill(sent_.begin() + static_cast<ptrdiff_t>(first_plane),
            sent_.begin() + static_cast<ptrdiff_t>(first_plane + n_planes), 1);
}

void CudaRing::episode_destinations(std::span<const int> layers, uint32_t slot, uint32_t n_tokens,
                                    size_t row) {
  if (row != static_cast<size_t>(kv_dim_) || layers.size() > layers_.size())
    throw_error(
        "cuda ring: recall rows of {} values for {} layers; the ring has rows of {} and {} "
        "layers",
        row, layers.size(), kv_dim_, layers_.size());
  auto* dst = episode_dst_h_.as<EpisodeDst>();
  for (size_t g = 0; g < layers.size(); ++g) {
    const int il = layers[g];
    if (il < 0 || static_cast<size_t>(il) >= layers_.size() ||
        global_index_[static_cast<size_t>(il)] < 0 ||
        slot + uint64_t{n_tokens} > static_cast<uint64_t>(layers_[static_cast<size_t>(il)].cap))
      throw_error("cuda ring: layer {} has no rows for slots {} .. {}", il, slot,
                  slot + n_tokens - 1);
    const LayerKv& L = layers_[static_cast<size_t>(il)];
    dst[g] = EpisodeDst{L.k, L.v, L.cap};
  }
}

void CudaRing::reserve_episode(size_t bytes) {
  if (episode_.bytes() >= bytes) return;
  episode_ = DeviceBuffer();  // the old one first: both at once may not fit
  episode_ = DeviceBuffer(bytes, "recall episode");
  std::fill(sent_.begin(), sent_.end(), 0);
}

void CudaRing::send_destinations(size_t n_layers) {
  cuda::check(cudaMemcpyAsync(episode_dst_.get(), episode_dst_h_.as<EpisodeDst>(),
                              n_layers * sizeof(EpisodeDst), cudaMemcpyHostToDevice, stream_.get()),
              "recall destinations");
}

void CudaRing::launch_episode(size_t n_layers, uint32_t slot, uint32_t n_tokens, double rotate_by) {
  write_episode_f16(episode_.as<uint16_t>(), 0, static_cast<int>(2 * n_layers),
                    static_cast<int>(n_tokens), hp().n_head_kv, hp().head_dim,
                    episode_dst_.as<EpisodeDst>(), slot, kv_f32_, rope_global_, rotate_by,
                    stream_.get());
}

// One copy of the whole staged episode, one kernel that turns the keys and writes every
// layer's rows, one wait: layer by layer a 48-layer episode took 96 copies, 144 launches and
// 48 waits.
void CudaRing::write_recall_f16(std::span<const int> layers, uint32_t slot, uint32_t n_tokens,
                                size_t row, const uint16_t* staged, double rotate_by) {
  if (n_tokens == 0 || layers.empty()) return;
  episode_destinations(layers, slot, n_tokens, row);
  const size_t plane_bytes = size_t{n_tokens} * row * 2, planes = 2 * layers.size();
  const size_t bytes = planes * plane_bytes;
  const bool from_staging = staged == recall_pinned_.as<uint16_t>();
  reserve_episode(bytes);
  const cudaStream_t cs = stream_.get();
  send_destinations(layers.size());
  // The planes recall_plane_ready did not send, in runs of consecutive ones.
  for (size_t p = 0; p < planes;) {
    if (from_staging && p < sent_.size() && sent_[p]) {
      ++p;
      continue;
    }
    size_t e = p + 1;
    while (e < planes && !(from_staging && e < sent_.size() && sent_[e])) ++e;
    cuda::check(cudaMemcpyAsync(episode_.as<char>() + p * plane_bytes,
                                reinterpret_cast<const char*>(staged) + p * plane_bytes,
                                (e - p) * plane_bytes, cudaMemcpyHostToDevice, cs),
                "recall rows");
    p = e;
  }
  std::fill(sent_.begin(), sent_.end(), 0);
  launch_episode(layers.size(), slot, n_tokens, rotate_by);
  stream_.sync("writing recall rows");
}

bool CudaRing::takes_stored(const StoredKvF16& source) {
  return source.bytes() > 0 && checks_on_device_ &&
         pins_.cover(source.planes, source.bytes(), source.region, source.region_bytes);
}

// Straight from the store's page-locked pages by DMA, then on the device, side by side, each
// plane's CRC-32C (written straight to page-locked host memory) and the kernel that writes the
// recall slots (free until the session activates the episode: a record that then fails its
// check is never attended), one wait, the check. No host core reads the episode: on the H200
// the store's read on 4-16 host threads took 1.1-6x a page-locked copy of the same bytes,
// varying by machine. (Copying groups of planes on a second stream while the first groups were
// checked and written was slower: 611-659 against 404-483 us for 12.6 MB.)
void CudaRing::write_recall_stored(std::span<const int> layers, uint32_t slot, uint32_t n_tokens,
                                   const StoredKvF16& source, double rotate_by) {
  if (n_tokens == 0 || layers.empty()) return;
  check_stored(layers, n_tokens, source);
  episode_destinations(layers, slot, n_tokens, source.row_dim);
  const size_t bytes = source.bytes(), plane_bytes = source.plane_values() * 2;
  const size_t n_planes = source.n_planes;
  if (!pins_.cover(source.planes, bytes, source.region, source.region_bytes))
    throw_error("cuda ring: the stored episode's pages cannot be page-locked");
  if (stored_unsettled_) {  // a previous, failed recall's work may still use episode_
    stream_.sync("recall rows");
    check_stream_.sync("recall checksums");
  }
  stored_unsettled_ = true;
  reserve_episode(bytes);
  if (plane_crc_h_.bytes() < n_planes * 4)
    plane_crc_h_ = PinnedBuffer(n_planes * 4, "recall checksums");
  const cudaStream_t cs = stream_.get();
  send_destinations(layers.size());  // small: ahead of the copy, not between it and the kernels
  const auto* from = reinterpret_cast<const char*>(source.planes);
  // A copy a locked run: one registration each (a copy spanning two may not take the locked
  // path). The probes: 235 us for 12.6 MB in one copy, 249 in 2 MiB pieces.
  for (size_t at = 0; at < bytes;) {
    const size_t piece = std::min(bytes - at, pins_.locked_from(from + at));
    if (piece == 0) throw_error("cuda ring: a stored episode's page is not locked");
    cuda::check(
        cudaMemcpyAsync(episode_.as<char>() + at, from + at, piece, cudaMemcpyHostToDevice, cs),
        "recall rows");
    at += piece;
  }
  copied_.order(cs, check_stream_.get(), "recall checksums");
  crc32c_planes(episode_.get(), static_cast<int>(n_planes), plane_bytes,
                plane_crc_h_.as<uint32_t>(), check_stream_.get());
  launch_episode(layers.size(), slot, n_tokens, rotate_by);
  checked_.order(check_stream_.get(), cs, "recall checksums");
  if (source.prepare) source.prepare();  // the record's head, read while the device works
  stream_.sync("recalling an episode");
  stored_unsettled_ = false;
  source.verify({plane_crc_h_.as<uint32_t>(), n_planes});
}

void CudaRing::load_bounded(int il, const BoundedState& state) {
  bounded_.load(il, state, stream_.get());
}

void CudaRing::build_step(const RingChunk& c) {
  const RingStepSizes sizes =
      build_ring_step(c, static_cast<size_t>(B_), header_h_.as<int32_t>(),
                      reinterpret_cast<double*>(header_h_.as<char>() + pos_offset_),
                      runs_h_.as<RingRun>(), runs_cap_, table_h_.as<uint32_t>(), table_cap_, refs_);
  n_runs_ = sizes.runs;
  n_table_ = sizes.table;
  const auto seen = static_cast<int64_t>(c.bounded_seen);
  std::memcpy(header_h_.as<char>() + seen_offset_, &seen, sizeof seen);
}

void CudaRing::upload_step() {
  const cudaStream_t cs = stream_.get();
  cuda::check(cudaMemcpyAsync(header_.get(), header_h_.as<char>(), header_bytes_,
                              cudaMemcpyHostToDevice, cs),
              "step inputs");
  if (n_runs_ > 0)
    cuda::check(cudaMemcpyAsync(runs_.get(), runs_h_.as<char>(), n_runs_ * sizeof(RingRun),
                                cudaMemcpyHostToDevice, cs),
                "the step's runs");
  if (n_table_ > 0)
    cuda::check(cudaMemcpyAsync(table_.get(), table_h_.as<char>(), n_table_ * 4,
                                cudaMemcpyHostToDevice, cs),
                "the active-slot table");
}

// Enqueues the forward of the n tokens of the uploaded step, logits of the last n_out. True
// when the LM head stores the one row of logits into logits_h_ itself (host_logits).
bool CudaRing::enqueue(const RingChunk& c, int n, int n_out) {
  const ModelHparams& h = hp();
  const WeightsLayout& W = w_->impl().w;
  const cudaStream_t cs = stream_.get();
  const int64_t B = B_;
  const int32_t* step = header_.as<int32_t>();
  const auto* key_pos = reinterpret_cast<const double*>(header_.as<char>() + pos_offset_);
  float* qkv = qkv_.as<float>();
  const QkvLayout ql{h.n_head, h.n_head_kv, h.head_dim, h.head_dim_v, qkv_w_, kv_f32_};
  const ForwardBufs bufs{x_.as<float>(),
                         xn_.as<float>(),
                         qkv,
                         attn_.as<float>(),
                         proj_.as<float>(),
                         gu_.as<float>(),
                         ff_.as<float>(),
                         act_.get(),
                         logits_.as<float>(),
                         qkv_w_,
                         attn_w_,
                         nonfinite_.as<uint32_t>(),
                         logits_h_.as<float>(),
                         logits_bad_.as<uint32_t>()};
  auto attend = [&](int il, void* wo_in, ActForm wo_form) {
    const DevLayer& L = W.layers[static_cast<size_t>(il)];
    if (bounded_.index(il) >= 0) {  // swa_sink_v1: sinks + the ring of the last W, then inserts
      const auto* seen = reinterpret_cast<const int64_t*>(header_.as<char>() + seen_offset_);
      bounded_.enqueue(il, L, qkv, qkv_w_, n, seen, attn_.as<float>(), cs);
      return false;
    }
    // W_o's input needs one segment over every query (it is offered in decode: n is 1).
    if (std::clamp(segment_end_[0], 1, n) < n) wo_in = nullptr;
    const bool sliding = h.is_sliding(il);
    const LayerKv& K = layers_[static_cast<size_t>(il)];
    for (int a = 0; a < n;) {  // segment [a, e): store its K/V, then attend its queries
      const int e = std::clamp(segment_end_[static_cast<size_t>(a)], a + 1, n);
      ring_qkv_finish(ql, qkv + a * qkv_w_, e - a, L.q_norm, L.k_norm, h.rms_eps,
                      sliding ? rope_sliding_ : rope_global_, key_pos + a,
                      step + (sliding ? kLocalSlot : kGlobalSlot) * B + a, K.k, K.v, K.cap, cs);
      RingAttnArgs A;
      A.q = qkv + a * qkv_w_;
      A.ldq = qkv_w_;
      A.k_cache = K.k;
      A.v_cache = K.v;
      A.kv_f32 = kv_f32_;
      A.cap = K.cap;
      A.table = table_.as<int32_t>();
      A.runs = runs_.as<RingRun>();
      A.run_first = step + (sliding ? kLocalFirst : kGlobalFirst) * B + a;
      A.run_count = step + (sliding ? kLocalCount : kGlobalCount) * B + a;
      A.rope = sliding ? rope_sliding_ : rope_global_;
      A.n = e - a;
      A.n_head = h.n_head;
      A.n_head_kv = h.n_head_kv;
      A.head_dim = h.head_dim;
      A.scale = h.attn_scale;
      A.splits = attention_splits(e - a, h.n_head_kv, w_->device().sm_count);
      A.part = part_.as<float>();
      A.out = attn_.as<float>() + a * attn_w_;
      A.out_act = wo_in;
      A.out_form = wo_form;
      ring_attention(A, cs);
      a = e;
    }
    const int g = global_index_[static_cast<size_t>(il)];
    if (c.queries && g >= 0)  // after q-norm, before rope: [t][g][q_dim]
      cuda::check(cudaMemcpy2DAsync(c.queries + g * q_dim_, n_global_ * q_dim_ * sizeof(float), qkv,
                                    qkv_w_ * sizeof(float), q_dim_ * sizeof(float), n,
                                    cudaMemcpyDeviceToHost, cs),
                  "the queries");
    return wo_in != nullptr;
  };
  return enqueue_model(*w_, bufs, step + kTokens * B, n, n_out, cs, attend);
}

void CudaRing::forward(const RingChunk& c) {
  const ModelHparams& h = hp();
  const int n = static_cast<int>(c.tokens.size());
  if (n < 1 || n > B_) throw_error("cuda ring: a chunk of {} tokens (at most {})", n, B_);
  for (int t = 0; t < n; ++t)
    segment_end_[static_cast<size_t>(t)] = c.segment_end[static_cast<size_t>(t)];
  const int n_out = c.which == LogitsFor::all ? n : c.which == LogitsFor::last ? 1 : 0;
  build_step(c);
  const cudaStream_t cs = stream_.get();
  const size_t n_vocab = static_cast<size_t>(h.n_vocab), E = static_cast<size_t>(h.n_embd);
  const bool graph_step = graphs_ && n == 1 && n_out == 1;
  const int with_queries = c.queries != nullptr ? 1 : 0;
  upload_step();
  *logits_bad_.as<uint32_t>() = 0;  // the LM head only ever sets it
  bool direct = false;
  if (graph_step) {
    cudaGraphExec_t& graph = graph_[with_queries];
    if (!graph) {  // the kernels, the logits and the residual back; the step is uploaded before
      cudaGraph_t g = nullptr;
      cuda::check(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal),
                  "capturing the decode step");
      try {
        // The queries go to the pinned queries_h_ (a captured copy needs a fixed address that
        // the device can reach), then to c.queries after the step.
        RingChunk captured = c;
        captured.queries = with_queries ? queries_h_.as<float>() : nullptr;
        graph_direct_[with_queries] = enqueue(captured, 1, 1);
        if (!graph_direct_[with_queries])
          cuda::check(cudaMemcpyAsync(logits_h_.as<float>(), logits_.get(), n_vocab * 4,
                                      cudaMemcpyDeviceToHost, cs),
                      "logits");
        cuda::check(
            cudaMemcpyAsync(resid_h_.as<float>(), x_.get(), E * 4, cudaMemcpyDeviceToHost, cs),
            "the residual");
      } catch (...) {
        cudaStreamEndCapture(cs, &g);
        if (g) cudaGraphDestroy(g);
        throw;
      }
      cuda::check(cudaStreamEndCapture(cs, &g), "capturing the decode step");
      const cudaError_t err = cudaGraphInstantiate(&graph, g, 0);
      cudaGraphDestroy(g);
      cuda::check(err, "instantiating the decode graph");
    }
    direct = graph_direct_[with_queries];
    cuda::check(cudaGraphLaunch(graph, cs), "launching the decode graph");
  } else {
    direct = enqueue(c, n, n_out);
    if (n_out == 1 && !direct)
      cuda::check(cudaMemcpyAsync(logits_h_.as<float>(), logits_.get(), n_vocab * 4,
                                  cudaMemcpyDeviceToHost, cs),
                  "logits");
    else if (n_out > 1)
      cuda::check(cudaMemcpyAsync(c.logits, logits_.get(), static_cast<size_t>(n_out) * n_vocab * 4,
                                  cudaMemcpyDeviceToHost, cs),
                  "logits");
    if (c.residual)
      cuda::check(cudaMemcpyAsync(c.residual, x_.get(), static_cast<size_t>(n) * E * 4,
                                  cudaMemcpyDeviceToHost, cs),
                  "the residuals");
  }
  stream_.sync("the forward pass");
  if (n_out == 1 && c.logits != logits_h_.as<float>())
    std::memcpy(c.logits, logits_h_.as<float>(), n_vocab * 4);
  if (bounded_.count() > 0 && c.bounded_kv)
    std::memcpy(c.bounded_kv, bounded_.chunk_kv(0, n),
                static_cast<size_t>(bounded_.count()) * n * 2 * kv_dim_ * sizeof(float));
  if (graph_step && c.residual) std::memcpy(c.residual, resid_h_.as<float>(), E * 4);
  if (graph_step && with_queries)
    std::memcpy(c.queries, queries_h_.as<float>(), static_cast<size_t>(n_global_ * q_dim_) * 4);
  if (n_out > 0 &&
      (direct ? *logits_bad_.as<uint32_t>() != 0 : any_nonfinite(nonfinite_.as<uint32_t>())))
    throw_error(
        "forward (cuda): non-finite values (NaN or Inf) in the logits: the model's "
        "weights or its input are damaged");
}

size_t CudaRing::row_offset(int il, uint32_t slot, int h) const {
  const LayerKv& L = layers_.at(static_cast<size_t>(il));
  if (h < 0 || h >= hp().n_head_kv || slot >= static_cast<uint64_t>(L.cap))
    throw_error("cuda ring: layer {} has no K/V row for slot {}, head {}", il, slot, h);
  return (static_cast<size_t>(h) * static_cast<size_t>(L.cap) + slot) * hp().head_dim * kv_elem_;
}

void CudaRing::kv_row(int il, uint32_t slot, int h, float* k, float* v) const {
  const size_t at = row_offset(il, slot, h), hd = static_cast<size_t>(hp().head_dim);
  const LayerKv& L = layers_[static_cast<size_t>(il)];
  std::vector<uint16_t> half(hd);
  for (int kv = 0; kv < 2; ++kv) {
    float* out = kv == 0 ? k : v;
    if (!out) continue;
    const char* src = (kv == 0 ? L.k : L.v) + at;
    if (kv_f32_) {
      cuda::check(cudaMemcpy(out, src, hd * 4, cudaMemcpyDeviceToHost), "reading a K/V row");
    } else {
      cuda::check(cudaMemcpy(half.data(), src, hd * 2, cudaMemcpyDeviceToHost),
                  "reading a K/V row");
      for (size_t i = 0; i < hd; ++i) out[i] = fp16_to_fp32(half[i]);
    }
  }
}

// Each run of consecutive slots of layer il (every slot checked) and each of K (kv 0) and V
// (kv 1): fn(kv, a, run, rows) with rows the run's rows of head 0 on the device (one head's
// lie pitch() bytes further) and the staging buffer buf_ sized for n_head_kv * run rows in the
// storage type, head-major [n_head_kv][run][head_dim]: one 2-D copy moves a run's K (or V).
template <typename Fn>
void CudaRing::each_run(int il, std::span<const uint32_t> slots, Fn&& fn) const {
  for (const uint32_t slot : slots) row_offset(il, slot, 0);
  const LayerKv& L = layers_[static_cast<size_t>(il)];
  for (size_t a = 0; a < slots.size();) {
    size_t e = a + 1;
    while (e < slots.size() && slots[e] == slots[e - 1] + 1) ++e;
    buf_.resize((e - a) * static_cast<size_t>(kv_dim_) * kv_elem_);
    const size_t at = row_offset(il, slots[a], 0);
    for (int kv = 0; kv < 2; ++kv) fn(kv, a, e - a, (kv == 0 ? L.k : L.v) + at);
    a = e;
  }
}

// Staging [n_head_kv][run][head_dim] (storage type) <-> rows [run][n_head_kv][head_dim] (f32);
// f16 widened exactly, or rounded as set_kv_row.
void CudaRing::unpack(size_t run, float* out) const {
  const size_t hd = static_cast<size_t>(hp().head_dim), nkv = static_cast<size_t>(hp().n_head_kv);
  for (size_t h = 0; h < nkv; ++h)
    for (size_t t = 0; t < run; ++t) {
      const char* from = buf_.data() + (h * run + t) * hd * kv_elem_;
      float* to = out + (t * nkv + h) * hd;
      if (kv_f32_) {
        std::memcpy(to, from, hd * sizeof(float));
        continue;
      }
      for (size_t i = 0; i < hd; ++i) {
        uint16_t bits;
        std::memcpy(&bits, from + 2 * i, 2);
        to[i] = fp16_to_fp32(bits);
      }
    }
}

void CudaRing::pack(size_t run, const float* in) const {
  const size_t hd = static_cast<size_t>(hp().head_dim), nkv = static_cast<size_t>(hp().n_head_kv);
  for (size_t h = 0; h < nkv; ++h)
    for (size_t t = 0; t < run; ++t) {
      char* to = buf_.data() + (h * run + t) * hd * kv_elem_;
      const float* from = in + (t * nkv + h) * hd;
      if (kv_f32_) {
        std::memcpy(to, from, hd * sizeof(float));
        continue;
      }
      for (size_t i = 0; i < hd; ++i) {
        const uint16_t bits = fp32_to_fp16(from[i]);
        std::memcpy(to + 2 * i, &bits, 2);
      }
    }
}

void CudaRing::kv_slots(int il, std::span<const uint32_t> slots, float* k, float* v) const {
  const size_t pitch = pitch_of(il);
  each_run(il, slots, [&](int kv, size_t a, size_t run, const char* rows) {
    const size_t width = run * hp().head_dim * kv_elem_;
    cuda::check(cudaMemcpy2D(buf_.data(), width, rows, pitch, width, hp().n_head_kv,
                             cudaMemcpyDeviceToHost),
                "reading slots' K/V");
    unpack(run, (kv == 0 ? k : v) + a * kv_dim_);
  });
}

void CudaRing::set_kv_slots(int il, std::span<const uint32_t> slots, const float* k,
                            const float* v) {
  const size_t pitch = pitch_of(il);
  each_run(il, slots, [&](int kv, size_t a, size_t run, char* rows) {
    const size_t width = run * hp().head_dim * kv_elem_;
    pack(run, (kv == 0 ? k : v) + a * kv_dim_);
    cuda::check(cudaMemcpy2DAsync(rows, pitch, buf_.data(), width, width, hp().n_head_kv,
                                  cudaMemcpyHostToDevice, stream_.get()),
                "writing slots' K/V");
    stream_.sync("writing slots' K/V");  // buf_ is refilled next
  });
}

void CudaRing::set_kv_row(int il, uint32_t slot, int h, const float* k, const float* v) {
  const size_t at = row_offset(il, slot, h), hd = static_cast<size_t>(hp().head_dim);
  const LayerKv& L = layers_[static_cast<size_t>(il)];
  std::vector<uint16_t> half(hd);
  for (int kv = 0; kv < 2; ++kv) {
    const float* in = kv == 0 ? k : v;
    char* dst = (kv == 0 ? L.k : L.v) + at;
    if (kv_f32_) {
      cuda::check(cudaMemcpy(dst, in, hd * 4, cudaMemcpyHostToDevice), "writing a K/V row");
    } else {
      for (size_t i = 0; i < hd; ++i) half[i] = fp32_to_fp16(in[i]);
      cuda::check(cudaMemcpy(dst, half.data(), hd * 2, cudaMemcpyHostToDevice),
                  "writing a K/V row");
    }
  }
}

}  // namespace

RingComputeFactory ring_compute(std::shared_ptr<const CudaWeights> weights, bool graphs) {
  return [weights, graphs](std::shared_ptr<const Model> model,
                           const RingComputeShape& shape) -> std::unique_ptr<RingCompute> {
    if (model.get() != &weights->model())
      throw_error("cuda: the session's model is not the one whose weights were uploaded");
    return std::make_unique<CudaRing>(weights, shape, graphs);
  };
}

RingComputeFactory ring_compute(int device, bool graphs) {
  // Sessions made by one factory (a server's conversations, a reloaded session file) share
  // one upload of a model's weights while any of them lives.
  struct Shared {
    std::mutex mutex;
    const Model* model = nullptr;
    std::weak_ptr<const CudaWeights> weights;
  };
  auto shared = std::make_shared<Shared>();
  return [device, graphs, shared](std::shared_ptr<const Model> model,
                                  const RingComputeShape& shape) -> std::unique_ptr<RingCompute> {
    std::shared_ptr<const CudaWeights> weights;
    {
      const std::lock_guard<std::mutex> lock(shared->mutex);
      if (shared->model == model.get()) weights = shared->weights.lock();
      if (!weights) {
        weights = CudaWeights::upload(model, device);
        shared->model = model.get();
        shared->weights = weights;
      }
    }
    return std::make_unique<CudaRing>(std::move(weights), shape, graphs);
  };
}

}  // namespace channel::cuda
