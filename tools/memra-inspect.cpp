// memra-inspect: what is in a weights file or model directory, as memra reads it.
//
//   memra-inspect [--json] [--all] FILE.gguf | FILE.safetensors | MODEL_DIR
//
// Opens the path with memra::open_weights (so it validates exactly what the engine would) and
// prints the file, for GGUF its version, alignment, data offset, general.architecture and the
// "<arch>.*" hyper-parameters, all metadata (arrays as "[type x count] first few...", long
// strings shortened; --all prints arrays and strings whole), and the tensor table (name, type,
// shape in ggml ne order, bytes) with the total. For a safetensors model (file or directory with
// config.json) the architecture is config.json's architectures[0] and the hyper-parameters are
// config.json's values, nested objects as dotted paths. --json prints the same as one JSON
// object.
// Errors go to stderr with exit code 1.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "memra/config.h"
#include "memra/error.h"
#include "memra/gguf.h"
#include "memra/safetensors.h"
#include "memra/source.h"

namespace {

// ordered: metadata and hyper-parameters keep the file's order.
using json = nlohmann::ordered_json;

struct Options {
  bool json = false;
  bool all = false;
  std::string path;
};

const char* kUsage =
    "usage: memra-inspect [--json] [--all] FILE.gguf | FILE.safetensors | MODEL_DIR\n"
    "  --json  print one JSON object instead of text\n"
    "  --all   do not shorten arrays and long strings\n";

std::string shape_of(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

std::string human_bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

const char* kind_name(memra::SourceKind k) {
  switch (k) {
    case memra::SourceKind::Gguf: return "gguf";
    case memra::SourceKind::Safetensors: return "safetensors";
    case memra::SourceKind::Memory: return "memory";
  }
  return "?";
}

// A metadata value as JSON: scalars as themselves (u64 stays unsigned), arrays as
// {"type", "count", "values"} with values cut to `max_elems` unless --all.
json value_json(const memra::GgufValue& v, size_t max_elems) {
  using memra::GgufType;
  auto elem = [&](uint64_t i) -> json {
    switch (v.elem_type()) {
      case GgufType::STRING: return v.is_array() ? v.string_at(i) : v.as_string();
      case GgufType::BOOL: return v.is_array() ? v.bool_at(i) : v.as_bool();
      case GgufType::F32:
      case GgufType::F64: return v.is_array() ? v.float_at(i) : v.as_float();
      case GgufType::U64: {
        uint64_t x;
        std::memcpy(&x, v.raw().data() + i * 8, 8);
        return x;
      }
      default: return v.is_array() ? v.int_at(i) : v.as_int();
    }
  };
  if (!v.is_array()) return elem(0);
  json a = json::array();
  for (uint64_t i = 0; i < v.count() && i < max_elems; ++i) a.push_back(elem(i));
  return json{{"type", memra::gguf_type_name(v.elem_type())},
              {"count", v.count()},
              {"values", a},
              {"truncated", v.count() > max_elems}};
}

// A config.json value on one line: scalars as JSON, arrays as JSON up to `max_elems` values
// ("[a, b, ...] (N values)" beyond), strings cut at `max_chars` as GGUF strings are (--all
// prints both whole).
std::string config_display(const json& v, size_t max_elems, size_t max_chars) {
  // Not UTF-8 (or cut inside a character): replaced, never a throw.
  auto text = [](const json& x) { return x.dump(-1, ' ', false, json::error_handler_t::replace); };
  auto scalar = [&](const json& x) {
    if (!x.is_string()) return text(x);
    const std::string& s = x.get_ref<const std::string&>();
    if (s.size() <= max_chars) return text(x);
    return text(json(s.substr(0, max_chars))) + "... (" + std::to_string(s.size()) + " bytes)";
  };
  if (!v.is_array()) return scalar(v);
  std::string out = "[";
  for (size_t i = 0; i < v.size() && i < max_elems; ++i)
    out += (i ? ", " : "") + (v[i].is_structured() ? text(v[i]) : scalar(v[i]));
  if (v.size() > max_elems) out += ", ...] (" + std::to_string(v.size()) + " values)";
  else out += "]";
  return out;
}

// config.json's hyper-parameters as "path = value" lines, nested objects (text_config,
// rope_parameters, ...) flattened to dotted paths: the HF counterpart of GGUF's "<arch>.*" keys.
void print_config(const json& j, const std::string& prefix, size_t max_elems, size_t max_chars) {
  for (const auto& item : j.items()) {
    const std::string path = prefix.empty() ? item.key() : prefix + "." + item.key();
    if (item.value().is_object() && !item.value().empty())
      print_config(item.value(), path, max_elems, max_chars);
    else
      std::cout << "  " << path << " = " << config_display(item.value(), max_elems, max_chars)
                << "\n";
  }
}

bool is_hparam(const std::string& key, const std::string& arch) {
  return !arch.empty() && key.size() > arch.size() && key.compare(0, arch.size(), arch) == 0 &&
         key[arch.size()] == '.';
}

// The architecture as memra understands it (memra/config.h), whatever the file format: the
// family and the hyper-parameters the engine will run with, or why the file is not a model
// memra can run (a tokenizer-only GGUF, an unknown architecture, a misshaped tensor).
struct Detected {
  bool ok = false;
  std::string text;  // summary() or the error
};

Detected detect_model(const memra::WeightSource& src) {
  try {
    return {true, memra::ModelConfig::from_source(src).summary()};
  } catch (const memra::Error& e) {
    return {false, e.what()};
  }
}

int inspect(const Options& o) {
  const std::unique_ptr<memra::WeightSource> src = memra::open_weights(o.path);
  const memra::GgufFile* g = src->gguf();
  const size_t max_elems = o.all ? SIZE_MAX : 8;
  const size_t max_chars = o.all ? SIZE_MAX : 80;

  uint64_t total = 0;
  const std::vector<std::string> names = src->tensor_names();
  for (const std::string& n : names) total += src->tensor(n).data.size();

  if (o.json) {
    json j;
    j["file"] = src->path();
    j["format"] = kind_name(src->kind());
    if (g) {
      j["version"] = g->version();
      j["alignment"] = g->alignment();
      j["data_offset"] = g->data_offset();
      j["file_size"] = g->file_size();
      const std::string arch = g->architecture();
      j["architecture"] = arch;
      json hp = json::object(), md = json::object();
      for (const std::string& k : g->keys()) {
        md[k] = value_json(*g->kv(k), max_elems);
        if (is_hparam(k, arch)) hp[k] = value_json(*g->kv(k), SIZE_MAX);
      }
      j["hyperparameters"] = hp;
      j["metadata"] = md;
    } else if (auto* st = dynamic_cast<const memra::SafetensorsFile*>(src.get())) {
      j["metadata"] = st->metadata();
    }
    if (src->hf_config_json()) j["config_json"] = json::parse(*src->hf_config_json());
    json ts = json::array();
    for (const std::string& n : names) {
      const memra::TensorView& t = src->tensor(n);
      json e{{"name", n}, {"type", memra::dtype_name(t.type)}, {"ne", t.ne},
             {"bytes", t.data.size()}};
      if (g) e["offset"] = g->tensor_offset(n);
      ts.push_back(e);
    }
    j["tensors"] = ts;
    const Detected d = detect_model(*src);
    j["model"] = d.ok ? json{{"summary", d.text}} : json{{"error", d.text}};
    j["tensor_count"] = names.size();
    j["total_bytes"] = total;
    // Metadata strings are not guaranteed UTF-8 (token pieces): replace, do not throw.
    std::cout << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    return 0;
  }

  std::cout << "file:         " << src->path() << "\n";
  std::cout << "format:       " << kind_name(src->kind());
  if (g) {
    std::cout << " v" << g->version() << ", alignment " << g->alignment() << ", data offset "
              << g->data_offset() << ", file size " << g->file_size() << " ("
              << human_bytes(g->file_size()) << ")";
  }
  std::cout << "\n";
  if (g) {
    const std::string arch = g->architecture();
    std::cout << "architecture: " << (arch.empty() ? "(none)" : arch) << "\n";
    if (!arch.empty()) {
      std::cout << "\nhyper-parameters (" << arch << ".*):\n";
      bool any = false;
      for (const std::string& k : g->keys()) {
        if (!is_hparam(k, arch)) continue;
        std::cout << "  " << k << " = " << g->kv(k)->to_display(max_elems, max_chars) << "\n";
        any = true;
      }
      if (!any) std::cout << "  (none)\n";
    }
    std::cout << "\nmetadata (" << g->keys().size() << " keys):\n";
    for (const std::string& k : g->keys()) {
      const memra::GgufValue& v = *g->kv(k);
      // Arrays display as "[type x count] first, ..." already.
      std::cout << "  " << k << " : ";
      if (!v.is_array()) std::cout << v.type_description() << " = ";
      std::cout << v.to_display(max_elems, max_chars) << "\n";
    }
  } else if (auto* st = dynamic_cast<const memra::SafetensorsFile*>(src.get())) {
    std::cout << "\nmetadata (" << st->metadata().size() << " keys):\n";
    for (const auto& [k, v] : st->metadata()) std::cout << "  " << k << " = " << v << "\n";
  }
  if (!g && src->hf_config_json()) {
    // An HF model: what GGUF keeps under "<arch>.*" is in config.json.
    const json cfg = json::parse(*src->hf_config_json());
    std::string arch = "(none)";
    if (cfg.contains("architectures") && cfg["architectures"].is_array() &&
        !cfg["architectures"].empty() && cfg["architectures"][0].is_string())
      arch = cfg["architectures"][0].get<std::string>();
    std::cout << "architecture: " << arch << "\n";
    std::cout << "\nhyper-parameters (config.json):\n";
    if (cfg.is_object() && !cfg.empty())
      print_config(cfg, "", max_elems, max_chars);
    else
      std::cout << "  (none)\n";
  } else if (src->hf_config_json()) {
    std::cout << "config.json:  present\n";
  }
  const Detected d = detect_model(*src);
  std::cout << "\nmodel:        " << (d.ok ? d.text : "not runnable: " + d.text) << "\n";

  size_t w_name = 4, w_type = 4, w_shape = 2;
  for (const std::string& n : names) {
    const memra::TensorView& t = src->tensor(n);
    w_name = std::max(w_name, n.size());
    w_type = std::max(w_type, memra::dtype_name(t.type).size());
    w_shape = std::max(w_shape, shape_of(t.ne).size());
  }
  std::cout << "\ntensors (" << names.size() << "):\n";
  auto row = [&](const std::string& a, const std::string& b, const std::string& c,
                 const std::string& d) {
    std::cout << "  " << std::left << std::setw(static_cast<int>(w_name)) << a << "  "
              << std::setw(static_cast<int>(w_type)) << b << "  "
              << std::setw(static_cast<int>(w_shape)) << c << "  " << std::right
              << std::setw(12) << d << "\n";
  };
  row("name", "type", "ne", "bytes");
  for (const std::string& n : names) {
    const memra::TensorView& t = src->tensor(n);
    row(n, std::string(memra::dtype_name(t.type)), shape_of(t.ne), std::to_string(t.data.size()));
  }
  std::cout << "\ntotal: " << names.size() << " tensors, " << total << " bytes ("
            << human_bytes(total) << ")\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      o.json = true;
    } else if (a == "--all") {
      o.all = true;
    } else if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "memra-inspect: unknown option " << a << "\n" << kUsage;
      return 2;
    } else if (o.path.empty()) {
      o.path = a;
    } else {
      std::cerr << "memra-inspect: more than one path\n" << kUsage;
      return 2;
    }
  }
  if (o.path.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  try {
    return inspect(o);
  } catch (const memra::Error& e) {
    std::cerr << "memra-inspect: " << e.what() << "\n";
    return 1;
  }
}
