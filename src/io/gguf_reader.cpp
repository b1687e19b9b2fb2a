// GgufFile: mapping and validating parse of a GGUF v2/v3 file (layout in docs/gguf.md).
//
// One parser serves both the mmap path (open) and the memory path (from_bytes, used by the
// fuzzer), so what the fuzzer exercises is what loads models. The parser never trusts a count:
// every length and count is compared with the bytes left before anything is allocated, every
// read goes through a bounds-checked cursor that names the field it was reading, and every
// multi-byte read is a memcpy (the fields of a GGUF header are not aligned).

#include <cerrno>
#include <cstring>
#include <limits>

#include "memra/error.h"
#include "memra/gguf.h"
#include "memra/mapped_file.h"

namespace memra {
namespace {

constexpr uint64_t kDefaultAlignment = 32;  // GGUF_DEFAULT_ALIGNMENT
constexpr uint64_t kMaxNameBytes = 63;      // GGML_MAX_NAME (64) minus the NUL ggml keeps
constexpr uint32_t kMaxDims = 4;            // GGML_MAX_DIMS
// The smallest encodings, used to reject counts the rest of the file cannot hold:
// a kv is at least key length (8) + a 1-byte key + type (4) + a 1-byte value;
// a tensor info is at least name length (8) + 1-byte name + n_dims (4) + ne[0] (8) + type (4)
// + offset (8).
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;

std::string hex32(uint32_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) s += digits[(v >> shift) & 15];
  return s;
}

// Printable form of the 4 magic bytes.
std::string show_magic(std::span<const std::byte> b) {
  std::string s = "'";
  for (std::byte x : b) {
    const unsigned char c = static_cast<unsigned char>(x);
    if (c >= 0x20 && c < 0x7f) {
      s += static_cast<char>(c);
    } else {
      s += "\\x";
      s += "0123456789abcdef"[c >> 4];
      s += "0123456789abcdef"[c & 15];
    }
  }
  return s + "'";
}

// A key or name for an error message: control bytes, quotes and backslashes escaped, cut after
// 80 bytes (a hostile key may be as long as the file).
std::string show_name(const std::string& s) {
  constexpr size_t kMax = 80;
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f || c == '\\' || c == '\'') {
      out += "\\x";
      out += "0123456789abcdef"[c >> 4];
      out += "0123456789abcdef"[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > kMax) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string show_ne(const std::vector<int64_t>& ne) {
  std::string s = "{";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "}";
}

// Bounds-checked little-endian reader over the file bytes. `item` names the record being
// read ("tensor info 3 ('blk.0.attn_q.weight')"); each read names its field, so a truncation
// error reads "truncated reading tensor info 3 ('blk.0.attn_q.weight') ne[1] at offset 1234
// (file size 1240)".
class Cursor {
 public:
  explicit Cursor(std::span<const std::byte> bytes) : b_(bytes) {}

  std::string item;

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return b_.size() - pos_; }
  uint64_t size() const { return b_.size(); }

  // `field` and `index` (when >= 0) name what is read: "ne" and 1 give "ne[1]".
  std::string where(const char* field, int64_t index) const {
    std::string s = item;
    if (field && *field) s += std::string(s.empty() ? "" : " ") + field;
    if (index >= 0) s += "[" + std::to_string(index) + "]";
    return s;
  }

  void need(uint64_t n, const char* field, int64_t index = -1) const {
    if (n > left())
      fail("truncated reading ", where(field, index), " at offset ", pos_, " (file size ",
           b_.size(), ")");
  }

  std::span<const std::byte> take(uint64_t n, const char* field, int64_t index = -1) {
    need(n, field, index);
    auto s = b_.subspan(pos_, n);
    pos_ += n;
    return s;
  }

  template <class T>
  T read(const char* field, int64_t index = -1) {
    T v;
    std::memcpy(&v, take(sizeof v, field, index).data(), sizeof v);
    return v;
  }

  // GGUF string: u64 length + bytes (no NUL). The length is checked against the bytes left
  // before the string is allocated.
  std::string read_string(const char* field, int64_t index = -1) {
    const uint64_t n = read<uint64_t>(field, index);
    if (n > left())
      fail(where(field, index), ": string length ", n, " exceeds the ", left(),
           " bytes left at offset ", pos_, " (file size ", b_.size(), ")");
    auto s = take(n, field, index);
    return std::string(reinterpret_cast<const char*>(s.data()), s.size());
  }

 private:
  std::span<const std::byte> b_;
  uint64_t pos_ = 0;
};

GgufValue read_scalar(Cursor& c, GgufType t, const char* field, int64_t index = -1) {
  switch (t) {
    case GgufType::U8: return GgufValue::u8(c.read<uint8_t>(field, index));
    case GgufType::I8: return GgufValue::i8(c.read<int8_t>(field, index));
    case GgufType::U16: return GgufValue::u16(c.read<uint16_t>(field, index));
    case GgufType::I16: return GgufValue::i16(c.read<int16_t>(field, index));
    case GgufType::U32: return GgufValue::u32(c.read<uint32_t>(field, index));
    case GgufType::I32: return GgufValue::i32(c.read<int32_t>(field, index));
    case GgufType::U64: return GgufValue::u64(c.read<uint64_t>(field, index));
    case GgufType::I64: return GgufValue::i64(c.read<int64_t>(field, index));
    case GgufType::F32: return GgufValue::f32(c.read<float>(field, index));
    case GgufType::F64: return GgufValue::f64(c.read<double>(field, index));
    case GgufType::BOOL: {
      const uint8_t v = c.read<uint8_t>(field, index);
      // ggml writes bools as int8 0/1; anything else is corruption, not "true".
      if (v > 1) fail(c.where(field, index), ": bool value ", int{v}, " (must be 0 or 1)");
      return GgufValue::boolean(v != 0);
    }
    case GgufType::STRING: return GgufValue::string(c.read_string(field, index));
    case GgufType::ARRAY: break;
  }
  fail(c.item, ": unexpected value type ", gguf_type_name(t));
}

GgufValue read_value(Cursor& c, GgufType t) {
  if (t != GgufType::ARRAY) return read_scalar(c, t, "value");
  const uint32_t elem_id = c.read<uint32_t>("array element type");
  if (!gguf_type_valid(elem_id)) fail(c.item, ": unknown array element type ", elem_id);
  const GgufType elem = static_cast<GgufType>(elem_id);
  if (elem == GgufType::ARRAY) fail(c.item, ": nested arrays are not supported");
  const uint64_t count = c.read<uint64_t>("array count");
  if (elem == GgufType::STRING) {
    // Each string is at least its 8-byte length.
    if (count > c.left() / 8)
      fail(c.item, ": array count ", count, " of string cannot fit in the ", c.left(),
           " bytes left at offset ", c.pos(), " (file size ", c.size(), ")");
    std::vector<std::string> v;
    v.reserve(count);
    for (uint64_t i = 0; i < count; ++i)
      v.push_back(c.read_string("element", static_cast<int64_t>(i)));
    return GgufValue::string_array(std::move(v));
  }
  const uint64_t size = gguf_type_size(elem);
  if (count > c.left() / size)
    fail(c.item, ": array count ", count, " of ", gguf_type_name(elem), " cannot fit in the ",
         c.left(), " bytes left at offset ", c.pos(), " (file size ", c.size(), ")");
  auto bytes = c.take(count * size, "array elements");
  std::vector<std::byte> raw(bytes.begin(), bytes.end());
  return with_context(c.item, [&] { return GgufValue::raw_array(elem, std::move(raw)); });
}

uint64_t pad_to(uint64_t x, uint64_t align) { return (x + align - 1) / align * align; }

}  // namespace

// --- opening ----------------------------------------------------------------------------------

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  with_context("gguf " + path, [&] {
    f->map_ = MappedFile::open(path);
    f->bytes_ = f->map_.bytes();
    f->parse();
  });
  return f;
}

std::unique_ptr<GgufFile> GgufFile::from_bytes(std::span<const std::byte> bytes,
                                               std::string name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = std::move(name);
  f->owned_.assign(bytes.begin(), bytes.end());
  f->bytes_ = f->owned_;
  with_context("gguf " + f->path_, [&] { f->parse(); });
  return f;
}

GgufFile::~GgufFile() = default;

// --- the parser -------------------------------------------------------------------------------

void GgufFile::parse() {
  Cursor c(bytes_);
  c.item = "header";

  // Header: magic, version, counts.
  const auto magic = c.take(4, "magic");
  if (std::memcmp(magic.data(), "GGUF", 4) != 0)
    fail("bad magic ", show_magic(magic), " (expected 'GGUF'); not a GGUF file");
  version_ = c.read<uint32_t>("version");
  if (version_ == 0) fail("version 0 is invalid");
  // A big-endian file read as little-endian has its small version number in the high bytes.
  if ((version_ & 0xFFFFu) == 0)
    fail("version ", hex32(version_), " looks byte-swapped (version ", __builtin_bswap32(version_),
         " of a big-endian file?); only little-endian GGUF is supported");
  if (version_ == 1) fail("GGUF v1 is no longer supported (re-convert the model)");
  if (version_ > 3) fail("version ", version_, " is not supported (memra reads versions 2 and 3)");

  const int64_t n_tensors = c.read<int64_t>("tensor count");
  const int64_t n_kv = c.read<int64_t>("kv count");
  if (n_tensors < 0) fail("tensor count ", n_tensors, " is negative");
  if (n_kv < 0) fail("kv count ", n_kv, " is negative");
  if (static_cast<uint64_t>(n_kv) > c.left() / kMinKvBytes)
    fail("kv count ", n_kv, " cannot fit in the ", c.left(), " bytes left at offset ", c.pos(),
         " (file size ", c.size(), "; a kv takes at least ", kMinKvBytes, " bytes)");
  const uint64_t left_for_infos = c.left() - static_cast<uint64_t>(n_kv) * kMinKvBytes;
  if (static_cast<uint64_t>(n_tensors) > left_for_infos / kMinTensorInfoBytes)
    fail("tensor count ", n_tensors, " cannot fit in the ", c.left(), " bytes left at offset ",
         c.pos(), " (file size ", c.size(), "; a tensor info takes at least ",
         kMinTensorInfoBytes, " bytes)");

  // Key/value pairs.
  kvs_.reserve(static_cast<size_t>(n_kv));
  for (int64_t i = 0; i < n_kv; ++i) {
    c.item = "kv " + std::to_string(i);
    std::string key = c.read_string("key");
    if (key.empty()) fail(c.item, ": empty key");
    c.item += " ('" + show_name(key) + "')";
    if (auto it = kv_index_.find(key); it != kv_index_.end())
      fail("duplicate key '", show_name(key), "' (kv ", it->second, " and kv ", i, ")");
    const uint32_t type_id = c.read<uint32_t>("type");
    if (!gguf_type_valid(type_id)) fail(c.item, ": unknown value type ", type_id);
    GgufValue v = read_value(c, static_cast<GgufType>(type_id));
    kv_index_.emplace(key, kvs_.size());
    kvs_.emplace_back(std::move(key), std::move(v));
  }

  alignment_ = kDefaultAlignment;
  if (const GgufValue* a = kv("general.alignment")) {
    if (a->type() != GgufType::U32)
      fail("general.alignment is ", a->type_description(), ", expected u32");
    const uint64_t v = a->as_uint();
    if (v == 0 || (v & (v - 1)) != 0)
      fail("general.alignment ", v, " is not a non-zero power of two");
    alignment_ = v;
  }

  // Tensor infos.
  tensors_.reserve(static_cast<size_t>(n_tensors));
  tensor_offsets_.reserve(static_cast<size_t>(n_tensors));
  std::vector<uint64_t> nbytes_of;
  nbytes_of.reserve(static_cast<size_t>(n_tensors));
  for (int64_t i = 0; i < n_tensors; ++i) {
    c.item = "tensor info " + std::to_string(i);
    TensorView t;
    t.name = c.read_string("name");
    if (t.name.empty()) fail(c.item, ": empty name");
    if (t.name.size() > kMaxNameBytes)
      fail(c.item, ": name length ", t.name.size(), " exceeds ", kMaxNameBytes,
           " bytes (GGML_MAX_NAME)");
    c.item += " ('" + show_name(t.name) + "')";
    if (auto it = tensor_index_.find(t.name); it != tensor_index_.end())
      fail("duplicate tensor name '", show_name(t.name), "' (tensor info ", it->second, " and ",
           i, ")");
    const uint32_t n_dims = c.read<uint32_t>("n_dims");
    if (n_dims == 0 || n_dims > kMaxDims)
      fail(c.item, ": n_dims ", n_dims, " (must be 1..", kMaxDims, ")");
    t.ne.resize(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      t.ne[d] = c.read<int64_t>("ne", d);
      if (t.ne[d] < 0) fail(c.item, ": ne[", d, "] = ", t.ne[d], " is negative");
    }
    const uint32_t type_id = c.read<uint32_t>("type");
    const std::optional<DType> type = dtype_from_ggml(type_id);
    if (!type) fail(c.item, ": unknown ggml type ", type_id);
    t.type = *type;
    const uint64_t offset = c.read<uint64_t>("offset");

    const TypeTraits& tr = type_traits(t.type);
    if (t.ne[0] % tr.block_elems != 0)
      fail(c.item, ": ne[0] = ", t.ne[0], " is not a multiple of the ", tr.name,
           " block size ", tr.block_elems);
    // Element count and byte size must fit int64 (ggml's nelements/nbytes are int64/size_t).
    int64_t rows = 1;
    for (uint32_t d = 1; d < n_dims; ++d) {
      if (t.ne[d] != 0 && rows > std::numeric_limits<int64_t>::max() / t.ne[d])
        fail(c.item, ": shape ", show_ne(t.ne), " overflows the int64 element count");
      rows *= t.ne[d];
    }
    if (rows != 0 && t.ne[0] > std::numeric_limits<int64_t>::max() / rows)
      fail(c.item, ": shape ", show_ne(t.ne), " overflows the int64 element count");
    const int64_t row = row_bytes(t.type, t.ne[0]);
    if (rows != 0 && row > std::numeric_limits<int64_t>::max() / rows)
      fail(c.item, ": shape ", show_ne(t.ne), " of ", tr.name, " overflows the int64 byte size");
    const uint64_t nbytes = static_cast<uint64_t>(row) * static_cast<uint64_t>(rows);
    // t.data is pointed at the bytes once the data section's start is known.
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
    tensor_offsets_.push_back(offset);
    nbytes_of.push_back(nbytes);
  }

  // The data section starts at the next multiple of the alignment.
  data_offset_ = pad_to(c.pos(), alignment_);

  // llama.cpp requires each tensor at the running sum of the padded sizes before it, so the
  // tensors are contiguous, in info order, and each starts on an alignment boundary.
  uint64_t expected = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    TensorView& t = tensors_[i];
    const uint64_t offset = tensor_offsets_[i];
    const uint64_t nbytes = nbytes_of[i];
    if (offset != expected) {
      // An offset inside an earlier tensor's bytes would alias its data: name both tensors,
      // since "expected N" alone does not say which one is hit. Only the error path scans.
      for (size_t j = 0; j < i; ++j) {
        const uint64_t b = tensor_offsets_[j], nb = nbytes_of[j];
        // [offset, offset + nbytes) meets [b, b + nb); written without the sums (no overflow).
        const bool meets =
            nbytes > 0 && nb > 0 && (offset <= b ? b - offset < nbytes : offset - b < nb);
        if (meets)
          fail("tensor '", show_name(t.name), "' at offset ", offset, " (", nbytes,
               " bytes) overlaps tensor '", show_name(tensors_[j].name), "' at offset ", b,
               " (", nb, " bytes); expected offset ", expected);
      }
      fail("tensor '", show_name(t.name), "' has offset ", offset, ", expected ", expected);
    }
    const uint64_t size = bytes_.size();
    if (data_offset_ > size || offset > size - data_offset_ ||
        nbytes > size - data_offset_ - offset)
      fail("tensor '", show_name(t.name), "': data at file offset ", data_offset_, " + ",
           offset, " (", nbytes, " bytes) extends past the end of the file (size ", size, ")");
    t.data = bytes_.subspan(data_offset_ + offset, nbytes);
    // Cannot overflow: offset + nbytes <= file size, and padding adds less than alignment
    // (a u32).
    expected = pad_to(offset + nbytes, alignment_);
  }
}

// --- metadata access ----------------------------------------------------------------------------

std::vector<std::string> GgufFile::keys() const {
  std::vector<std::string> out;
  out.reserve(kvs_.size());
  for (const auto& [k, v] : kvs_) out.push_back(k);
  return out;
}

const GgufValue* GgufFile::kv(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second].second;
}

const GgufValue& GgufFile::require(std::string_view key) const {
  const GgufValue* v = kv(key);
  if (!v) fail("gguf ", path_, ": key '", key, "': missing");
  return *v;
}

namespace {
template <class F>
auto keyed(const std::string& path, std::string_view key, F&& f) {
  return with_context("gguf " + path + ": key '" + std::string(key) + "'", std::forward<F>(f));
}
}  // namespace

std::string GgufFile::get_string(std::string_view key) const {
  const GgufValue& v = require(key);
  return keyed(path_, key, [&] { return v.as_string(); });
}
int64_t GgufFile::get_int(std::string_view key) const {
  const GgufValue& v = require(key);
  return keyed(path_, key, [&] { return v.as_int(); });
}
double GgufFile::get_float(std::string_view key) const {
  const GgufValue& v = require(key);
  return keyed(path_, key, [&] { return v.as_float(); });
}
bool GgufFile::get_bool(std::string_view key) const {
  const GgufValue& v = require(key);
  return keyed(path_, key, [&] { return v.as_bool(); });
}
std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue& v = require(key);
  return keyed(path_, key, [&] { return v.strings(); });
}
std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue& v = require(key);
  return keyed(path_, key, [&] { return v.to_int_array(); });
}
std::vector<double> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue& v = require(key);
  return keyed(path_, key, [&] { return v.to_float_array(); });
}

std::string GgufFile::get_string_or(std::string_view key, std::string def) const {
  return has(key) ? get_string(key) : def;
}
int64_t GgufFile::get_int_or(std::string_view key, int64_t def) const {
  return has(key) ? get_int(key) : def;
}
double GgufFile::get_float_or(std::string_view key, double def) const {
  return has(key) ? get_float(key) : def;
}
bool GgufFile::get_bool_or(std::string_view key, bool def) const {
  return has(key) ? get_bool(key) : def;
}
std::string GgufFile::architecture() const { return get_string_or("general.architecture", ""); }

// --- tensors ------------------------------------------------------------------------------------

std::vector<std::string> GgufFile::tensor_names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const TensorView& t : tensors_) out.push_back(t.name);
  return out;
}

const TensorView* GgufFile::find(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

uint64_t GgufFile::tensor_offset(std::string_view name) const {
  auto it = tensor_index_.find(name);
  if (it == tensor_index_.end()) fail("gguf ", path_, ": tensor '", name, "' not found");
  return tensor_offsets_[it->second];
}

}  // namespace memra
