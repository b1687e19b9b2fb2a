# Builds tiny randomly initialised HF models of the four families (all norms, A_log, dt_bias
# randomised), saves them with save_pretrained, and records transformers' fp32 logits of a fixed
# 70-token prompt at every position. Output: one tar with <family>/{config.json,model.safetensors,logits.bin,tokens.json}.
import json, math, os, sys, tarfile
import torch
import transformers
from transformers import (Qwen3Config, Qwen3ForCausalLM, Qwen3NextConfig, Qwen3NextForCausalLM,
                          Qwen3_5TextConfig, Qwen3_5ForCausalLM, Qwen3_5MoeTextConfig, Qwen3_5MoeForCausalLM)
print("transformers", transformers.__version__, "torch", torch.__version__)
torch.manual_seed(0)
out = sys.argv[1]
common = dict(vocab_size=128, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
              intermediate_size=96, num_hidden_layers=4, linear_conv_kernel_dim=4, linear_key_head_dim=8,
              linear_value_head_dim=12, linear_num_key_heads=2, linear_num_value_heads=4, tie_word_embeddings=False,
              attn_implementation="eager")
moe = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48)
q3 = {k: v for k, v in common.items() if not k.startswith("linear")}
q3["num_hidden_layers"] = 2
models = {
  "qwen3": Qwen3ForCausalLM(Qwen3Config(**q3)),
  "qwen3next": Qwen3NextForCausalLM(Qwen3NextConfig(**common, **moe, mlp_only_layers=[2])),
  "qwen35": Qwen3_5ForCausalLM(Qwen3_5TextConfig(**common)),
  "qwen35moe": Qwen3_5MoeForCausalLM(Qwen3_5MoeTextConfig(**{k: v for k, v in common.items() if k != "intermediate_size"}, **moe)),
}
tokens = [(i * 37 + 11) % 128 for i in range(70)]
g = torch.Generator().manual_seed(1)
def U(shape, lo, hi): return torch.rand(shape, generator=g) * (hi - lo) + lo
with tarfile.open(os.path.join(out, "hf_ref.tar"), "w") as tar:
  for fam, m in models.items():
    m = m.float().eval()
    zc = fam != "qwen3"
    with torch.no_grad():
      for name, p in m.named_parameters():
        if name.endswith("A_log"): p.copy_(torch.log(U(p.shape, 1.0, 8.0)))
        elif name.endswith("dt_bias"): p.copy_(U(p.shape, 0.5, 1.5))
        elif "norm" in name and p.dim() == 1:
          plain = (not zc) or "linear_attn.norm" in name
          p.copy_(U(p.shape, 0.75, 1.25) if plain else U(p.shape, -0.25, 0.25))
        elif "embed_tokens" in name: p.copy_(U(p.shape, -1, 1))
        elif name.endswith("mlp.gate.weight"): p.copy_(U(p.shape, -1, 1))
        else:
          s = 1 / math.sqrt(p.shape[-1]) if "conv1d" not in name else 0.5
          p.copy_(U(p.shape, -s, s))
      logits = m(torch.tensor([tokens])).logits[0].float().contiguous()
    d = os.path.join(out, fam)
    m.save_pretrained(d, safe_serialization=True)
    logits.numpy().tofile(os.path.join(d, "logits.bin"))
    json.dump(tokens, open(os.path.join(d, "tokens.json"), "w"))
    print(fam, "logits", tuple(logits.shape), "absmax", float(logits.abs().max()), "files", sorted(os.listdir(d)))
    for f in sorted(os.listdir(d)): tar.add(os.path.join(d, f), arcname=f"{fam}/{f}")
