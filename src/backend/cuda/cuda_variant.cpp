// The backend's run-time kernel choices, each read once from its environment variable unless
// set first (cuda_kernels.h names them and their defaults), and set_decode_kernels, the spec
// that sets every decode choice at once (channel bench --cuda-decode).
#include <algorithm>
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
// Stop 39: the LM head storing the logits to the host in windows of 256 rows, against the
// 1 MiB copy and nonfinite_flags after it, in one process: 12B q8_0 tg128 229.6-230.1 ->
// 231.0-231.7 t/s, 1B 896 -> 906.
constexpr bool kDefaultHostLogits = true;
// Stop 44 (H100, one process): attention writing W_o's input in every form, 12B f16 tg128
// 108.93 -> 109.38 t/s (the same bits); Q8_0 unchanged (182.9 / 183.0).
constexpr bool kDefaultEveryForm = true;

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
std::atomic<int> g_host_logits{-1};
std::atomic<int> g_every_form{-1};

// 0 or 1 from the environment variable `name`, else `fallback`; anything else is an error.
int env_flag(const char* name, bool fallback) {
  const char* env = std::getenv(name);
  if (!env || !*env) return fallback ? 1 : 0;
  const std::string e(env);
  if (e != "0" && e != "1") throw_error("{}: expected 0 or 1, got '{}'", name, e);
  return e == "1" ? 1 : 0;
}

// The process setting in `slot` (-1: not yet read), from env_flag(name, fallback) on first use.
bool cached_env_flag(std::atomic<int>& slot, const char* name, bool fallback) {
  int v = slot.load(std::memory_order_relaxed);
  if (v >= 0) return v == 1;
  v = env_flag(name, fallback);
  slot.store(v, std::memory_order_relaxed);
  return v == 1;
}

// The process setting in `slot` from the environment variable `name`, one of two words
// (`on_word` sets it, `off_word` clears it; unset: `fallback`), on first use; another word is
// an error.
bool cached_env_choice(std::atomic<int>& slot, const char* name, const char* off_word,
                       const char* on_word, bool fallback) {
  int v = slot.load(std::memory_order_relaxed);
  if (v >= 0) return v == 1;
  const char* env = std::getenv(name);
  const std::string e = env ? env : "";
  if (!e.empty() && e != off_word && e != on_word)
    throw_error("{}: expected {} or {}, got '{}'", name, on_word, off_word, e);
  v = e.empty() ? (fallback ? 1 : 0) : e == on_word ? 1 : 0;
  slot.store(v, std::memory_order_relaxed);
  return v == 1;
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

namespace {

constexpr const char* kRoleNames[kMatRoles] = {"other", "qkv", "wo", "gate_up", "down", "output"};

// Each role's variant, -1 where none is set; g_roles_read once the environment was read.
std::atomic<int> g_role_variant[kMatRoles] = {-1, -1, -1, -1, -1, -1};
std::atomic<bool> g_roles_read{false};

// "role:vN,..." into variants[role] (-1 elsewhere); anything else is a one-line error.
void parse_roles(const std::string& spec, int (&variants)[kMatRoles]) {
  for (int& v : variants) v = -1;
  auto bad = [&] {
    throw_error(
        "matvec roles: expected role:vN,... (roles qkv, wo, gate_up, down, output; "
        "v0..v{}), got '{}'",
        kMatvecVariants - 1, spec);
  };
  for (size_t p = 0; p < spec.size();) {
    const size_t q = std::min(spec.find(',', p), spec.size());
    const std::string item = spec.substr(p, q - p);
    if (q + 1 == spec.size()) bad();  // a trailing comma
    p = q + 1;
    const size_t colon = item.find(':');
    if (colon == std::string::npos) bad();
    const std::string name = item.substr(0, colon), v = item.substr(colon + 1);
    int role = -1;
    for (int r = 1; r < kMatRoles; ++r)
      if (name == kRoleNames[r]) role = r;
    if (role < 0 || v.size() != 2 || v[0] != 'v' || v[1] < '0' || v[1] >= '0' + kMatvecVariants ||
        variants[role] >= 0)
      bad();
    variants[role] = v[1] - '0';
  }
}

void store_roles(const int (&variants)[kMatRoles]) {
  for (int r = 0; r < kMatRoles; ++r)
    g_role_variant[r].store(variants[r], std::memory_order_relaxed);
  g_roles_read.store(true, std::memory_order_release);
}

int role_variant(MatRole role) {
  if (!g_roles_read.load(std::memory_order_acquire)) {
    const char* env = std::getenv("CHANNEL_CUDA_MATVEC_ROLES");
    int variants[kMatRoles];
    parse_roles(env ? env : "", variants);
    store_roles(variants);
  }
  return g_role_variant[static_cast<int>(role)].load(std::memory_order_relaxed);
}

}  // namespace

int matvec_variant_for(const DevMatrix& w) {
  const int v = role_variant(w.role);
  return v >= 0 ? v : matvec_variant_for(w.type);
}

void set_role_variants(const std::string& spec) {
  int variants[kMatRoles];
  parse_roles(spec, variants);
  store_roles(variants);
}

std::string role_variants() {
  std::string out;
  for (int r = 1; r < kMatRoles; ++r) {
    const int v = role_variant(static_cast<MatRole>(r));
    if (v < 0) continue;
    if (!out.empty()) out += ',';
    out += kRoleNames[r];
    out += ":v";
    out += std::to_string(v);
  }
  return out;
}

void set_matvec_variant(int variant) {
  if (variant != kMatvecPerType && (variant < 0 || variant >= kMatvecVariants))
    throw_error("matvec variant: expected 0..{}, got {}", kMatvecVariants - 1, variant);
  g_variant.store(variant, std::memory_order_relaxed);
}

bool fused_decode() {
  return cached_env_flag(g_fuse, "CHANNEL_CUDA_FUSE", kDefaultFuse);
}

void set_fused_decode(bool on) { g_fuse.store(on ? 1 : 0, std::memory_order_relaxed); }

bool pdl_enabled() {
  return cached_env_flag(g_pdl, "CHANNEL_CUDA_PDL", kDefaultPdl);
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
  return cached_env_choice(g_flash, "CHANNEL_CUDA_ATTN", "slots", "flash", true);
}

void set_flash_attention(bool on) {
  g_flash.store(on ? 1 : 0, std::memory_order_relaxed);
}

bool one_kernel_attention() {
  return cached_env_choice(g_one_attn, "CHANNEL_CUDA_DECODE_ATTN", "split", "one", false);
}

void set_one_kernel_attention(bool on) {
  g_one_attn.store(on ? 1 : 0, std::memory_order_relaxed);
}

bool host_logits() {
  return cached_env_flag(g_host_logits, "CHANNEL_CUDA_HOST_LOGITS", kDefaultHostLogits);
}

void set_host_logits(bool on) {
  g_host_logits.store(on ? 1 : 0, std::memory_order_relaxed);
}

bool attention_writes_every_form() {
  return cached_env_choice(g_every_form, "CHANNEL_CUDA_WO_INPUT", "q8", "all", kDefaultEveryForm);
}

void set_attention_writes_every_form(bool on) {
  g_every_form.store(on ? 1 : 0, std::memory_order_relaxed);
}

namespace {

[[noreturn]] void bad_decode_kernels(const std::string& spec) {
  throw_error(
      "decode kernels: expected v0..v{}, then any of f (fused), p (PDL), a (one-kernel "
      "attention), h (logits written to the host by the LM head) and w (W_o's input written by "
      "attention in every form), then any +role:vN (roles qkv, wo, gate_up, down, output), got "
      "'{}'",
      kMatvecVariants - 1, spec);
}

}  // namespace

void set_decode_kernels(const std::string& spec) {
  if (spec.size() < 2 || spec[0] != 'v' || spec[1] < '0' || spec[1] >= '0' + kMatvecVariants)
    bad_decode_kernels(spec);
  // "+role:vN" parts after the flags: per-product variants (set_role_variants).
  const size_t plus = std::min(spec.find('+'), spec.size());
  std::string roles;
  for (size_t p = plus; p < spec.size();) {
    const size_t q = std::min(spec.find('+', p + 1), spec.size());
    if (q == p + 1) bad_decode_kernels(spec);  // an empty "+" part
    if (!roles.empty()) roles += ',';
    roles += spec.substr(p + 1, q - p - 1);
    p = q;
  }
  int variants[kMatRoles];
  parse_roles(roles, variants);  // checked before anything is set
  bool fused = false, pdl = false, one = false, host = false, every_form = false;
  for (const char c : spec.substr(2, plus - 2)) {
    bool* flag = c == 'f'   ? &fused
                 : c == 'p' ? &pdl
                 : c == 'a' ? &one
                 : c == 'h' ? &host
                 : c == 'w' ? &every_form
                            : nullptr;
    if (!flag || *flag) bad_decode_kernels(spec);  // an unknown letter, or one given twice
    *flag = true;
  }
  set_matvec_variant(spec[1] - '0');
  store_roles(variants);
  set_fused_decode(fused);
  set_pdl(pdl);
  set_one_kernel_attention(one);
  set_host_logits(host);
  set_attention_writes_every_form(every_form);
}

}  // namespace channel::cuda
