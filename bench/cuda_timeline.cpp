// cuda_timeline_bench: where a one-token decode step's time goes on the GPU with CUDA graphs
// and programmatic dependent launch on, as run by `channel bench` (cuda_timeline.h). Needs a
// build configured with -DCHANNEL_CUDA_TIMELINE=ON (the kernels' first blocks then stamp the
// device's clock; other builds record nothing and this says so).
//
//   cuda_timeline_bench MODEL.gguf [STEPS=64] [DEPTH=128]
//
// Fills DEPTH tokens, captures the step's graph, replays it STEPS times and prints, in launch
// order, each kernel's span (from its release, when the kernel before it had completed, to the
// next kernel's release: its run and the hand-over after it) and how long its first block had
// already been resident before that (PDL's early start), then the spans summed by kernel.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "backend/cuda/cuda_session.h"
#include "backend/cuda/cuda_timeline.h"
#include "model/model.h"
#include "util/error.h"

namespace {

using namespace channel;

struct Stat {
  double sum = 0;
  int n = 0;
  void add(double v) {
    sum += v;
    ++n;
  }
  double mean() const { return n ? sum / n : 0.0; }
};

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cuda_timeline_bench MODEL.gguf [STEPS=64] [DEPTH=128]\n");
    return 2;
  }
  if (!cuda::timeline_built()) {
    std::fprintf(stderr,
                 "cuda_timeline_bench: this build records no timeline (configure with "
                 "-DCHANNEL_CUDA_TIMELINE=ON)\n");
    return 1;
  }
  const int steps = argc > 2 ? std::max(2, std::atoi(argv[2])) : 64;
  const int depth = argc > 3 ? std::max(1, std::atoi(argv[3])) : 128;
  const auto model = Model::load(argv[1]);
  const int vocab = model->hparams().n_vocab;
  const auto weights = cuda::CudaWeights::upload(model, 0);
  cuda::CudaSession session(
      weights, cuda::CudaSessionConfig{.n_ctx = depth + steps + 8, .n_batch = 512, .graphs = true});
  std::vector<int32_t> prompt(static_cast<size_t>(depth));
  for (int i = 0; i < depth; ++i) prompt[static_cast<size_t>(i)] = (i * 37 + 5) % vocab;
  session.decode(prompt);
  auto token = [&](int i) { return static_cast<int32_t>((i * 11 + 3) % vocab); };
  // The first one-token step captures the graph: its launches are the step's kernels.
  cuda::timeline_start();
  int32_t t = token(0);
  session.decode(std::span(&t, 1));
  cuda::timeline_stop_launches();
  const std::vector<cuda::TimelineLaunch> kernels = cuda::timeline_launches();
  const size_t k = kernels.size();
  cuda::timeline_clear_marks();
  for (int i = 1; i <= steps; ++i) {
    t = token(i);
    session.decode(std::span(&t, 1));
  }
  const std::vector<cuda::TimelineMark> marks = cuda::timeline_marks();
  if (k == 0 || marks.size() != k * static_cast<size_t>(steps)) {
    std::fprintf(stderr, "cuda_timeline_bench: %zu marks for %d steps of %zu launches\n",
                 marks.size(), steps, k);
    return 1;
  }
  for (size_t i = 0; i < marks.size(); ++i)
    if (marks[i].blocks != kernels[i % k].blocks || marks[i].threads != kernels[i % k].threads) {
      std::fprintf(stderr,
                   "cuda_timeline_bench: mark %zu (%u x %u) is not launch %zu's %s (%u x %u): a "
                   "kernel that skips pdl_wait in its first block, or one not launched by "
                   "launch_k\n",
                   i, marks[i].blocks, marks[i].threads, i % k, kernels[i % k].kernel.c_str(),
                   kernels[i % k].blocks, kernels[i % k].threads);
      return 1;
    }
  // Spans within a step; the last kernel's span runs to the next step's first release (the
  // step's end, the host's sync and its next launch), so the last step has none.
  std::vector<Stat> span(k), early(k);
  Stat step;
  for (int s = 0; s < steps; ++s)
    for (size_t i = 0; i < k; ++i) {
      const size_t at = static_cast<size_t>(s) * k + i;
      early[i].add((marks[at].released_ns - marks[at].started_ns) / 1e3);
      if (at + 1 < marks.size())
        span[i].add((marks[at + 1].released_ns - marks[at].released_ns) / 1e3);
      if (i == 0 && s + 1 < steps)
        step.add((marks[at + k].released_ns - marks[at].released_ns) / 1e3);
    }
  std::printf("%s: %d steps after %d tokens, %zu kernels a step, %.1f us a step (%.1f t/s)\n\n",
              argv[1], steps, depth, k, step.mean(), 1e6 / step.mean());
  std::printf("| # | kernel | blocks x threads | span us | resident before release us |\n");
  std::printf("|---|---|---|---|---|\n");
  std::map<std::string, Stat> by_kernel;
  std::map<std::string, int> calls;
  for (size_t i = 0; i < k; ++i) {
    std::printf("| %zu | %s | %u x %u | %.2f | %.2f |\n", i, kernels[i].kernel.c_str(),
                kernels[i].blocks, kernels[i].threads, span[i].mean(), early[i].mean());
    by_kernel[kernels[i].kernel].add(span[i].mean());
    ++calls[kernels[i].kernel];
  }
  std::vector<std::pair<std::string, Stat>> order(by_kernel.begin(), by_kernel.end());
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.second.sum > b.second.sum; });
  std::printf("\n| kernel | launches a step | us a step | share |\n|---|---|---|---|\n");
  for (const auto& [name, st] : order)
    std::printf("| %s | %d | %.1f | %.1f %% |\n", name.c_str(), calls[name], st.sum,
                100.0 * st.sum / step.mean());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_timeline_bench: %s\n", e.what());
    return 1;
  }
}
