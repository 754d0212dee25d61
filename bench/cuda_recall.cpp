// cuda_recall_bench: an episode recalled from the store's page cache into a device ring's
// recall tier, the path MemoryAttachment::recall takes on a device (the store's rows as stored,
// every plane's checksum verified, one copy to the device, the keys turned there), against a
// plain page-locked host-to-device copy of the same bytes. Spec 003's 12B geometry: 48 layers,
// 8 KV heads of 128 (an episode of 64 tokens is 12.6 MB of f16 K/V). The two alternate, one
// of each per round; medians. A plain executable: the GPU machine has no Google Benchmark.
//   cuda_recall_bench [--tokens 16,64,256] [--threads N] [--rounds 30] [--probes]
// --threads: the pool the store checks and copies the planes on (MemoryAttachment's query
// pool), 1 for none. The store's read alone (the same rehydrate into page-locked host rows,
// no device) is timed too, with the pool's threads asleep (as a recall finds them) and awake
// (right after another read), and the recall is split into its phases: before the store's
// first row, the store's read, and after it (the rest of the copy, the kernel, the wait).
// The stored recall (MemoryAttachment's path on a device: the planes copied by DMA straight
// from the store's page-locked pages and checked on the device) is timed too: its first call
// for an episode (which page-locks its pages) and the median of the later ones.
// --probes: where a stored recall's time goes (run_probes).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
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
#include "backend/cuda/cuda_kernels.h"
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

double us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Where a stored recall's time goes, on a plain file of the episode's bytes (cached: it was
// just written), its mapping page-locked once as HostPins does: the copy whole and in 2 MiB
// pieces, the pieces again after the process's page tables dropped the pages (the store
// does after every read), and the two kernels alone. Medians over rounds.
void run_probes(const std::vector<int>& sizes, int rounds, cudaStream_t stream) {
  std::printf(
      "\n# probes: an episode's bytes, page-locked file mapping -> device\n"
      "| tokens | pinned copy us | locked map, one copy us | locked map, 2 MiB pieces us | "
      "pieces after MADV_DONTNEED us | crc32c_planes us | write_episode_f16 us |\n"
      "|---|---|---|---|---|---|---|\n");
  for (const int n : sizes) {
    const size_t plane = static_cast<size_t>(n) * kKvDim * 2, planes = 2 * kLayers;
    const size_t bytes = planes * plane;
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("channel_cuda_probe_" + std::to_string(::getpid()) + ".bin"))
                                 .string();
    std::vector<char> data(bytes, 3);
    {
      const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
      if (fd < 0 || ::write(fd, data.data(), bytes) != static_cast<ssize_t>(bytes))
        throw_error("probe file {}: cannot write", path);
      ::close(fd);
    }
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) throw_error("probe file {}: cannot open", path);
    void* m = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (m == MAP_FAILED) throw_error("probe file {}: cannot map", path);
    cuda::check(cudaHostRegister(m, bytes, cudaHostRegisterReadOnly), "locking the map");
    cuda::DeviceBuffer dev(bytes, "probe rows"), crc(planes * 4, "probe crc");
    cuda::DeviceBuffer arena(2 * bytes, "probe arena"),
        dst(kLayers * sizeof(cuda::EpisodeDst), "dst");
    cuda::PinnedBuffer host(bytes, "probe rows");
    std::memset(host.as<char>(), 1, bytes);
    std::vector<cuda::EpisodeDst> dh(kLayers);
    for (uint32_t g = 0; g < kLayers; ++g)
      dh[g] = {arena.as<char>() + (2 * g) * plane, arena.as<char>() + (2 * g + 1) * plane,
               static_cast<int64_t>(n)};
    cuda::check(cudaMemcpy(dst.get(), dh.data(), kLayers * sizeof(cuda::EpisodeDst),
                           cudaMemcpyHostToDevice),
                "dst");
    std::vector<double> inv(kHeadDim / 2);
    for (size_t i = 0; i < inv.size(); ++i) inv[i] = std::pow(10000.0, -2.0 * i / kHeadDim);
    cuda::DeviceBuffer inv_d(inv.size() * 8, "inv_freq");
    cuda::check(cudaMemcpy(inv_d.get(), inv.data(), inv.size() * 8, cudaMemcpyHostToDevice), "inv");
    const cuda::RingRope rope{true, static_cast<int>(kHeadDim), inv_d.as<double>()};
    auto sync = [&] { cuda::check(cudaStreamSynchronize(stream), "probe"); };
    auto copy = [&](const void* from) {
      cuda::check(cudaMemcpyAsync(dev.get(), from, bytes, cudaMemcpyHostToDevice, stream), "copy");
      sync();
    };
    auto pieces = [&] {
      const auto* from = static_cast<const char*>(m);
      for (size_t at = 0; at < bytes;) {
        const size_t piece = std::min(
            bytes - at,
            (size_t{2} << 20) - (reinterpret_cast<uintptr_t>(from + at) & ((size_t{2} << 20) - 1)));
        cuda::check(
            cudaMemcpyAsync(dev.as<char>() + at, from + at, piece, cudaMemcpyHostToDevice, stream),
            "piece");
        at += piece;
      }
      sync();
    };
    std::vector<double> t_pinned, t_one, t_pieces, t_dropped, t_crc, t_episode;
    copy(host.as<char>());
    for (int r = 0; r < rounds; ++r) {
      auto t0 = Clock::now();
      copy(host.as<char>());
      auto t1 = Clock::now();
      copy(m);
      auto t2 = Clock::now();
      pieces();
      auto t3 = Clock::now();
      ::madvise(m, bytes, MADV_DONTNEED);
      auto t4 = Clock::now();
      pieces();
      auto t5 = Clock::now();
      cuda::crc32c_planes(dev.get(), static_cast<int>(planes), plane, crc.as<uint32_t>(), stream);
      sync();
      auto t6 = Clock::now();
      cuda::write_episode_f16(dev.as<uint16_t>(), 0, static_cast<int>(planes), n,
                              static_cast<int>(kHeads), static_cast<int>(kHeadDim),
                              dst.as<cuda::EpisodeDst>(), 0, false, rope, 37.0, stream);
      sync();
      auto t7 = Clock::now();
      t_pinned.push_back(us(t0, t1));
      t_one.push_back(us(t1, t2));
      t_pieces.push_back(us(t2, t3));
      t_dropped.push_back(us(t4, t5));
      t_crc.push_back(us(t5, t6));
      t_episode.push_back(us(t6, t7));
    }
    cudaHostUnregister(m);
    ::munmap(m, bytes);
    ::close(fd);
    std::filesystem::remove(path);
    std::printf("| %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n", n, median(t_pinned),
                median(t_one), median(t_pieces), median(t_dropped), median(t_crc),
                median(t_episode));
  }
}

int run(int argc, char** argv) {
  std::vector<int> sizes = {16, 64, 256};
  int threads = static_cast<int>(std::min(16u, std::max(1u, std::thread::hardware_concurrency())));
  int rounds = 30;
  bool probes = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--probes") {
      probes = true;
      continue;
    }
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
      bench::recall_geometry_model(kLayers, kHeads, kHeadDim, GgmlType::F16);  // f16 arena
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
      "| tokens | MB | pinned copy us | store read us (pool asleep / awake) | staged recall us | "
      "staged / pinned | staged: before / read / after us | stored recall: first us | stored "
      "recall us (the session's part) | stored / pinned | stored GB/s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
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
    Clock::time_point fill0, fill1;  // the store's read inside the recall
    auto recall = [&] {
      session.inject_recall(
          ids[si], static_cast<uint32_t>(n), stored_pos,
          [&](const KvRowsF16& out) {
            fill0 = Clock::now();
            store.rehydrate(ids[si], {&rope, 1}, 0.0, out, ro);
            fill1 = Clock::now();
          },
          delta);
      session.release_recall(ids[si]);
    };
    double device_part = 0.0;  // of the last stored recall: the session's, inside the store's
    auto stored = [&] {
      const bool ok = store.with_stored_kv(ids[si], [&](const StoredKvF16& src) {
        const auto d0 = Clock::now();
        if (!session.inject_recall_stored(ids[si], stored_pos, src, delta))
          throw_error("the device does not take the stored episode (page locks refused?)");
        device_part = std::chrono::duration<double, std::micro>(Clock::now() - d0).count();
      });
      if (!ok) throw_error("the store is not f16");
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
    const auto s0 = Clock::now();
    stored();  // the first: page-locks the episode's pages
    const double stored_first =
        std::chrono::duration<double, std::micro>(Clock::now() - s0).count();
    // The pool's workers spin for a while after a job, then sleep: a recall finds them asleep.
    auto let_pool_sleep = [] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); };
    std::vector<double> t_pinned, t_recall, t_read_asleep, t_read_awake, t_before, t_fill, t_after,
        t_stored, t_device_part;
    for (int r = 0; r < rounds; ++r) {
      auto t0 = Clock::now();
      pinned();
      const auto t0e = Clock::now();
      let_pool_sleep();
      auto t1 = Clock::now();
      recall();
      auto t2 = Clock::now();
      let_pool_sleep();
      auto t3 = Clock::now();
      read();
      auto t4 = Clock::now();
      read();
      auto t5 = Clock::now();
      stored();
      t_stored.push_back(us(t5, Clock::now()));
      t_device_part.push_back(device_part);
      t_pinned.push_back(us(t0, t0e));
      t_recall.push_back(us(t1, t2));
      t_read_asleep.push_back(us(t3, t4));
      t_read_awake.push_back(us(t4, t5));
      t_before.push_back(us(t1, fill0));
      t_fill.push_back(us(fill0, fill1));
      t_after.push_back(us(fill1, t2));
    }
    const double p = median(t_pinned), rc = median(t_recall), st = median(t_stored);
    std::printf(
        "| %d | %.1f | %.0f | %.0f / %.0f | %.0f | %.2f | %.0f / %.0f / %.0f | %.0f | %.0f (%.0f) "
        "| %.2f | %.1f |\n",
        n, static_cast<double>(bytes) / 1e6, p, median(t_read_asleep), median(t_read_awake), rc,
        rc / p, median(t_before), median(t_fill), median(t_after), stored_first, st,
        median(t_device_part), st / p, static_cast<double>(bytes) / st / 1e3);
  }
  std::filesystem::remove(path);
  if (probes) run_probes(sizes, rounds, stream.get());
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
