// matmul throughput on the Gemma-3-1B shapes: weight GB/s for the matvec (n = 1, decode) and
// GFLOP/s for n = 128 (prompt), per weight type, on 1 and 2 threads. Matvec benchmarks
// rotate over enough copies of the matrix (>= 256 MiB) that the weights stream from memory
// as they do in a real decode step, not from cache.
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "backend/cpu/quant_groups.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/matmul.h"

namespace channel {
namespace {

struct Shape {
  const char* name;
  int64_t rows, cols;
};
constexpr Shape kShapes[] = {
    {"ffn_up_6912x1152", 6912, 1152},    // ffn gate / up: 1152 -> 6912
    {"ffn_down_1152x6912", 1152, 6912},  // ffn down: 6912 -> 1152
    {"attn_q_1024x1152", 1024, 1152},    // attn q (4 heads x 256); attn output is 1152x1024
    {"head_262144x1152", 262144, 1152},  // tied output head
};
constexpr GgmlType kTypes[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::F16, GgmlType::BF16,
                               GgmlType::F32};

uint64_t next_random(uint64_t& s) {  // xorshift64*
  s ^= s >> 12;
  s ^= s << 25;
  s ^= s >> 27;
  return s * 0x2545F4914F6CDD1Dull;
}

// Random, finite weights of a type: [rows][row_bytes].
void fill_random(GgmlType type, uint8_t* data, int64_t rows, size_t row_bytes, uint64_t seed) {
  uint64_t s = seed | 1;
  const size_t n = static_cast<size_t>(rows) * row_bytes;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t r = next_random(s);
    std::memcpy(data + i, &r, 8);
  }
  auto set16 = [&](size_t at, uint16_t v) { std::memcpy(data + at, &v, 2); };
  switch (type) {
    case GgmlType::Q8_0:
    case GgmlType::Q4_0: {
      const size_t block = type == GgmlType::Q8_0 ? 34 : 18;
      for (int64_t r = 0; r < rows; ++r) {
        for (size_t b = 0; b + block <= row_bytes; b += block) set16(r * row_bytes + b, 0x211f);
      }
      break;
    }
    case GgmlType::F16:  // |x| in [2^-4, 2^0)
      for (size_t i = 0; i + 2 <= n; i += 2) {
        uint16_t h;
        std::memcpy(&h, data + i, 2);
        set16(i, static_cast<uint16_t>((h & 0x83ff) | ((11 + (h >> 10 & 3)) << 10)));
      }
      break;
    case GgmlType::BF16:
      for (size_t i = 0; i + 2 <= n; i += 2) {
        uint16_t h;
        std::memcpy(&h, data + i, 2);
        set16(i, static_cast<uint16_t>((h & 0x807f) | ((123 + (h >> 7 & 3)) << 7)));
      }
      break;
    case GgmlType::F32:
      for (size_t i = 0; i + 4 <= n; i += 4) {
        uint32_t u;
        std::memcpy(&u, data + i, 4);
        u = (u & 0x807fffffu) | ((123u + (u >> 23 & 3)) << 23);
        std::memcpy(data + i, &u, 4);
      }
      break;
    default:  // the other quantized types are benchmarked on real files (channel bench)
      std::fprintf(stderr, "matmul_bench: no random weights for type %d\n", static_cast<int>(type));
      std::abort();
  }
}

// Copies of one weight matrix, enough of them to exceed `min_bytes` in total; Q4_0/Q5_0 also
// as the 16-row groups a model makes at load where this machine's kernels read them
// (quant_groups.h), so that the bench times the path a model decodes with.
struct WeightSet {
  std::unique_ptr<uint8_t[]> bytes;
  std::vector<std::unique_ptr<uint8_t[]>> groups;
  std::vector<WeightMatrix> copies;
};

WeightSet make_weights(GgmlType type, const Shape& shape, size_t min_bytes) {
  const auto traits = *ggml_type_traits(static_cast<uint32_t>(type));
  const size_t row_bytes = ggml_row_bytes(traits, shape.cols);
  const size_t matrix_bytes = row_bytes * shape.rows;
  const size_t n_copies = std::max<size_t>(1, (min_bytes + matrix_bytes - 1) / matrix_bytes);
  WeightSet set;
  set.bytes.reset(new uint8_t[matrix_bytes * n_copies + 64]);
  uint8_t* base = set.bytes.get() + (64 - reinterpret_cast<uintptr_t>(set.bytes.get()) % 64) % 64;
  for (size_t c = 0; c < n_copies; ++c) {
    uint8_t* data = base + c * matrix_bytes;
    fill_random(type, data, shape.rows, row_bytes, 1234 + c);
    WeightMatrix m{type, shape.rows, shape.cols, data, row_bytes};
    if (cpu::quant_groups_used(type)) {
      set.groups.emplace_back(
          new uint8_t[cpu::quant_groups_bytes(type, shape.rows, shape.cols) + 64]);
      uint8_t* g = set.groups.back().get();
      g += (64 - reinterpret_cast<uintptr_t>(g) % 64) % 64;
      cpu::pack_quant_groups(type, data, row_bytes, shape.rows, shape.cols, g);
      m.groups = g;
    }
    set.copies.push_back(m);
  }
  return set;
}

ThreadPool& pool_of(int threads) {
  static ThreadPool one(1), two(2);
  return threads == 1 ? one : two;
}

void bench_matmul(benchmark::State& state, GgmlType type, Shape shape, int64_t n, int threads) {
  const size_t min_bytes = n == 1 ? (size_t{256} << 20) : 0;
  WeightSet weights = make_weights(type, shape, min_bytes);
  std::vector<float> x(static_cast<size_t>(n * shape.cols));  // [n][cols]
  uint64_t s = 42;
  for (auto& v : x)
    v = static_cast<float>(static_cast<int64_t>(next_random(s) % 2001) - 1000) / 1000.0f;
  std::vector<float> y(static_cast<size_t>(n * shape.rows));  // [n][rows]
  ThreadPool& pool = pool_of(threads);
  size_t i = 0;
  for (auto _ : state) {
    matmul(weights.copies[i], x.data(), n, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
    i = (i + 1) % weights.copies.size();
  }
  const double bytes = static_cast<double>(weights.copies[0].row_bytes * shape.rows);
  state.counters["GB/s"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * shape.rows * shape.cols / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// All matmuls of one Gemma-3-1B step (26 layers of q, k, v, o, gate, up, down, then the
// tied head), each layer with its own weights: the matmul-only ceiling of the model's
// tok/s. n = 1 is a decode step (items/s = tok/s); n = 128 is a prompt chunk, where only the
// last token needs logits (the head runs on one token).
void bench_model_step(benchmark::State& state, GgmlType type, int64_t n, int threads) {
  constexpr int kLayers = 26;
  const Shape layer_shapes[] = {{"q", 1024, 1152},   {"k", 256, 1152},     {"v", 256, 1152},
                                {"o", 1152, 1024},   {"gate", 6912, 1152}, {"up", 6912, 1152},
                                {"down", 1152, 6912}};
  std::vector<WeightSet> weights;  // [layer][7], then the head
  for (int l = 0; l < kLayers; ++l) {
    for (const Shape& sh : layer_shapes) weights.push_back(make_weights(type, sh, 0));
  }
  weights.push_back(make_weights(type, Shape{"head", 262144, 1152}, 0));
  std::vector<float> x(static_cast<size_t>(n) * 6912), y(static_cast<size_t>(n) * 262144);
  uint64_t s = 7;
  for (auto& v : x)
    v = static_cast<float>(static_cast<int64_t>(next_random(s) % 2001) - 1000) / 1000.0f;
  ThreadPool& pool = pool_of(threads);
  double bytes = 0;
  for (const auto& w : weights)
    bytes += static_cast<double>(w.copies[0].row_bytes * w.copies[0].rows);
  for (auto _ : state) {
    for (size_t i = 0; i + 1 < weights.size(); ++i)
      matmul(weights[i].copies[0], x.data(), n, y.data(), pool);
    matmul(weights.back().copies[0], x.data(), 1, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["GB/s"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// Round trip of an (almost) empty parallel_for: the dispatch cost paid ~200 times per token.
void bench_dispatch(benchmark::State& state) {
  ThreadPool& pool = pool_of(static_cast<int>(state.range(0)));
  std::atomic<int64_t> sink{0};
  for (auto _ : state) {
    pool.parallel_for(
        64, [&](int64_t b, int64_t e, int) { sink.fetch_add(e - b, std::memory_order_relaxed); });
  }
  benchmark::DoNotOptimize(sink.load());
}
BENCHMARK(bench_dispatch)->Name("thread_pool/parallel_for_64")->Arg(1)->Arg(2)->UseRealTime();

const bool registered = [] {
  for (int64_t n : {int64_t{1}, int64_t{128}}) {
    for (GgmlType type : kTypes) {
      for (const Shape& shape : kShapes) {
        for (int threads : {1, 2}) {
          const std::string name = std::string(n == 1 ? "matvec/" : "gemm128/") +
                                   std::string(ggml_type_name(static_cast<uint32_t>(type))) + "/" +
                                   shape.name + "/t" + std::to_string(threads);
          benchmark::RegisterBenchmark(name.c_str(), bench_matmul, type, shape, n, threads)
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        }
      }
    }
  }
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::F16}) {
    for (int64_t n : {int64_t{1}, int64_t{128}}) {
      const std::string name = std::string(n == 1 ? "model1b_decode/" : "model1b_prompt128/") +
                               std::string(ggml_type_name(static_cast<uint32_t>(type))) + "/t2";
      benchmark::RegisterBenchmark(name.c_str(), bench_model_step, type, n, 2)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  return true;
}();

}  // namespace
}  // namespace channel
