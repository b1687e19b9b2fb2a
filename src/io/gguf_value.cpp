// GgufValue: construction, typed access and display of GGUF metadata values.
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "memra/error.h"
#include "memra/gguf.h"

static_assert(std::endian::native == std::endian::little,
              "GGUF values are stored little-endian and copied as-is");

namespace memra {

std::string gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::U8: return "u8";
    case GgufType::I8: return "i8";
    case GgufType::U16: return "u16";
    case GgufType::I16: return "i16";
    case GgufType::U32: return "u32";
    case GgufType::I32: return "i32";
    case GgufType::F32: return "f32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "string";
    case GgufType::ARRAY: return "array";
    case GgufType::U64: return "u64";
    case GgufType::I64: return "i64";
    case GgufType::F64: return "f64";
  }
  return "type(" + std::to_string(static_cast<uint32_t>(t)) + ")";
}

size_t gguf_type_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    case GgufType::STRING: case GgufType::ARRAY: return 0;
  }
  return 0;
}

bool gguf_type_valid(uint32_t id) { return id <= static_cast<uint32_t>(GgufType::F64); }

namespace {

bool is_integer_type(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::U16: case GgufType::I16:
    case GgufType::U32: case GgufType::I32: case GgufType::U64: case GgufType::I64:
      return true;
    default:
      return false;
  }
}
bool is_float_type(GgufType t) { return t == GgufType::F32 || t == GgufType::F64; }

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

// --- construction ---------------------------------------------------------------------------

template <class T>
GgufValue GgufValue::scalar_of(GgufType t, T v) {
  GgufValue g;
  g.type_ = t;
  g.elem_ = t;
  g.count_ = 1;
  g.raw_.resize(sizeof v);
  std::memcpy(g.raw_.data(), &v, sizeof v);
  return g;
}

template <class T>
GgufValue GgufValue::array_of(GgufType t, const std::vector<T>& v) {
  GgufValue g;
  g.type_ = GgufType::ARRAY;
  g.elem_ = t;
  g.count_ = v.size();
  g.raw_.resize(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(g.raw_.data(), v.data(), g.raw_.size());
  return g;
}

GgufValue GgufValue::u8(uint8_t v) { return scalar_of(GgufType::U8, v); }
GgufValue GgufValue::i8(int8_t v) { return scalar_of(GgufType::I8, v); }
GgufValue GgufValue::u16(uint16_t v) { return scalar_of(GgufType::U16, v); }
GgufValue GgufValue::i16(int16_t v) { return scalar_of(GgufType::I16, v); }
GgufValue GgufValue::u32(uint32_t v) { return scalar_of(GgufType::U32, v); }
GgufValue GgufValue::i32(int32_t v) { return scalar_of(GgufType::I32, v); }
GgufValue GgufValue::u64(uint64_t v) { return scalar_of(GgufType::U64, v); }
GgufValue GgufValue::i64(int64_t v) { return scalar_of(GgufType::I64, v); }
GgufValue GgufValue::f32(float v) { return scalar_of(GgufType::F32, v); }
GgufValue GgufValue::f64(double v) { return scalar_of(GgufType::F64, v); }
GgufValue GgufValue::boolean(bool v) { return scalar_of(GgufType::BOOL, static_cast<uint8_t>(v ? 1 : 0)); }
GgufValue GgufValue::string(std::string v) {
  GgufValue g;
  g.type_ = GgufType::STRING;
  g.elem_ = GgufType::STRING;
  g.count_ = 1;
  g.strings_.push_back(std::move(v));
  return g;
}

GgufValue GgufValue::u8_array(const std::vector<uint8_t>& v) { return array_of(GgufType::U8, v); }
GgufValue GgufValue::i8_array(const std::vector<int8_t>& v) { return array_of(GgufType::I8, v); }
GgufValue GgufValue::u16_array(const std::vector<uint16_t>& v) {
  return array_of(GgufType::U16, v);
}
GgufValue GgufValue::i16_array(const std::vector<int16_t>& v) {
  return array_of(GgufType::I16, v);
}
GgufValue GgufValue::u32_array(const std::vector<uint32_t>& v) {
  return array_of(GgufType::U32, v);
}
GgufValue GgufValue::i32_array(const std::vector<int32_t>& v) {
  return array_of(GgufType::I32, v);
}
GgufValue GgufValue::u64_array(const std::vector<uint64_t>& v) {
  return array_of(GgufType::U64, v);
}
GgufValue GgufValue::i64_array(const std::vector<int64_t>& v) {
  return array_of(GgufType::I64, v);
}
GgufValue GgufValue::f32_array(const std::vector<float>& v) { return array_of(GgufType::F32, v); }
GgufValue GgufValue::f64_array(const std::vector<double>& v) {
  return array_of(GgufType::F64, v);
}
GgufValue GgufValue::bool_array(const std::vector<bool>& v) {
  std::vector<uint8_t> bytes(v.begin(), v.end());
  return array_of(GgufType::BOOL, bytes);
}
GgufValue GgufValue::string_array(std::vector<std::string> v) {
  GgufValue g;
  g.type_ = GgufType::ARRAY;
  g.elem_ = GgufType::STRING;
  g.count_ = v.size();
  g.strings_ = std::move(v);
  return g;
}

GgufValue GgufValue::raw_array(GgufType elem, std::vector<std::byte> raw) {
  const size_t size = gguf_type_size(elem);
  if (size == 0) fail("array of ", gguf_type_name(elem), " has no fixed element size");
  if (raw.size() % size != 0)
    fail("array of ", gguf_type_name(elem), ": ", raw.size(), " bytes is not a whole number of ",
         size, "-byte elements");
  if (elem == GgufType::BOOL) {
    for (size_t i = 0; i < raw.size(); ++i)
      if (static_cast<uint8_t>(raw[i]) > 1)
        fail("bool array element ", i, " is ", static_cast<int>(raw[i]), " (must be 0 or 1)");
  }
  GgufValue g;
  g.type_ = GgufType::ARRAY;
  g.elem_ = elem;
  g.count_ = raw.size() / size;
  g.raw_ = std::move(raw);
  return g;
}

// --- access ---------------------------------------------------------------------------------

std::string GgufValue::type_description() const {
  if (!is_array()) return gguf_type_name(type_);
  return "array[" + gguf_type_name(elem_) + " x " + std::to_string(count_) + "]";
}

void GgufValue::check_scalar(const char* expected) const {
  if (is_array()) fail("is ", type_description(), ", expected ", expected);
}

void GgufValue::check_array_index(uint64_t i) const {
  if (!is_array()) fail("is ", type_description(), ", expected an array");
  if (i >= count_) fail("index ", i, " out of range for ", type_description());
}

int64_t GgufValue::int_elem(uint64_t i) const {
  const std::byte* p = raw_.data() + i * gguf_type_size(elem_);
  switch (elem_) {
    case GgufType::U8: return load<uint8_t>(p);
    case GgufType::I8: return load<int8_t>(p);
    case GgufType::U16: return load<uint16_t>(p);
    case GgufType::I16: return load<int16_t>(p);
    case GgufType::U32: return load<uint32_t>(p);
    case GgufType::I32: return load<int32_t>(p);
    case GgufType::I64: return load<int64_t>(p);
    case GgufType::U64: {
      const uint64_t v = load<uint64_t>(p);
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail("u64 value ", v, " does not fit int64");
      return static_cast<int64_t>(v);
    }
    default:
      fail("is ", type_description(), ", expected an integer");
  }
}

uint64_t GgufValue::uint_elem(uint64_t i) const {
  if (elem_ == GgufType::U64) return load<uint64_t>(raw_.data() + i * 8);
  const int64_t v = int_elem(i);
  if (v < 0) fail(gguf_type_name(elem_), " value ", v, " is negative, expected unsigned");
  return static_cast<uint64_t>(v);
}

double GgufValue::float_elem(uint64_t i) const {
  if (elem_ == GgufType::F32) return load<float>(raw_.data() + i * 4);
  if (elem_ == GgufType::F64) return load<double>(raw_.data() + i * 8);
  if (is_integer_type(elem_)) {
    if (elem_ == GgufType::U64) return static_cast<double>(load<uint64_t>(raw_.data() + i * 8));
    return static_cast<double>(int_elem(i));
  }
  fail("is ", type_description(), ", expected a float or an integer");
}

int64_t GgufValue::as_int() const {
  check_scalar("an integer");
  return int_elem(0);
}
uint64_t GgufValue::as_uint() const {
  check_scalar("an unsigned integer");
  return uint_elem(0);
}
double GgufValue::as_float() const {
  check_scalar("a float");
  return float_elem(0);
}
bool GgufValue::as_bool() const {
  if (type_ != GgufType::BOOL) fail("is ", type_description(), ", expected bool");
  return raw_[0] != std::byte{0};
}
const std::string& GgufValue::as_string() const {
  if (type_ != GgufType::STRING) fail("is ", type_description(), ", expected string");
  return strings_[0];
}

int64_t GgufValue::int_at(uint64_t i) const {
  check_array_index(i);
  return int_elem(i);
}
double GgufValue::float_at(uint64_t i) const {
  check_array_index(i);
  return float_elem(i);
}
bool GgufValue::bool_at(uint64_t i) const {
  check_array_index(i);
  if (elem_ != GgufType::BOOL) fail("is ", type_description(), ", expected array of bool");
  return raw_[i] != std::byte{0};
}
const std::string& GgufValue::string_at(uint64_t i) const {
  check_array_index(i);
  if (elem_ != GgufType::STRING) fail("is ", type_description(), ", expected array of string");
  return strings_[i];
}

std::vector<int64_t> GgufValue::to_int_array() const {
  if (!is_array() || !is_integer_type(elem_))
    fail("is ", type_description(), ", expected array of integers");
  std::vector<int64_t> out(count_);
  for (uint64_t i = 0; i < count_; ++i) out[i] = int_elem(i);
  return out;
}
std::vector<double> GgufValue::to_float_array() const {
  if (!is_array() || !(is_integer_type(elem_) || is_float_type(elem_)))
    fail("is ", type_description(), ", expected array of floats");
  std::vector<double> out(count_);
  for (uint64_t i = 0; i < count_; ++i) out[i] = float_elem(i);
  return out;
}
const std::vector<std::string>& GgufValue::strings() const {
  if (!is_array() || elem_ != GgufType::STRING)
    fail("is ", type_description(), ", expected array of string");
  return strings_;
}

bool GgufValue::operator==(const GgufValue& o) const {
  return type_ == o.type_ && elem_ == o.elem_ && count_ == o.count_ && raw_ == o.raw_ &&
         strings_ == o.strings_;
}

// --- display --------------------------------------------------------------------------------

namespace {

// Quoted, with control bytes escaped and the tail cut after max_chars bytes.
std::string quote(const std::string& s, size_t max_chars) {
  std::string out = "\"";
  const size_t n = std::min(s.size(), max_chars);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  if (s.size() > max_chars) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace

std::string GgufValue::to_display(size_t max_elems, size_t max_chars) const {
  auto elem = [&](uint64_t i) -> std::string {
    switch (elem_) {
      case GgufType::STRING: return quote(strings_[i], max_chars);
      case GgufType::BOOL: return raw_[i] != std::byte{0} ? "true" : "false";
      case GgufType::F32:
      case GgufType::F64: {
        // Shortest text that reads back to the same value ("0.1", not "0.100000001").
        char buf[64];
        const auto r = elem_ == GgufType::F32
                           ? std::to_chars(buf, buf + sizeof buf, load<float>(raw_.data() + i * 4))
                           : std::to_chars(buf, buf + sizeof buf, load<double>(raw_.data() + i * 8));
        return std::string(buf, r.ptr);
      }
      case GgufType::U64: return std::to_string(load<uint64_t>(raw_.data() + i * 8));
      default: return std::to_string(int_elem(i));
    }
  };
  if (!is_array()) return elem(0);
  std::string out = "[" + gguf_type_name(elem_) + " x " + std::to_string(count_) + "]";
  for (uint64_t i = 0; i < count_ && i < max_elems; ++i) out += (i ? ", " : " ") + elem(i);
  if (count_ > max_elems) out += ", ...";
  return out;
}

}  // namespace memra
