#include "backend/cuda/cuda_device.h"

#include <utility>

#include "util/error.h"

namespace channel::cuda {

void fail(cudaError_t err, const char* what) {
  cudaGetLastError();  // clear a sticky launch error so the next call starts clean
  throw_error("cuda: {}: {} ({})", what, cudaGetErrorName(err), cudaGetErrorString(err));
}

void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

namespace {

std::string gib(size_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1ull << 30)); }

}  // namespace

DeviceInfo select_device(int index) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorNoDevice || (err == cudaSuccess && count == 0))
    throw_error("cuda: no CUDA device found (use --device cpu)");
  if (err == cudaErrorInsufficientDriver)
    throw_error("cuda: the CUDA driver is missing or older than this build's CUDA runtime "
                "(use --device cpu)");
  if (err != cudaSuccess) fail(err, "looking for CUDA devices");
  if (index < 0 || index >= count)
    throw_error("cuda: device {} does not exist ({} CUDA device{} found: cuda:0 .. cuda:{})", index,
                count, count == 1 ? "" : "s", count - 1);
  check(cudaSetDevice(index), "selecting the device");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, index), "reading the device's properties");
  DeviceInfo info;
  info.index = index;
  info.name = prop.name;
  info.sm_count = prop.multiProcessorCount;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  check(cudaMemGetInfo(&info.free_bytes, &info.total_bytes), "reading free device memory");
  return info;
}

void require_device_memory(const DeviceInfo& info, size_t need, const std::string& what) {
  size_t free_bytes = 0, total = 0;
  check(cudaMemGetInfo(&free_bytes, &total), "reading free device memory");
  const size_t margin = 256ull << 20;  // the runtime's own allocations, graphs, fragmentation
  if (need + margin > free_bytes)
    throw_error("cuda: {} needs {} of device memory, but {} has {} free of {}", what, gib(need),
                info.name, gib(free_bytes), gib(total));
}

DeviceBuffer::DeviceBuffer(size_t bytes, const char* what) : bytes_(bytes) {
  if (bytes == 0) return;
  const cudaError_t err = cudaMalloc(&ptr_, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    throw_error("cuda: out of device memory allocating {} for {} ({} free of {})", gib(bytes),
                what, gib(free_bytes), gib(total));
  }
  check(err, what);
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

PinnedBuffer::PinnedBuffer(size_t bytes, const char* what) : bytes_(bytes) {
  if (bytes == 0) return;
  check(cudaMallocHost(&ptr_, bytes), what);
}

PinnedBuffer::~PinnedBuffer() {
  if (ptr_) cudaFreeHost(ptr_);
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFreeHost(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

Stream::Stream() { check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "creating a stream"); }

Stream::~Stream() {
  if (s_) cudaStreamDestroy(s_);
}

void Stream::sync(const char* what) const { check(cudaStreamSynchronize(s_), what); }

Event::Event() {
  check(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming), "creating an event");
}

Event::~Event() {
  if (e_) cudaEventDestroy(e_);
}

void Event::order(cudaStream_t done, cudaStream_t waiter, const char* what) const {
  check(cudaEventRecord(e_, done), what);
  check(cudaStreamWaitEvent(waiter, e_, 0), what);
}

}  // namespace channel::cuda
