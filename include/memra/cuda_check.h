// memra/cuda_check.h — every CUDA runtime call and every launch, checked and named.
//
//   MEMRA_CUDA_CHECK(cudaMemcpyAsync(...));   // throws memra::Error:
//     "cuda: cudaMemcpyAsync(...) failed at src/cuda/x.cu:42 on device 0: cudaErrorInvalidValue
//      (invalid argument)"
// Kernel launches go through src/cuda/launch.cuh's launch_kernel(), which checks each launch
// under the kernel's name (a bad configuration fails there, not at the next unrelated sync) and,
// in builds without NDEBUG, synchronises so an illegal access is attributed to its kernel.
//
// provides: MEMRA_CUDA_CHECK, cuda_fail
#pragma once

#include <cuda_runtime_api.h>

namespace memra {

[[noreturn]] void cuda_fail(cudaError_t e, const char* what, const char* file, int line);

inline void cuda_check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess) cuda_fail(e, what, file, line);
}

}  // namespace memra

#define MEMRA_CUDA_CHECK(stmt) ::memra::cuda_check((stmt), #stmt, __FILE__, __LINE__)
