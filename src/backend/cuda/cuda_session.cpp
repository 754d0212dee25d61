// CudaSession: the contiguous session's forward on the device (see cuda_session.h).
#include "backend/cuda/cuda_session.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backend/cuda/cuda_bounded_layers.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_forward.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_weights_impl.h"
#include "model/token_check.h"
#include "util/error.h"

namespace channel::cuda {

namespace {

// The step's inputs, [6][max_batch] int32: token ids, positions (== slots), then the first
// slot-table index and slot count of each query on global and on sliding layers; after them
// (8-byte aligned) one int64, the positions the bounded layers held before the step.
enum StepRow { kTokens = 0, kPositions, kFirstGlobal, kCountGlobal, kFirstSliding, kCountSliding, kRows };

}  // namespace

struct CudaSession::State {
  Stream stream;
  int max_batch = 0;
  int64_t q_dim = 0, kv_dim = 0, v_dim = 0, qkv_w = 0, attn_w = 0;
  int max_splits = 0;
  bool kv_f32 = false;  // F32 models keep f32 keys and values, the others f16
  size_t kv_elem = 2;
  DeviceBuffer kv;  // K then V, [kv layer][n_head_kv][cap][head_dim]
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  std::vector<int> kv_index;  // [n_layer] position in the arena, -1 for bounded layers
  // The bounded (swa_sink_v1) layers: their rings on the device, mirrored by the host's
  // states [n_layer] (empty on other layers), which keep the undo history; loaded into the
  // device before the next forward when they changed there (truncate, reset, a failed chunk).
  BoundedLayers bounded;
  std::vector<BoundedState> host;
  bool bounded_dirty = false;
  size_t seen_offset = 0, step_bytes = 0;
  DeviceBuffer x, xn, qkv, attn, proj, gu, ff, act, part, logits, step, table;
  DeviceBuffer arrivals;  // decode_attention's counters, [max_batch][n_head_kv], kept zero
  DeviceBuffer rope_cs;   // rope_table's, [2: global, sliding][max_batch][n_rot / 2]
  PinnedBuffer step_host, logits_host;  // logits_host: [kVerifyTokens][n_vocab] at most
  PinnedBuffer nonfinite;               // the logits' flags (nonfinite_flags), written by the step
  PinnedBuffer logits_bad;              // the LM head's non-finite mark (host_logits), one word
  float* hidden = nullptr;              // hidden_states' rows for the chunk under way, else null
  // The captured steps of 1 .. kVerifyTokens tokens, the last token's logits or every token's
  // (a speculative verify): graph_index(n, all), each captured on its first use.
  std::vector<cudaGraphExec_t> graphs = std::vector<cudaGraphExec_t>(2 * (kVerifyTokens + 1));
  // Whether each captured step's LM head writes the logits to the host itself (no copy node).
  std::vector<char> graph_direct = std::vector<char>(2 * (kVerifyTokens + 1));
  size_t bytes = 0;

  static size_t graph_index(int n, bool all) { return static_cast<size_t>(n) * 2 + (all ? 1 : 0); }

  ~State() {
    for (cudaGraphExec_t g : graphs)
      if (g) cudaGraphExecDestroy(g);
  }
};

CudaSession::CudaSession(std::shared_ptr<const CudaWeights> weights, CudaSessionConfig config)
    : weights_(std::move(weights)), config_(config), st_(std::make_unique<State>()) {
  if (config_.n_ctx < 1) throw_error("session: n_ctx must be at least 1, got {}", config_.n_ctx);
  if (config_.n_batch < 1)
    throw_error("session: n_batch must be at least 1, got {}", config_.n_batch);
  const ModelHparams& hp = weights_->model().hparams();
  const DeviceInfo& info = weights_->device();
  cuda::check(cudaSetDevice(info.index), "selecting the device");
  State& s = *st_;
  s.max_batch = std::min(config_.n_batch, config_.n_ctx);
  s.q_dim = static_cast<int64_t>(hp.n_head) * hp.head_dim;
  s.kv_dim = static_cast<int64_t>(hp.n_head_kv) * hp.head_dim;
  s.v_dim = static_cast<int64_t>(hp.n_head_kv) * hp.head_dim_v;
  s.qkv_w = s.q_dim + s.kv_dim + s.v_dim;
  s.attn_w = static_cast<int64_t>(hp.n_head) * hp.head_dim_v;
  for (int n = 1; n <= s.max_batch; ++n)
    s.max_splits = std::max(s.max_splits, n * attention_splits(n, hp.n_head_kv, info.sm_count));

  const auto B = static_cast<size_t>(s.max_batch);
  const auto cap = static_cast<size_t>(config_.n_ctx);
  s.kv_f32 = weights_->impl().w.layers.front().wq.type == GgmlType::F32;
  s.kv_elem = s.kv_f32 ? 4 : 2;
  s.kv_index.assign(static_cast<size_t>(hp.n_layer), -1);
  size_t kv_layers = 0;
  for (int il = 0; il < hp.n_layer; ++il)
    if (!hp.is_bounded(il)) s.kv_index[static_cast<size_t>(il)] = static_cast<int>(kv_layers++);
  const size_t bounded_bytes = BoundedLayers::device_bytes(weights_->model());
  if (bounded_bytes > 0 && hp.head_dim != hp.head_dim_v)
    throw_error("cuda: bounded layers need equal K and V head dims, got {} and {}", hp.head_dim,
                hp.head_dim_v);
  s.seen_offset = (static_cast<size_t>(kRows) * B * 4 + 7) / 8 * 8;
  s.step_bytes = s.seen_offset + 8;
  const size_t kv_bytes = kv_layers * (s.kv_dim + s.v_dim) * cap * s.kv_elem;
  const size_t widest = static_cast<size_t>(std::max({s.q_dim, s.attn_w, static_cast<int64_t>(hp.n_embd),
                                                      static_cast<int64_t>(hp.n_ff)}));
  const size_t f = sizeof(float);
  const size_t scratch =
      B * f * (2 * hp.n_embd + s.qkv_w + s.attn_w + hp.n_embd + 3 * hp.n_ff) + B * widest * f +
      attention_part_floats(1, hp.n_head, hp.head_dim_v, s.max_splits) * f + B * hp.n_vocab * f +
      s.step_bytes + cap * 4 + bounded_bytes + B * static_cast<size_t>(hp.n_head_kv) * 4 +
      2 * B * static_cast<size_t>(hp.n_rot / 2) * 8;
  require_device_memory(info, kv_bytes + scratch,
                        fmt::format("a session of {} slots (KV arena and activations)", cap));
  s.kv = DeviceBuffer(std::max<size_t>(kv_bytes, 1), "the KV arena");
  s.k_cache = s.kv.get();
  s.v_cache = s.kv.as<char>() + kv_layers * s.kv_dim * cap * s.kv_elem;
  s.x = DeviceBuffer(B * hp.n_embd * f, "activations");
  s.xn = DeviceBuffer(B * hp.n_embd * f, "activations");
  s.qkv = DeviceBuffer(B * s.qkv_w * f, "activations");
  s.attn = DeviceBuffer(B * s.attn_w * f, "activations");
  s.proj = DeviceBuffer(B * hp.n_embd * f, "activations");
  s.gu = DeviceBuffer(B * 2 * hp.n_ff * f, "activations");
  s.ff = DeviceBuffer(B * hp.n_ff * f, "activations");
  s.act = DeviceBuffer(B * widest * f, "activations");
  s.part = DeviceBuffer(attention_part_floats(1, hp.n_head, hp.head_dim_v, s.max_splits) * f,
                        "attention partials");
  s.arrivals = DeviceBuffer(B * static_cast<size_t>(hp.n_head_kv) * 4, "attention counters");
  cuda::check(cudaMemset(s.arrivals.get(), 0, s.arrivals.bytes()), "clearing the counters");
  s.rope_cs = DeviceBuffer(std::max<size_t>(2 * B * static_cast<size_t>(hp.n_rot / 2) * 8, 8),
                           "rotation tables");
  s.logits = DeviceBuffer(B * hp.n_vocab * f, "logits");
  s.step = DeviceBuffer(s.step_bytes, "step inputs");
  s.table = DeviceBuffer(cap * 4, "the slot table");
  s.step_host = PinnedBuffer(s.step_bytes, "step inputs");
  std::memset(s.step_host.as<char>(), 0, s.step_bytes);
  s.logits_host = PinnedBuffer(
      static_cast<size_t>(std::min(s.max_batch, kVerifyTokens)) * hp.n_vocab * f, "logits");
  s.nonfinite = PinnedBuffer(kNonfiniteBlocks * 4, "logits flags");
  s.logits_bad = PinnedBuffer(4, "logits flags");
  s.bytes = kv_bytes + scratch;
  // Slot i holds position i: the contiguous session's table is the identity.
  std::vector<int32_t> ids(cap);
  std::iota(ids.begin(), ids.end(), 0);
  cuda::check(cudaMemcpy(s.table.get(), ids.data(), cap * 4, cudaMemcpyHostToDevice), "uploading the slot table");
  s.bounded = BoundedLayers(*weights_, s.max_batch);
  s.host.resize(static_cast<size_t>(hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il)
    if (hp.is_bounded(il))
      s.host[static_cast<size_t>(il)] = BoundedState(hp.n_head_kv, hp.bounded.window, hp.head_dim);
  s.bounded_dirty = s.bounded.count() > 0;
}

CudaSession::~CudaSession() = default;

size_t CudaSession::device_bytes() const { return st_->bytes; }

void CudaSession::check(std::span<const int32_t> tokens) const {
  check_token_ids(tokens, model().hparams().n_vocab);
  if (tokens.size() > static_cast<size_t>(config_.n_ctx - n_past_))
    throw_error("context full: {} tokens already held + {} new exceed n_ctx {}", n_past_,
                tokens.size(), config_.n_ctx);
}

void CudaSession::truncate_last(int k) {
  if (k < 0 || k > n_past_) throw_error("truncate: cannot drop {} tokens of the {} held", k, n_past_);
  const ModelHparams& hp = model().hparams();
  State& s = *st_;
  for (int il = 0; il < hp.n_layer; ++il)  // check every layer before changing any
    if (hp.is_bounded(il) && s.host[static_cast<size_t>(il)].undo_available() < k)
      throw_error(
          "truncate: cannot drop {} tokens: bounded layer {} keeps undo history for {} "
          "(UNDO_DEPTH {})",
          k, il, s.host[static_cast<size_t>(il)].undo_available(), UNDO_DEPTH);
  for (int il = 0; il < hp.n_layer; ++il)
    if (hp.is_bounded(il)) s.host[static_cast<size_t>(il)].truncate_last(k);
  if (k > 0 && s.bounded.count() > 0) s.bounded_dirty = true;
  n_past_ -= k;
}

void CudaSession::reset() {
  State& s = *st_;
  for (BoundedState& b : s.host)
    if (b.window() > 0) b.clear();
  s.bounded_dirty = s.bounded.count() > 0;
  n_past_ = 0;
}

bool CudaSession::has_bounded_layers() const { return st_->bounded.count() > 0; }

int CudaSession::verify_capacity() const {
  return has_bounded_layers() ? UNDO_DEPTH + 1 : config_.n_ctx;
}

// Enqueues the forward of the n tokens whose inputs are in st_->step, logits into
// st_->logits: the last token's row, or all n rows. pinned_logits (st_->logits_host, or null):
// where the logits go on the host; true when the LM head wrote them there itself
// (host_logits()), with a non-finite one marked in st_->logits_bad.
bool CudaSession::enqueue_forward(int n, bool all_logits, float* pinned_logits) {
  const ModelHparams& hp = model().hparams();
  const WeightsLayout& W = weights_->impl().w;
  State& s = *st_;
  const cudaStream_t cs = s.stream.get();
  const int64_t B = s.max_batch;
  const int32_t* step = s.step.as<int32_t>();
  const int32_t* positions = step + kPositions * B;
  const size_t cap = static_cast<size_t>(config_.n_ctx);
  const RopeMode mode = hp.rope_style == RopeStyle::neox ? RopeMode::neox : RopeMode::normal;
  // Each rotation's (cos, sin) at the step's positions, once for all its layers.
  RopeDev rope_global = make_rope(mode, hp.n_rot, hp.rope_base, hp.rope_freq_scale, W.rope_freqs);
  RopeDev rope_sliding = make_rope(mode, hp.n_rot, hp.rope_base_swa, 1.0f, W.rope_freqs);
  float2* tables = s.rope_cs.as<float2>();
  rope_tables(rope_global, rope_sliding, positions, n, tables, tables + B * (hp.n_rot / 2), cs);
  rope_global.table = tables;
  rope_sliding.table = tables + B * (hp.n_rot / 2);
  const QkvLayout ql{hp.n_head, hp.n_head_kv, hp.head_dim, hp.head_dim_v, s.qkv_w, s.kv_f32};
  const int splits = attention_splits(n, hp.n_head_kv, weights_->device().sm_count);
  ForwardBufs bufs{s.x.as<float>(),    s.xn.as<float>(), s.qkv.as<float>(), s.attn.as<float>(),
                   s.proj.as<float>(), s.gu.as<float>(), s.ff.as<float>(),  s.act.get(),
                   s.logits.as<float>(), s.qkv_w,        s.attn_w};
  bufs.nonfinite = s.nonfinite.as<uint32_t>();
  bufs.logits_host = pinned_logits;
  bufs.logits_bad = s.logits_bad.as<uint32_t>();

  // The contiguous context: slot == position, each query sees the slots its range names.
  auto attend = [&](int il, void* wo_in, ActForm wo_form) {
    const DevLayer& L = W.layers[static_cast<size_t>(il)];
    if (s.bounded.index(il) >= 0) {  // swa_sink_v1: sinks + the ring of the last W, then inserts
      const auto* seen = reinterpret_cast<const int64_t*>(s.step.as<char>() + s.seen_offset);
      s.bounded.enqueue(il, L, s.qkv.as<float>(), s.qkv_w, n, seen, s.attn.as<float>(), cs);
      return false;
    }
    const bool sliding = hp.is_sliding(il);
    const auto kv_layer = static_cast<size_t>(s.kv_index[static_cast<size_t>(il)]);
    const size_t layer_k = kv_layer * s.kv_dim * cap;
    const size_t layer_v = kv_layer * s.v_dim * cap;
    void* kc = static_cast<char*>(s.k_cache) + layer_k * s.kv_elem;
    void* vc = static_cast<char*>(s.v_cache) + layer_v * s.kv_elem;
    const RopeDev& rope = sliding ? rope_sliding : rope_global;
    AttnArgs a;
    a.q = s.qkv.as<float>();
    a.ldq = s.qkv_w;
    a.k_cache = kc;
    a.v_cache = vc;
    a.cap = static_cast<int64_t>(cap);
    a.kv_f32 = s.kv_f32;
    a.table = s.table.as<int32_t>();
    a.first = step + (sliding ? kFirstSliding : kFirstGlobal) * B;
    a.count = step + (sliding ? kCountSliding : kCountGlobal) * B;
    a.n = n;
    a.n_head = hp.n_head;
    a.n_head_kv = hp.n_head_kv;
    a.head_dim = hp.head_dim;
    a.head_dim_v = hp.head_dim_v;
    a.scale = hp.attn_scale;
    a.splits = splits;
    a.part = s.part.as<float>();
    a.out = s.attn.as<float>();
    a.out_act = wo_in;
    a.out_form = wo_form;
    // One token: its q|k|v finish and attention in one kernel. A verify's tokens take the same
    // attention after qkv_finish (same bits, so each verified token's logits are decode's).
    const bool one_kernel = one_kernel_attention() && decode_attention_supported(a);
    if (!one_kernel || n > 1)
      qkv_finish(ql, s.qkv.as<float>(), n, L.q_norm, L.k_norm, hp.rms_eps, rope, positions,
                 positions, kc, vc, static_cast<int64_t>(cap), cs);
    if (one_kernel) {
      DecodeAttnArgs d{a,         n == 1,     L.q_norm,
                       L.k_norm,  hp.rms_eps, rope,
                       positions, positions,  s.arrivals.as<unsigned>()};
      decode_attention(d, cs);
    } else {
      attention(a, cs);
    }
    return wo_in != nullptr;
  };
  if (s.hidden) {  // hidden_states: no LM head; every token's final-norm row instead
    enqueue_model(*weights_, bufs, step + kTokens * B, n, 0, cs, attend);
    const int64_t E = hp.n_embd;
    rms_norm(bufs.x, E, W.output_norm, n, E, hp.rms_eps, bufs.xn, E, cs);
    cuda::check(cudaMemcpyAsync(s.hidden, bufs.xn, static_cast<size_t>(n * E) * 4,
                                cudaMemcpyDeviceToHost, cs),
                "hidden states");
    return false;
  }
  return enqueue_model(*weights_, bufs, step + kTokens * B, n, all_logits ? n : 1, cs, attend);
}

void CudaSession::run_chunk(std::span<const int32_t> tokens, bool all_logits, float* logits_out) {
  const ModelHparams& hp = model().hparams();
  State& s = *st_;
  const int n = static_cast<int>(tokens.size());
  const int B = s.max_batch;
  int32_t* h = s.step_host.as<int32_t>();
  for (int t = 0; t < n; ++t) {
    const int p = n_past_ + t;
    h[kTokens * B + t] = tokens[static_cast<size_t>(t)];
    h[kPositions * B + t] = p;
    h[kFirstGlobal * B + t] = 0;
    h[kCountGlobal * B + t] = p + 1;
    const int first = hp.sliding_window > 0 ? std::max(0, p - hp.sliding_window + 1) : 0;
    h[kFirstSliding * B + t] = first;
    h[kCountSliding * B + t] = p - first + 1;
  }
  // One decode step, or a speculative verify's few tokens: replayed from a captured graph.
  const bool graph_step = n <= kVerifyTokens && config_.graphs && !s.hidden;
  const int n_bounded = s.bounded.count();
  if (n_bounded > 0) {
    const int64_t seen = n_past_;  // every token passes every bounded layer
    std::memcpy(s.step_host.as<char>() + s.seen_offset, &seen, sizeof seen);
  }
  try {
    if (s.bounded_dirty) {  // the host rings changed: the device's follow before the chunk
      for (int il = 0; il < hp.n_layer; ++il)
        if (hp.is_bounded(il)) s.bounded.load(il, s.host[static_cast<size_t>(il)], s.stream.get());
      s.bounded_dirty = false;
    }
    run_step(n, all_logits, graph_step, logits_out);
    if (n_bounded > 0) {  // the host's rings follow: the device returned each layer's rows
      const size_t kvd = static_cast<size_t>(s.kv_dim);
      for (int il = 0; il < hp.n_layer; ++il) {
        const int b = s.bounded.index(il);
        if (b < 0) continue;
        const float* kv = s.bounded.chunk_kv(b, n);
        for (int t = 0; t < n; ++t)
          s.host[static_cast<size_t>(il)].insert(kv + t * 2 * kvd, kv + t * 2 * kvd + kvd);
      }
    }
  } catch (...) {
    s.bounded_dirty = n_bounded > 0;  // the device may hold part of the chunk
    throw;
  }
  n_past_ += n;
}

// Uploads the step (in st_->step_host), runs the forward of its n tokens (the decode graph
// when graph_step) and copies the logits back; throws on non-finite logits.
void CudaSession::run_step(int n, bool all_logits, bool graph_step, float* logits_out) {
  const ModelHparams& hp = model().hparams();
  State& s = *st_;
  const int32_t* h = s.step_host.as<int32_t>();
  const cudaStream_t cs = s.stream.get();
  const size_t step_bytes = s.step_bytes;
  const size_t n_vocab = static_cast<size_t>(hp.n_vocab);
  const size_t rows = all_logits ? static_cast<size_t>(n) : 1;
  // The graph copies the logits into the pinned logits_host (a fixed address), the host then
  // to logits_out; without it they go to logits_out directly.
  float* dst = graph_step || !all_logits ? s.logits_host.as<float>() : logits_out;
  // direct: the LM head stores the logits at dst itself (host_logits), nothing is copied back.
  bool direct = false;
  auto enqueue = [&] {
    cuda::check(cudaMemcpyAsync(s.step.get(), h, step_bytes, cudaMemcpyHostToDevice, cs),
                "step inputs");
    direct = enqueue_forward(n, all_logits, dst == s.logits_host.as<float>() ? dst : nullptr);
    if (!direct)
      cuda::check(
          cudaMemcpyAsync(dst, s.logits.get(), rows * n_vocab * 4, cudaMemcpyDeviceToHost, cs),
          "logits");
  };
  if (s.hidden) {  // hidden_states: its rows are all that comes back
    cuda::check(cudaMemcpyAsync(s.step.get(), h, step_bytes, cudaMemcpyHostToDevice, cs),
                "step inputs");
    enqueue_forward(n, false, nullptr);
    s.stream.sync("the forward pass");
    for (size_t i = 0; i < static_cast<size_t>(n * hp.n_embd); ++i)
      if (!std::isfinite(s.hidden[i]))
        throw_error(
            "forward (cuda): non-finite values (NaN or Inf) in the hidden states: the "
            "model's weights or its input are damaged");
    return;
  }
  *s.logits_bad.as<uint32_t>() = 0;  // the LM head only ever sets it
  if (graph_step) {
    const size_t gi = State::graph_index(n, all_logits);
    cudaGraphExec_t& exec = s.graphs[gi];
    if (!exec) {
      cudaGraph_t g = nullptr;
      cuda::check(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal), "capturing the decode step");
      try {
        enqueue();
      } catch (...) {
        cudaStreamEndCapture(cs, &g);
        if (g) cudaGraphDestroy(g);
        throw;
      }
      cuda::check(cudaStreamEndCapture(cs, &g), "capturing the decode step");
      const cudaError_t err = cudaGraphInstantiate(&exec, g, 0);
      cudaGraphDestroy(g);
      cuda::check(err, "instantiating the decode graph");
      s.graph_direct[gi] = direct;
    }
    direct = s.graph_direct[gi];
    cuda::check(cudaGraphLaunch(exec, cs), "launching the decode graph");
  } else {
    enqueue();
  }
  s.stream.sync("the forward pass");
  if (all_logits && dst != logits_out) std::memcpy(logits_out, dst, rows * n_vocab * 4);
  if (direct ? *s.logits_bad.as<uint32_t>() != 0 : any_nonfinite(s.nonfinite.as<uint32_t>()))
    throw_error("forward (cuda): non-finite values (NaN or Inf) in the logits: the model's "
                "weights or its input are damaged");
}

std::span<const float> CudaSession::decode(std::span<const int32_t> tokens) {
  check(tokens);
  const size_t step = static_cast<size_t>(st_->max_batch);
  for (size_t i = 0; i < tokens.size(); i += step)
    run_chunk(tokens.subspan(i, std::min(step, tokens.size() - i)), false, nullptr);
  return {st_->logits_host.as<float>(), static_cast<size_t>(model().hparams().n_vocab)};
}

float* CudaSession::logits_memory() {
  return st_->logits_host.as<float>();
}

void CudaSession::hidden_states(std::span<const int32_t> tokens, std::vector<float>& rows) {
  check(tokens);
  const size_t n_embd = static_cast<size_t>(model().hparams().n_embd);
  rows.resize(tokens.size() * n_embd);
  const size_t step = static_cast<size_t>(st_->max_batch);
  struct Clear {  // s.hidden is set only while these chunks run
    float*& p;
    ~Clear() { p = nullptr; }
  } clear{st_->hidden};
  for (size_t i = 0; i < tokens.size(); i += step) {
    st_->hidden = rows.data() + i * n_embd;
    run_chunk(tokens.subspan(i, std::min(step, tokens.size() - i)), false, nullptr);
  }
}

std::vector<float> CudaSession::decode_all(std::span<const int32_t> tokens) {
  check(tokens);
  const size_t n_vocab = static_cast<size_t>(model().hparams().n_vocab);
  std::vector<float> all(tokens.size() * n_vocab);  // [n_tokens][n_vocab]
  const size_t step = static_cast<size_t>(st_->max_batch);
  for (size_t i = 0; i < tokens.size(); i += step)
    run_chunk(tokens.subspan(i, std::min(step, tokens.size() - i)), true, all.data() + i * n_vocab);
  std::copy(all.end() - static_cast<std::ptrdiff_t>(n_vocab), all.end(), st_->logits_host.as<float>());
  return all;
}

}  // namespace channel::cuda
