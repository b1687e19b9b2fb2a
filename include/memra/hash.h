// memra/hash.h — SHA-256 (FIPS 180-4), streaming.
//
// Used where two runs must be shown byte-identical without keeping both byte streams: the
// teacher-forced gate hashes its whole logits stream per run, banks record the sha256 of the
// source model they were produced from. Portable scalar code: the hashes are identities, so
// speed does not matter and the result must not depend on the host.
//
// provides: Sha256, sha256_hex, sha256_file_hex
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace memra {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();
  void update(const void* data, size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // Finishes the hash; the object then starts over (ready for a new message).
  Digest finish();
  // finish() as 64 lowercase hex digits.
  std::string finish_hex();

  static std::string to_hex(const Digest& d);

 private:
  void block(const uint8_t* p);
  void reset();

  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_;
  size_t buf_len_ = 0;
  uint64_t total_bytes_ = 0;
};

// One-shot hex digest of a byte string.
std::string sha256_hex(std::string_view bytes);
// Hex digest of a file's bytes, read in 1 MiB pieces; memra::Error naming the file when it cannot
// be opened or read. (The identity of a model file in a bank: memra/bank.h.)
std::string sha256_file_hex(const std::string& path);

}  // namespace memra
