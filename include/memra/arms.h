// memra/arms.h — Arms: the engine's numeric configuration, one typed field per choice.
//
// Every place where the engine can compute the same math two ways is an arm (DESIGN.md
// "Arms"). Arms are plain values: a test switches them on a model with ScopedArms
// (memra/testing/gate.h) between passes of one process, so the only difference between two
// passes is the arm.
//
// The arms are ONE table, MEMRA_ARMS below: field, type, default, value under the equalised
// composition, one-line doc. The struct's defaults, `equalised()`, `set()`, `fields()`,
// `from_env()` (MEMRA_<FIELD> variables), reports (testing/report.h) and the docs table
// (docs/gpu.md, checked by unit_arms) are all generated from it, so an arm is added in one
// place. Every consumer that has the choice — the GPU Model, the CPU oracle, BackendOptions and
// the tools — starts from `Arms{}`: one default per arm. The defaults are the forms that are
// bit-identical to decode (DESIGN.md law 3); faster forms are opt-in arms.
//
// provides: Arms, ArmSpec, arm_specs, arms_markdown_table, PrefillAct, DecodeMatvec,
//           GdnPrefill, PrefillMatmul, MlaDecode, PrefillAttn, Nvfp4Dot, to_string
#pragma once

#include <functional>
#include <span>
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
// Gated-DeltaNet prefill form: token-by-token recurrence (decode's own order) or the WY form
// per 64-token chunk.
enum class GdnPrefill { recurrent, chunked };
// Prefill matrix products (calls of >= 32 tokens) of Q8_0 / NVFP4 / BF16 matrices: the
// token-tiled mat-vec (the dot contract's warp32 order, bit-identical to decode) or the
// tensor-core GEMM (mma.sync, DotOrder::sequential).
enum class PrefillMatmul { mmvq, mma };
// Multi-head latent attention (GLM-5) in calls of one token per sequence: over the cache's
// expanded per-head keys and values, or in the absorbed latent form (each head's query taken
// into the kv latent through W_UK, scores and weighted sum over the [latent | rope key] rows,
// the result out through W_UV).
enum class MlaDecode { expanded, latent };
// Causal attention of calls of more than one token (Qwen attention layers): the split-KV kernel
// whose per-key chains are decode's (split: prefill bit-identical to decode), or key tiles of 32
// staged once for a block of 64 queries with an online softmax (flash: another reduction order;
// cuda/attention.cuh).
enum class PrefillAttn { split, flash };
// NVFP4 x q8_1 dots of the mat-vec family (decode, batched decode, the mmvq prefill, MoE experts):
// W4A8's unit of one 16-value sub-block (sub16: quant.h dot_nvfp4_q8_1), or a q8_1 block's two
// sub-blocks combined with one fma before one multiply by the activation scale (pair32:
// dot_nvfp4_q8_1_pair32; one f32 epilogue per 32 values: faster batched tiles, not a faster m = 1
// stream, docs/PERF.md). The tensor-core GEMM (prefill_matmul = mma) and W4A4 keep their own
// contracts.
enum class Nvfp4Dot { sub16, pair32 };

// X(field, type, default, equalised value, doc). Enum values are spelled as their enumerator
// names (the spelling tables in src/core/arms.cpp list them); bools as on/off.
#define MEMRA_ARMS(X)                                                                                                  \
  X(prefill_act, PrefillAct, PrefillAct::w4a8, PrefillAct::w4a8,                                                       \
    "NVFP4 mat-muls of calls of more than one token: q8_1 activations (w4a8) or e2m1 + E4M3 per-16 (w4a4)")            \
  X(decode_matvec, DecodeMatvec, DecodeMatvec::mmvq, DecodeMatvec::dp4a,                                               \
    "quantised mat-vec reduction: warp per row (mmvq) or block of 128 per row (dp4a)")                                 \
  X(fuse_norm_quant, bool, true, false, "RMSNorm and the q8_1 quantisation of its output in one kernel")               \
  X(b1_fast, bool, true, true, "decode_step_batch at B=1 routes to the single-sequence trunk")                         \
  X(decode_graph, bool, false, false,                                                                                  \
    "decode steps replay a CUDA graph captured per cache (batched steps of B >= 2: one per batch size)")               \
  X(graph_recapture, bool, true, true, "a stale decode graph is re-captured (on) or the cache latches to eager")       \
  X(launch_overlap, bool, true, true, "programmatic dependent launch: a kernel starts while the previous drains")      \
  X(gdn_prefill, GdnPrefill, GdnPrefill::recurrent, GdnPrefill::recurrent,                                             \
    "delta-rule prefill (GDN, KDA): recurrent (bit-identical to decode) or chunked (WY form, 64-token chunks)")        \
  X(prefill_matmul, PrefillMatmul, PrefillMatmul::mmvq, PrefillMatmul::mmvq,                                           \
    "prefill mat-muls of >= 32 tokens: token-tiled mat-vec (mmvq, bit-identical to decode) or tensor-core GEMM (mma)") \
  X(mla_decode, MlaDecode, MlaDecode::expanded, MlaDecode::expanded,                                                   \
    "MLA attention of one-token calls: expanded per-head keys/values (bit-identical to prefill) or absorbed latent")   \
  X(prefill_attn, PrefillAttn, PrefillAttn::split, PrefillAttn::split,                                                 \
    "attention of calls of > 1 token: split-KV + combine (split, bit-identical to decode) or key-tiled online "        \
    "softmax (flash)")                                                                                                 \
  X(nvfp4_dot, Nvfp4Dot, Nvfp4Dot::sub16, Nvfp4Dot::sub16,                                                             \
    "NVFP4 x q8_1 mat-vec dots: per 16-value sub-block (sub16) or a q8_1 block's two sub-blocks combined by one fma "  \
    "before the activation scale (pair32)")

struct Arms {
#define MEMRA_ARM_FIELD(field, type, def, eq, doc) type field = def;
  MEMRA_ARMS(MEMRA_ARM_FIELD)
#undef MEMRA_ARM_FIELD

  // The equalised composition (DESIGN.md law 4): dp4a mat-vec and unfused norms, under which
  // decode_step and decode_step_batch at B=1 must be bit-identical (the table's fourth column).
  static Arms equalised();

  // Reads MEMRA_<FIELD> for every field of the table over the defaults. Unset or empty leaves
  // the default. Throws memra::Error naming the variable on a value that is not accepted.
  static Arms from_env();
  // The same with the variables looked up through `getenv` (tests pass a map).
  static Arms from_env(const std::function<const char*(const char*)>& getenv);

  // Sets one field by name ("prefill_act", "w4a4"); bools take on/off, 1/0, true/false.
  // Throws memra::Error naming the field, the value and the accepted values.
  void set(std::string_view field, std::string_view value);

  // (field, value) pairs in table order, values as set() accepts them. Reports and JSON are
  // built from this.
  std::vector<std::pair<std::string_view, std::string_view>> fields() const;

  // The environment variable for a field name: "prefill_act" -> "MEMRA_PREFILL_ACT".
  static std::string env_name(std::string_view field);

  bool operator==(const Arms&) const = default;
};

// One row of the table as data, for docs, tools and tests.
struct ArmSpec {
  std::string_view field;
  std::string env;                       // MEMRA_<FIELD>
  std::vector<std::string_view> values;  // accepted spellings (bools: on, off)
  std::string_view default_value;
  std::string_view equalised_value;
  std::string_view doc;
};
std::span<const ArmSpec> arm_specs();

// The docs table (docs/gpu.md "Arms"): | arm | variable | values | default | equalised | what |.
std::string arms_markdown_table();

// "prefill_act=w4a8 decode_matvec=mmvq fuse_norm_quant=on ..." (every field, in order).
std::string to_string(const Arms& a);
std::string_view to_string(PrefillAct v);
std::string_view to_string(DecodeMatvec v);
std::string_view to_string(GdnPrefill v);
std::string_view to_string(PrefillMatmul v);
std::string_view to_string(MlaDecode v);
std::string_view to_string(PrefillAttn v);
std::string_view to_string(Nvfp4Dot v);

}  // namespace memra
