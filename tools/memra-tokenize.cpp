// memra-tokenize — the tokenizer from the command line, one JSON value per line.
//
//   memra-tokenize --tokenizer (tokenizer.json | model.gguf) --jsonl FILE [--decode]
//
// Encode (default): each line of FILE is a JSON string; prints its ids as a JSON array (no
// BOS/EOS; added-token text such as <|im_end|> becomes its id). With --decode each line is a
// JSON array of ids and the output is a JSON string (bytes that are not valid UTF-8, e.g. a
// character cut between tokens, print as U+FFFD). Errors go to stderr with the line number,
// exit status 1. FILE "-" reads stdin.
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "memra/error.h"
#include "memra/tokenizer.h"

namespace {

int usage(const char* msg) {
  std::cerr << "memra-tokenize: " << msg << "\n"
            << "usage: memra-tokenize --tokenizer (tokenizer.json|model.gguf) --jsonl FILE [--decode]\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tok_path, jsonl;
  bool decode = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--decode") {
      decode = true;
    } else if ((a == "--tokenizer" || a == "--jsonl") && i + 1 < argc) {
      (a == "--tokenizer" ? tok_path : jsonl) = argv[++i];
    } else if (a == "-h" || a == "--help") {
      usage("tokenize text or decode ids");
      return 0;
    } else {
      return usage(("unknown or incomplete argument '" + a + "'").c_str());
    }
  }
  if (tok_path.empty() || jsonl.empty()) return usage("--tokenizer and --jsonl are required");

  std::unique_ptr<memra::Tokenizer> tok;
  try {
    tok = std::make_unique<memra::Tokenizer>(memra::Tokenizer::from_file(tok_path));
  } catch (const std::exception& e) {
    std::cerr << "memra-tokenize: " << e.what() << "\n";
    return 1;
  }

  std::ifstream file;
  if (jsonl != "-") {
    file.open(jsonl, std::ios::binary);
    if (!file) {
      std::cerr << "memra-tokenize: " << jsonl << ": cannot open\n";
      return 1;
    }
  }
  std::istream& in = jsonl == "-" ? std::cin : file;
  std::string line;
  size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    try {
      nlohmann::json v;
      try {
        v = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        memra::fail("not JSON: ", e.what());
      }
      if (decode) {
        if (!v.is_array()) memra::fail("expected a JSON array of ids");
        std::vector<int32_t> ids;
        for (const auto& x : v) {
          if (!x.is_number_integer() || x.get<int64_t>() < INT32_MIN || x.get<int64_t>() > INT32_MAX)
            memra::fail("id ", x.dump(), " is not a 32-bit integer");
          ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
        }
        std::cout << nlohmann::json(tok->decode(ids)).dump(-1, ' ', false,
                                                           nlohmann::json::error_handler_t::replace)
                  << "\n";
      } else {
        if (!v.is_string()) memra::fail("expected a JSON string");
        std::cout << nlohmann::json(tok->encode(v.get<std::string>())).dump() << "\n";
      }
    } catch (const std::exception& e) {
      std::cerr << "memra-tokenize: " << jsonl << ":" << lineno << ": " << e.what() << "\n";
      return 1;
    }
  }
  return 0;
}
