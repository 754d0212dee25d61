// Where a decode step's time goes with graphs and PDL on, as the kernels themselves see it
// (bench/cuda_timeline.cpp). Only a build configured with -DCHANNEL_CUDA_TIMELINE=ON records
// anything: there every kernel's first block stamps the device's clock (%globaltimer) when it
// starts and when its PDL wait releases it, which is when the kernel before it has completed;
// the host notes each launch's kernel and shape in order. The differences between releases are
// the kernels' spans in the stream, the gaps between them included, which neither a profiler
// that serializes kernels (ncu) nor events between launches (they break the PDL chain) show.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace channel::cuda {

struct TimelineMark {
  uint64_t started_ns = 0;   // block 0 began (before its PDL wait)
  uint64_t released_ns = 0;  // block 0's PDL wait returned
  uint32_t blocks = 0, threads = 0;
};

struct TimelineLaunch {
  std::string kernel;  // demangled, without its namespace
  uint32_t blocks = 0, threads = 0;
};

// False unless the build records timelines (the rest then does nothing and returns nothing).
bool timeline_built();
// Clears the marks and the launch list on the current device; launches are noted from now
// until timeline_stop_launches (a graph's are noted when it is captured, not when replayed).
void timeline_start();
void timeline_stop_launches();
void timeline_clear_marks();
std::vector<TimelineLaunch> timeline_launches();
std::vector<TimelineMark> timeline_marks();  // after the device's work so far

}  // namespace channel::cuda
