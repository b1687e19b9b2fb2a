// memra/mapped_file.h — a whole file mapped read-only: the bytes that GGUF and safetensors
// tensor views point into, for as long as their source lives.
//
// Errors carry no file prefix (the reader adds "gguf <path>: " or "safetensors <path>: "):
// "cannot open: <reason>", "cannot stat: <reason>", "is a directory", "is not a regular file",
// "cannot mmap <n> bytes: <reason>". An empty file maps to no bytes (the parser then reports
// what it could not read), never to an mmap error.
//
// provides: MappedFile
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace memra {

class MappedFile {
 public:
  MappedFile() = default;
  static MappedFile open(const std::string& path);

  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace memra
