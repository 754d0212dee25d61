// bounded_attend: per-(position, GQA group) softmax over S sinks + ≤ W window keys, then the
// ring insertions of the chunk in order. Reads happen before any write, so a chunk position
// finds earlier chunk keys in the chunk buffers and older keys in the untouched ring.
#include "bounded/bounded_attention_core.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/bounded_kernels.h"
#include "util/error.h"

namespace channel {

namespace {

// Independent partial sums in a fixed order: vectorisable without reassociation flags and
// deterministic in every build.
constexpr int kLanes = 16;

float reduce_lanes(const float* acc) {
  float sum = 0.0f;
  for (int l = 0; l < kLanes; ++l) sum += acc[l];
  return sum;
}

float dot(const float* a, const float* b, int n) {
  float acc[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return reduce_lanes(acc) + tail;
}

// One head's score row: S sinks, W window keys, and the softmax normaliser.
size_t score_stride(const BoundedAttnCfg& c) {
  return static_cast<size_t>(c.n_sinks) + c.window + 1;
}

// Keys/values of positions [t0 − len0, t0 + n): the chunk's own rows, else the ring as it
// was before the chunk.
struct ChunkKeys {
  const BoundedState& state;
  const float* k;  // [n][kvh][hd]
  const float* v;  // [n][kvh][hd]
  uint64_t t0;
  int kvh;
  int hd;

  size_t row(uint64_t j, int h) const { return ((j - t0) * kvh + h) * static_cast<size_t>(hd); }
  const float* key(int h, uint64_t j) const {
    return j >= t0 ? k + row(j, h) : state.key(h, bounded_slot_of(j, state.window()));
  }
  const float* value(int h, uint64_t j) const {
    return j >= t0 ? v + row(j, h) : state.value(h, bounded_slot_of(j, state.window()));
  }
};

// Query heads [h0, h1) of KV head g at position t, processed together so each window key
// and value is loaded (and rotated) once for the whole GQA group: the window's rows by
// distance go to the dispatched kernel (backend/cpu/bounded_kernels.h). Every head's
// arithmetic (terms and their order) depends only on t's window length, never on the
// grouping or the chunk, so results never depend on them.
// q: [n_heads][hd] of position t. scores: [h1 − h0][score_stride] scratch, rows: [2][W]
// scratch for the key and value pointers. out: [n_heads][hd].
void attend_group(const BoundedAttnCfg& c, const float* sink_k, const float* sink_v,
                  const ChunkKeys& keys, const float* q, int g, int h0, int h1, uint64_t t,
                  float* scores, const float** rows, float* out) {
  const int hd = c.head_dim;
  const int len = t + 1 < static_cast<uint64_t>(c.window) ? static_cast<int>(t + 1) : c.window;
  const float** key_rows = rows;
  const float** value_rows = rows + c.window;
  for (int d = 0; d < len; ++d) {  // d = Δ = t − j
    key_rows[d] = keys.key(g, t - d);
    value_rows[d] = keys.value(g, t - d);
  }
  cpu::BoundedGroupTask task;
  task.head_dim = hd;
  task.half = c.rope_dims / 2;
  task.n_sinks = c.n_sinks;
  task.len = len;
  task.n_q = h1 - h0;
  task.scale = c.attn_scale;
  task.q = q + static_cast<size_t>(h0) * hd;
  task.sink_k = sink_k + static_cast<size_t>(g) * c.n_sinks * hd;
  task.sink_v = sink_v + static_cast<size_t>(g) * c.n_sinks * hd;
  task.keys = key_rows;
  task.values = value_rows;
  task.cos = c.rope->cos(0);
  task.sin = c.rope->sin(0);
  task.scores = scores;
  task.score_stride = score_stride(c);
  task.out = out + static_cast<size_t>(h0) * hd;
  cpu::bounded_group_attend(task);
}

}  // namespace

float bounded_rotated_dot(const float* q, const float* k, const float* cos, const float* sin,
                          int half, int head_dim) {
  // (R q)·k per pair = cos·(q0 k0 + q1 k1) + sin·(q0 k1 − q1 k0).
  const float* q0 = q;
  const float* q1 = q + half;
  const float* k0 = k;
  const float* k1 = k + half;
  float acc[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= half; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const int p = i + l;
      acc[l] += cos[p] * (q0[p] * k0[p] + q1[p] * k1[p]) + sin[p] * (q0[p] * k1[p] - q1[p] * k0[p]);
    }
  }
  float tail = 0.0f;
  for (; i < half; ++i) {
    tail += cos[i] * (q0[i] * k0[i] + q1[i] * k1[i]) + sin[i] * (q0[i] * k1[i] - q1[i] * k0[i]);
  }
  const int rd = 2 * half;
  return reduce_lanes(acc) + tail + dot(q + rd, k + rd, head_dim - rd);
}

void bounded_attend(const BoundedAttnCfg& c, const float* sink_k, const float* sink_v,
                    BoundedState& state, const float* q, const float* k, const float* v, int64_t n,
                    float* out, ThreadPool* pool) {
  if (state.n_kv_heads() != c.n_kv_heads || state.window() != c.window ||
      state.head_dim() != c.head_dim) {
    throw_error(
        "bounded attention: state geometry (kvh {}, W {}, hd {}) does not match the "
        "layer (kvh {}, W {}, hd {})",
        state.n_kv_heads(), state.window(), state.head_dim(), c.n_kv_heads, c.window, c.head_dim);
  }
  const int hd = c.head_dim;
  const int group = c.n_heads / c.n_kv_heads;
  const ChunkKeys keys{state, k, v, state.seen(), c.n_kv_heads, hd};
  // Tasks: (position, KV head, slice of its query heads). Slices exist only to give every
  // thread work when positions x KV heads are fewer than threads (decode on MQA).
  const int n_threads = pool != nullptr ? pool->size() : 1;
  const int64_t n_groups = n * c.n_kv_heads;
  const int n_slices =
      n_groups >= n_threads
          ? 1
          : std::min<int>(group, static_cast<int>((n_threads + n_groups - 1) / n_groups));
  const int per_slice = (group + n_slices - 1) / n_slices;
  // [threads][group][S + W + 1], the calling thread's buffer: grows, never shrinks, so a
  // decode step does not allocate.
  thread_local std::vector<float> scores;
  thread_local std::vector<const float*> rows;  // [threads][2][W] key and value rows
  const size_t need = static_cast<size_t>(n_threads) * group * score_stride(c);
  if (scores.size() < need) scores.resize(need);
  const size_t need_rows = static_cast<size_t>(n_threads) * 2 * c.window;
  if (rows.size() < need_rows) rows.resize(need_rows);
  float* scores_base = scores.data();  // names the workers share (these vectors are per thread)
  const float** rows_base = rows.data();
  auto run = [&](int64_t t0, int64_t t1, int thread) {
    float* sc = scores_base + static_cast<size_t>(thread) * group * score_stride(c);
    const float** rw = rows_base + static_cast<size_t>(thread) * 2 * c.window;
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t i = task / (static_cast<int64_t>(c.n_kv_heads) * n_slices);
      const int g = static_cast<int>(task / n_slices % c.n_kv_heads);
      const int h0 = g * group + static_cast<int>(task % n_slices) * per_slice;
      const int h1 = std::min(h0 + per_slice, (g + 1) * group);
      if (h0 >= h1) continue;
      const size_t qo = static_cast<size_t>(i) * c.n_heads * hd;
      attend_group(c, sink_k, sink_v, keys, q + qo, g, h0, h1, keys.t0 + i, sc, rw, out + qo);
    }
  };
  const int64_t n_tasks = n_groups * n_slices;
  if (pool != nullptr && n_tasks > 1) {
    pool->parallel_for(n_tasks, run);
  } else {
    run(0, n_tasks, 0);
  }
  const size_t kv_row = static_cast<size_t>(c.n_kv_heads) * hd;
  for (int64_t i = 0; i < n; ++i) state.insert(k + i * kv_row, v + i * kv_row);
}

}  // namespace channel
