// cuda_recall_bench: an episode recalled from the store's page cache into a device ring's
// recall tier, the path MemoryAttachment::recall takes on a device (the store's rows as stored,
// every plane's checksum verified, one copy to the device, the keys turned there), against a
// plain page-locked host-to-device copy of the same bytes. Spec 003's 12B geometry: 48 layers,
// 8 KV heads of 128 (an episode of 64 tokens is 12.6 MB of f16 K/V). The two alternate, one
// of each per round; medians. A plain executable: the GPU machine has no Google Benchmark.
//   cuda_recall_bench [--tokens 16,64,256] [--threads N] [--rounds 30]
// --threads: the pool the store checks and copies the planes on (MemoryAttachment's query
// pool), 1 for none. The store's read alone (the same rehydrate into page-locked host rows,
// no device) is timed too, to see which side bounds a recall.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include "backend/cpu/thread_pool.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ring.h"
#include "kv/kv_rows.h"
#include "memory/episodic_store.h"
#include "memory/rerotate.h"
#include "model/model.h"
#include "recall_geometry_model.h"
#include "runtime/ring_session.h"
#include "util/error.h"

namespace {

using namespace channel;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kLayers = 48, kHeads = 8, kHeadDim = 128, kKvDim = kHeads * kHeadDim;

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  size_t at = 0;
  while (at < s.size()) {
    const size_t comma = s.find(',', at);
    out.push_back(
        std::stoi(s.substr(at, comma == std::string::npos ? std::string::npos : comma - at)));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run(int argc, char** argv) {
  std::vector<int> sizes = {16, 64, 256};
  int threads = static_cast<int>(std::min(16u, std::max(1u, std::thread::hardware_concurrency())));
  int rounds = 30;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) throw_error("{}: needs a value", a);
    if (a == "--tokens")
      sizes = parse_list(argv[++i]);
    else if (a == "--threads")
      threads = std::stoi(argv[++i]);
    else if (a == "--rounds")
      rounds = std::stoi(argv[++i]);
    else
      throw_error("unknown flag {}", a);
  }
  const int max_tokens = *std::max_element(sizes.begin(), sizes.end());

  const std::string path = (std::filesystem::temp_directory_path() /
                            ("channel_cuda_recall_" + std::to_string(::getpid()) + ".mem"))
                               .string();
  std::filesystem::remove(path);
  StoreGeometry g;
  g.num_layers = kLayers;
  g.hidden_size = 64;
  g.kv_dim = kKvDim;
  g.max_tokens = static_cast<uint32_t>(max_tokens);
  g.max_episodes = static_cast<uint32_t>(sizes.size());
  StoreOptions o;
  o.durable = false;
  EpisodicStore store = EpisodicStore::create(path, g, 1, o);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  const std::vector<float> centroid(64, 1.0f);
  std::vector<uint64_t> ids;
  for (int n : sizes) {
    std::vector<int32_t> tokens(static_cast<size_t>(n), 7);
    std::vector<float> kv(2ull * kLayers * static_cast<size_t>(n) * kKvDim);
    for (float& x : kv) x = nd(rng);
    EpisodeRecord r;
    r.start_clock = 123456;
    r.tokens = tokens;
    r.centroid = centroid;
    r.kv = kv;
    ids.push_back(store.append(r));
  }
  store.sync();

  const std::shared_ptr<const Model> model =
      bench::recall_geometry_model(kLayers, kHeads, kHeadDim);
  RingSessionConfig sc;
  sc.ring.n_slots = static_cast<uint32_t>(2 * max_tokens + 64);
  sc.ring.n_recall = static_cast<uint32_t>(max_tokens);
  sc.n_threads = 1;
  sc.n_batch = 8;
  sc.compute = cuda::ring_compute(0);
  RingSession session(model, sc);
  const std::vector<int32_t> anchors = {2, 40, 41, 42};
  session.append(SpanType::system, anchors);
  session.seal();
  const RopeFreqs& rf = session.rope_global();
  RotaryDims rope;
  rope.style = rf.style;
  rope.head_dim = kHeadDim;
  rope.n_heads = kHeads;
  rope.n_rot = rf.n_rot;
  rope.inv_freq = rf.inv_freq;
  RotationTable table(rope);
  ThreadPool pool(threads);
  RehydrateOptions ro;  // verified, as MemoryAttachment::recall
  ro.tables = {&table, 1};
  ro.pool = threads > 1 ? &pool : nullptr;
  const uint64_t stored_pos = session.ring().n_sys();
  const double delta = static_cast<double>(stored_pos) - 123456.0;

  cuda::Stream stream;
  std::printf(
      "# cuda_recall_bench: %s, 12B geometry (%u layers x %u KV heads of %u), %d rounds, "
      "store threads %d\n",
      session.device_name().c_str(), kLayers, kHeads, kHeadDim, rounds, threads);
  std::printf(
      "| tokens | MB | pinned copy us | store read us | recall us | recall / pinned | recall "
      "GB/s |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (size_t si = 0; si < sizes.size(); ++si) {
    const int n = sizes[si];
    const size_t bytes = 2ull * kLayers * static_cast<size_t>(n) * kKvDim * 2;  // f16 K and V
    cuda::PinnedBuffer host(bytes, "bench rows");
    std::memset(host.as<char>(), 1, bytes);
    cuda::DeviceBuffer dev(bytes, "bench rows");
    cuda::PinnedBuffer rows(bytes, "bench rows");
    std::vector<uint16_t*> kp(kLayers), vp(kLayers);
    for (uint32_t l = 0; l < kLayers; ++l) {
      kp[l] = rows.as<uint16_t>() + (2 * l) * static_cast<size_t>(n) * kKvDim;
      vp[l] = kp[l] + static_cast<size_t>(n) * kKvDim;
    }
    auto read = [&] {
      store.rehydrate(ids[si], {&rope, 1}, 0.0, KvRowsF16{kp, vp, kKvDim, static_cast<size_t>(n)},
                      ro);
    };
    auto recall = [&] {
      session.inject_recall(
          ids[si], static_cast<uint32_t>(n), stored_pos,
          [&](const KvRowsF16& out) {
            store.rehydrate(ids[si], {&rope, 1}, 0.0, out, ro);
          },
          delta);
      session.release_recall(ids[si]);
    };
    auto pinned = [&] {
      cuda::check(
          cudaMemcpyAsync(dev.get(), host.as<char>(), bytes, cudaMemcpyHostToDevice, stream.get()),
          "pinned copy");
      stream.sync("pinned copy");
    };
    recall();  // warm: the page cache, the staging buffers
    pinned();
    std::vector<double> t_pinned, t_recall, t_read;
    for (int r = 0; r < rounds; ++r) {
      auto t0 = Clock::now();
      pinned();
      auto t1 = Clock::now();
      recall();
      auto t2 = Clock::now();
      read();
      auto t3 = Clock::now();
      t_pinned.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      t_recall.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
      t_read.push_back(std::chrono::duration<double, std::micro>(t3 - t2).count());
    }
    const double p = median(t_pinned), rc = median(t_recall), rd = median(t_read);
    std::printf("| %d | %.1f | %.0f | %.0f | %.0f | %.2f | %.1f |\n", n,
                static_cast<double>(bytes) / 1e6, p, rd, rc, rc / p,
                static_cast<double>(bytes) / rc / 1e3);
  }
  std::filesystem::remove(path);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_recall_bench: %s\n", e.what());
    return 1;
  }
}
