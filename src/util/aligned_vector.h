// aligned_vector.h: std::vector with 64-byte aligned storage (one cache line, one AVX-512
// vector), for buffers that SIMD kernels write in whole lines: an unaligned 64-byte store
// touches two lines, which halves the store rate of a copy-bound kernel.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace channel {

template <typename T, size_t kAlign = 64>
struct AlignedAllocator {
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = AlignedAllocator<U, kAlign>;
  };

  AlignedAllocator() = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U, kAlign>&) noexcept {}

  T* allocate(size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{kAlign}));
  }
  void deallocate(T* p, size_t) noexcept { ::operator delete (p, std::align_val_t{kAlign}); }
  template <typename U>
  bool operator==(const AlignedAllocator<U, kAlign>&) const noexcept {
    return true;
  }
};

template <typename T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

}  // namespace channel
