// The backend's run-time kernel choices (cuda_kernels.h): the one-token product's variant,
// CHANNEL_CUDA_MATVEC (v0..v8), the fused activation stages, CHANNEL_CUDA_FUSE (0|1),
// programmatic dependent launch, CHANNEL_CUDA_PDL (0|1), and the many-token products through
// cuBLAS or the own tiles, CHANNEL_CUDA_GEMM (cublas|tiles), and prompt-chunk attention on
// tensor cores or the slot kernel, CHANNEL_CUDA_ATTN (flash|slots); each read once from the
// environment unless set first.
#include <atomic>
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_cublas.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_session.h"
#include "util/error.h"

namespace channel::cuda {

namespace {

// Measured on the H200 (bench/results/cuda_h200/matvec_variants.md): v6 reads the 12B
// shape's q8_0 and q4_0 rows fastest (3.42 / 2.26 ms of matvecs a token against v5's 3.83 /
// 2.43 and v0's 4.40 / 3.10; 12B q8_0 decode 207 t/s against v5's 200); v0 and v6 its f16
// rows alike (6.14 / 6.09 ms), v0 kept; the fused stages and PDL each add 2-4 %. Stop 36: v8
// (the copy engine into shared memory, its rings requested before the PDL wait) decodes the
// 12B q8_0 model at 232-235 t/s against v6's 224 in the same process (the 1B shape 891 against
// 804); the 12B q4_0 at 307 against v6's 320 (its 1,920-byte rows fill half a stage; not tuned),
// f16 at 138 against v0's 144.
constexpr bool kDefaultFuse = true;
constexpr bool kDefaultPdl = true;

int default_variant(GgmlType type) {
  if (type == GgmlType::F16 || type == GgmlType::BF16) return 0;
  return type == GgmlType::Q8_0 ? 8 : 6;
}

int parse_variant(const char* s) {
  const std::string v(s);
  const std::string digits = !v.empty() && v[0] == 'v' ? v.substr(1) : v;
  if (digits.size() == 1 && digits[0] >= '0' && digits[0] < '0' + kMatvecVariants)
    return digits[0] - '0';
  throw_error("CHANNEL_CUDA_MATVEC: expected v0..v{}, got '{}'", kMatvecVariants - 1, v);
}

std::atomic<int> g_variant{-1};
std::atomic<int> g_fuse{-1};
std::atomic<int> g_pdl{-1};
std::atomic<int> g_flash{-1};
std::atomic<int> g_cublas{-1};
std::atomic<int> g_one_attn{-1};

// 0 or 1 from the environment variable `name`, else `fallback`; anything else is an error.
int env_flag(const char* name, bool fallback) {
  const char* env = std::getenv(name);
  if (!env || !*env) return fallback ? 1 : 0;
  const std::string e(env);
  if (e != "0" && e != "1") throw_error("{}: expected 0 or 1, got '{}'", name, e);
  return e == "1" ? 1 : 0;
}

}  // namespace

int matvec_variant() {
  int v = g_variant.load(std::memory_order_relaxed);
  if (v >= 0) return v;
  const char* env = std::getenv("CHANNEL_CUDA_MATVEC");
  v = env && *env ? parse_variant(env) : kMatvecPerType;
  g_variant.store(v, std::memory_order_relaxed);
  return v;
}

int matvec_variant_for(GgmlType type) {
  const int v = matvec_variant();
  return v == kMatvecPerType ? default_variant(type) : v;
}

void set_matvec_variant(int variant) {
  if (variant != kMatvecPerType && (variant < 0 || variant >= kMatvecVariants))
    throw_error("matvec variant: expected 0..{}, got {}", kMatvecVariants - 1, variant);
  g_variant.store(variant, std::memory_order_relaxed);
}

bool fused_decode() {
  int v = g_fuse.load(std::memory_order_relaxed);
  if (v >= 0) return v == 1;
  v = env_flag("CHANNEL_CUDA_FUSE", kDefaultFuse);
  g_fuse.store(v, std::memory_order_relaxed);
  return v == 1;
}

void set_fused_decode(bool on) { g_fuse.store(on ? 1 : 0, std::memory_order_relaxed); }

bool pdl_enabled() {
  int v = g_pdl.load(std::memory_order_relaxed);
  if (v >= 0) return v == 1;
  v = env_flag("CHANNEL_CUDA_PDL", kDefaultPdl);
  g_pdl.store(v, std::memory_order_relaxed);
  return v == 1;
}

void set_pdl(bool on) { g_pdl.store(on ? 1 : 0, std::memory_order_relaxed); }

bool gemm_uses_cublas() {
  int v = g_cublas.load(std::memory_order_relaxed);
  if (v >= 0) return v == 1;
  const char* env = std::getenv("CHANNEL_CUDA_GEMM");
  const std::string e = env ? env : "";
  if (!e.empty() && e != "cublas" && e != "tiles")
    throw_error("CHANNEL_CUDA_GEMM: expected cublas or tiles, got '{}'", e);
  if (e == "cublas" && !cublas_available())
    throw_error("CHANNEL_CUDA_GEMM=cublas: libcublas could not be loaded");
  v = e == "tiles" ? 0 : cublas_available() ? 1 : 0;
  g_cublas.store(v, std::memory_order_relaxed);
  return v == 1;
}

void set_gemm_cublas(bool on) {
  if (on && !cublas_available()) throw_error("cuBLAS: libcublas could not be loaded");
  g_cublas.store(on ? 1 : 0, std::memory_order_relaxed);
}

bool flash_attention_enabled() {
  int v = g_flash.load(std::memory_order_relaxed);
  if (v >= 0) return v == 1;
  const char* env = std::getenv("CHANNEL_CUDA_ATTN");
  const std::string e = env ? env : "";
  if (!e.empty() && e != "flash" && e != "slots")
    throw_error("CHANNEL_CUDA_ATTN: expected flash or slots, got '{}'", e);
  v = e == "slots" ? 0 : 1;
  g_flash.store(v, std::memory_order_relaxed);
  return v == 1;
}

void set_flash_attention(bool on) {
  g_flash.store(on ? 1 : 0, std::memory_order_relaxed);
}

bool one_kernel_attention() {
  int v = g_one_attn.load(std::memory_order_relaxed);
  if (v >= 0) return v == 1;
  const char* env = std::getenv("CHANNEL_CUDA_DECODE_ATTN");
  const std::string e = env ? env : "";
  if (!e.empty() && e != "one" && e != "split")
    throw_error("CHANNEL_CUDA_DECODE_ATTN: expected one or split, got '{}'", e);
  v = e == "one" ? 1 : 0;
  g_one_attn.store(v, std::memory_order_relaxed);
  return v == 1;
}

void set_one_kernel_attention(bool on) {
  g_one_attn.store(on ? 1 : 0, std::memory_order_relaxed);
}

namespace {

[[noreturn]] void bad_decode_kernels(const std::string& spec) {
  throw_error(
      "decode kernels: expected v0..v{}, then any of f (fused), p (PDL) and a (one-kernel "
      "attention), got '{}'",
      kMatvecVariants - 1, spec);
}

}  // namespace

void set_decode_kernels(const std::string& spec) {
  if (spec.size() < 2 || spec[0] != 'v' || spec[1] < '0' || spec[1] >= '0' + kMatvecVariants)
    bad_decode_kernels(spec);
  bool fused = false, pdl = false, one = false;
  for (const char c : spec.substr(2)) {
    bool* flag = c == 'f' ? &fused : c == 'p' ? &pdl : c == 'a' ? &one : nullptr;
    if (!flag || *flag) bad_decode_kernels(spec);  // an unknown letter, or one given twice
    *flag = true;
  }
  set_matvec_variant(spec[1] - '0');
  set_fused_decode(fused);
  set_pdl(pdl);
  set_one_kernel_attention(one);
}

}  // namespace channel::cuda
