// memra/gguf.h — GGUF files (llama.cpp's model format): a validating reader and a writer.
//
// The reader maps the file read-only and checks everything llama.cpp's loader checks before any
// tensor is handed out: magic, version (2 or 3), every key/value (types, no nested arrays, no
// duplicate or empty keys), general.alignment (u32, power of two), every tensor info (name,
// n_dims 1..4, ne >= 0, known ggml type, ne[0] a multiple of the block size, no overflow, offset
// equal to the running padded sum, data inside the file). Counts and lengths are checked against
// the bytes left in the file before anything is allocated, so a hostile file costs memory of
// the order of its own size, never what its counts claim. Every error is a memra::Error
// starting with "gguf <path>: " and naming the field and the offset. The file layout and the
// full list of checks are in docs/gguf.md.
//
// The writer produces files llama.cpp accepts (version 3, tensors contiguous in info order, each
// padded to the alignment, general.quantization_version always present: u32 2 unless set).
//
// Multi-byte values are little-endian on disk; memra only builds on little-endian hosts.
//
// provides: GgufType, gguf_type_name, GgufValue, GgufFile, GgufWriter
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memra/dtype.h"
#include "memra/mapped_file.h"
#include "memra/source.h"

namespace memra {

// The GGUF value type ids (gguf_type in ggml's gguf.h).
enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9,
  U64 = 10, I64 = 11, F64 = 12,
};

// "u8", "i32", "f32", "bool", "string", "array", ...; "type(<id>)" for ids outside the enum.
std::string gguf_type_name(GgufType t);
// Byte size of one element of a fixed-size type; 0 for STRING and ARRAY.
size_t gguf_type_size(GgufType t);
// Nothing but the thirteen ids above is a GGUF type.
bool gguf_type_valid(uint32_t id);

// One metadata value: a scalar, a string, or a one-level array of scalars or of strings.
// Accessors that do not match the stored type throw memra::Error ("is u32, expected string");
// GgufFile's getters add "gguf <path>: key '<k>': " in front.
class GgufValue {
 public:
  GgufValue() = default;  // an empty u8 array; only useful as a placeholder

  // --- scalars
  static GgufValue u8(uint8_t v);
  static GgufValue i8(int8_t v);
  static GgufValue u16(uint16_t v);
  static GgufValue i16(int16_t v);
  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue u64(uint64_t v);
  static GgufValue i64(int64_t v);
  static GgufValue f32(float v);
  static GgufValue f64(double v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  // --- arrays (one level; GGUF has no nested arrays)
  static GgufValue u8_array(const std::vector<uint8_t>& v);
  static GgufValue i8_array(const std::vector<int8_t>& v);
  static GgufValue u16_array(const std::vector<uint16_t>& v);
  static GgufValue i16_array(const std::vector<int16_t>& v);
  static GgufValue u32_array(const std::vector<uint32_t>& v);
  static GgufValue i32_array(const std::vector<int32_t>& v);
  static GgufValue u64_array(const std::vector<uint64_t>& v);
  static GgufValue i64_array(const std::vector<int64_t>& v);
  static GgufValue f32_array(const std::vector<float>& v);
  static GgufValue f64_array(const std::vector<double>& v);
  static GgufValue bool_array(const std::vector<bool>& v);
  static GgufValue string_array(std::vector<std::string> v);
  // An array of fixed-size elements from their packed little-endian bytes (the reader's path).
  // Fails unless elem is a fixed-size type and raw.size() is a multiple of its size.
  static GgufValue raw_array(GgufType elem, std::vector<std::byte> raw);

  GgufType type() const { return type_; }
  bool is_array() const { return type_ == GgufType::ARRAY; }
  // The element type of an array; the type itself for a scalar.
  GgufType elem_type() const { return elem_; }
  // Elements of an array; 1 for a scalar.
  uint64_t count() const { return count_; }
  // "u32", "string", "array[string x 151936]".
  std::string type_description() const;

  // --- scalar access
  // Any integer type (not bool), range-checked into int64 (a u64 above INT64_MAX fails).
  int64_t as_int() const;
  uint64_t as_uint() const;  // any integer type, fails on negative values
  double as_float() const;   // F32/F64, and integers (converted)
  bool as_bool() const;
  const std::string& as_string() const;

  // --- array access (i < count(); elements follow the same rules as the scalar accessors)
  int64_t int_at(uint64_t i) const;
  double float_at(uint64_t i) const;
  bool bool_at(uint64_t i) const;
  const std::string& string_at(uint64_t i) const;
  std::vector<int64_t> to_int_array() const;
  std::vector<double> to_float_array() const;
  const std::vector<std::string>& strings() const;  // array of strings
  // Packed little-endian elements of a fixed-size array (or the scalar's bytes).
  std::span<const std::byte> raw() const { return raw_; }

  // For tools: "42", "\"qwen3\"", "[i32 x 3] 1, 2, 3", long strings and arrays shortened.
  std::string to_display(size_t max_elems = 8, size_t max_chars = 64) const;

  // Same type, element type and contents (floats compared bitwise).
  bool operator==(const GgufValue& o) const;

 private:
  GgufType type_ = GgufType::ARRAY;
  GgufType elem_ = GgufType::U8;
  uint64_t count_ = 0;
  std::vector<std::byte> raw_;         // fixed-size scalar or array elements
  std::vector<std::string> strings_;   // STRING (one) or array of STRING

  void check_scalar(const char* expected) const;
  void check_array_index(uint64_t i) const;
  int64_t int_elem(uint64_t i) const;
  uint64_t uint_elem(uint64_t i) const;
  double float_elem(uint64_t i) const;
  template <class T>
  static GgufValue scalar_of(GgufType t, T v);
  template <class T>
  static GgufValue array_of(GgufType t, const std::vector<T>& v);
};

// A parsed, validated GGUF file. Tensor data points into the read-only mapping (or the owned
// copy for from_bytes) and lives as long as the GgufFile. Data pointers are aligned only to
// general.alignment relative to the file start: read through memcpy, not reinterpret_cast.
class GgufFile : public WeightSource {
 public:
  // Maps `path` read-only and validates it (see the header comment).
  static std::unique_ptr<GgufFile> open(const std::string& path);
  // Parses bytes from memory (tests, fuzzing); the bytes are copied. `name` stands in for the
  // path in error messages. The same parser as open().
  static std::unique_ptr<GgufFile> from_bytes(std::span<const std::byte> bytes,
                                              std::string name = "<memory>");
  ~GgufFile() override;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // Absolute file offset of the data section (padded end of the tensor infos).
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return bytes_.size(); }

  // --- metadata
  std::vector<std::string> keys() const;  // file order
  const GgufValue* kv(std::string_view key) const;  // nullptr when absent
  bool has(std::string_view key) const { return kv(key) != nullptr; }
  // Typed getters. They throw memra::Error "gguf <path>: key '<k>': missing" or
  // "gguf <path>: key '<k>': is <type>, expected <...>".
  std::string get_string(std::string_view key) const;
  int64_t get_int(std::string_view key) const;   // any integer type (not bool), range-checked
  double get_float(std::string_view key) const;  // F32/F64, integers accepted
  bool get_bool(std::string_view key) const;
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  std::vector<double> get_float_array(std::string_view key) const;
  // The same with a default when the key is absent (a present key of the wrong type still fails).
  std::string get_string_or(std::string_view key, std::string def) const;
  int64_t get_int_or(std::string_view key, int64_t def) const;
  double get_float_or(std::string_view key, double def) const;
  bool get_bool_or(std::string_view key, bool def) const;
  // general.architecture, or "" when absent.
  std::string architecture() const;

  // --- tensors
  const std::vector<TensorView>& tensors() const { return tensors_; }  // file order
  // Offset of the tensor's data relative to data_offset(), as stored in its info.
  uint64_t tensor_offset(std::string_view name) const;

  // --- WeightSource
  SourceKind kind() const override { return SourceKind::Gguf; }
  const std::string& path() const override { return path_; }
  std::vector<std::string> tensor_names() const override;
  const TensorView* find(std::string_view name) const override;
  const GgufFile* gguf() const override { return this; }

 private:
  GgufFile() = default;

  std::string path_;
  std::span<const std::byte> bytes_;   // the whole file
  MappedFile map_;                     // the file (open); empty for from_bytes
  std::vector<std::byte> owned_;       // from_bytes copy
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kvs_;     // file order
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<TensorView> tensors_;
  std::vector<uint64_t> tensor_offsets_;
  std::map<std::string, size_t, std::less<>> tensor_index_;

  void parse();
  const GgufValue& require(std::string_view key) const;
};

// Builds a GGUF v3 file. Keys keep the order of their first set_*; setting a key again replaces
// its value in place. Tensors keep the order of add_tensor. Validation happens at the call that
// introduces the problem (bad tensor sizes, duplicate names) or at write (bad general.alignment).
class GgufWriter {
 public:
  void set(std::string key, GgufValue v);
  void set_u8(std::string key, uint8_t v) { set(std::move(key), GgufValue::u8(v)); }
  void set_i8(std::string key, int8_t v) { set(std::move(key), GgufValue::i8(v)); }
  void set_u16(std::string key, uint16_t v) { set(std::move(key), GgufValue::u16(v)); }
  void set_i16(std::string key, int16_t v) { set(std::move(key), GgufValue::i16(v)); }
  void set_u32(std::string key, uint32_t v) { set(std::move(key), GgufValue::u32(v)); }
  void set_i32(std::string key, int32_t v) { set(std::move(key), GgufValue::i32(v)); }
  void set_u64(std::string key, uint64_t v) { set(std::move(key), GgufValue::u64(v)); }
  void set_i64(std::string key, int64_t v) { set(std::move(key), GgufValue::i64(v)); }
  void set_f32(std::string key, float v) { set(std::move(key), GgufValue::f32(v)); }
  void set_f64(std::string key, double v) { set(std::move(key), GgufValue::f64(v)); }
  void set_bool(std::string key, bool v) { set(std::move(key), GgufValue::boolean(v)); }
  void set_string(std::string key, std::string v) {
    set(std::move(key), GgufValue::string(std::move(v)));
  }
  void set_u8_array(std::string key, const std::vector<uint8_t>& v) {
    set(std::move(key), GgufValue::u8_array(v));
  }
  void set_i8_array(std::string key, const std::vector<int8_t>& v) {
    set(std::move(key), GgufValue::i8_array(v));
  }
  void set_u16_array(std::string key, const std::vector<uint16_t>& v) {
    set(std::move(key), GgufValue::u16_array(v));
  }
  void set_i16_array(std::string key, const std::vector<int16_t>& v) {
    set(std::move(key), GgufValue::i16_array(v));
  }
  void set_u32_array(std::string key, const std::vector<uint32_t>& v) {
    set(std::move(key), GgufValue::u32_array(v));
  }
  void set_i32_array(std::string key, const std::vector<int32_t>& v) {
    set(std::move(key), GgufValue::i32_array(v));
  }
  void set_u64_array(std::string key, const std::vector<uint64_t>& v) {
    set(std::move(key), GgufValue::u64_array(v));
  }
  void set_i64_array(std::string key, const std::vector<int64_t>& v) {
    set(std::move(key), GgufValue::i64_array(v));
  }
  void set_f32_array(std::string key, const std::vector<float>& v) {
    set(std::move(key), GgufValue::f32_array(v));
  }
  void set_f64_array(std::string key, const std::vector<double>& v) {
    set(std::move(key), GgufValue::f64_array(v));
  }
  void set_bool_array(std::string key, const std::vector<bool>& v) {
    set(std::move(key), GgufValue::bool_array(v));
  }
  void set_string_array(std::string key, std::vector<std::string> v) {
    set(std::move(key), GgufValue::string_array(std::move(v)));
  }
  bool has(std::string_view key) const;
  void remove(std::string_view key);

  // Copies `data`; fails unless name is 1..63 bytes and new, type is a ggml type, ne has 1..4
  // entries >= 0 with ne[0] a multiple of the block size, and data.size() ==
  // row_bytes(type, ne[0]) * ne[1] * ... . ne is written as given (trailing 1s kept).
  void add_tensor(std::string name, DType type, std::vector<int64_t> ne,
                  std::span<const std::byte> data);

  // A tensor whose bytes are produced at write time, for files too large to hold in memory:
  // `generate(emit)` must pass exactly nbytes(type, ne) bytes to emit, in any number of
  // pieces (the writer fails naming the tensor otherwise). Same checks as add_tensor.
  using Emit = std::function<void(std::span<const std::byte>)>;
  using Generator = std::function<void(const Emit& emit)>;
  void add_tensor_generated(std::string name, DType type, std::vector<int64_t> ne,
                            Generator generate);

  // The exact size write() will produce, without producing it (tensor data is not generated).
  uint64_t file_size() const;

  // The alignment write() will use: general.alignment when set (must be a u32 power of two),
  // else 32.
  uint64_t alignment() const;
  // The whole file in memory (tests, fixtures).
  std::vector<std::byte> to_bytes() const;
  // Writes the file; errors name the path.
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    uint64_t nbytes;
    std::vector<std::byte> data;  // add_tensor
    Generator generate;           // add_tensor_generated
  };
  uint64_t check_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne) const;
  std::vector<std::pair<std::string, GgufValue>> kvs_;
  std::vector<Tensor> tensors_;

  template <class Sink>
  void emit(Sink& sink) const;
};

}  // namespace memra
