// tools/cli.h — argument parsing shared by the memra-* programs: integers and id lists with
// errors that name the flag and the offending item (the tools print them and exit 1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memra/error.h"

namespace memra::cli {

// One integer, all of `s` (no trailing junk): "--ctx: '12x' is not an integer".
inline long long parse_int(const std::string& flag, const std::string& s) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (...) {
    used = 0;
  }
  if (s.empty() || used != s.size()) fail(flag, ": '", s, "' is not an integer");
  return v;
}

// "1,2,3" -> {1, 2, 3}: "--tokens: item 1 'x' is not an integer". Range checks against the
// vocabulary are the model's (it names the position).
inline std::vector<int64_t> parse_id_list(const std::string& flag, const std::string& s) {
  std::vector<int64_t> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = s.find(',', start);
    const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      fail(flag, ": item ", out.size(), " '", item, "' is not an integer");
    out.push_back(v);
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

}  // namespace memra::cli
