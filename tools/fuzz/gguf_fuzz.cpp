// libFuzzer target: the GGUF parser on arbitrary bytes (the same parser GgufFile::open uses).
// A memra::Error is the expected answer to a malformed file; a crash, a sanitizer report, an
// escaping exception of another type or a huge allocation is a bug.
#include <cstddef>
#include <cstdint>
#include <span>

#include "memra/error.h"
#include "memra/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = memra::GgufFile::from_bytes(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size), "fuzz.gguf");
    // Touch what a loader touches, so the accessors run on every accepted file.
    for (const std::string& k : f->keys()) {
      const memra::GgufValue* v = f->kv(k);
      (void)v->to_display(4, 16);
      if (v->is_array() && v->count() > 0) {
        try {
          (void)v->float_at(v->count() - 1);
        } catch (const memra::Error&) {
        }
      }
    }
    uint64_t sum = 0;
    for (const memra::TensorView& t : f->tensors())
      if (!t.data.empty()) sum += static_cast<uint8_t>(t.data.back());
    (void)sum;
  } catch (const memra::Error&) {
  }
  return 0;
}
