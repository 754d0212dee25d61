// cuda_matvec_bench: the one-token product's variants (cuda_kernels.h, v0..v7) on the
// Gemma-3-12B decode shapes, in GB/s of weights read. Each measurement replays a CUDA graph of
// `iters` products (as the decode step replays its graph), cycling over enough copies of the
// matrix that they do not fit in L2; the variants alternate in rounds and the best round
// counts; the best variant is timed again with programmatic dependent launch. Ends with each
// variant's matvec time per token of the 12B model (48 layers of qkv, o, gate_up and down,
// plus the LM head) and the decode rate that alone would allow.
//   cuda_matvec_bench [--types q8_0,q4_0,f16] [--rounds 3] [--iters 20]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_kernels.h"
#include "gguf/ggml_type.h"
#include "util/error.h"

namespace {

using namespace channel;

struct Shape {
  const char* name;
  int64_t rows, cols;
  int per_token;  // times per 12B decode step
};

// The 12B shapes as the device runs them (q|k|v and gate|up stacked) and the brief's parts.
const Shape kShapes[] = {
    {"qkv 3840->8192", 8192, 3840, 48},       {"o 4096->3840", 3840, 4096, 48},
    {"gate_up 3840->30720", 30720, 3840, 48}, {"down 15360->3840", 3840, 15360, 48},
    {"lm_head 3840->262144", 262144, 3840, 1}, {"up 3840->15360", 15360, 3840, 0},
    {"q 3840->4096", 4096, 3840, 0},          {"kv 3840->2048", 2048, 3840, 0},
};

GgmlType parse_type(const std::string& s) {
  if (s == "q8_0") return GgmlType::Q8_0;
  if (s == "q4_0") return GgmlType::Q4_0;
  if (s == "f16") return GgmlType::F16;
  if (s == "bf16") return GgmlType::BF16;
  throw_error("cuda_matvec_bench: unknown type '{}' (q8_0, q4_0, f16, bf16)", s);
}

// Seconds per product of variant v over `copies` matrices, replayed as one graph.
double time_variant(const std::vector<cuda::DevMatrix>& mats, const void* act, float* y, int v,
                    int iters, cudaStream_t s) {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  cuda::check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "capture");
  try {
    for (int i = 0; i < iters; ++i)
      cuda::matmul_variant(mats[static_cast<size_t>(i) % mats.size()], act, 1, y, 0, s, v);
  } catch (...) {  // leave the stream usable
    cudaStreamEndCapture(s, &g);
    if (g) cudaGraphDestroy(g);
    throw;
  }
  cuda::check(cudaStreamEndCapture(s, &g), "capture");
  cuda::check(cudaGraphInstantiate(&exec, g, 0), "instantiate");
  cudaGraphDestroy(g);
  cudaEvent_t a, b;
  cuda::check(cudaEventCreate(&a), "event");
  cuda::check(cudaEventCreate(&b), "event");
  cuda::check(cudaGraphLaunch(exec, s), "warm-up");
  cuda::check(cudaEventRecord(a, s), "event");
  cuda::check(cudaGraphLaunch(exec, s), "replay");
  cuda::check(cudaEventRecord(b, s), "event");
  cuda::check(cudaEventSynchronize(b), "sync");
  float ms = 0;
  cuda::check(cudaEventElapsedTime(&ms, a, b), "elapsed");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(exec);
  return ms * 1e-3 / iters;
}

int run(int argc, char** argv) {
  std::vector<std::string> types = {"q8_0", "q4_0", "f16"};
  int rounds = 3, iters = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) throw_error("cuda_matvec_bench: {} needs a value", a);
    const std::string v = argv[++i];
    if (a == "--types") {
      types.clear();
      for (size_t p = 0; p <= v.size();) {
        const size_t q = std::min(v.find(',', p), v.size());
        types.push_back(v.substr(p, q - p));
        p = q + 1;
      }
    } else if (a == "--rounds") {
      rounds = std::max(1, std::stoi(v));
    } else if (a == "--iters") {
      iters = std::max(1, std::stoi(v));
    } else {
      throw_error("cuda_matvec_bench: unknown flag {}", a);
    }
  }
  const cuda::DeviceInfo info = cuda::select_device(0);
  std::printf("device: %s, %d SMs\n\n", info.name.c_str(), info.sm_count);
  cuda::Stream stream;
  const cudaStream_t s = stream.get();
  constexpr int V = cuda::kMatvecVariants;
  constexpr size_t kRotateBytes = size_t{256} << 20;  // past the 50 MB L2, several times

  std::printf("| type | shape | MB |");
  for (int v = 0; v < V; ++v) std::printf(" v%d GB/s |", v);
  std::printf(" best | best, PDL GB/s |\n|---|---|---|");
  for (int v = 0; v < V; ++v) std::printf("---|");
  std::printf("---|---|\n");
  std::vector<std::string> summary;
  for (const std::string& tn : types) {
    const GgmlType type = parse_type(tn);
    std::vector<double> per_token(V, 0.0);
    for (const Shape& sh : kShapes) {
      const size_t qb = cuda::repacked_q_bytes(type, sh.rows, sh.cols);
      const size_t db = cuda::repacked_d_bytes(type, sh.rows, sh.cols);
      const size_t bytes = qb + db;
      const size_t copies = std::clamp<size_t>((kRotateBytes + bytes - 1) / bytes, 1, 16);
      cuda::DeviceBuffer w(bytes * copies, "weights");
      cuda::check(cudaMemset(w.get(), 0x11, bytes * copies), "fill");
      std::vector<cuda::DevMatrix> mats;
      for (size_t c = 0; c < copies; ++c) {
        const char* base = w.as<char>() + c * bytes;
        mats.push_back(cuda::DevMatrix{type, sh.rows, sh.cols, base, db ? base + qb : nullptr});
      }
      cuda::DeviceBuffer x(static_cast<size_t>(sh.cols) * 4, "x");
      cuda::check(cudaMemset(x.get(), 0x3c, static_cast<size_t>(sh.cols) * 4), "fill");
      cuda::DeviceBuffer act(cuda::act_bytes(type, 1, sh.cols), "act");
      cuda::DeviceBuffer y(static_cast<size_t>(sh.rows) * 4, "y");
      cuda::convert_act(type, x.as<float>(), 1, sh.cols, sh.cols, act.get(), s);
      std::vector<double> best(V, 1e30);
      for (int r = 0; r < rounds; ++r)
        for (int v = 0; v < V; ++v)
          best[static_cast<size_t>(v)] = std::min(
              best[static_cast<size_t>(v)], time_variant(mats, act.get(), y.as<float>(), v, iters, s));
      const auto top = std::min_element(best.begin(), best.end()) - best.begin();
      cuda::set_pdl(true);  // the best variant again, each product overlapping the one before
      double pdl = 1e30;
      try {
        for (int r = 0; r < rounds; ++r)
          pdl = std::min(pdl, time_variant(mats, act.get(), y.as<float>(), static_cast<int>(top), iters, s));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "cuda_matvec_bench: with PDL: %s\n", e.what());
        cudaGetLastError();
      }
      cuda::set_pdl(false);
      std::printf("| %s | %s | %.1f |", tn.c_str(), sh.name, static_cast<double>(bytes) / 1e6);
      for (int v = 0; v < V; ++v)
        std::printf(" %.0f |", static_cast<double>(bytes) / best[static_cast<size_t>(v)] / 1e9);
      std::printf(" v%d | %.0f |\n", static_cast<int>(top), static_cast<double>(bytes) / pdl / 1e9);
      std::fflush(stdout);
      for (int v = 0; v < V; ++v) per_token[static_cast<size_t>(v)] += sh.per_token * best[static_cast<size_t>(v)];
    }
    std::string line = tn + ", 12B matvecs per token:";
    for (int v = 0; v < V; ++v)
      line += fmt::format(" v{} {:.2f} ms ({:.0f} t/s);", v, per_token[static_cast<size_t>(v)] * 1e3,
                          1.0 / per_token[static_cast<size_t>(v)]);
    summary.push_back(line);
  }
  std::printf("\n");
  for (const std::string& l : summary) std::printf("%s\n", l.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_matvec_bench: %s\n", e.what());
    return 1;
  }
}
