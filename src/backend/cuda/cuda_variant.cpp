// Decode's run-time kernel choices (cuda_kernels.h): the one-token product's variant,
// CHANNEL_CUDA_MATVEC (v0..v5), and the fused activation stages, CHANNEL_CUDA_FUSE (0|1);
// each read once from the environment unless set first.
#include <atomic>
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_session.h"
#include "util/error.h"

namespace channel::cuda {

namespace {

constexpr int kDefaultVariant = 0;
constexpr bool kDefaultFuse = false;

int parse_variant(const char* s) {
  const std::string v(s);
  const std::string digits = !v.empty() && v[0] == 'v' ? v.substr(1) : v;
  if (digits.size() == 1 && digits[0] >= '0' && digits[0] < '0' + kMatvecVariants)
    return digits[0] - '0';
  throw_error("CHANNEL_CUDA_MATVEC: expected v0..v{}, got '{}'", kMatvecVariants - 1, v);
}

std::atomic<int> g_variant{-1};
std::atomic<int> g_fuse{-1};

}  // namespace

int matvec_variant() {
  int v = g_variant.load(std::memory_order_relaxed);
  if (v >= 0) return v;
  const char* env = std::getenv("CHANNEL_CUDA_MATVEC");
  v = env && *env ? parse_variant(env) : kDefaultVariant;
  g_variant.store(v, std::memory_order_relaxed);
  return v;
}

void set_matvec_variant(int variant) {
  if (variant < 0 || variant >= kMatvecVariants)
    throw_error("matvec variant: expected 0..{}, got {}", kMatvecVariants - 1, variant);
  g_variant.store(variant, std::memory_order_relaxed);
}

bool fused_decode() {
  int v = g_fuse.load(std::memory_order_relaxed);
  if (v >= 0) return v == 1;
  const char* env = std::getenv("CHANNEL_CUDA_FUSE");
  if (env && *env) {
    const std::string e(env);
    if (e != "0" && e != "1") throw_error("CHANNEL_CUDA_FUSE: expected 0 or 1, got '{}'", e);
    v = e == "1" ? 1 : 0;
  } else {
    v = kDefaultFuse ? 1 : 0;
  }
  g_fuse.store(v, std::memory_order_relaxed);
  return v == 1;
}

void set_fused_decode(bool on) { g_fuse.store(on ? 1 : 0, std::memory_order_relaxed); }

void set_decode_kernels(const std::string& spec) {
  const bool fused = !spec.empty() && spec.back() == 'f';
  const std::string v = fused ? spec.substr(0, spec.size() - 1) : spec;
  if (v.size() != 2 || v[0] != 'v' || v[1] < '0' || v[1] >= '0' + kMatvecVariants)
    throw_error("decode kernels: expected v0..v{} with an optional f (fused), got '{}'",
                kMatvecVariants - 1, spec);
  set_matvec_variant(v[1] - '0');
  set_fused_decode(fused);
}

}  // namespace channel::cuda
