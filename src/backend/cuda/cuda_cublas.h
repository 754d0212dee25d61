// cuBLAS for the many-token products (prefill), loaded at run time: a CUDA build links no
// cuBLAS, and a machine whose toolkit lacks it keeps the backend's own tiles (cuda_matmul.cu).
// Internal to the backend (needs the CUDA runtime headers).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace channel::cuda {

// Whether libcublas could be loaded and has what cublas_gemm calls (looked up once).
bool cublas_available();

// y[t * ldy + r] = sum_k w[r][k] * x[t][k] for r < rows, t < n, with f32 accumulation:
// w [rows][cols] and x [n][cols] dense, both f16 (bf16: both bf16). On stream s, through this
// thread's cuBLAS handle for the current device. Throws on a cuBLAS error.
void cublas_gemm(const void* w, const void* x, bool bf16, int64_t rows, int64_t cols, int64_t n,
                 float* y, int64_t ldy, cudaStream_t s);

}  // namespace channel::cuda
