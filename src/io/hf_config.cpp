#include "memra/hf_config.h"

#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/json_strict.h"
#include "memra/error.h"

namespace memra {

using Json = nlohmann::json;  // not `json`: HfConfig::json() would hide it
using detail::json_kind;

// Where a key was found: the value and the name to show in messages ("text_config.x" when it
// came from the nested config).
struct HfConfig::Found {
  const Json* value = nullptr;
  std::string shown;
};

HfConfig::HfConfig(const HfConfig& o)
    : path_(o.path_), text_(o.text_), json_(o.json_ ? std::make_unique<Json>(*o.json_) : nullptr) {}
HfConfig::HfConfig(HfConfig&&) noexcept = default;
HfConfig& HfConfig::operator=(const HfConfig& o) {
  if (this != &o) *this = HfConfig(o);
  return *this;
}
HfConfig& HfConfig::operator=(HfConfig&&) noexcept = default;
HfConfig::~HfConfig() = default;

HfConfig HfConfig::parse(std::string_view text, std::string path) {
  HfConfig c;
  c.path_ = std::move(path);
  c.text_ = std::string(text);
  const std::string what = "config.json " + c.path_;
  c.json_ = std::make_unique<Json>(detail::parse_json_strict(text, what));
  if (!c.json_->is_object())
    fail(what, ": top level is ", json_kind(*c.json_), ", expected object");
  auto tc = c.json_->find("text_config");
  // A null text_config is what transformers writes for "no nested config".
  if (tc != c.json_->end() && !tc->is_object() && !tc->is_null())
    fail(what, ": key 'text_config': is ", json_kind(*tc), ", expected object");
  return c;
}

HfConfig HfConfig::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("config.json ", path, ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("config.json ", path, ": read error");
  return parse(ss.str(), path);
}

bool HfConfig::has_text_config() const {
  auto tc = json_->find("text_config");
  return tc != json_->end() && tc->is_object();
}

HfConfig::Found HfConfig::lookup(std::string_view key) const {
  const size_t dot = key.find('.');
  const std::string first(key.substr(0, dot));
  Found f;
  const Json& root = *json_;
  const Json* obj = &root;
  auto it = obj->find(first);
  if (it == obj->end() && has_text_config()) {
    obj = &root.at("text_config");
    it = obj->find(first);
    if (it != obj->end()) f.shown = "text_config.";
  }
  f.shown += std::string(key);
  if (it == obj->end()) return f;
  const Json* v = &*it;
  // The rest of a dotted path descends through objects; a non-object on the way is "missing".
  size_t pos = dot;
  while (pos != std::string_view::npos) {
    const size_t next = key.find('.', pos + 1);
    const std::string seg(key.substr(pos + 1, next == std::string_view::npos ? next : next - pos - 1));
    if (!v->is_object()) return Found{nullptr, f.shown};
    auto sub = v->find(seg);
    if (sub == v->end()) return Found{nullptr, f.shown};
    v = &*sub;
    pos = next;
  }
  f.value = v;
  return f;
}

const Json* HfConfig::find(std::string_view key) const { return lookup(key).value; }

bool HfConfig::has(std::string_view key) const {
  const Json* v = find(key);
  return v && !v->is_null();
}

const Json& HfConfig::require(std::string_view key, std::string* shown) const {
  Found f = lookup(key);
  if (!f.value) fail("config.json ", path_, ": key '", f.shown, "': missing");
  *shown = f.shown;
  return *f.value;
}

namespace {

[[noreturn]] void wrong_type(const std::string& path, const std::string& shown, const Json& v,
                             std::string_view expected) {
  fail("config.json ", path, ": key '", shown, "': is ", json_kind(v), ", expected ", expected);
}

// An integer that fits int64 (a uint64 above INT64_MAX is reported as out of range).
int64_t as_int(const std::string& path, const std::string& shown, const Json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail("config.json ", path, ": key '", shown, "': ", u, " is out of int64 range");
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  wrong_type(path, shown, v, "integer");
}

}  // namespace

int64_t HfConfig::get_int(std::string_view key) const {
  std::string shown;
  const Json& v = require(key, &shown);
  return as_int(path_, shown, v);
}

double HfConfig::get_float(std::string_view key) const {
  std::string shown;
  const Json& v = require(key, &shown);
  if (!v.is_number()) wrong_type(path_, shown, v, "number");
  return v.get<double>();
}

bool HfConfig::get_bool(std::string_view key) const {
  std::string shown;
  const Json& v = require(key, &shown);
  if (!v.is_boolean()) wrong_type(path_, shown, v, "boolean");
  return v.get<bool>();
}

std::string HfConfig::get_string(std::string_view key) const {
  std::string shown;
  const Json& v = require(key, &shown);
  if (!v.is_string()) wrong_type(path_, shown, v, "string");
  return v.get<std::string>();
}

std::vector<int64_t> HfConfig::get_int_array(std::string_view key) const {
  std::string shown;
  const Json& v = require(key, &shown);
  if (!v.is_array()) wrong_type(path_, shown, v, "array of integers");
  std::vector<int64_t> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out.push_back(as_int(path_, shown + "[" + std::to_string(i) + "]", v[i]));
  return out;
}

std::vector<double> HfConfig::get_float_array(std::string_view key) const {
  std::string shown;
  const Json& v = require(key, &shown);
  if (!v.is_array()) wrong_type(path_, shown, v, "array of numbers");
  std::vector<double> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number()) wrong_type(path_, shown + "[" + std::to_string(i) + "]", v[i], "number");
    out.push_back(v[i].get<double>());
  }
  return out;
}

std::vector<std::string> HfConfig::get_string_array(std::string_view key) const {
  std::string shown;
  const Json& v = require(key, &shown);
  if (!v.is_array()) wrong_type(path_, shown, v, "array of strings");
  std::vector<std::string> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) wrong_type(path_, shown + "[" + std::to_string(i) + "]", v[i], "string");
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

int64_t HfConfig::get_int_or(std::string_view key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}
double HfConfig::get_float_or(std::string_view key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}
bool HfConfig::get_bool_or(std::string_view key, bool fallback) const {
  return has(key) ? get_bool(key) : fallback;
}
std::string HfConfig::get_string_or(std::string_view key, std::string fallback) const {
  return has(key) ? get_string(key) : fallback;
}

std::string HfConfig::architecture() const {
  auto it = json_->find("architectures");
  if (it == json_->end()) fail("config.json ", path_, ": key 'architectures': missing");
  if (!it->is_array()) wrong_type(path_, "architectures", *it, "array of strings");
  if (it->empty()) fail("config.json ", path_, ": key 'architectures': is empty");
  if (!(*it)[0].is_string()) wrong_type(path_, "architectures[0]", (*it)[0], "string");
  return (*it)[0].get<std::string>();
}

}  // namespace memra
