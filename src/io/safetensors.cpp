#include "memra/safetensors.h"


#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/json_strict.h"
#include "memra/error.h"
#include "memra/mapped_file.h"

namespace memra {

using nlohmann::json;
using detail::json_kind;

namespace {

namespace fs = std::filesystem;

// A header is JSON text of a few KiB to a few MiB for real checkpoints; a length beyond this
// is a corrupt or hostile file, refused before anything is allocated for it.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
constexpr size_t kMaxDims = 4;  // TensorView's limit (ggml's GGML_MAX_DIMS)

struct DtypeName {
  DType type;
  std::string_view name;
};
constexpr DtypeName kDtypes[] = {
    {DType::F32, "F32"}, {DType::F16, "F16"},         {DType::BF16, "BF16"},       {DType::F64, "F64"},
    {DType::I8, "I8"},   {DType::U8, "U8"},           {DType::I16, "I16"},         {DType::I32, "I32"},
    {DType::I64, "I64"}, {DType::F8_E4M3, "F8_E4M3"}, {DType::F8_E8M0, "F8_E8M0"},
};

std::string supported_list() {
  std::string s;
  for (const DtypeName& d : kDtypes) {
    if (!s.empty()) s += ' ';
    s += d.name;
  }
  return s;
}

uint64_t read_u64_le(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

// A JSON value that must be a non-negative integer (the header's shape entries and offsets).
uint64_t as_u64(const json& v, std::string_view field) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) fail(field, " is ", v.get<int64_t>(), ": negative");
  fail(field, " is ", json_kind(v), ", expected a non-negative integer");
}

const json& member(const json& entry, const char* key) {
  auto it = entry.find(key);
  if (it == entry.end()) fail("missing '", key, "'");
  return *it;
}

struct Entry {
  std::string name;
  DType type;
  std::vector<int64_t> shape;  // row-major, as in the file
  uint64_t begin, end;
};

Entry parse_entry(const std::string& name, const json& e, uint64_t data_size) {
  if (!e.is_object()) fail("entry is ", json_kind(e), ", expected object");
  Entry out;
  out.name = name;

  const json& dt = member(e, "dtype");
  if (!dt.is_string()) fail("'dtype' is ", json_kind(dt), ", expected string");
  const std::string dname = dt.get<std::string>();
  std::optional<DType> type = safetensors_dtype_from_name(dname);
  if (!type) fail("unsupported dtype '", dname, "' (memra reads ", supported_list(), ")");
  out.type = *type;

  const json& sh = member(e, "shape");
  if (!sh.is_array()) fail("'shape' is ", json_kind(sh), ", expected array");
  if (sh.size() > kMaxDims)
    fail("shape has ", sh.size(), " dimensions; memra supports at most ", kMaxDims);
  int64_t nel = 1;
  bool overflow = false;
  for (size_t i = 0; i < sh.size(); ++i) {
    const std::string field = "shape[" + std::to_string(i) + "]";
    const uint64_t d = as_u64(sh[i], field);
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(field, " is ", d, ": too large");
    out.shape.push_back(static_cast<int64_t>(d));
    overflow = overflow || __builtin_mul_overflow(nel, static_cast<int64_t>(d), &nel);
  }
  // A zero dimension makes any product 0, so an overflow only counts when no dim is zero.
  const bool has_zero = std::find(out.shape.begin(), out.shape.end(), 0) != out.shape.end();
  if (overflow && !has_zero) fail("shape ", shape_str(out.shape), " overflows int64 elements");
  if (has_zero) nel = 0;
  const int64_t esize = type_traits(out.type).block_bytes;
  int64_t nbytes = 0;
  if (__builtin_mul_overflow(nel, esize, &nbytes))
    fail("shape ", shape_str(out.shape), " of ", dname, " overflows int64 bytes");

  const json& off = member(e, "data_offsets");
  if (!off.is_array()) fail("'data_offsets' is ", json_kind(off), ", expected array");
  if (off.size() != 2) fail("'data_offsets' has ", off.size(), " entries, expected 2");
  out.begin = as_u64(off[0], "data_offsets[0]");
  out.end = as_u64(off[1], "data_offsets[1]");
  if (out.end < out.begin)
    fail("data_offsets [", out.begin, ", ", out.end, "]: end before begin");
  if (out.end - out.begin != static_cast<uint64_t>(nbytes))
    fail("data_offsets [", out.begin, ", ", out.end, "] span ", out.end - out.begin,
         " bytes, but shape ", shape_str(out.shape), " of ", dname, " needs ", nbytes);
  if (out.end > data_size)
    fail("data_offsets [", out.begin, ", ", out.end, "] past the end of the data buffer (",
         data_size, " bytes)");
  return out;
}

struct Parsed {
  uint64_t data_start = 0;
  std::vector<Entry> entries;  // data order
  std::map<std::string, std::string> metadata;
};

// Everything but the I/O: `base` holds the whole file. Messages here lack the path; the caller
// prefixes it.
Parsed parse_file(const std::byte* base, uint64_t size) {
  if (size < 8) fail("file is ", size, " bytes, shorter than the 8-byte header length");
  const uint64_t n = read_u64_le(base);
  if (n > kMaxHeaderBytes)
    fail("header length ", n, " exceeds the limit of ", kMaxHeaderBytes, " bytes");
  if (n > size - 8)
    fail("header length ", n, " exceeds the file (", size, " bytes, ", size - 8,
         " after the length)");
  Parsed p;
  p.data_start = 8 + n;
  const uint64_t data_size = size - p.data_start;
  const std::string_view text(reinterpret_cast<const char*>(base + 8), n);
  const json header = detail::parse_json_strict(text, "header", "tensor name");
  if (!header.is_object()) fail("header is ", json_kind(header), ", expected object");

  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) fail("__metadata__ is ", json_kind(value), ", expected object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string())
          fail("__metadata__ key '", k, "' is ", json_kind(v), ", expected string");
        p.metadata.emplace(k, v.get<std::string>());
      }
      continue;
    }
    if (name.empty()) fail("empty tensor name");
    // Named references for the lambda: capturing structured bindings is C++20 (P1091) and
    // clang before 16 rejects it, which would break the clang builds (fuzzing, sanitizers).
    const std::string& tensor_name = name;
    const json& entry = value;
    p.entries.push_back(with_context("tensor '" + tensor_name + "'", [&] {
      return parse_entry(tensor_name, entry, data_size);
    }));
  }

  std::sort(p.entries.begin(), p.entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  // Two tensors sharing bytes would alias each other's data. Empty tensors own no bytes and may
  // sit anywhere. Holes and trailing bytes are tolerated (they harm nothing we read).
  const Entry* reach = nullptr;  // the non-empty tensor reaching furthest so far
  for (const Entry& e : p.entries) {
    if (e.begin == e.end) continue;
    if (reach && e.begin < reach->end)
      fail("tensor '", e.name, "' [", e.begin, ", ", e.end, ") overlaps tensor '", reach->name,
           "' [", reach->begin, ", ", reach->end, ")");
    if (!reach || e.end > reach->end) reach = &e;
  }
  return p;
}

std::string read_text(const std::string& path, const std::string& ctx) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ctx, ": cannot open ", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail(ctx, ": read error on ", path);
  return ss.str();
}

bool is_regular(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

bool has_suffix(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::optional<std::string_view> safetensors_dtype_name(DType t) {
  for (const DtypeName& d : kDtypes)
    if (d.type == t) return d.name;
  return std::nullopt;
}

std::optional<DType> safetensors_dtype_from_name(std::string_view name) {
  for (const DtypeName& d : kDtypes)
    if (d.name == name) return d.type;
  return std::nullopt;
}

// --- SafetensorsFile -------------------------------------------------------------------------

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile);
  f->path_ = path;
  with_context("safetensors " + path, [&] {
    f->map_ = MappedFile::open(path);  // owned from here on, also if parsing throws
    const std::byte* addr = f->map_.bytes().data();
    const size_t size = f->map_.bytes().size();
    Parsed p = parse_file(addr, size);
    f->data_start_ = p.data_start;
    f->metadata_ = std::move(p.metadata);
    f->tensors_.reserve(p.entries.size());
    for (Entry& e : p.entries) {
      TensorView v;
      v.name = std::move(e.name);
      v.type = e.type;
      v.ne.assign(e.shape.rbegin(), e.shape.rend());  // row-major → ggml order
      v.data = std::span<const std::byte>(addr + p.data_start + e.begin, e.end - e.begin);
      f->by_name_.emplace(v.name, f->tensors_.size());
      f->tensors_.push_back(std::move(v));
    }
  });
  return f;
}

SafetensorsFile::~SafetensorsFile() = default;

std::vector<std::string> SafetensorsFile::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const TensorView& t : tensors_) names.push_back(t.name);
  return names;
}

const TensorView* SafetensorsFile::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

// --- SafetensorsDir --------------------------------------------------------------------------

SafetensorsDir::~SafetensorsDir() = default;

std::unique_ptr<SafetensorsDir> SafetensorsDir::open(const std::string& dir) {
  std::unique_ptr<SafetensorsDir> d(new SafetensorsDir);
  d->path_ = dir;
  const std::string ctx = "safetensors " + dir;
  const fs::path root(dir);
  {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) fail(ctx, ": not a directory");
  }

  const fs::path index_path = root / "model.safetensors.index.json";
  if (is_regular(index_path)) {
    const std::string ictx = ctx + ": model.safetensors.index.json";
    const json index =
        detail::parse_json_strict(read_text(index_path.string(), ictx), ictx, "key");
    if (!index.is_object()) fail(ictx, ": top level is ", json_kind(index), ", expected object");
    auto wm = index.find("weight_map");
    if (wm == index.end()) fail(ictx, ": missing 'weight_map'");
    if (!wm->is_object()) fail(ictx, ": 'weight_map' is ", json_kind(*wm), ", expected object");
    // shard file name → tensors the index puts there (std::map: shards in name order).
    std::map<std::string, std::vector<std::string>> listed;
    for (const auto& [tensor, shard] : wm->items()) {
      if (!shard.is_string())
        fail(ictx, ": weight_map['", tensor, "'] is ", json_kind(shard), ", expected string");
      const std::string s = shard.get<std::string>();
      // Shards live in the directory itself; anything else could read outside it.
      if (s.empty() || s == "." || s == ".." || s.find('/') != std::string::npos ||
          s.find('\\') != std::string::npos)
        fail(ictx, ": weight_map['", tensor, "'] = '", s, "' is not a plain file name");
      listed[s].push_back(tensor);
    }
    if (listed.empty()) fail(ictx, ": 'weight_map' is empty");
    for (const auto& [shard, tensors] : listed) {
      const fs::path sp = root / shard;
      if (!is_regular(sp))
        fail(ictx, ": shard '", shard, "' (", tensors.size(), " tensors, e.g. '", tensors[0],
             "') does not exist: ", sp.string());
      d->shards_.push_back(SafetensorsFile::open(sp.string()));
    }
    // Union first, so that a tensor present in two shards is reported as such rather than as
    // a shard/index mismatch.
    for (const auto& s : d->shards_)
      for (const std::string& name : s->tensor_names()) {
        auto [it, fresh] = d->owner_.emplace(name, s.get());
        if (!fresh)
          fail(ctx, ": tensor '", name, "' is in two shards: ",
               fs::path(it->second->path()).filename().string(), " and ",
               fs::path(s->path()).filename().string());
      }
    size_t i = 0;
    for (const auto& [shard, tensors] : listed) {
      const SafetensorsFile& s = *d->shards_[i++];
      for (const std::string& t : tensors)
        if (!s.find(t))
          fail(ictx, ": tensor '", t, "' is mapped to shard '", shard, "', which does not hold it");
    }
    // Every tensor of every shard must be listed, for that shard.
    for (const auto& [name, owner] : d->owner_) {
      auto it = wm->find(name);
      const std::string have = fs::path(owner->path()).filename().string();
      if (it == wm->end())
        fail(ictx, ": shard '", have, "' holds tensor '", name, "', which the index does not list");
      if (it->get<std::string>() != have)
        fail(ictx, ": tensor '", name, "' is mapped to shard '", it->get<std::string>(),
             "' but is in shard '", have, "'");
    }
  } else if (is_regular(root / "model.safetensors")) {
    d->shards_.push_back(SafetensorsFile::open((root / "model.safetensors").string()));
  } else {
    std::vector<std::string> found;
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(root, ec))
      if (has_suffix(e.path().filename().string(), ".safetensors") && is_regular(e.path()))
        found.push_back(e.path().filename().string());
    if (ec) fail(ctx, ": cannot list directory: ", ec.message());
    std::sort(found.begin(), found.end());
    if (found.empty())
      fail(ctx, ": no model.safetensors.index.json, model.safetensors or other *.safetensors file");
    if (found.size() > 1) {
      std::string names;
      for (const std::string& f : found) names += (names.empty() ? "" : ", ") + f;
      fail(ctx, ": ", found.size(), " *.safetensors files and no model.safetensors.index.json "
           "to say how they combine: ", names);
    }
    d->shards_.push_back(SafetensorsFile::open((root / found[0]).string()));
  }
  if (d->owner_.empty())
    for (const std::string& name : d->shards_[0]->tensor_names())
      d->owner_.emplace(name, d->shards_[0].get());

  const fs::path cfg = root / "config.json";
  if (is_regular(cfg)) d->config_ = HfConfig::load(cfg.string());
  return d;
}

std::vector<std::string> SafetensorsDir::tensor_names() const {
  std::vector<std::string> names;
  for (const auto& s : shards_) {
    std::vector<std::string> n = s->tensor_names();
    names.insert(names.end(), n.begin(), n.end());
  }
  return names;
}

const TensorView* SafetensorsDir::find(std::string_view name) const {
  auto it = owner_.find(name);
  return it == owner_.end() ? nullptr : it->second->find(name);
}

const SafetensorsFile* SafetensorsDir::shard_of(std::string_view name) const {
  auto it = owner_.find(name);
  return it == owner_.end() ? nullptr : it->second;
}

const std::string* SafetensorsDir::hf_config_json() const {
  return config_ ? &config_->text() : nullptr;
}

// --- writer ----------------------------------------------------------------------------------

void write_safetensors_file(const std::string& path, const std::vector<TensorView>& tensors,
                            const std::map<std::string, std::string>& metadata) {
  const std::string ctx = "safetensors " + path + ": write";
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  for (const TensorView& t : tensors) {
    const std::string tctx = ctx + ": tensor '" + t.name + "'";
    if (t.name.empty()) fail(ctx, ": empty tensor name");
    if (t.name == "__metadata__" || header.contains(t.name))
      fail(tctx, ": name used twice (or reserved)");
    std::optional<std::string_view> dname = safetensors_dtype_name(t.type);
    if (!dname) fail(tctx, ": type ", dtype_name(t.type), " has no safetensors dtype");
    if (t.ne.size() > kMaxDims) fail(tctx, ": ", t.ne.size(), " dims, at most ", kMaxDims);
    int64_t nel = 1;
    for (int64_t d : t.ne) {
      if (d < 0) fail(tctx, ": negative dimension ", d);
      if (__builtin_mul_overflow(nel, d, &nel)) fail(tctx, ": element count overflows");
    }
    const int64_t want = nel * type_traits(t.type).block_bytes;
    if (t.nbytes() != want)
      fail(tctx, ": data is ", t.nbytes(), " bytes, shape needs ", want);
    nlohmann::ordered_json e = nlohmann::ordered_json::object();
    e["dtype"] = std::string(*dname);
    e["shape"] = std::vector<int64_t>(t.ne.rbegin(), t.ne.rend());
    e["data_offsets"] = {offset, offset + static_cast<uint64_t>(want)};
    header[t.name] = std::move(e);
    offset += static_cast<uint64_t>(want);
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    fail(ctx, ": cannot encode header (names and metadata must be UTF-8): ", e.what());
  }
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');  // data buffer 8-byte aligned in the file

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(ctx, ": cannot create file");
  char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  out.write(len, 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const TensorView& t : tensors)
    out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.nbytes()));
  out.close();
  if (!out) fail(ctx, ": write failed");
}

}  // namespace memra
