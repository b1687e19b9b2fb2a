// src/cuda/timeline.h — where a graph's kernels spend their time, measured inside the graph.
//
// Why: ncu times kernels one at a time, and leaving launches out of a step (docs/PERF.md, Method)
// shows that a launch's saving is not its own duration: what costs is the chain of
// dependencies between ~330 kernels and what each overlaps with. In a build with
// -DMEMRA_TIMELINE=ON every kernel's pdl_wait() (launch.cuh: every kernel calls it once per
// block) records, for the first thread of each block, the %globaltimer before and after the
// wait, the grid id and the SM. Per launch k, min(t_go) is when k's dependencies resolved — with
// programmatic dependent launch that is when launch k - 1 completed — and min(t_ready) is when
// k's first block was resident (the window in which it could prefetch weights). So
// go(k + 1) - go(k) is launch k's share of the critical path.
//
// Diagnostic only: off by default (then every function here is a no-op and available() is
// false), never in a timed arm; the atomics it adds perturb what they measure by a little.
//
// provides: timeline::Mark, timeline::available, timeline::start, timeline::stop,
//           timeline::launch_names, timeline::launch_host_ns, timeline::note_launch
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace memra::cuda::timeline {

struct Mark {
  uint64_t grid;     // %gridid: one value per launch, increasing in launch order
  uint64_t t_ready;  // ns, block's first thread before griddepcontrol.wait
  uint64_t t_go;     // ns, after it
  uint32_t sm;
  uint32_t block;    // blockIdx.x + gridDim.x * blockIdx.y
};

bool available();  // built with MEMRA_TIMELINE

// Points every kernel translation unit at a device buffer of `capacity` marks (allocated here)
// and zeroes its count; stop() copies the marks out and detaches the buffer, and fails, naming
// both counts, where more marks were recorded than the buffer held (the rest were dropped). Both
// synchronise the device.
void start(uint32_t capacity);
std::vector<Mark> stop();

// Names of the launches made while recording (launch_kernel notes each), in launch order:
// clear it, capture a graph, and its nodes' names are here in the order their grids run.
std::vector<std::string>& launch_names();
bool& note_launches();
// Host time (steady_clock ns) at which each noted launch was about to be enqueued, beside its
// name: a launch whose host time trails its predecessor's completion is one the host was late with.
std::vector<uint64_t>& launch_host_ns();
inline void note_launch(const char* name) {
  if (!note_launches()) return;
  launch_names().emplace_back(name);
  launch_host_ns().push_back(static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
}

}  // namespace memra::cuda::timeline
