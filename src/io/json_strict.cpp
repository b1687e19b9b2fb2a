#include "io/json_strict.h"

#include <set>
#include <vector>

#include "memra/error.h"

namespace memra::detail {
namespace {

constexpr size_t kMaxDepth = 64;

struct Frame {
  bool is_object = false;
  std::set<std::string, std::less<>> keys;
  std::string key;  // the key whose value is being parsed (objects only)
};

}  // namespace

nlohmann::json parse_json_strict(std::string_view text, std::string_view what,
                                 std::string_view top_noun) {
  using nlohmann::json;
  std::vector<Frame> stack;
  std::string dup;       // first duplicate found, as a dotted path
  bool dup_top = false;  // ... and whether it was a top-level key
  // The callback only records: throwing through nlohmann's parser is avoided except for the
  // depth bound, where stopping early is the point.
  json::parser_callback_t check = [&](int, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (stack.size() >= kMaxDepth) fail(what, ": nesting deeper than ", kMaxDepth);
        stack.push_back(Frame{ev == json::parse_event_t::object_start, {}, {}});
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!stack.empty()) stack.pop_back();
        break;
      case json::parse_event_t::key: {
        Frame& f = stack.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second && dup.empty()) {
          dup_top = stack.size() == 1;
          for (const Frame& g : stack) {
            if (!g.is_object) continue;
            if (!dup.empty()) dup += '.';
            dup += g.key;
          }
        }
        break;
      }
      case json::parse_event_t::value:
        break;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), check, /*allow_exceptions=*/true,
                    /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    fail(what, ": invalid JSON: ", e.what());
  }
  if (!dup.empty()) fail(what, ": duplicate ", dup_top ? top_noun : "key", " '", dup, "'");
  return j;
}

std::string_view json_kind(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return "boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "integer";
    case nlohmann::json::value_t::number_float: return "float";
    case nlohmann::json::value_t::string: return "string";
    case nlohmann::json::value_t::array: return "array";
    case nlohmann::json::value_t::object: return "object";
    case nlohmann::json::value_t::binary: return "binary";
    case nlohmann::json::value_t::discarded: return "discarded";
  }
  return "unknown";
}

}  // namespace memra::detail
