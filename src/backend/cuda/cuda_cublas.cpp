// cuBLAS through dlopen (see cuda_cublas.h): the three entry points the prefill products use,
// looked up once; a handle per thread and device, kept for the process (destroying one while
// the process exits can run after the driver has gone).
#include "backend/cuda/cuda_cublas.h"

#include <cublas_v2.h>
#include <dlfcn.h>

#include <map>

#include "backend/cuda/cuda_device.h"
#include "util/error.h"

namespace channel::cuda {

namespace {

struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  // cublasGemmEx (C++ sees overloads of it, so the C signature is spelled out).
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*,
                            cudaDataType, int, const void*, void*, cudaDataType, int,
                            cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};

// The library, or null entry points when it is missing or lacks one of them.
const CublasApi& api() {
  static const CublasApi loaded = [] {
    CublasApi a;
    void* lib = nullptr;
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (!lib) return a;
    a.create = reinterpret_cast<decltype(a.create)>(dlsym(lib, "cublasCreate_v2"));
    a.set_stream = reinterpret_cast<decltype(a.set_stream)>(dlsym(lib, "cublasSetStream_v2"));
    a.gemm_ex = reinterpret_cast<decltype(a.gemm_ex)>(dlsym(lib, "cublasGemmEx"));
    if (!a.create || !a.set_stream || !a.gemm_ex) return CublasApi{};
    return a;  // the library stays loaded for the process
  }();
  return loaded;
}

void check_cublas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw_error("cuda: cuBLAS {} failed (status {})", what, static_cast<int>(st));
}

// This thread's handle for the current device, and the end of its last use: a handle's
// workspace serves one stream at a time, so a use on another stream waits for it.
struct Handle {
  cublasHandle_t h = nullptr;
  cudaEvent_t done = nullptr;
};

Handle& handle_for_current_device() {
  thread_local std::map<int, Handle> by_device;
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  Handle& h = by_device[dev];
  if (!h.h) {
    check_cublas(api().create(&h.h), "create");
    check(cudaEventCreateWithFlags(&h.done, cudaEventDisableTiming), "a cuBLAS event");
  }
  return h;
}

}  // namespace

bool cublas_available() { return api().gemm_ex != nullptr; }

void cublas_gemm(const void* w, const void* x, bool bf16, int64_t rows, int64_t cols, int64_t n,
                 float* y, int64_t ldy, cudaStream_t s) {
  if (!cublas_available()) throw_error("cuda: cuBLAS is not available");
  Handle& handle = handle_for_current_device();
  cublasHandle_t h = handle.h;
  check(cudaStreamWaitEvent(s, handle.done, 0), "cuBLAS");
  check_cublas(api().set_stream(h, s), "set stream");
  // Column-major view: W is cols x rows (ld cols), X is cols x n (ld cols), Y is rows x n (ld
  // ldy); Y = W^T X.
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType t = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  check_cublas(api().gemm_ex(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows),
                             static_cast<int>(n), static_cast<int>(cols), &alpha, w, t,
                             static_cast<int>(cols), x, t, static_cast<int>(cols), &beta, y,
                             CUDA_R_32F, static_cast<int>(ldy), CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT),
               "GemmEx");
  check(cudaEventRecord(handle.done, s), "cuBLAS");
}

}  // namespace channel::cuda
