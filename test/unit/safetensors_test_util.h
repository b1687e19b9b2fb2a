// Helpers for the safetensors tests: files are assembled byte by byte here, independently of
// memra::write_safetensors_file, so that the reader is checked against the format itself.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace memra::st_test {

// u64 little-endian header length, the header text, then the data buffer.
inline std::string file_bytes(std::string_view header, std::string_view data = {}) {
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out.append(header);
  out.append(data);
  return out;
}

// Little-endian bytes of an integer of `width` bytes (two's complement for negatives).
inline std::string le(uint64_t v, int width) {
  std::string s;
  for (int i = 0; i < width; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return s;
}

inline void write_file(const std::filesystem::path& p, std::string_view bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("test: cannot write " + p.string());
}

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  explicit TempDir(std::string_view tag = "st") {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / ("memra-" + std::string(tag) + "-XXXXXX"))
            .string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("test: mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(std::string_view name, std::string_view bytes) const {
    const std::filesystem::path p = path_ / std::string(name);
    write_file(p, bytes);
    return p.string();
  }

 private:
  std::filesystem::path path_;
};

}  // namespace memra::st_test
