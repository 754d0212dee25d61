// The CUDA device context: device selection with one-line errors (no driver, no device, a
// bad ordinal), CUDA errors turned into channel::Error naming the CUDA error, and RAII device
// and pinned host buffers whose allocation failure says how much was asked and how much is
// free. Host code only; kernels live in the .cu files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

namespace channel::cuda {

// Throws channel::Error: "cuda: WHAT: cudaErrorX (description)".
[[noreturn]] void fail(cudaError_t err, const char* what);
inline void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) fail(err, what);
}
// The last launch's error, if any (launch configuration errors surface here).
void check_launch(const char* kernel);

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  size_t total_bytes = 0, free_bytes = 0;
};

// Makes device `index` current and returns its properties. One-line channel::Error when no
// driver is installed, no device is present, or the ordinal is out of range.
DeviceInfo select_device(int index);

// Throws a one-line channel::Error when `need` bytes of device memory exceed what is free
// (less a margin), naming what they are for. Called before any upload.
void require_device_memory(const DeviceInfo& info, size_t need, const std::string& what);

// Device memory, allocated once and freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, const char* what);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory (the step's inputs and the logits travel through it).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(size_t bytes, const char* what);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// One non-blocking stream.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  void sync(const char* what) const;

 private:
  cudaStream_t s_ = nullptr;
};

// An event without timing, to order one stream's work after another's.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  // `waiter` runs what it is given next only after what `done` has been given so far.
  void order(cudaStream_t done, cudaStream_t waiter, const char* what) const;

 private:
  cudaEvent_t e_ = nullptr;
};

}  // namespace channel::cuda
