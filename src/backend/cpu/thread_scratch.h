// thread_scratch.h: a 64-byte aligned buffer per thread and per user that grows and never
// shrinks, so the matmul loops allocate nothing in steady state. Each user names its own Tag
// type, so two loops of one thread (the caller's activations and a GEMM's repacked panel)
// never share a buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace channel::cpu {

template <typename Tag>
uint8_t* thread_scratch(size_t bytes) {
  thread_local std::unique_ptr<uint8_t[]> buf;
  thread_local size_t size = 0;
  if (size < bytes) {
    buf.reset(new uint8_t[bytes + 64]);
    size = bytes;
  }
  const uintptr_t p = reinterpret_cast<uintptr_t>(buf.get());
  return buf.get() + (64 - p % 64) % 64;
}

}  // namespace channel::cpu
