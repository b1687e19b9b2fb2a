// Writes the seed corpus for gguf_fuzz: small valid GGUF files covering every kv type,
// string arrays, a custom alignment and several tensor types.
#include <cstdio>
#include <string>
#include <vector>

#include "memra/error.h"
#include "memra/gguf.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gguf_fuzz_seeds DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  try {
    {
      memra::GgufWriter w;
      w.set_u32("a", 7);
      w.add_tensor("w", memra::DType::F32, {2}, std::vector<std::byte>(8));
      w.write(dir + "/one_tensor.gguf");
    }
    {
      memra::GgufWriter w;
      w.set_string("general.architecture", "qwen3");
      w.set_u32("general.alignment", 64);
      w.set_u8("u8", 1);
      w.set_i8("i8", -1);
      w.set_u16("u16", 2);
      w.set_i16("i16", -2);
      w.set_i32("i32", -3);
      w.set_u64("u64", 4);
      w.set_i64("i64", -4);
      w.set_f32("f32", 0.5f);
      w.set_f64("f64", 0.25);
      w.set_bool("bool", true);
      w.set_string_array("tokenizer.ggml.tokens", {"a", "bc", ""});
      w.set_f32_array("tokenizer.ggml.scores", {0.f, 1.f, 2.f});
      w.set_i32_array("ids", {1, 2, 3});
      w.set_bool_array("flags", {true, false});
      w.add_tensor("blk.0.attn_q.weight", memra::DType::Q8_0, {32, 2}, std::vector<std::byte>(68));
      w.add_tensor("blk.0.ffn_up.weight", memra::DType::NVFP4, {64, 1, 1, 1},
                   std::vector<std::byte>(36));
      w.add_tensor("output_norm.weight", memra::DType::BF16, {4}, std::vector<std::byte>(8));
      w.write(dir + "/all_types.gguf");
    }
    {
      memra::GgufWriter w;
      w.set_string("general.name", "empty");
      w.write(dir + "/no_tensors.gguf");
    }
  } catch (const memra::Error& e) {
    std::fprintf(stderr, "gguf_fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
