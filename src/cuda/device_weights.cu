// src/cuda/device_weights.cu — weights onto the device (device_weights.h): uploads of the file's
// blocks made planar, synthetic blocks drawn on the device, byte counts, the kernels' limits.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "cuda/attention.cuh"
#include "cuda/common.cuh"
#include "cuda/device_weights.h"
#include "cuda/dsa.cuh"
#include "cuda/dsv4.cuh"
#include "cuda/gdn.cuh"
#include "cuda/launch.cuh"
#include "cuda/mla.cuh"
#include "cuda/moe.cuh"
#include "cuda/planar.cuh"
#include "memra/error.h"

namespace memra::cuda {
namespace {

cudaStream_t stream_of(const Engine& e) { return reinterpret_cast<cudaStream_t>(e.stream()); }

DevMatrix make_matrix(Engine& e, DType type, int64_t rows, int64_t cols, int64_t n_slab, const std::string& what) {
  DevMatrix d;
  if (rows == 0) return d;
  const bool is_float = type == DType::F32 || type == DType::F16 || type == DType::BF16;
  if (is_float && cols % 8 != 0)
    fail(what, ": row length ", cols, " of a ", dtype_name(type), " matrix is not a multiple of 8 (GPU mat-vec unit)");
  if (!is_float && type != DType::Q8_0 && type != DType::NVFP4)
    fail(what, ": type ", dtype_name(type), " has no GPU mat-vec");
  // planar rows (cuda/planar.cuh); +16: slack past the last row for whole-word loads
  const int64_t rb = planar_row_stride(type, cols);
  d.bytes = DeviceBuffer<uint8_t>(e, static_cast<size_t>(rb * rows + 16));
  d.scale = DeviceBuffer<float>(e, static_cast<size_t>(n_slab));
  d.n_slab = n_slab;
  d.m.type = type;
  d.m.rows = rows;
  d.m.cols = cols;
  d.m.row_bytes = rb;
  d.m.slab_rows = rows / n_slab;
  d.m.data = d.bytes.data();
  d.m.slab_scale = d.scale.data();
  return d;
}

DevMatrix upload(Engine& e, const RawMatrix& r, const std::string& what) {
  DevMatrix d = make_matrix(e, r.type, r.rows, r.cols, r.n_slab, what);
  if (r.rows == 0) return d;
  if (is_planar(r.type)) {  // GGUF blocks in, planar rows on the device
    DeviceBuffer<uint8_t> blocks(e, r.data.size());
    copy_to_device(blocks.data(), r.data.data(), r.data.size(), e.stream());
    to_planar(r.type, blocks.data(), d.bytes.data(), r.rows, r.cols, d.m.row_bytes, stream_of(e));
    e.synchronize();  // `blocks` is freed next
  } else {
    copy_to_device(d.bytes.data(), r.data.data(), r.data.size(), e.stream());
  }
  d.scale.upload(r.slab_scale);
  return d;
}

DevVec upload_vec(Engine& e, const std::vector<float>& v) {
  DevVec b(e, v.size());
  b.upload(v);
  return b;
}

// A [1, n] F32 matrix of the values v (the shared-expert gate as the mat-vec reads it).
DevMatrix upload_row(Engine& e, const std::vector<float>& v, const std::string& what) {
  RawMatrix r;
  r.type = DType::F32;
  r.rows = 1;
  r.cols = static_cast<int64_t>(v.size());
  r.slab_scale = {1.0f};
  r.data.resize(sizeof(float) * v.size());
  std::memcpy(r.data.data(), v.data(), r.data.size());
  return upload(e, r, what);
}

// --- synthetic weights (benchmarks): valid random blocks written on the device

__device__ __forceinline__ uint32_t mix32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

__global__ void synth_kernel(uint8_t* data, int64_t n_units, int type, uint64_t seed) {
  pdl_wait();
  pdl_release();
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < n_units;
       u += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint32_t h = mix32(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(u));
    if (type == static_cast<int>(DType::Q8_0)) {  // unit = block of 34 B
      uint8_t* b = data + u * 34;
      const uint16_t d = __half_as_ushort(__float2half_rn(0.0005f * static_cast<float>(1 + (h & 3))));
      b[0] = d & 0xff;
      b[1] = d >> 8;
      for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>((mix32(h + j) % 255) - 127));
    } else if (type == static_cast<int>(DType::NVFP4)) {  // unit = block of 36 B
      uint8_t* b = data + u * 36;
      for (int s = 0; s < 4; ++s) b[s] = static_cast<uint8_t>(0x18 + ((h >> (4 * s)) & 7));  // ~2^-4 scales
      for (int j = 0; j < 32; ++j) b[4 + j] = static_cast<uint8_t>(mix32(h + j));
    } else if (type == static_cast<int>(DType::BF16) || type == static_cast<int>(DType::F16)) {  // unit = 2 B
      const float v = (static_cast<float>(h % 2001) - 1000.0f) * 2e-5f;
      const uint16_t bits = type == static_cast<int>(DType::BF16) ? static_cast<uint16_t>(__float_as_uint(v) >> 16)
                                                                  : __half_as_ushort(__float2half_rn(v));
      data[2 * u] = bits & 0xff;
      data[2 * u + 1] = bits >> 8;
    } else {  // F32
      reinterpret_cast<float*>(data)[u] = (static_cast<float>(h % 2001) - 1000.0f) * 2e-5f;
    }
  }
}

DevMatrix synth_matrix(Engine& e, DType type, int64_t rows, int64_t cols, int64_t n_slab, uint64_t seed,
                       const std::string& what) {
  if (rows == 0) return DevMatrix{};
  // Row lengths a type cannot block fall back to BF16, as quantizers keep such tensors wider.
  const int64_t bs = type_traits(type).block_elems;
  if (cols % bs != 0) type = DType::BF16;
  DevMatrix d = make_matrix(e, type, rows, cols, n_slab, what);
  const int64_t units = type == DType::Q8_0 ? rows * cols / 32 : type == DType::NVFP4 ? rows * cols / 64 : rows * cols;
  if (is_planar(type)) {  // GGUF blocks written, then made planar as an upload would
    DeviceBuffer<uint8_t> blocks(e, static_cast<size_t>(row_bytes(type, cols) * rows));
    launch_kernel("synth_kernel", synth_kernel, 1024, 256, 0, stream_of(e), blocks.data(), units,
                  static_cast<int>(type), seed);
    to_planar(type, blocks.data(), d.bytes.data(), rows, cols, d.m.row_bytes, stream_of(e));
    e.synchronize();
  } else {
    launch_kernel("synth_kernel", synth_kernel, 1024, 256, 0, stream_of(e), d.bytes.data(), units,
                  static_cast<int>(type), seed);
  }
  std::vector<float> ones(static_cast<size_t>(n_slab), 1.0f);
  d.scale.upload(ones);
  return d;
}

// A tensor's shape as the synthetic model draws it.
struct MatShape {
  int64_t rows = 0, cols = 0, n_slab = 1;
  bool f32 = false;  // kept F32 whatever the model's type (router, as llama.cpp's quantizer does)
};
struct VecShape {
  int64_t n = 0;
  float value = 1.0f;
};
using LayerShape = LayerT<MatShape, VecShape, VecShape, FfnT<MatShape>>;

// Layer li's tensors and their shapes, from the config alone.
LayerShape layer_shape(const ModelConfig& c, int64_t li) {
  const int64_t D = c.n_embd, qd = c.n_head * c.head_dim, kvd = c.n_head_kv * c.head_dim;
  const int64_t cd = c.ssm_conv_dim(), vd = c.ssm_value_dim(), nv = c.ssm_n_v_heads;
  LayerShape L;
  L.attn_norm = {D};
  L.ffn_norm = {D};
  const LayerKind kind = c.layer_kind[static_cast<size_t>(li)];
  if (kind == LayerKind::Mla) {
    const int64_t qr = c.mla_q_rank, kvr = c.mla_kv_rank, H = c.n_head, ni = c.dsa_n_head, hi = c.dsa_head_dim;
    L.mla = {.wq_a = {qr, D},
             .q_a_norm = {qr},
             .wq_b = {H * c.head_dim, qr},
             .wkv_a = {kvr + c.n_rot, D},
             .kv_a_norm = {kvr},
             .wkv_b = {H * (c.mla_d_nope + c.mla_d_v), kvr},
             .wo = {D, H * c.mla_d_v}};
    const int64_t P = c.dsa_kpool;
    if (!c.dsa_shared[static_cast<size_t>(li)])
      L.dsa = {.wq_b = {ni * hi, qr},
               .wk = {hi, D},
               .k_norm = {hi},
               .k_norm_bias = {hi, 0.0f},
               .weights = {ni, D},
               .kpool_gate = {P > 0 ? hi : 0, D},
               .kpool_ape = {P * hi, 0.0f}};
  } else if (kind == LayerKind::Kda) {
    const int64_t d = c.ssm_d_v, H = c.ssm_n_v_heads;
    L.kda = {.wq = {vd, D},
             .wk = {vd, D},
             .wv = {vd, D},
             .conv = {cd * c.ssm_conv_kernel, 0.25f},
             .f_a = {d, D},
             .f_b = {vd, d},
             .dt_bias = {vd, 0.0f},
             .a_log = {H, 0.0f},
             .wb = {H, D},
             .g_a = {d, D},
             .g_b = {vd, d},
             .norm = {d},
             .wo = {D, vd}};
  } else if (kind == LayerKind::Dsv4) {
    const int64_t hd = c.head_dim, H = c.n_head, qr = c.mla_q_rank, G = c.o_groups, R = c.o_rank;
    const int64_t ihd = c.dsa_head_dim, m = c.csa_ratio;
    const Dsv4Attn form = c.dsv4_attn[static_cast<size_t>(li)];
    L.dsv4 = {.wq_a = {qr, D},
              .q_a_norm = {qr},
              .wq_b = {H * hd, qr},
              .wkv = {hd, D},
              .kv_norm = {hd},
              .wo_a = {G * R, H * hd / G, G},
              .wo_b = {D, G * R},
              .sinks = {H, 0.0f}};
    if (form != Dsv4Attn::Sliding) {
      const int64_t cw = form == Dsv4Attn::Csa ? 2 * hd : hd, ratio = form == Dsv4Attn::Csa ? m : c.hca_ratio;
      L.compressor = {.wkv = {cw, D}, .wgate = {cw, D}, .ape = {ratio * cw, 0.0f}, .norm = {hd}};
    }
    if (form == Dsv4Attn::Csa)
      L.dsv4_indexer = {
          .wq_b = {c.dsa_n_head * ihd, qr},
          .weights = {c.dsa_n_head, D},
          .comp = {.wkv = {2 * ihd, D}, .wgate = {2 * ihd, D}, .ape = {m * 2 * ihd, 0.0f}, .norm = {ihd}}};
  } else if (kind == LayerKind::Attention) {
    L.attn = {.wq = {qd, D},
              .wgate = {c.attn_gated() ? qd : 0, D},
              .wk = {kvd, D},
              .wv = {kvd, D},
              .wo = {D, qd},
              .q_norm = {c.head_dim},
              .k_norm = {c.head_dim}};
  } else {
    L.gdn = {.wqkv = {cd, D},
             .wz = {vd, D},
             .wb = {nv, D},
             .wa = {nv, D},
             .conv = {cd * c.ssm_conv_kernel, 0.25f},
             .ssm_a = {nv, -1.0f},
             .dt_bias = {nv, 0.0f},
             .norm = {c.ssm_d_v},
             .wout = {D, vd}};
  }
  if (c.is_hyper()) {
    // the mixers stay F32 (as the converters keep them): base 0, scale 1
    const int64_t N = c.hc_mult, M = (2 + N) * N;
    L.hc_attn = {.fn = {M, N * D, 1, true}, .base = {M, 0.0f}, .scale = {3}};
    L.hc_ffn = {.fn = {M, N * D, 1, true}, .base = {M, 0.0f}, .scale = {3}};
  }
  if (c.ffn_kind[static_cast<size_t>(li)] == FfnKind::Moe) {
    const int64_t E = c.n_expert, I = c.n_ff_exp, S = c.n_ff_shexp;
    const bool grouped = c.moe_gating == MoeGating::SigmoidGrouped, gated = S > 0 && c.shared_expert_gated();
    const bool sqrt_softplus = c.moe_gating == MoeGating::SqrtSoftplus;
    // DeepSeek-V4's hash layers route by the token's table, not drawn here: synthetic models route
    // every layer by score
    L.moe = {.router = {E, D, 1, true},
             .router_bias = {grouped || (sqrt_softplus && li >= c.n_hash_layers) ? E : 0, 0.0f},
             .experts = {.gate = {E * I, D, E}, .up = {E * I, D, E}, .down = {E * D, I, E}},
             .shared = {.gate = {S, D}, .up = {S, D}, .down = {S > 0 ? D : 0, S}},
             .shared_gate = {gated ? D : 0},
             .tid2eid = {0}};
  } else {
    L.ffn = {.gate = {c.n_ff, D}, .up = {c.n_ff, D}, .down = {D, c.n_ff}};
  }
  return L;
}

// DeepSeek-V4's wo_a as the mat-vec reads a grouped projection: o_groups slabs of o_rank rows,
// output vector t·G + g (slab g) reading group g of token t's attention output.
void group_slabs(Engine& e, DevMatrix& d, int64_t groups, float scale) {
  d.n_slab = groups;
  d.m.slab_rows = d.m.rows / groups;
  d.scale = DeviceBuffer<float>(e, static_cast<size_t>(groups));
  d.scale.upload(std::vector<float>(static_cast<size_t>(groups), scale));
  d.m.slab_scale = d.scale.data();
}

// A hash layer's table for synthetic weights: token t's j-th expert (7t + j) mod E (distinct, k <= E).
DevVec synthetic_tid2eid(Engine& e, const ModelConfig& c) {
  std::vector<float> t(static_cast<size_t>(c.n_vocab * c.n_expert_used));
  for (int64_t i = 0; i < c.n_vocab; ++i)
    for (int64_t j = 0; j < c.n_expert_used; ++j)
      t[static_cast<size_t>(i * c.n_expert_used + j)] = static_cast<float>((7 * i + j) % c.n_expert);
  return upload_vec(e, t);
}

}  // namespace

void check_kernel_limits(const ModelConfig& c) {
  auto need = [](bool ok, const auto&... what) {
    if (!ok) fail("GPU model: ", what...);
  };
  if (c.is_hyper())
    need(c.hc_mult >= 1 && c.hc_mult <= kHcMaxStreams, "hc_mult = ", c.hc_mult, " (the hyper-connections take 1..",
         kHcMaxStreams, " streams)");
  if (c.has_kda()) {
    need(c.ssm_conv_kernel >= 1 && c.ssm_conv_kernel <= kGdnMaxConvKernel,
         "linear_conv_kernel_dim = ", c.ssm_conv_kernel, " (the conv takes 1..", kGdnMaxConvKernel, ")");
    need(c.ssm_d_v >= 1 && c.ssm_d_v <= kGdnMaxHeadDim, "linear_head_dim = ", c.ssm_d_v, " (the KDA kernel takes 1..",
         kGdnMaxHeadDim, ")");
  }
  if (c.dsa_kpool > 0)
    need(c.dsa_topk / c.dsa_kpool >= 1 && c.dsa_sel_width() <= kSparseAttnMaxTopk, "index_topk = ", c.dsa_topk,
         ", index_kpool = ", c.dsa_kpool, " (at least one pool kept, at most ", kSparseAttnMaxTopk,
         " positions with the open tail)");
  if (c.family == Family::DeepseekV4) {
    need(c.n_rot >= 2 && c.n_rot % 2 == 0 && c.n_rot <= c.head_dim && c.n_rot <= c.dsa_head_dim, "n_rot = ", c.n_rot,
         " (an even count 2..min(head_dim ", c.head_dim, ", index_head_dim ", c.dsa_head_dim, "))");
    need(c.o_groups >= 1 && (c.n_head * c.head_dim) % c.o_groups == 0 && c.n_head % c.o_groups == 0,
         "o_groups = ", c.o_groups, " (whole heads per group of the ", c.n_head, ")");
    need(c.dsa_n_head >= 1 && c.dsa_n_head <= kDsaMaxHeads && c.dsa_n_head * c.dsa_head_dim <= kDsaMaxQFloats &&
             c.dsa_head_dim <= kDsaMaxHeadDim,
         "index_n_heads = ", c.dsa_n_head, ", index_head_dim = ", c.dsa_head_dim, " (the indexer takes 1..",
         kDsaMaxHeads, " heads of up to ", kDsaMaxHeadDim, ", at most ", kDsaMaxQFloats, " query floats)");
    need(c.n_expert >= 1 && c.n_expert <= kMoeMaxExperts && c.n_expert_used >= 1 && c.n_expert_used <= kMoeMaxUsed,
         "n_expert = ", c.n_expert, ", n_expert_used = ", c.n_expert_used, " (the router takes 1..", kMoeMaxExperts,
         " experts, 1..", kMoeMaxUsed, " per token)");
  }
  if (c.has_mla()) {
    const int64_t min_rot = c.family == Family::Glm5Next ? 0 : 2;  // GLM-5's hybrid rotates nothing
    need(c.n_rot >= min_rot && c.n_rot % 2 == 0 && c.n_rot <= kMlaMaxRot, "n_rot = ", c.n_rot,
         " (MLA's interleaved RoPE takes an even count ", min_rot, "..", kMlaMaxRot, ")");
    need(c.head_dim <= kSparseAttnMaxDim && c.mla_d_v >= 1 && c.mla_d_v <= kSparseAttnMaxDim, "head_dim = ", c.head_dim,
         ", mla_d_v = ", c.mla_d_v, " (the sparse attention takes 1..", kSparseAttnMaxDim, ")");
    need(c.dsa_topk >= 1 && c.dsa_topk <= kSparseAttnMaxTopk, "dsa_topk = ", c.dsa_topk,
         " (the sparse attention takes 1..", kSparseAttnMaxTopk, ")");
    need(c.dsa_n_head >= 1 && c.dsa_n_head <= kDsaMaxHeads && c.dsa_n_head * c.dsa_head_dim <= kDsaMaxQFloats,
         "dsa_n_head = ", c.dsa_n_head, " (the indexer takes 1..", kDsaMaxHeads, " heads, at most ", kDsaMaxQFloats,
         " query floats)");
    need(c.dsa_head_dim >= c.n_rot && c.dsa_head_dim <= std::min(kDsaMaxHeadDim, kMlaMaxIndexDim),
         "dsa_head_dim = ", c.dsa_head_dim, " (the indexer takes n_rot..", std::min(kDsaMaxHeadDim, kMlaMaxIndexDim),
         ")");
  }
  if (c.moe_gating == MoeGating::SigmoidGrouped) {
    const int64_t g = c.n_expert_group;
    need(g >= 1 && g <= kMoeMaxGroups && c.n_expert % g == 0 && c.n_expert / g >= 2, "n_expert_group = ", g,
         " (sigmoid-grouped routing takes 1..", kMoeMaxGroups, " equal groups of >= 2 of the ", c.n_expert,
         " experts)");
    need(c.n_expert_group_used >= 1 && c.n_expert_group_used <= g &&
             c.n_expert_used <= c.n_expert_group_used * (c.n_expert / std::max<int64_t>(g, 1)),
         "n_expert_group_used = ", c.n_expert_group_used, " (1..n_expert_group ", g, ", its groups holding the ",
         c.n_expert_used, " experts used)");
  }
  const bool has_attn = std::count(c.layer_kind.begin(), c.layer_kind.end(), LayerKind::Attention) > 0;
  const bool has_gdn = std::count(c.layer_kind.begin(), c.layer_kind.end(), LayerKind::Linear) > 0;
  const bool has_moe = std::count(c.ffn_kind.begin(), c.ffn_kind.end(), FfnKind::Moe) > 0;
  if (has_attn) {
    need(c.head_dim >= 1 && c.head_dim <= kAttnMaxHeadDim, "head_dim = ", c.head_dim,
         " (the attention kernels take 1..", kAttnMaxHeadDim, ")");
    need(c.n_head_kv >= 1 && c.n_head % c.n_head_kv == 0, "n_head = ", c.n_head,
         " is not a multiple of n_head_kv = ", c.n_head_kv, " (grouped-query attention)");
    need(c.n_rot % 2 == 0 && c.n_rot <= c.head_dim, "n_rot = ", c.n_rot, " (RoPE needs an even count <= head_dim ",
         c.head_dim, ")");
  }
  if (has_gdn) {
    need(c.ssm_conv_kernel >= 1 && c.ssm_conv_kernel <= kGdnMaxConvKernel, "ssm_conv_kernel = ", c.ssm_conv_kernel,
         " (the GDN conv takes 1..", kGdnMaxConvKernel, ")");
    need(c.ssm_d_k >= 1 && c.ssm_d_k <= kGdnMaxHeadDim, "ssm_d_k = ", c.ssm_d_k, " (the GDN kernels take 1..",
         kGdnMaxHeadDim, ")");
    need(c.ssm_d_v >= 1 && c.ssm_d_v <= kGdnMaxHeadDim, "ssm_d_v = ", c.ssm_d_v, " (the GDN kernels take 1..",
         kGdnMaxHeadDim, ")");
  }
  if (has_moe) {
    need(c.n_expert >= 1 && c.n_expert <= kMoeMaxExperts, "n_expert = ", c.n_expert, " (the router takes 1..",
         kMoeMaxExperts, ")");
    need(c.n_expert_used >= 1 && c.n_expert_used <= kMoeMaxUsed && c.n_expert_used <= c.n_expert,
         "n_expert_used = ", c.n_expert_used, " (the router takes 1..", kMoeMaxUsed, ", at most n_expert)");
  }
}

int64_t DeviceWeights::weight_bytes() const {
  int64_t n = embed.total_bytes() + output.total_bytes();
  for (const DevLayer& L : layers) {
    for_each_tensor(
        [&](std::string_view, const auto& t) {
          if constexpr (std::is_same_v<std::remove_cvref_t<decltype(t)>, DevMatrix>) n += t.total_bytes();
        },
        L);
    n += L.shared_gate_row.total_bytes();
  }
  return n + (hc_head ? hc_head->fn.total_bytes() : 0);
}

int64_t DeviceWeights::decode_bytes_per_token(int64_t n_expert_used, bool embeds, bool heads) const {
  int64_t n =
      (embeds ? embed.m.row_bytes : 0) + (heads ? (output.empty() ? embed.total_bytes() : output.total_bytes()) : 0);
  for (const DevLayer& L : layers) {
    for_each_tensor(
        [&](std::string_view name, const auto& t) {
          if constexpr (std::is_same_v<std::remove_cvref_t<decltype(t)>, DevMatrix>) {
            // a step reads k of the E expert slabs
            if (name.starts_with("moe.experts."))
              n += t.empty() ? 0 : t.total_bytes() / t.n_slab * n_expert_used;
            else
              n += t.total_bytes();
          }
        },
        L);
    n += L.shared_gate_row.total_bytes();
  }
  return n + (hc_head ? hc_head->fn.total_bytes() : 0);
}

namespace {

int64_t range_end(const ModelConfig& c, LayerRange r) { return r.l1 < 0 ? c.n_layer : r.l1; }

}  // namespace

DeviceWeights upload_weights(Engine& e, const ModelConfig& c, const RawWeights& w, LayerRange r) {
  const int64_t l1 = range_end(c, r);
  const bool first = r.l0 == 0, last = l1 == c.n_layer;
  DeviceWeights d;
  d.tiled = w.gdn_tiled_v_heads;
  if (first || (last && w.output.empty())) d.embed = upload(e, w.embed, "token_embd");  // tied: the lm_head
  if (last) {
    d.output = upload(e, w.output, "output");
    d.output_norm = upload_vec(e, w.output_norm);
  }
  d.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t i = r.l0; i < l1; ++i) {
    const RawLayer& R = w.layers[static_cast<size_t>(i)];
    DevLayer& L = d.layers[static_cast<size_t>(i)];
    L.kind = c.layer_kind[static_cast<size_t>(i)];
    const std::string P = "layer " + std::to_string(i) + " ";
    for_each_tensor(
        [&](std::string_view name, const auto& raw, auto& dev) {
          if constexpr (std::is_same_v<std::remove_cvref_t<decltype(raw)>, RawMatrix>)
            dev = upload(e, raw, P + std::string(name));
          else
            dev = upload_vec(e, raw);
        },
        R, L);
    if (L.moe && !L.moe->shared.empty() && !R.moe->shared_gate.empty())
      L.shared_gate_row = upload_row(e, R.moe->shared_gate, P + "moe.shared_gate");
    if (L.dsv4) group_slabs(e, L.dsv4->wo_a, c.o_groups, R.dsv4->wo_a.slab_scale.at(0));
  }
  if (w.hc_head && last) {
    d.hc_head.emplace();
    d.hc_head->fn = upload(e, w.hc_head->fn, "hc_head.fn");
    d.hc_head->base = upload_vec(e, w.hc_head->base);
    d.hc_head->scale = upload_vec(e, w.hc_head->scale);
  }
  e.synchronize();  // the uploads read host memory owned by `w`
  return d;
}

DeviceWeights synthetic_weights(Engine& e, const ModelConfig& c, DType t, uint64_t seed, LayerRange r) {
  const int64_t l1 = range_end(c, r);
  const bool first = r.l0 == 0, last = l1 == c.n_layer;
  DeviceWeights d;
  uint64_t sd = seed;
  auto M = [&](const MatShape& s, const std::string& what) {
    return synth_matrix(e, s.f32 ? DType::F32 : t, s.rows, s.cols, s.n_slab, ++sd, what);
  };
  // every matrix draws from its own seed, counted over the whole model: a stage's matrices hold
  // the values the unsplit model's do
  if (first || (last && c.tied_embeddings))
    d.embed = M({c.n_vocab, c.n_embd}, "token_embd");
  else
    ++sd;
  if (!c.tied_embeddings) {
    if (last)
      d.output = M({c.n_vocab, c.n_embd}, "output");
    else
      ++sd;
  }
  if (last) d.output_norm = upload_vec(e, std::vector<float>(static_cast<size_t>(c.n_embd), 1.0f));
  d.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const bool here = i >= r.l0 && i < l1;
    DevLayer& L = d.layers[static_cast<size_t>(i)];
    L.kind = c.layer_kind[static_cast<size_t>(i)];
    const LayerShape S = layer_shape(c, i);
    const bool gated_shared = S.moe && c.n_ff_shexp > 0 && c.shared_expert_gated();
    if (!here) {  // the seeds its matrices would have drawn
      for_each_tensor(
          [&](std::string_view, const auto& shape) {
            if constexpr (std::is_same_v<std::remove_cvref_t<decltype(shape)>, MatShape>) ++sd;
          },
          S);
      if (gated_shared) ++sd;
      continue;
    }
    for_each_tensor(
        [&](std::string_view name, const auto& shape, auto& dev) {
          if constexpr (std::is_same_v<std::remove_cvref_t<decltype(shape)>, MatShape>)
            dev = M(shape, std::string(name));
          else
            dev = upload_vec(e, std::vector<float>(static_cast<size_t>(shape.n), shape.value));
        },
        S, L);
    if (gated_shared) L.shared_gate_row = synth_matrix(e, DType::F32, 1, c.n_embd, 1, ++sd, "shared_gate");
    if (L.moe && c.moe_gating == MoeGating::SqrtSoftplus && i < c.n_hash_layers)
      L.moe->tid2eid = synthetic_tid2eid(e, c);
  }
  if (c.family == Family::DeepseekV4 && last) {
    const int64_t N = c.hc_mult;
    d.hc_head.emplace();
    d.hc_head->fn = synth_matrix(e, DType::F32, N, N * c.n_embd, 1, ++sd, "hc_head.fn");
    d.hc_head->base = upload_vec(e, std::vector<float>(static_cast<size_t>(N), 0.0f));
    d.hc_head->scale = upload_vec(e, std::vector<float>(1, 1.0f));
  }
  e.synchronize();
  return d;
}

namespace {

int64_t device_bytes(DType t, int64_t rows, int64_t cols) { return rows == 0 ? 0 : planar_row_stride(t, cols) * rows; }

}  // namespace

ModelBytes model_bytes(const ModelConfig& c, const RawWeights& w) {
  ModelBytes b;
  b.embed = device_bytes(w.embed.type, w.embed.rows, w.embed.cols);
  b.head = w.output.empty() ? b.embed : device_bytes(w.output.type, w.output.rows, w.output.cols);
  if (w.hc_head) b.head += device_bytes(w.hc_head->fn.type, w.hc_head->fn.rows, w.hc_head->fn.cols);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    int64_t n = 0;
    for_each_tensor(
        [&](std::string_view, const auto& raw) {
          if constexpr (std::is_same_v<std::remove_cvref_t<decltype(raw)>, RawMatrix>)
            n += device_bytes(raw.type, raw.rows, raw.cols);
        },
        w.layers[static_cast<size_t>(i)]);
    b.layers.push_back(n);
  }
  return b;
}

ModelBytes model_bytes(const ModelConfig& c, DType t) {
  ModelBytes b;
  b.embed = b.head = device_bytes(t, c.n_vocab, c.n_embd);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    int64_t n = 0;
    const LayerShape S = layer_shape(c, i);
    for_each_tensor(
        [&](std::string_view, const auto& shape) {
          if constexpr (std::is_same_v<std::remove_cvref_t<decltype(shape)>, MatShape>)
            n += device_bytes(shape.f32 ? DType::F32 : t, shape.rows, shape.cols);
        },
        S);
    b.layers.push_back(n);
  }
  return b;
}

}  // namespace memra::cuda
