// SHA-256 against the FIPS 180-2 appendix B / NIST CAVP example vectors. The expected digests
// are the published ones, not outputs of this code.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include <string>

#include "memra/error.h"
#include "memra/hash.h"

namespace {

TEST(Sha256, FipsAbc) {
  EXPECT_EQ(memra::sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, FipsEmpty) {
  EXPECT_EQ(memra::sha256_hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, Fips448Bit) {
  // 56 bytes: the padding no longer fits the first block, so this covers the two-block tail.
  EXPECT_EQ(memra::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, FipsMillionA) {
  // Fed in uneven pieces so the buffering across update() calls is exercised too.
  memra::Sha256 h;
  const std::string chunk(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    const size_t n = std::min(left, chunk.size());
    h.update(chunk.data(), n);
    left -= n;
  }
  EXPECT_EQ(h.finish_hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, FinishResetsForTheNextMessage) {
  memra::Sha256 h;
  h.update("garbage");
  (void)h.finish();
  h.update("abc");
  EXPECT_EQ(h.finish_hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, FileDigestIsTheDigestOfItsBytes) {
  const std::string path = ::testing::TempDir() + "/memra_sha256_file.bin";
  std::string bytes(3 << 20, '\0');  // three 1 MiB reads, then a partial one
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131 % 251);
  bytes += "tail";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  EXPECT_EQ(memra::sha256_file_hex(path), memra::sha256_hex(bytes));
  EXPECT_THAT(
      [&] { memra::sha256_file_hex(path + ".missing"); },
      ::testing::ThrowsMessage<memra::Error>(::testing::HasSubstr("memra_sha256_file.bin.missing: cannot open")));
}

}  // namespace
