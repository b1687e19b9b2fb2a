// src/cuda/timeline.cuh — the device side of timeline.h: each kernel translation unit's pointer
// to the mark buffer, and the record pdl_wait() makes when built with MEMRA_TIMELINE.
//
// A __device__ variable belongs to its translation unit (this project builds without relocatable
// device code), so each unit that includes this header holds its own copy of the sink, and
// registers a setter that timeline::start() calls for every unit.
//
// provides: timeline::Sink, timeline::add_setter, timeline::record
#pragma once

#include <cuda_runtime.h>

#include "cuda/timeline.h"

namespace memra::cuda::timeline {

struct Sink {
  Mark* marks = nullptr;
  uint32_t* count = nullptr;
  uint32_t capacity = 0;
};

void add_setter(void (*set)(const Sink&));

#if MEMRA_TIMELINE
namespace {
__device__ Sink d_sink;
void set_sink_of_this_unit(const Sink& s) { cudaMemcpyToSymbol(d_sink, &s, sizeof s); }
[[maybe_unused]] const bool registered = (add_setter(&set_sink_of_this_unit), true);
}  // namespace

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ bool block_lead() { return threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0; }

__device__ __forceinline__ void record(uint64_t t_ready) {
  const Sink s = d_sink;
  if (s.marks == nullptr) return;
  const uint64_t t_go = now_ns();
  uint64_t grid;
  uint32_t sm;
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(grid));
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  const uint32_t i = atomicAdd(s.count, 1u);
  if (i < s.capacity) s.marks[i] = Mark{grid, t_ready, t_go, sm, blockIdx.x + gridDim.x * blockIdx.y};
}
#endif

}  // namespace memra::cuda::timeline
