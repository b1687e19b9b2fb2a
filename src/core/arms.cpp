// Arms (memra/arms.h): everything here is generated from the MEMRA_ARMS table.
#include "memra/arms.h"

#include <cctype>
#include <cstdlib>

#include "memra/error.h"

namespace memra {
namespace {

// One spelling table per enum: the spelling is the contract between env, reports and set().
template <class E>
struct Spelling {
  E value;
  std::string_view name;
};
template <class E>
struct Spellings;  // specialised per arm type: static constexpr table[]
template <>
struct Spellings<PrefillAct> {
  static constexpr Spelling<PrefillAct> table[] = {{PrefillAct::w4a8, "w4a8"}, {PrefillAct::w4a4, "w4a4"}};
};
template <>
struct Spellings<DecodeMatvec> {
  static constexpr Spelling<DecodeMatvec> table[] = {{DecodeMatvec::mmvq, "mmvq"}, {DecodeMatvec::dp4a, "dp4a"}};
};
template <>
struct Spellings<GdnPrefill> {
  static constexpr Spelling<GdnPrefill> table[] = {{GdnPrefill::recurrent, "recurrent"},
                                                   {GdnPrefill::chunked, "chunked"}};
};
template <>
struct Spellings<PrefillMatmul> {
  static constexpr Spelling<PrefillMatmul> table[] = {{PrefillMatmul::mmvq, "mmvq"}, {PrefillMatmul::mma, "mma"}};
};
template <>
struct Spellings<MlaDecode> {
  static constexpr Spelling<MlaDecode> table[] = {{MlaDecode::expanded, "expanded"}, {MlaDecode::latent, "latent"}};
};
template <>
struct Spellings<PrefillAttn> {
  static constexpr Spelling<PrefillAttn> table[] = {{PrefillAttn::split, "split"}, {PrefillAttn::flash, "flash"}};
};
template <>
struct Spellings<Nvfp4Dot> {
  static constexpr Spelling<Nvfp4Dot> table[] = {{Nvfp4Dot::sub16, "sub16"}, {Nvfp4Dot::pair32, "pair32"}};
};
template <>
struct Spellings<bool> {
  static constexpr Spelling<bool> table[] = {{true, "on"}, {false, "off"}};
};

template <class T>
std::string_view spell(T v) {
  for (const auto& s : Spellings<T>::table)
    if (s.value == v) return s.name;
  return "?";
}

template <class T>
std::vector<std::string_view> spellings() {
  std::vector<std::string_view> out;
  for (const auto& s : Spellings<T>::table) out.push_back(s.name);
  return out;
}

template <class T>
T parse(std::string_view field, std::string_view value) {
  if constexpr (std::is_same_v<T, bool>) {  // bools also take the usual aliases
    if (value == "1" || value == "true") return true;
    if (value == "0" || value == "false") return false;
  }
  std::string accepted;
  for (const auto& s : Spellings<T>::table) {
    if (s.name == value) return s.value;
    accepted += (accepted.empty() ? "" : ", ") + std::string(s.name);
  }
  if constexpr (std::is_same_v<T, bool>) accepted += ", 1, 0, true, false";
  fail("arms: ", field, "='", value, "' is not one of: ", accepted);
}

std::vector<ArmSpec> make_specs() {
  const Arms def, eq = Arms::equalised();
  std::vector<ArmSpec> specs;
#define MEMRA_ARM_SPEC(field, type, d, e, doc) \
  specs.push_back({#field, Arms::env_name(#field), spellings<type>(), spell(def.field), spell(eq.field), doc});
  MEMRA_ARMS(MEMRA_ARM_SPEC)
#undef MEMRA_ARM_SPEC
  return specs;
}

}  // namespace

std::string_view to_string(PrefillAct v) { return spell(v); }
std::string_view to_string(DecodeMatvec v) { return spell(v); }
std::string_view to_string(GdnPrefill v) { return spell(v); }
std::string_view to_string(MlaDecode v) { return spell(v); }
std::string_view to_string(PrefillMatmul v) { return spell(v); }
std::string_view to_string(PrefillAttn v) { return spell(v); }
std::string_view to_string(Nvfp4Dot v) { return spell(v); }

Arms Arms::equalised() {
  Arms a;
#define MEMRA_ARM_EQUALISED(field, type, d, e, doc) a.field = e;
  MEMRA_ARMS(MEMRA_ARM_EQUALISED)
#undef MEMRA_ARM_EQUALISED
  return a;
}

void Arms::set(std::string_view field, std::string_view value) {
#define MEMRA_ARM_SET(f, type, d, e, doc) \
  if (field == #f) {                      \
    f = parse<type>(field, value);        \
    return;                               \
  }
  MEMRA_ARMS(MEMRA_ARM_SET)
#undef MEMRA_ARM_SET
  std::string known;
  for (const ArmSpec& s : arm_specs()) known += (known.empty() ? "" : ", ") + std::string(s.field);
  fail("arms: unknown field '", field, "' (fields: ", known, ")");
}

std::vector<std::pair<std::string_view, std::string_view>> Arms::fields() const {
  std::vector<std::pair<std::string_view, std::string_view>> out;
#define MEMRA_ARM_PAIR(f, type, d, e, doc) out.emplace_back(#f, spell(f));
  MEMRA_ARMS(MEMRA_ARM_PAIR)
#undef MEMRA_ARM_PAIR
  return out;
}

std::span<const ArmSpec> arm_specs() {
  static const std::vector<ArmSpec> specs = make_specs();
  return specs;
}

std::string arms_markdown_table() {
  std::string t = "| arm | variable | values | default | equalised | what |\n|---|---|---|---|---|---|\n";
  for (const ArmSpec& s : arm_specs()) {
    std::string values;
    for (std::string_view v : s.values) values += (values.empty() ? "" : ", ") + std::string(v);
    t += "| " + std::string(s.field) + " | `" + s.env + "` | " + values + " | " + std::string(s.default_value) + " | " +
         std::string(s.equalised_value) + " | " + std::string(s.doc) + " |\n";
  }
  return t;
}

std::string Arms::env_name(std::string_view field) {
  std::string s = "MEMRA_";
  for (char c : field) s += char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

Arms Arms::from_env(const std::function<const char*(const char*)>& getenv) {
  Arms a;
  for (const ArmSpec& s : arm_specs()) {
    const char* v = getenv(s.env.c_str());
    if (v == nullptr || *v == '\0') continue;
    with_context("environment " + s.env, [&] { a.set(s.field, v); });
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
