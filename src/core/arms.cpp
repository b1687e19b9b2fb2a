#include "memra/arms.h"

#include <cctype>
#include <cstdlib>

#include "memra/error.h"

namespace memra {
namespace {

// One table per enum: the spelling is the contract between env, reports and set().
template <class E>
struct Spelling {
  E value;
  std::string_view name;
};
constexpr Spelling<PrefillAct> kPrefillAct[] = {{PrefillAct::w4a8, "w4a8"}, {PrefillAct::w4a4, "w4a4"}};
constexpr Spelling<DecodeMatvec> kDecodeMatvec[] = {{DecodeMatvec::mmvq, "mmvq"},
                                                    {DecodeMatvec::dp4a, "dp4a"}};
constexpr Spelling<GdnPrefill> kGdnPrefill[] = {{GdnPrefill::chunked, "chunked"},
                                                {GdnPrefill::recurrent, "recurrent"}};
constexpr Spelling<PrefillMatmul> kPrefillMatmul[] = {{PrefillMatmul::mmvq, "mmvq"}, {PrefillMatmul::mma, "mma"}};

template <class E, size_t N>
std::string_view name_of(const Spelling<E> (&table)[N], E v) {
  for (const auto& s : table)
    if (s.value == v) return s.name;
  return "?";
}

template <class E, size_t N>
E parse_enum(const Spelling<E> (&table)[N], std::string_view field, std::string_view value) {
  std::string accepted;
  for (const auto& s : table) {
    if (s.name == value) return s.value;
    accepted += (accepted.empty() ? "" : ", ") + std::string(s.name);
  }
  fail("arms: ", field, "='", value, "' is not one of: ", accepted);
}

bool parse_bool(std::string_view field, std::string_view value) {
  if (value == "on" || value == "1" || value == "true") return true;
  if (value == "off" || value == "0" || value == "false") return false;
  fail("arms: ", field, "='", value, "' is not one of: on, off, 1, 0, true, false");
}

std::string_view on_off(bool b) { return b ? "on" : "off"; }

constexpr std::string_view kFields[] = {"prefill_act",     "decode_matvec",  "fuse_norm_quant", "b1_fast",
                                        "decode_graph",    "graph_recapture", "launch_overlap", "gdn_prefill",
                                        "prefill_matmul"};

}  // namespace

std::string_view to_string(PrefillAct v) { return name_of(kPrefillAct, v); }
std::string_view to_string(DecodeMatvec v) { return name_of(kDecodeMatvec, v); }
std::string_view to_string(GdnPrefill v) { return name_of(kGdnPrefill, v); }
std::string_view to_string(PrefillMatmul v) { return name_of(kPrefillMatmul, v); }

Arms Arms::equalised() {
  Arms a;
  a.decode_matvec = DecodeMatvec::dp4a;
  a.fuse_norm_quant = false;
  return a;
}

void Arms::set(std::string_view field, std::string_view value) {
  if (field == "prefill_act") prefill_act = parse_enum(kPrefillAct, field, value);
  else if (field == "decode_matvec") decode_matvec = parse_enum(kDecodeMatvec, field, value);
  else if (field == "fuse_norm_quant") fuse_norm_quant = parse_bool(field, value);
  else if (field == "b1_fast") b1_fast = parse_bool(field, value);
  else if (field == "decode_graph") decode_graph = parse_bool(field, value);
  else if (field == "graph_recapture") graph_recapture = parse_bool(field, value);
  else if (field == "launch_overlap") launch_overlap = parse_bool(field, value);
  else if (field == "gdn_prefill") gdn_prefill = parse_enum(kGdnPrefill, field, value);
  else if (field == "prefill_matmul") prefill_matmul = parse_enum(kPrefillMatmul, field, value);
  else {
    std::string known;
    for (auto f : kFields) known += (known.empty() ? "" : ", ") + std::string(f);
    fail("arms: unknown field '", field, "' (fields: ", known, ")");
  }
}

std::vector<std::pair<std::string_view, std::string_view>> Arms::fields() const {
  return {{"prefill_act", to_string(prefill_act)},
          {"decode_matvec", to_string(decode_matvec)},
          {"fuse_norm_quant", on_off(fuse_norm_quant)},
          {"b1_fast", on_off(b1_fast)},
          {"decode_graph", on_off(decode_graph)},
          {"graph_recapture", on_off(graph_recapture)},
          {"launch_overlap", on_off(launch_overlap)},
          {"gdn_prefill", to_string(gdn_prefill)},
          {"prefill_matmul", to_string(prefill_matmul)}};
}

std::string Arms::env_name(std::string_view field) {
  std::string s = "MEMRA_";
  for (char c : field) s += char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

Arms Arms::from_env(const std::function<const char*(const char*)>& getenv) {
  Arms a;
  for (auto field : kFields) {
    const std::string var = env_name(field);
    const char* v = getenv(var.c_str());
    if (v == nullptr || *v == '\0') continue;
    with_context("environment " + var, [&] { a.set(field, v); });
  }
  return a;
}

Arms Arms::from_env() {
  return from_env([](const char* name) -> const char* { return std::getenv(name); });
}

std::string to_string(const Arms& a) {
  std::string s;
  for (const auto& [k, v] : a.fields()) {
    if (!s.empty()) s += ' ';
    s.append(k).append("=").append(v);
  }
  return s;
}

}  // namespace memra
