// ggml-rewrite — re-writes a GGUF file with ggml's own GGUF writer (gguf_write_to_file), so memra
// can be checked on a file that another tool wrote: same metadata and tensors, but the header,
// padding and data offsets are laid out by ggml, not by memra's GgufWriter.
//
// Built against an external llama.cpp/ggml checkout, NOT part of the memra build:
//   g++ -O2 -std=c++17 tools/llamacpp-check/ggml-rewrite.cpp -I$LLAMA/ggml/include \
//       -L$LLAMA_BUILD/bin -lggml-base -Wl,-rpath,$LLAMA_BUILD/bin -o ggml-rewrite
//   ggml-rewrite IN.gguf OUT.gguf
// tools/llamacpp-crosscheck.sh runs it (section C) and compares memra's logits on IN and OUT.
#include <cstdio>

#include "ggml.h"
#include "gguf.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: ggml-rewrite IN.gguf OUT.gguf\n");
    return 2;
  }
  ggml_context* data = nullptr;
  gguf_init_params params{/*no_alloc=*/false, /*ctx=*/&data};
  gguf_context* in = gguf_init_from_file(argv[1], params);
  if (!in) {
    std::fprintf(stderr, "ggml-rewrite: ggml cannot read %s\n", argv[1]);
    return 1;
  }
  gguf_context* out = gguf_init_empty();
  gguf_set_kv(out, in);  // every key/value, in the input's order
  int n = 0;
  // By name from the GGUF's tensor infos: the ggml context also holds the whole data section as
  // one extra "binary blob" tensor, which must not be copied.
  for (int64_t i = 0; i < gguf_get_n_tensors(in); ++i) {
    ggml_tensor* t = ggml_get_tensor(data, gguf_get_tensor_name(in, i));
    if (!t) {
      std::fprintf(stderr, "ggml-rewrite: tensor %lld missing from the ggml context\n", (long long)i);
      return 1;
    }
    gguf_add_tensor(out, t);  // ggml computes the offsets (general.alignment, padding)
    ++n;
  }
  if (!gguf_write_to_file(out, argv[2], /*only_meta=*/false)) {
    std::fprintf(stderr, "ggml-rewrite: ggml failed to write %s\n", argv[2]);
    return 1;
  }
  std::printf("ggml-rewrite: %s -> %s (%d tensors, %lld keys)\n", argv[1], argv[2], n,
              static_cast<long long>(gguf_get_n_kv(out)));
  gguf_free(out);
  gguf_free(in);
  ggml_free(data);
  return 0;
}
