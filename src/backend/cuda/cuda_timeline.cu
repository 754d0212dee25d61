// The timeline build's host side (cuda_timeline.h): the marks' buffer on the device, the
// files' pointers to it, and the launches noted in order. Without CHANNEL_CUDA_TIMELINE it
// records nothing.
#include "backend/cuda/cuda_timeline.h"

#include <cxxabi.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <tuple>

#include "backend/cuda/cuda_common.cuh"

namespace channel::cuda {

#if defined(CHANNEL_CUDA_TIMELINE)

namespace {

constexpr unsigned int kTimelineCapacity = 1u << 18;  // marks: 6 MiB, thousands of steps

struct TimelineHost {
  std::mutex mu;
  std::vector<TimelinePoint> points;
  std::vector<std::tuple<const void*, dim3, dim3>> launches;
  std::atomic<bool> noting{false};
  TimelineDevice* dev = nullptr;  // the header, the marks after it
};

TimelineHost& host() {
  static TimelineHost h;
  return h;
}

// "channel::cuda::(anonymous namespace)::matvec_bulk_kernel<0>(...)" -> "matvec_bulk_kernel<0>".
std::string short_name(const void* kernel) {
  const char* mangled = nullptr;
  if (cudaFuncGetName(&mangled, kernel) != cudaSuccess || !mangled) return "?";
  int status = 0;
  char* plain = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && plain ? plain : mangled;
  std::free(plain);
  // Namespaces first: "(anonymous namespace)" holds the first '('. A template kernel's name
  // starts with its return type, and its arguments may hold casts such as "(Type)8", so the
  // parameter list is the first '(' outside the template's angle brackets.
  for (const char* prefix : {"channel::cuda::(anonymous namespace)::", "channel::cuda::"})
    for (size_t at; (at = name.find(prefix)) != std::string::npos;)
      name.erase(at, std::string(prefix).size());
  if (name.rfind("void ", 0) == 0) name.erase(0, 5);
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '<') ++depth;
    if (name[i] == '>') --depth;
    if (name[i] == '(' && depth == 0) return name.substr(0, i);
  }
  return name;
}

}  // namespace

void timeline_register(TimelinePoint point) {
  TimelineHost& h = host();
  const std::lock_guard<std::mutex> lock(h.mu);
  h.points.push_back(point);
}

bool timeline_noting() {
  return host().noting.load(std::memory_order_relaxed);
}

void timeline_note_launch(const void* kernel, dim3 grid, dim3 block) {
  TimelineHost& h = host();
  const std::lock_guard<std::mutex> lock(h.mu);
  h.launches.emplace_back(kernel, grid, block);
}

bool timeline_built() {
  return true;
}

void timeline_start() {
  TimelineHost& h = host();
  {
    const std::lock_guard<std::mutex> lock(h.mu);
    if (!h.dev) {
      void* mem = nullptr;
      check(cudaMalloc(&mem,
                       sizeof(TimelineDevice) + size_t{kTimelineCapacity} * sizeof(TimelineMark)),
            "the timeline's marks");
      const TimelineDevice header{
          0, kTimelineCapacity,
          reinterpret_cast<TimelineMark*>(static_cast<TimelineDevice*>(mem) + 1)};
      check(cudaMemcpy(mem, &header, sizeof header, cudaMemcpyHostToDevice), "the timeline");
      h.dev = static_cast<TimelineDevice*>(mem);
      for (const TimelinePoint point : h.points) point(h.dev);
    }
    h.launches.clear();
  }
  timeline_clear_marks();
  h.noting.store(true, std::memory_order_relaxed);
}

void timeline_stop_launches() {
  host().noting.store(false, std::memory_order_relaxed);
}

void timeline_clear_marks() {
  TimelineHost& h = host();
  if (!h.dev) return;
  check(cudaDeviceSynchronize(), "the timeline");
  check(cudaMemset(&h.dev->count, 0, sizeof h.dev->count), "the timeline");
}

std::vector<TimelineLaunch> timeline_launches() {
  TimelineHost& h = host();
  const std::lock_guard<std::mutex> lock(h.mu);
  std::vector<TimelineLaunch> out;
  for (const auto& [kernel, grid, block] : h.launches)
    out.push_back({short_name(kernel), grid.x * grid.y * grid.z, block.x * block.y * block.z});
  return out;
}

std::vector<TimelineMark> timeline_marks() {
  TimelineHost& h = host();
  if (!h.dev) return {};
  check(cudaDeviceSynchronize(), "the timeline");
  TimelineDevice header{};
  check(cudaMemcpy(&header, h.dev, sizeof header, cudaMemcpyDeviceToHost), "the timeline");
  std::vector<TimelineMark> marks(std::min(header.count, header.capacity));
  check(cudaMemcpy(marks.data(), header.marks, marks.size() * sizeof(TimelineMark),
                   cudaMemcpyDeviceToHost),
        "the timeline's marks");
  return marks;
}

#else

bool timeline_built() {
  return false;
}
void timeline_start() {}
void timeline_stop_launches() {}
void timeline_clear_marks() {}
std::vector<TimelineLaunch> timeline_launches() {
  return {};
}
std::vector<TimelineMark> timeline_marks() {
  return {};
}

#endif

}  // namespace channel::cuda
