// BoundedLayers: the bounded layers' device state and per-chunk kernels (see
// cuda_bounded_layers.h).
#include "backend/cuda/cuda_bounded_layers.h"

#include <algorithm>

#include "backend/cuda/cuda_kernels.h"
#include "bounded/bounded_rope.h"
#include "model/model.h"
#include "util/error.h"

namespace channel::cuda {

namespace {

struct Sizes {
  int n_bounded = 0;
  size_t ring_floats = 0, sink_floats = 0, table_floats = 0;  // per layer, per layer, shared
};

Sizes sizes_of(const Model& model) {
  const ModelHparams& h = model.hparams();
  const BoundedAttnCfg& bc = model.weights().bounded_cfg;
  Sizes s;
  for (int il = 0; il < h.n_layer; ++il) {
    if (!h.is_bounded(il)) continue;
    if (!bounded_shape_supported(bc.head_dim, bc.n_heads / std::max(1, bc.n_kv_heads)) ||
        bc.head_dim != h.head_dim || bc.n_kv_heads != h.n_head_kv || bc.n_heads != h.n_head)
      throw_error(
          "cuda: bounded layers of head_dim {} with {} query heads per KV head are not "
          "supported by the CUDA bounded attention (head_dim <= 256, at most 8 heads)",
          bc.head_dim, bc.n_heads / std::max(1, bc.n_kv_heads));
    ++s.n_bounded;
  }
  if (s.n_bounded == 0) return s;
  const size_t kv_dim = static_cast<size_t>(h.n_head_kv) * h.head_dim;
  s.ring_floats = 2 * kv_dim * bc.window;
  s.sink_floats = 2 * kv_dim * bc.n_sinks;
  s.table_floats = 2 * static_cast<size_t>(bc.window) * (bc.rope_dims / 2);
  return s;
}

}  // namespace

size_t BoundedLayers::device_bytes(const Model& model) {
  const Sizes s = sizes_of(model);
  return (s.n_bounded * (s.ring_floats + s.sink_floats) + s.table_floats) * sizeof(float);
}

BoundedLayers::BoundedLayers(const CudaWeights& weights, int max_batch) : w_(&weights) {
  const Model& model = weights.model();
  const ModelHparams& h = model.hparams();
  const BoundedAttnCfg& bc = model.weights().bounded_cfg;
  const Sizes sz = sizes_of(model);
  index_.assign(static_cast<size_t>(h.n_layer), -1);
  for (int il = 0; il < h.n_layer; ++il)
    if (h.is_bounded(il)) index_[static_cast<size_t>(il)] = n_bounded_++;
  q_dim_ = static_cast<int64_t>(h.n_head) * h.head_dim;
  kv_dim_ = static_cast<int64_t>(h.n_head_kv) * h.head_dim;
  if (n_bounded_ == 0) return;
  const size_t f = sizeof(float);
  const auto B = static_cast<size_t>(std::max(1, max_batch));
  // Empty rings: the session loads its states before the first chunk.
  rings_ = DeviceBuffer(n_bounded_ * sz.ring_floats * f, "the bounded layers' rings");
  cuda::check(cudaMemset(rings_.get(), 0, rings_.bytes()), "clearing the bounded rings");
  sinks_ = DeviceBuffer(std::max<size_t>(n_bounded_ * sz.sink_floats * f, 4),
                        "the bounded layers' sinks");
  rope_table_ =
      DeviceBuffer(std::max<size_t>(sz.table_floats * f, 4), "the bounded rotation table");
  chunk_kv_ = PinnedBuffer(n_bounded_ * B * 2 * kv_dim_ * f, "bounded keys and values");
  for (int il = 0; il < h.n_layer; ++il) {
    const int b = index(il);
    if (b < 0) continue;
    const BoundedSinks& s = model.weights().layers[static_cast<size_t>(il)].sinks;
    const size_t half_bytes = sz.sink_floats / 2 * f;
    if (s.k.size() * f != half_bytes || s.v.size() * f != half_bytes)
      throw_error("cuda: bounded layer {} has {} sink values, expected {}", il, s.k.size(),
                  sz.sink_floats / 2);
    char* dst = sinks_.as<char>() + b * sz.sink_floats * f;
    cuda::check(cudaMemcpy(dst, s.k.data(), half_bytes, cudaMemcpyHostToDevice),
                "uploading sinks");
    cuda::check(cudaMemcpy(dst + half_bytes, s.v.data(), half_bytes, cudaMemcpyHostToDevice),
                "uploading sinks");
  }
  const BoundedRope& r = *model.weights().bounded_rope;
  const size_t table_bytes = static_cast<size_t>(bc.window) * r.half() * f;
  cuda::check(cudaMemcpy(rope_table_.get(), r.cos(0), table_bytes, cudaMemcpyHostToDevice),
              "uploading the bounded rotation table");
  cuda::check(cudaMemcpy(rope_table_.as<char>() + table_bytes, r.sin(0), table_bytes,
                         cudaMemcpyHostToDevice),
              "uploading the bounded rotation table");
}

void BoundedLayers::load(int il, const BoundedState& state, cudaStream_t cs) {
  const int b = il >= 0 && static_cast<size_t>(il) < index_.size() ? index(il) : -1;
  const size_t half = rings_.bytes() / std::max(1, n_bounded_) / 2;  // one ring's K (or V)
  if (b < 0 || state.ring_k().size() * 4 != half || state.ring_v().size() * 4 != half)
    throw_error("cuda: layer {} has no bounded ring of that size", il);
  char* dst = rings_.as<char>() + 2 * half * b;
  const cudaMemcpyKind h2d = cudaMemcpyHostToDevice;
  cuda::check(cudaMemcpyAsync(dst, state.ring_k().data(), half, h2d, cs), "loading a bounded ring");
  cuda::check(cudaMemcpyAsync(dst + half, state.ring_v().data(), half, h2d, cs),
              "loading a bounded ring");
}

void BoundedLayers::enqueue(int il, const DevLayer& L, float* qkv, int64_t ld, int n,
                            const int64_t* seen, float* out, cudaStream_t cs) {
  const ModelHparams& h = w_->model().hparams();
  const BoundedAttnCfg& bc = w_->model().weights().bounded_cfg;
  const int b = index(il);
  const size_t ring = static_cast<size_t>(kv_dim_) * bc.window;
  const size_t sinks = static_cast<size_t>(kv_dim_) * bc.n_sinks;
  float* ring_k = rings_.as<float>() + 2 * ring * b;
  const size_t table = static_cast<size_t>(bc.window) * (bc.rope_dims / 2);
  qk_head_norm(qkv, ld, n, h.n_head, h.n_head_kv, h.head_dim, L.q_norm, L.k_norm, h.rms_eps, cs);
  BoundedArgs A;
  A.qkv = qkv;
  A.ld = ld;
  A.n = n;
  A.n_head = h.n_head;
  A.n_head_kv = h.n_head_kv;
  A.head_dim = h.head_dim;
  A.window = bc.window;
  A.n_sinks = bc.n_sinks;
  A.half = bc.rope_dims / 2;
  A.scale = bc.attn_scale;
  A.seen = seen;
  A.ring_k = ring_k;
  A.ring_v = ring_k + ring;
  A.sink_k = sinks_.as<float>() + 2 * sinks * b;
  A.sink_v = A.sink_k + sinks;
  A.cos = rope_table_.as<float>();
  A.sin = A.cos + table;
  A.out = out;
  bounded_attention(A, cs);
  bounded_insert(qkv, ld, n, h.n_head, h.n_head_kv, h.head_dim, bc.window, seen, ring_k,
                 ring_k + ring, cs);
  // The chunk's keys and values back for the session's BoundedState: [b][n][2][kv_dim].
  cuda::check(cudaMemcpy2DAsync(chunk_kv_.as<float>() + static_cast<size_t>(b) * n * 2 * kv_dim_,
                                2 * kv_dim_ * sizeof(float), qkv + q_dim_, ld * sizeof(float),
                                2 * kv_dim_ * sizeof(float), n, cudaMemcpyDeviceToHost, cs),
              "the bounded keys and values");
}

const float* BoundedLayers::chunk_kv(int b, int n) const {
  return chunk_kv_.as<float>() + static_cast<size_t>(b) * n * 2 * kv_dim_;
}

}  // namespace channel::cuda
