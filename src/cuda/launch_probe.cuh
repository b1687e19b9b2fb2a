// src/cuda/launch_probe.cuh — where a small grid's blocks land after a busy grid: the check behind
// launch_kernel's spread_smem (launch.cuh).
//
// Under programmatic dependent launch a grid is dispatched while the grid before it drains, and
// the block scheduler puts its pending blocks on the first SM that frees, as many as fit there:
// a grid of fewer blocks than SMs then runs packed on a few SMs while the rest of the card idles
// (the 0.6B's 128-block GEMMs ran on 68 of 132 SMs). On an idle card the same grid spreads, so a
// test that launches it alone cannot see the packing. The probe builds the draining grid on
// purpose: a hold grid of one block per SM that fills each SM's shared memory and leaves SM by
// SM, then the probe grid, released early under PDL, each of its blocks recording its SM and
// staying until the whole grid is resident (so an SM reused after a block leaves is not counted
// as two at once).
//
// provides: Placement, placement_probe
#pragma once

#include <cuda_runtime.h>

#include <vector>

namespace memra::cuda {

struct Placement {
  std::vector<int> sm;        // the SM of each probe block
  int sms_used = 0;           // distinct SMs among them
  int max_per_sm = 0;         // most probe blocks on one SM
  bool all_resident = false;  // every probe block saw the whole grid resident before it left
};

// Runs the hold grid, then `blocks` probe blocks of 128 threads: through launch_kernel
// (`spread`: spread_smem applies) or the same PDL launch without dynamic shared memory (what
// launch_kernel did before spread_smem). Synchronises `s`. Throws on blocks outside
// 1..sm_count().
Placement placement_probe(int blocks, bool spread, cudaStream_t s);

}  // namespace memra::cuda
