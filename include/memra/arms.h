// memra/arms.h — Arms: the engine's numeric configuration, one typed field per choice.
//
// Every place where the engine can compute the same math two ways is an arm (DESIGN.md
// "Arms"). Arms are plain values: a test switches them on a model with ScopedArms
// (memra/testing/gate.h) between passes of one process, so the only difference between two
// passes is the arm. Arms::from_env() is the one place that reads MEMRA_* arm variables (for
// users and scripts); a bad value there is an error naming the variable and the accepted
// values, never a silent default.
//
// provides: Arms, PrefillAct, DecodeMatvec, GdnPrefill, PrefillMatmul, Arms::from_env, to_string
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memra {

// NVFP4 prefill GEMM activation contract: int8 q8_1 activations (the reference), or e2m1 FP4
// activations with per-16 E4M3 scales.
enum class PrefillAct { w4a8, w4a4 };
// m=1 quantised mat-vec family: warp-reduce (mmvq) or two-level block reduce (dp4a).
enum class DecodeMatvec { mmvq, dp4a };
// Gated-DeltaNet prefill form.
enum class GdnPrefill { chunked, recurrent };
// Prefill matrix products (calls of >= 32 tokens) of Q8_0 / NVFP4 matrices: the token-tiled
// mat-vec (the dot contract's warp32 order, bit-identical to decode) or the int8 tensor-core
// GEMM (mma.sync, DotOrder::sequential).
enum class PrefillMatmul { mmvq, mma };

struct Arms {
  PrefillAct prefill_act = PrefillAct::w4a8;
  DecodeMatvec decode_matvec = DecodeMatvec::mmvq;
  bool fuse_norm_quant = true;   // RMSNorm fused with activation quantisation
  bool b1_fast = true;           // decode_step_batch at B=1 routes to the m=1 fused trunk
  bool decode_graph = false;     // replay the decode step as captured CUDA graphs
  bool graph_recapture = true;   // on invalidation: re-capture (true) or latch to eager (false)
  bool launch_overlap = true;    // programmatic dependent launch: a kernel's blocks start while the previous drains
  GdnPrefill gdn_prefill = GdnPrefill::chunked;
  PrefillMatmul prefill_matmul = PrefillMatmul::mmvq;

  // The equalised composition (DESIGN.md law 4): dp4a mat-vec and unfused norms, under which
  // decode_step and decode_step_batch at B=1 must be bit-identical.
  static Arms equalised();

  // Reads MEMRA_PREFILL_ACT, MEMRA_DECODE_MATVEC, MEMRA_FUSE_NORM_QUANT, MEMRA_B1_FAST,
  // MEMRA_DECODE_GRAPH, MEMRA_GRAPH_RECAPTURE, MEMRA_LAUNCH_OVERLAP, MEMRA_GDN_PREFILL, MEMRA_PREFILL_MATMUL over the defaults. Unset or
  // empty leaves the default. Throws memra::Error on a value that is not accepted.
  static Arms from_env();
  // The same with the variables looked up through `getenv` (tests pass a map).
  static Arms from_env(const std::function<const char*(const char*)>& getenv);

  // Sets one field by name ("prefill_act", "w4a4"); bools take on/off, 1/0, true/false.
  // Throws memra::Error naming the field, the value and the accepted values.
  void set(std::string_view field, std::string_view value);

  // (field, value) pairs in declaration order, values as set() accepts them. Reports and JSON
  // are built from this, so a new field shows up everywhere once it is listed here.
  std::vector<std::pair<std::string_view, std::string_view>> fields() const;

  // The environment variable for a field name: "prefill_act" -> "MEMRA_PREFILL_ACT".
  static std::string env_name(std::string_view field);

  bool operator==(const Arms&) const = default;
};

// "prefill_act=w4a8 decode_matvec=mmvq fuse_norm_quant=on ..." (every field, in order).
std::string to_string(const Arms& a);
std::string_view to_string(PrefillAct v);
std::string_view to_string(DecodeMatvec v);
std::string_view to_string(GdnPrefill v);
std::string_view to_string(PrefillMatmul v);

}  // namespace memra
