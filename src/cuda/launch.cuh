// src/cuda/launch.cuh — how every memra kernel is launched: checked, named, and (under the
// launch_overlap arm) with programmatic dependent launch, PDL (sm_90+).
//
// Why: a decode step is ~330 dependent kernels, most of them a few microseconds long. Between two
// of them the GPU drains the first grid, then dispatches the second, whose first loads then
// wait a full DRAM latency: measured on the H200 as ~30% of a 9B step's matrix time. With PDL the
// next grid's blocks are scheduled while the previous one drains; a mat-vec issues its first
// weight loads (immutable data) before it waits, so the weight stream overlaps the tail of the
// kernel before it.
//
// The contract every kernel body keeps (the failure it prevents: a read-after-write or
// write-after-read race with the previous kernel of the stream):
//   - call pdl_wait() before writing anything at all, and before reading anything the kernel
//     launched just before this one may write; before it, read weights (no kernel writes them)
//     or memory last written two or more launches earlier (a cache's recurrent state or conv
//     window, written by the same layer one token before), or use a value only as a hint that
//     never reaches a result (an L2 prefetch range);
//   - call pdl_release() only after pdl_wait(): dependents still wait in their own pdl_wait()
//     for this grid's completion and memory flush; release lets them be scheduled sooner. Why
//     the second rule makes the first safe: launch k is scheduled only once every block of k - 1
//     has released, i.e. has passed its wait, which returned only when k - 2 had completed; so
//     everything before k - 1 is complete and visible when k starts.
// Both are no-ops when the kernel was launched without the attribute (launch_overlap off) and
// on architectures before sm_90. Results never depend on the arm: the same kernels run on the
// same operands in the same order (DESIGN.md law 3); the gate LaunchOverlap.BitIdentical checks it.
//
// provides: pdl_wait, pdl_release, launch_overlap, ScopedLaunchOverlap, allow_dynamic_smem, sm_count,
//           spread_smem, launch_kernel
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "cuda/timeline.cuh"
#include "memra/cuda_check.h"

namespace memra::cuda {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#if MEMRA_TIMELINE
  const uint64_t t_ready = timeline::block_lead() ? timeline::now_ns() : 0;
#endif
  asm volatile("griddepcontrol.wait;" ::: "memory");
#if MEMRA_TIMELINE
  if (timeline::block_lead()) timeline::record(t_ready);  // timeline.h
#endif
#endif
}

__device__ __forceinline__ void pdl_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The launch policy of the calling host thread (set per forward pass by the model from its
// arms; off by default, so a kernel launched outside a model runs with plain stream order).
bool& launch_overlap();

class ScopedLaunchOverlap {
 public:
  explicit ScopedLaunchOverlap(bool on) : saved_(launch_overlap()) { launch_overlap() = on; }
  ~ScopedLaunchOverlap() { launch_overlap() = saved_; }
  ScopedLaunchOverlap(const ScopedLaunchOverlap&) = delete;
  ScopedLaunchOverlap& operator=(const ScopedLaunchOverlap&) = delete;

 private:
  bool saved_;
};

// Throws memra::Error "cuda: launch of <name> failed ..." on a launch error; in builds without
// NDEBUG also synchronises the stream when it is not being captured, so an illegal access is
// attributed to the kernel that made it.
void launch_check(cudaError_t launch_result, const char* name, cudaStream_t s);

// Lets `kernel` take `smem` bytes of dynamic shared memory on the current device: raises its
// cudaFuncAttributeMaxDynamicSharedMemorySize when its static shared memory plus `smem` passes
// the 48 KB a launch gets without the opt-in (past it the launch fails as "invalid argument":
// the one-launch decode attention did at 9B shapes, ~5 KB static + 43-48 KB of staged keys, on
// a model where nothing had raised the limit before). Remembered per (device, kernel); only
// this function sets the attribute, so the remembered limit is the kernel's.
void allow_dynamic_smem(const void* kernel, size_t smem);

// The current device's SM count (remembered per device): what a launcher sizes a grid against
// when it has no Engine at hand (the GEMM's token tile, the decode attention's splits).
int sm_count();

// The dynamic shared memory launch_kernel gives a grid of `blocks`: `smem`, raised to just over
// half an SM's shared memory where the grid has no more blocks than the device has SMs, so that no
// SM can take two of them. Why: the block scheduler packs such a grid onto few SMs where several
// fit, each pack sharing one SM while the rest of the card idles (in-graph timelines on an H100:
// a 128-block GEMM of the 32-token tile on 68 of 132 SMs and the 0.6B's flash attention on 64 in
// prefill; a 0.6B decode step's 16-block attention on 6 SMs).
size_t spread_smem(size_t smem, int64_t blocks);

// kernel<<<grid, block, smem, s>>>(args...), with the PDL attribute when launch_overlap() is on,
// and the launch checked under `name` (a bad configuration fails here, named). A grid of at most
// one block per SM runs on as many SMs (spread_smem); any dynamic shared memory is allowed first
// (allow_dynamic_smem).
template <class... Params, class... Args>
void launch_kernel(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                   Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = spread_smem(smem, static_cast<int64_t>(grid.x) * grid.y * grid.z);
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = launch_overlap() ? 1 : 0;
  if (cfg.dynamicSmemBytes > 0) allow_dynamic_smem(reinterpret_cast<const void*>(kernel), cfg.dynamicSmemBytes);
  timeline::note_launch(name);
  launch_check(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...), name, s);
}

}  // namespace memra::cuda
