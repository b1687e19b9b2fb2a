// memra/cuda_check.h — every CUDA runtime call and every launch, checked and named.
//
//   MEMRA_CUDA_CHECK(cudaMemcpyAsync(...));   // throws memra::Error:
//     "cuda: cudaMemcpyAsync(...) failed at src/cuda/x.cu:42 on device 0: cudaErrorInvalidValue
//      (invalid argument)"
//   kernel<<<g, b, 0, s>>>(p);
//   MEMRA_CUDA_CHECK_LAUNCH("dequantize_q8_0");  // a bad launch configuration fails here, named,
//                                                 // not at the next unrelated sync
// In builds without NDEBUG the launch check also synchronises the stream, so an illegal access
// is attributed to the kernel that made it.
//
// provides: MEMRA_CUDA_CHECK, MEMRA_CUDA_CHECK_LAUNCH, cuda_fail
#pragma once

#include <cuda_runtime_api.h>

namespace memra {

[[noreturn]] void cuda_fail(cudaError_t e, const char* what, const char* file, int line);

inline void cuda_check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess) cuda_fail(e, what, file, line);
}

}  // namespace memra

#define MEMRA_CUDA_CHECK(stmt) ::memra::cuda_check((stmt), #stmt, __FILE__, __LINE__)

#ifdef NDEBUG
#define MEMRA_CUDA_CHECK_LAUNCH(name) \
  ::memra::cuda_check(cudaGetLastError(), "launch of " name, __FILE__, __LINE__)
#else
#define MEMRA_CUDA_CHECK_LAUNCH(name)                                                    \
  do {                                                                                   \
    ::memra::cuda_check(cudaGetLastError(), "launch of " name, __FILE__, __LINE__);      \
    ::memra::cuda_check(cudaDeviceSynchronize(), "run of " name, __FILE__, __LINE__);    \
  } while (0)
#endif
