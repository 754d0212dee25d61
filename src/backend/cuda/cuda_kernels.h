// Launchers of the CUDA kernels: plain C++ declarations over device pointers, so host code
// and tests compile with the ordinary C++ compiler. Every launcher enqueues on `s` and checks
// the launch; none allocates.
//
// Weights live on the device in a repacked form (repack_weight): float types as in the file;
// Q8_0 as int8 quants [rows][cols] plus f16 scales [rows][cols/32]; Q4_0 as the file's 16-byte
// nibble blocks [rows][cols/32][16] plus f16 scales [rows][cols/32]; the K-quants and
// Q4_1/Q5_0/Q5_1 as the file's blocks (kquant_group.h).
//
// Activations reach a product in the weight type's input form (convert_act):
//   F32: f32; F16: f16; BF16: bf16 (each as the CPU rounds them);
//   Q8_0/Q4_0, up to kVerifyTokens tokens: Q8_0 blocks (int8 [n][cols] then f32 scales
//     [n][cols/32], with the CPU's arithmetic: d = f16(amax / 127), q = round-half-even(x * 127
//     / amax)), so a matvec is the CPU's integer dot per block;
//   Q8_0/Q4_0, more tokens: f16, for the tensor-core product of f16-dequantized weights.
//   (The file's blocks, K-quants and Q4_1/Q5_0/Q5_1: f32 up to kVerifyTokens tokens, f16 for
//   more.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "gguf/ggml_type.h"

namespace channel::cuda {

// A batch of at most kVerifyTokens tokens (a speculative verify: the current token and its
// drafts) takes the one-token arithmetic: the one-token products' activation forms and kernels
// (each token's dot in the order of a single token), and each query's attention split as a
// single token's. So each token's logits are bit for bit those of decoding it alone, and
// speculative decoding gives exactly the greedy text. Larger batches (prompt chunks) take the
// tensor cores.
constexpr int kVerifyTokens = 16;

// What a matrix is in the layer stack, set at upload, for per-product kernel choices.
enum class MatRole : uint8_t { other = 0, qkv, wo, gate_up, down, output };
constexpr int kMatRoles = 6;

struct DevMatrix {
  GgmlType type = GgmlType::F32;
  int64_t rows = 0, cols = 0;
  const void* q = nullptr;  // quants or float elements
  const void* d = nullptr;  // f16 block scales (Q8_0, Q4_0), else null
  MatRole role = MatRole::other;
};

// The form convert_act gives one token's activations (up to kVerifyTokens) for a product on
// weights of `type` (act_form): Q8_0 blocks (Q8_0, Q4_0), f16 (F16), bf16 (BF16), else f32
// (F32, the file's blocks).
enum class ActForm : int { q8 = 0, f16 = 1, bf16 = 2, f32 = 3 };

// True when the backend computes with weights of this type.
bool type_supported(GgmlType type);
// Device bytes of the repacked matrix: quants (or elements) and scales.
size_t repacked_q_bytes(GgmlType type, int64_t rows, int64_t cols);
size_t repacked_d_bytes(GgmlType type, int64_t rows, int64_t cols);
// raw: rows of the file's format already on the device. Writes q and d.
void repack_weight(GgmlType type, const void* raw, int64_t rows, int64_t cols, void* q, void* d,
                   cudaStream_t s);

// Bytes of the input form of n tokens of `cols` activations for weights of `type`.
size_t act_bytes(GgmlType type, int64_t n, int64_t cols);
// x: [n][ldx] f32 rows (first cols used) -> out in the input form (dense, [n][cols]).
void convert_act(GgmlType type, const float* x, int64_t n, int64_t cols, int64_t ldx, void* out,
                 cudaStream_t s);
// y[t * ldy + r] = W[r] . x[t] for t < n, r < rows; act from convert_act(w.type, ..., n, ...).
// One token runs the matvec variant of matvec_variant().
void matmul(const DevMatrix& w, const void* act, int64_t n, float* y, int64_t ldy, cudaStream_t s);
// One token's matmul through v8 (where w's variant is 8 and the device takes it) that also
// stores every y[r] at host_y[r] (pinned host memory) as it is made and sets *host_bad to 1 on
// a NaN or an Inf (the caller clears it before the step): the logits reach the host while the
// LM head still runs. False, launching nothing, elsewhere.
bool matmul_logits_to_host(const DevMatrix& w, const void* act, float* y, float* host_y,
                           uint32_t* host_bad, cudaStream_t s);

// The one-token product (matvec) for Q8_0, Q4_0, F16 and BF16 weights comes in variants, all
// with the same arithmetic per 16-byte unit of a row (Q8_0: 16 elements, Q4_0: one 32-element
// block, F16/BF16: 8 elements), so they differ only in summation order:
//   v0: a warp per row, 16-byte loads four deep per lane, scales loaded with the products;
//   v1..v5 (matvec_chunk_kernel): per chunk, each thread issues all its 16-byte weight loads
//     and their block scales (predicated, no divergent tail) before any dot:
//   v1: a warp per row, eight loads a thread (4 KiB in flight a warp);
//   v2: as v1, the loads not kept in L1 and the L2 asked for 256-byte spans;
//   v3: as v2 over two rows per warp sharing the activation (8 KiB a warp);
//   v4: as v2 four loads deep (more warps resident);
//   v5: four rows per block of four warps that split each row, two loads a row a thread;
//   v6, v7 (matvec_stream_kernel): a resident grid whose warps stream rows in chunks of two
//     (v6) or one (v7) loads a thread, the next chunk's loads issued before the current
//     chunk's dots, each warp's first chunk loaded before waiting (PDL), and the rows dealt
//     out evenly (as few warps as give every warp the same number of rows);
//   v8 (matvec_bulk_kernel, sm_90; one token, else v6): a block a multiprocessor whose warps
//     each keep two 4 KiB row chunks coming into shared memory through the copy engine
//     (cp.async.bulk), requested before the PDL wait, and dot them against the activation
//     the block copied into shared memory; v6's summation order, so v6's bits.
// F32 weights, the file's blocks (K-quants, Q4_1/Q5_0/Q5_1) and F16/BF16 rows not a multiple
// of 8 always run v0.
// Default: CHANNEL_CUDA_MATVEC=v0..v8 when set (a bad value is a one-line error), else the
// fastest measured on the H200 for the weight type (cuda_variant.cpp: v8 for Q8_0, v6 for Q4_0,
// v0 for F16 and BF16); set_matvec_variant overrides both (kMatvecPerType: back to per type).
constexpr int kMatvecVariants = 9;
constexpr int kMatvecPerType = -2;
int matvec_variant();  // 0..8, or kMatvecPerType
int matvec_variant_for(GgmlType type);
void set_matvec_variant(int variant);
// Per product: CHANNEL_CUDA_MATVEC_ROLES="down:v6,output:v6" (read once; a bad one is a
// one-line error) or set_role_variants gives the products of those roles (qkv, wo, gate_up,
// down, output) their one-token variant over the choice above; "" clears them. matmul takes
// matvec_variant_for(w): the role's variant where one is set, else the type's.
int matvec_variant_for(const DevMatrix& w);
void set_role_variants(const std::string& spec);
std::string role_variants();  // the roles' variants as set_role_variants takes them
// Products of kCublasMinTokens tokens or more run through cuBLAS (cuda_cublas.h: F16/BF16
// weights as they are, the other types dequantized to f16 in row chunks first) when it loads,
// else the backend's own tensor-core tiles. CHANNEL_CUDA_GEMM=cublas|tiles (read once; a bad
// value, or cublas without the library, is a one-line error) or set_gemm_cublas choose.
constexpr int64_t kCublasMinTokens = 32;
bool gemm_uses_cublas();
void set_gemm_cublas(bool on);
// matmul with an explicit variant (tests and the kernel benchmark).
void matmul_variant(const DevMatrix& w, const void* act, int64_t n, float* y, int64_t ldy,
                    cudaStream_t s, int variant);

// The longest row (n) that rms_norm, add_normed and norm_quant take: each thread of a row's
// block holds its share of the row in registers. Their norm weights (w, norm_w, post_w), and
// qkv_finish's qn/kn, are read before the PDL wait (cuda_common.cuh): weights, which no kernel
// of the stream writes.
int64_t row_kernels_max_row();
// y[r] = x[r] / rms(x[r]) * w, rows of n; ldx/ldy in floats.
void rms_norm(const float* x, int64_t ldx, const float* w, int64_t rows, int64_t n, float eps,
              float* y, int64_t ldy, cudaStream_t s);
// resid[r] += (norm_w ? rms_norm(x[r]) * norm_w : x[r])
void add_normed(const float* x, const float* norm_w, int64_t rows, int64_t n, float eps,
                float* resid, cudaStream_t s);

enum class RopeMode { normal = 0, neox = 1 };
struct RopeDev {
  RopeMode mode = RopeMode::normal;
  int n_rot = 0;
  float theta_scale = 1.0f;  // std::pow(base, -2 / n_rot) computed on the host, as the CPU does
  float freq_scale = 1.0f;
  const float* freq_factors = nullptr;  // device [n_rot/2] or null
  // When set: (cos, sin) of every pair at each token of the step, [n][n_rot/2] (rope_table),
  // read instead of computed (the angle's float recurrence is n_rot/2 multiplications long,
  // and every layer of a step would repeat it).
  const float2* table = nullptr;
};
RopeDev make_rope(RopeMode mode, int n_rot, float base, float freq_scale,
                  const float* freq_factors_dev);
// table[t][i] = (cos, sin) of pair i at positions[t], t < n: the values every kernel computes
// without a table. A RopeDev with .table = table then rotates the step's n tokens.
void rope_table(const RopeDev& p, const int32_t* positions, int n, float2* table, cudaStream_t s);
// Two rotations' tables (a model's global and sliding layers) in one launch.
void rope_tables(const RopeDev& p0, const RopeDev& p1, const int32_t* positions, int n,
                 float2* table0, float2* table1, cudaStream_t s);
// In place on x: [n][ldx], heads of head_dim at x + t*ldx + h*head_dim; positions: device [n].
// Angles follow the CPU's float recurrence (ops/rope.h) exactly.
void rope(const RopeDev& p, float* x, int64_t ldx, int n, int n_heads, int head_dim,
          const int32_t* positions, cudaStream_t s);

// The attention input stage of one layer over qkv [n][ld] = q | k | v of every token:
// optional per-head RMSNorm of q and k (qn, kn: device [head_dim] or null), rope of q and k,
// q left in place, k and v stored as f16 (or f32, kv_f32) in the cache rows of slot store_slots[t]:
// k_cache[(hk * cap + slot) * head_dim], v_cache[(hk * cap + slot) * head_dim_v].
struct QkvLayout {
  int n_head = 0, n_head_kv = 0, head_dim = 0, head_dim_v = 0;
  int64_t ld = 0;       // floats per token row of qkv
  bool kv_f32 = false;  // the cache holds f32 (F32 models) instead of f16
};
void qkv_finish(const QkvLayout& l, float* qkv, int n, const float* qn, const float* kn,
                float eps, const RopeDev& rope, const int32_t* positions,
                const int32_t* store_slots, void* k_cache, void* v_cache, int64_t cap,
                cudaStream_t s);

// Slot attention. Query t sees the slots table[first[t] .. first[t] + count[t]) of the cache
// (any order; a query's own slot included); out[t][h][head_dim_v] = softmax(scale q.k) v.
// GQA: query head h reads KV head h / (n_head / n_head_kv). `splits` > 1 splits every query's
// slots over that many blocks (decode), merged through part (attention_part_floats).
struct AttnArgs {
  const float* q = nullptr;  // [n][ldq], heads of head_dim
  int64_t ldq = 0;
  const void* k_cache = nullptr;  // f16 (f32 with kv_f32) [n_head_kv][cap][head_dim]
  const void* v_cache = nullptr;  // f16 (f32 with kv_f32) [n_head_kv][cap][head_dim_v]
  bool kv_f32 = false;
  int64_t cap = 0;
  const int32_t* table = nullptr;  // device slot table
  const int32_t* first = nullptr;  // device [n]
  const int32_t* count = nullptr;  // device [n]
  int n = 0, n_head = 0, n_head_kv = 0, head_dim = 0, head_dim_v = 0;
  float scale = 1.0f;
  int splits = 1;
  float* part = nullptr;  // scratch of attention_part_floats(...) when splits > 1
  float* out = nullptr;   // [n][n_head][head_dim_v]
  // When set: out's rows end here in out_form instead (convert_act's form and rounding for
  // W_o's weights; Q8_0 blocks for Q8_0/Q4_0), so W_o needs no conversion; out is then not
  // written.
  void* out_act = nullptr;
  ActForm out_form = ActForm::q8;
};
size_t attention_part_floats(int n, int n_head, int head_dim_v, int splits);
// Head sizes the kernel takes: multiples of 32 up to 256, at most 8 query heads per KV head.
bool attention_shape_supported(int head_dim, int head_dim_v, int group);
// Through the slots one at a time (attention_kernel), or for chunks of kFlashMinTokens or
// more through flash_attention when it takes the shape and flash_attention_enabled().
void attention(const AttnArgs& a, cudaStream_t s);

// Prompt-chunk attention on tensor cores (cuda_flash_attention.cu): 64 queries of a head a
// block against 64-key tiles, queries and probabilities rounded to f16, f32 accumulators.
// Takes the f16 cache with head_dim == head_dim_v a multiple of 32 from 64 to 256; a.splits parts
// of each block's key range merged as attention's. CHANNEL_CUDA_ATTN=flash|slots (read once;
// default flash) or set_flash_attention choose whether attention() uses it.
constexpr int kFlashMinTokens = 32;
bool flash_attention_supported(const AttnArgs& a);
void flash_attention(const AttnArgs& a, cudaStream_t s);
bool flash_attention_enabled();
void set_flash_attention(bool on);

// The end of attention (and ring_attention): merges the splits' partial
// results (part, as the kernel writes it with splits > 1) into out [n][n_head][head_dim_v], or
// into out_act in out_form when out_act is set (AttnArgs; splits 1: nothing to do).
void finish_attention(const float* part, int n, int n_head, int head_dim_v, int splits, float* out,
                      void* out_act, ActForm out_form, cudaStream_t s);

// Attention of one token, or of each token of a speculative verify (n <= kVerifyTokens), in
// one kernel: each query's slots split over up to a.splits blocks (fewer for a short range),
// whose parts (in a.part, attention_kernel's layout) the last block to finish merges, counted
// in `arrivals` (device [n][n_head_kv], zero, left zero). With `finish` (one token) it also
// does qkv_finish's work for that token: q and k normed and rotated from the raw q | k | v
// row in a.q (ldq: the row's width), k and v stored at store_slots[0], whose key and value
// the blocks take from that work, not from the cache; so nothing runs between the q|k|v
// product and it. Same bits as qkv_finish then decode_attention without finish
// (cuda_head_finish.cuh).
struct DecodeAttnArgs {
  AttnArgs a;
  bool finish = false;
  const float* qn = nullptr;  // device [head_dim] or null (no norm)
  const float* kn = nullptr;
  float eps = 0.0f;
  RopeDev rope;
  const int32_t* positions = nullptr;    // device [n]
  const int32_t* store_slots = nullptr;  // device [n]
  unsigned* arrivals = nullptr;
};
// The shapes it takes: attention_shape_supported's, at most kVerifyTokens tokens and 64
// splits.
bool decode_attention_supported(const AttnArgs& a);
void decode_attention(const DecodeAttnArgs& d, cudaStream_t s);
// CHANNEL_CUDA_DECODE_ATTN=one|split (read once; default split): whether one-token attention
// takes decode_attention where it is supported, or qkv_finish, attention() and its merge
// kernel. On the H200 the three kernels are faster (docs/cuda.md: 12B q8_0 tg128 210.9
// against 203.3 t/s, 168.2 against 149.2 at depth 16,384). set_one_kernel_attention overrides
// it.
bool one_kernel_attention();
void set_one_kernel_attention(bool on);
// CHANNEL_CUDA_HOST_LOGITS=0|1 (read once; default 1): a one-token step's LM head, where it
// runs v8, also stores the logits into the session's pinned host buffer, a window of rows at
// a time while it runs, and marks a non-finite one in a host word (matmul_logits_to_host), so
// neither the 1 MiB copy after it nor nonfinite_flags waits at the end of the step.
// set_host_logits overrides it.
bool host_logits();
void set_host_logits(bool on);

// ---- the slot ring (cuda_ring_ops.cu; kv/virtual_positions.h, kv/slot_attention.h) -------
// A rotation with f64 angles (ops/rope.h RopeFreqs): pair i of the first n_rot dimensions
// turns by pos * inv_freq[i], computed in double and rounded to f32 as rope_cos_sin does.
struct RingRope {
  bool neox = false;
  int n_rot = 0;
  const double* inv_freq = nullptr;  // device [n_rot / 2]
};
// One run of a query's active-slot table: table[first .. first + count), keys scored with
// the query rotated at pos (SlotRun). 16 bytes, as the step buffer holds it.
struct RingRun {
  int32_t first = 0;
  int32_t count = 0;
  double pos = 0;
};
// The ring's attention input stage of one layer over qkv [n][l.ld] = q | k | v: the per-head
// norms of q and k; q stays unrotated in place; k is rotated at key_pos[t] and stored with v
// at slot slots[t] of the arena (k_cache[(hk * cap + slot) * head_dim], f16 or f32).
void ring_qkv_finish(const QkvLayout& l, float* qkv, int n, const float* qn, const float* kn,
                     float eps, const RingRope& rope, const double* key_pos,
                     const int32_t* slots, void* k_cache, void* v_cache, int64_t cap,
                     cudaStream_t s);
// Slot attention through the active-slot table: query t's runs are
// runs[run_first[t] .. run_first[t] + run_count[t]); for each run the block rotates the query
// heads at run.pos and scores the run's slots, one online softmax over all of them.
struct RingAttnArgs {
  const float* q = nullptr;  // [n][ldq] unrotated, heads of head_dim
  int64_t ldq = 0;
  const void* k_cache = nullptr;  // [n_head_kv][cap][head_dim], f16 (f32 with kv_f32)
  const void* v_cache = nullptr;
  bool kv_f32 = false;
  int64_t cap = 0;
  const int32_t* table = nullptr;  // device slot ids
  const RingRun* runs = nullptr;   // device
  const int32_t* run_first = nullptr;  // device [n]
  const int32_t* run_count = nullptr;  // device [n]
  RingRope rope;
  int n = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  float scale = 1.0f;
  int splits = 1;
  float* part = nullptr;  // attention_part_floats(n, n_head, head_dim, splits) when splits > 1
  float* out = nullptr;   // [n][n_head][head_dim]
  void* out_act = nullptr;  // as AttnArgs::out_act
  ActForm out_form = ActForm::q8;
};
void ring_attention(const RingAttnArgs& a, cudaStream_t s);
// Where write_episode_f16 puts global layer g's rows: its K and V arenas (f16, or f32 with
// kv_f32), [n_head_kv][cap][head_dim] each.
struct EpisodeDst {
  void* k = nullptr;
  void* v = nullptr;
  int64_t cap = 0;
};
// An episode of n tokens into slots first .. first + n - 1 of its layers: rows is device f16
// [layers][2][n][n_head_kv * head_dim] (layer g's keys, then its values, token-major; plane p
// is layer p / 2's keys or values), of which planes first_plane .. + n_planes - 1 are written;
// dst device [layers]. Keys are turned by delta positions first (delta 0: as they are:
// widened, rotated in f32 by the f64 angles rounded to f32, rounded back to f16 nearest-even,
// as the store's rehydration does on the host), then stored (widened to f32 for an f32 arena).
void write_episode_f16(const uint16_t* rows, int first_plane, int n_planes, int n, int n_head_kv,
                       int head_dim, const EpisodeDst* dst, int64_t first, bool kv_f32,
                       const RingRope& rope, double delta, cudaStream_t s);

// out[p] = crc32c(0, plane p) (util/hash.h) of n_planes consecutive planes of plane_bytes
// (a multiple of 4) each at device memory data (4-byte aligned): a block per plane. out may
// be device memory or page-locked host memory (cudaMallocHost: mapped where addressing is
// unified), which saves a copy back.
void crc32c_planes(const void* data, int n_planes, uint64_t plane_bytes, uint32_t* out,
                   cudaStream_t s);
// Whether the current device gives a block the shared memory crc32c_planes keeps its tables
// in (a copy a lane: 128 KiB, which Hopper has; Ampere's consumer parts do not).
bool crc32c_planes_fit();

// ---- the bounded swa_sink_v1 layers (cuda_bounded.cu; bounded/bounded_attention_core.h) -----
// Per-head RMSNorm in place of q (qn) and k (kn) heads of qkv [n][ld] = q | k | v (either may
// be null: left as they are).
void qk_head_norm(float* qkv, int64_t ld, int n, int n_head, int n_head_kv, int head_dim,
                  const float* qn, const float* kn, float eps, cudaStream_t s);
// Position seen + t of a chunk (t < n) attends its S sinks (NoPE) and the window keys of
// positions j in (seen + t - W, seen + t]: the chunk's own rows of qkv for j >= seen, else the
// ring slot j mod W as it was before the chunk; scores (R(seen + t - j) q) . k * scale with the
// rotation table rows (pairs (i, i + rd/2) of the first rd dims), one softmax over sinks and
// window. bounded_insert then writes the chunk's keys and values into the ring in order.
struct BoundedArgs {
  const float* qkv = nullptr;  // [n][ld]: q heads, k heads (normed), v heads
  int64_t ld = 0;
  int n = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  int window = 0, n_sinks = 0, half = 0;  // half = rd / 2
  float scale = 1.0f;
  const int64_t* seen = nullptr;  // device: positions inserted before the chunk
  const float* ring_k = nullptr;  // [n_head_kv][W][head_dim]
  const float* ring_v = nullptr;
  const float* sink_k = nullptr;  // [n_head_kv][S][head_dim]
  const float* sink_v = nullptr;
  const float* cos = nullptr;  // [W][half], row Δ
  const float* sin = nullptr;
  float* out = nullptr;  // [n][n_head][head_dim]
};
// Head sizes the kernel takes: at most 256, at most 8 query heads per KV head.
bool bounded_shape_supported(int head_dim, int group);
void bounded_attention(const BoundedArgs& a, cudaStream_t s);
void bounded_insert(const float* qkv, int64_t ld, int n, int n_head, int n_head_kv, int head_dim,
                    int window, const int64_t* seen, float* ring_k, float* ring_v, cudaStream_t s);

// out[t] = act(gate[t]) * up[t]; gu: [n][ld], gate at 0, up at n_ff. gelu: llama.cpp's
// f16-rounded GELU-tanh (ops/activation.h); else SiLU.
void glu(const float* gu, int64_t ld, int n, int64_t n_ff, bool gelu, float* out, cudaStream_t s);

ActForm act_form(GgmlType type);

// Decode's fused activation stages: `out` as convert_act writes it for a product on weights of
// `type` (act_form) for `rows` (n) tokens; Q8_0 blocks need n a multiple of 32.
// norm_quant: with proj, first resid[r] += (post_w ? rms_norm(proj[r]) * post_w : proj[r])
//   (add_normed), then out = rms_norm(resid[r]) * norm_w in that form (rms_norm, then
//   convert_act), in one kernel and with their arithmetic. proj and resid: [rows][n].
void norm_quant(const float* proj, const float* post_w, float* resid, const float* norm_w,
                int64_t rows, int64_t n, float eps, GgmlType type, void* out, cudaStream_t s);
// glu_quant: out = glu(gu) in that form (glu, then convert_act).
void glu_quant(const float* gu, int64_t ld, int n, int64_t n_ff, bool gelu, GgmlType type,
               void* out, cudaStream_t s);
// CHANNEL_CUDA_FUSE=0|1 (read once; a bad value is a one-line error): decode (one token, the
// parts of q|k|v and of gate|up each taking one activation form) runs norm_quant and glu_quant
// instead of add_normed, rms_norm, glu and convert_act, and attention writes W_o's Q8_0 input
// itself (AttnArgs::out_act) where W_o takes Q8_0 blocks. set_fused_decode overrides it.
bool fused_decode();
void set_fused_decode(bool on);
// CHANNEL_CUDA_WO_INPUT=q8|all (read once; default all; spec letter w): with the fused stages,
// attention also writes W_o's f16, bf16 or f32 input itself (convert_act's rounding), so those
// weights lose a conversion kernel a layer as Q8_0 and Q4_0 did (12B f16 tg128 on the H100:
// 108.9 -> 109.4 t/s); q8 writes only Q8_0 there. set_attention_writes_every_form overrides it.
bool attention_writes_every_form();
void set_attention_writes_every_form(bool on);
// CHANNEL_CUDA_PDL=0|1 (read once): every kernel launches with programmatic stream
// serialization, lets the next grid launch and then waits for the grid before it on entry
// (pdl_wait, cuda_common.cuh), so the next kernel's launch and prologue overlap this one; the
// streaming matvecs first load their first weights. set_pdl overrides it.
bool pdl_enabled();
void set_pdl(bool on);

// x[t] = row tokens[t] of the embedding matrix (repacked) times scale.
void embed(const DevMatrix& w, const int32_t* tokens, int n, float scale, float* x, cudaStream_t s);

// x = cap * tanh(x / cap)
void softcap(float* x, int64_t count, float cap, cudaStream_t s);

// flags[b] = whether block b's share of x[0, count) holds a NaN or an Inf, for each of the
// kNonfiniteBlocks blocks (all written every launch). flags may be pinned host memory, which
// the kernel writes directly: the step's logits check then costs the host kNonfiniteBlocks
// words after the sync instead of a scan of every logit (1 MiB a token at Gemma's vocabulary).
constexpr int kNonfiniteBlocks = 64;
void nonfinite_flags(const float* x, int64_t count, uint32_t* flags, cudaStream_t s);
// Whether any of the kNonfiniteBlocks flags is set.
bool any_nonfinite(const uint32_t* flags);

}  // namespace channel::cuda
