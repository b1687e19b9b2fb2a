// io/json_strict.h (private) — JSON parsing for untrusted headers: nlohmann::json plus the
// checks it does not make.
//
// nlohmann keeps the last of two equal keys silently; in a safetensors header that would hide
// a second tensor of the same name, so every object is checked for duplicate keys. Nesting
// depth is bounded so that a hostile header ("[[[[...") cannot exhaust memory.
//
// provides: parse_json_strict, json_kind
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace memra::detail {

// Parses `text`. Throws memra::Error "<what>: invalid JSON: ..." on a syntax error (including
// invalid UTF-8 in strings), "<what>: duplicate <top_noun> 'k'" for a repeated top-level key
// ("duplicate key 'a.b'" below the top level), or "<what>: nesting deeper than 64".
nlohmann::json parse_json_strict(std::string_view text, std::string_view what,
                                 std::string_view top_noun = "key");

// "null", "boolean", "integer", "float", "string", "array", "object" — for "is X, expected Y".
std::string_view json_kind(const nlohmann::json& v);

}  // namespace memra::detail
