// GgufWriter: GGUF v3 output in the layout llama.cpp's gguf_write_out produces:
// header, kvs, tensor infos, zero padding to the alignment, then each tensor's bytes padded
// with zeros to the alignment. Tensor offsets are the running padded sums, the only layout
// llama.cpp's reader accepts.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include "memra/error.h"
#include "memra/gguf.h"

namespace memra {
namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kQuantizationVersion = 2;  // GGML_QNT_VERSION
constexpr size_t kMaxNameBytes = 63;          // GGML_MAX_NAME - 1

uint64_t pad_to(uint64_t x, uint64_t align) { return (x + align - 1) / align * align; }

// Counts bytes (file_size): metadata is measured, tensor data only added up.
struct CountSink {
  static constexpr bool kMeasureOnly = true;
  uint64_t n = 0;
  void put(const void*, size_t k) { n += k; }
  void skip(uint64_t k) { n += k; }
  uint64_t pos() const { return n; }
};

// Accumulates bytes in memory.
struct VectorSink {
  static constexpr bool kMeasureOnly = false;
  std::vector<std::byte>& out;
  void put(const void* p, size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    out.insert(out.end(), b, b + n);
  }
  uint64_t pos() const { return out.size(); }
};

// Streams to a file, failing with the path on the first error.
struct FileSink {
  static constexpr bool kMeasureOnly = false;
  std::ofstream& os;
  const std::string& path;
  uint64_t written = 0;
  void put(const void* p, size_t n) {
    os.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
    if (!os) fail("gguf ", path, ": write failed after ", written, " bytes");
    written += n;
  }
  uint64_t pos() const { return written; }
};

template <class Sink, class T>
void put_le(Sink& s, T v) {
  s.put(&v, sizeof v);  // little-endian host (static_assert in gguf_value.cpp)
}

template <class Sink>
void put_string(Sink& s, const std::string& str) {
  put_le<Sink, uint64_t>(s, str.size());
  s.put(str.data(), str.size());
}

template <class Sink>
void put_zeros(Sink& s, uint64_t n) {
  static const std::byte zeros[64] = {};
  while (n > 0) {
    const uint64_t k = std::min<uint64_t>(n, sizeof zeros);
    s.put(zeros, k);
    n -= k;
  }
}

template <class Sink>
void put_value(Sink& s, const GgufValue& v) {
  if (v.is_array()) {
    put_le<Sink, uint32_t>(s, static_cast<uint32_t>(v.elem_type()));
    put_le<Sink, uint64_t>(s, v.count());
    if (v.elem_type() == GgufType::STRING) {
      for (const std::string& str : v.strings()) put_string(s, str);
    } else {
      s.put(v.raw().data(), v.raw().size());
    }
  } else if (v.type() == GgufType::STRING) {
    put_string(s, v.as_string());
  } else {
    s.put(v.raw().data(), v.raw().size());
  }
}

}  // namespace

void GgufWriter::set(std::string key, GgufValue v) {
  if (key.empty()) fail("gguf writer: empty key");
  if (v.is_array() && v.elem_type() == GgufType::ARRAY)
    fail("gguf writer: key '", key, "': nested arrays are not supported");
  for (auto& [k, old] : kvs_) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  kvs_.emplace_back(std::move(key), std::move(v));
}

bool GgufWriter::has(std::string_view key) const {
  for (const auto& kv : kvs_)
    if (kv.first == key) return true;
  return false;
}

void GgufWriter::remove(std::string_view key) {
  std::erase_if(kvs_, [&](const auto& kv) { return kv.first == key; });
}

// Validates a new tensor and returns its byte size.
uint64_t GgufWriter::check_tensor(const std::string& name, DType type,
                                  const std::vector<int64_t>& ne) const {
  return with_context("gguf writer: tensor '" + name + "'", [&] {
    if (name.empty()) fail("empty name");
    if (name.size() > kMaxNameBytes)
      fail("name length ", name.size(), " exceeds ", kMaxNameBytes, " bytes (GGML_MAX_NAME)");
    for (const Tensor& t : tensors_)
      if (t.name == name) fail("duplicate tensor name");
    if (!dtype_from_ggml(static_cast<uint32_t>(type)))
      fail("type ", dtype_name(type), " has no ggml type id");
    if (ne.empty() || ne.size() > 4) fail("n_dims ", ne.size(), " (must be 1..4)");
    int64_t rows = 1;
    for (size_t d = 0; d < ne.size(); ++d) {
      if (ne[d] < 0) fail("ne[", d, "] = ", ne[d], " is negative");
      if (d == 0) continue;
      if (ne[d] != 0 && rows > std::numeric_limits<int64_t>::max() / ne[d])
        fail("element count overflows int64");
      rows *= ne[d];
    }
    const int64_t row = row_bytes(type, ne[0]);
    if (rows != 0 && row > std::numeric_limits<int64_t>::max() / rows)
      fail("byte size overflows int64");
    return static_cast<uint64_t>(row) * static_cast<uint64_t>(rows);
  });
}

void GgufWriter::add_tensor(std::string name, DType type, std::vector<int64_t> ne,
                            std::span<const std::byte> data) {
  const uint64_t nbytes = check_tensor(name, type, ne);
  if (data.size() != nbytes) {
    int64_t rows = 1;
    for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
    fail("gguf writer: tensor '", name, "': data is ", data.size(), " bytes, expected ", nbytes,
         " for ", dtype_name(type), " with ne[0] = ", ne[0], " and ", rows, " rows");
  }
  tensors_.push_back(Tensor{std::move(name), type, std::move(ne), nbytes,
                            std::vector<std::byte>(data.begin(), data.end()), nullptr});
}

void GgufWriter::add_tensor_generated(std::string name, DType type, std::vector<int64_t> ne,
                                      Generator generate) {
  const uint64_t nbytes = check_tensor(name, type, ne);
  if (!generate) fail("gguf writer: tensor '", name, "': no generator");
  tensors_.push_back(Tensor{std::move(name), type, std::move(ne), nbytes, {}, std::move(generate)});
}

uint64_t GgufWriter::alignment() const {
  for (const auto& [k, v] : kvs_) {
    if (k != "general.alignment") continue;
    if (v.type() != GgufType::U32)
      fail("gguf writer: general.alignment is ", v.type_description(), ", expected u32");
    const uint64_t a = v.as_uint();
    if (a == 0 || (a & (a - 1)) != 0)
      fail("gguf writer: general.alignment ", a, " is not a non-zero power of two");
    return a;
  }
  return kDefaultAlignment;
}

template <class Sink>
void GgufWriter::emit(Sink& s) const {
  const uint64_t align = alignment();

  // Every file carries general.quantization_version, as llama.cpp's convert_hf_to_gguf.py
  // writes it: llama.cpp refuses quantized tensors without it, and a file whose tensors are all
  // float should not read differently from one converted by llama.cpp. A value the caller set
  // is kept.
  const bool add_qv = !has("general.quantization_version");

  s.put("GGUF", 4);
  put_le<Sink, uint32_t>(s, kVersion);
  put_le<Sink, int64_t>(s, static_cast<int64_t>(tensors_.size()));
  put_le<Sink, int64_t>(s, static_cast<int64_t>(kvs_.size() + (add_qv ? 1 : 0)));
  for (const auto& [k, v] : kvs_) {
    put_string(s, k);
    put_le<Sink, uint32_t>(s, static_cast<uint32_t>(v.type()));
    put_value(s, v);
  }
  if (add_qv) {
    put_string(s, std::string("general.quantization_version"));
    put_le<Sink, uint32_t>(s, static_cast<uint32_t>(GgufType::U32));
    put_le<Sink, uint32_t>(s, kQuantizationVersion);
  }

  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(s, t.name);
    put_le<Sink, uint32_t>(s, static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) put_le<Sink, int64_t>(s, n);
    put_le<Sink, uint32_t>(s, static_cast<uint32_t>(t.type));
    put_le<Sink, uint64_t>(s, offset);
    offset += pad_to(t.nbytes, align);
  }
  put_zeros(s, pad_to(s.pos(), align) - s.pos());
  if constexpr (Sink::kMeasureOnly) {
    s.skip(offset);
    return;
  }
  for (const Tensor& t : tensors_) {
    if (t.generate) {
      // A generator that emits too much or too little would shift every later tensor.
      uint64_t emitted = 0;
      t.generate([&](std::span<const std::byte> piece) {
        if (piece.size() > t.nbytes - emitted)
          fail("gguf writer: tensor '", t.name, "': generator emitted more than ", t.nbytes,
               " bytes");
        s.put(piece.data(), piece.size());
        emitted += piece.size();
      });
      if (emitted != t.nbytes)
        fail("gguf writer: tensor '", t.name, "': generator emitted ", emitted,
             " bytes, expected ", t.nbytes);
    } else {
      s.put(t.data.data(), t.data.size());
    }
    put_zeros(s, pad_to(t.nbytes, align) - t.nbytes);
  }
}

uint64_t GgufWriter::file_size() const {
  CountSink sink;
  emit(sink);
  return sink.n;
}

std::vector<std::byte> GgufWriter::to_bytes() const {
  std::vector<std::byte> out;
  VectorSink sink{out};
  emit(sink);
  return out;
}

void GgufWriter::write(const std::string& path) const {
  alignment();  // fail on a bad general.alignment before creating the file
  std::ofstream os(path, std::ios::binary | std::ios::trunc);
  if (!os) fail("gguf ", path, ": cannot create: ", std::strerror(errno));
  FileSink sink{os, path};
  try {
    emit(sink);
    os.close();
    if (!os) fail("gguf ", path, ": write failed on close");
  } catch (...) {
    // A half-written file would fail to load later with a less useful message.
    os.close();
    std::remove(path.c_str());
    throw;
  }
}

}  // namespace memra
