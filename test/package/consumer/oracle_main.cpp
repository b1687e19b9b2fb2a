// consumer_oracle DIR — uses the installed library the way a program would: a seeded fixture
// model (memra/fixture.h) written as a GGUF file, opened through the reader, one prompt and one
// decode step on the CPU oracle, checked against the same weights loaded in memory, then banked
// (memra/bank.h) and read back. Prints one line; exit 0 on success.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "memra/bank.h"
#include "memra/error.h"
#include "memra/fixture.h"
#include "memra/hash.h"
#include "memra/oracle.h"
#include "memra/source.h"

int main(int argc, char** argv) try {
  using namespace memra;
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer_oracle DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  const fixture::FixtureSpec spec{.family = Family::Qwen3, .preset = fixture::Preset::Unit};
  const ModelConfig c = fixture::fixture_config(spec);
  const ModelWeights w = fixture::fixture_weights(c, fixture::fixture_seed(spec));
  const std::string path = dir + "/consumer.gguf";
  fixture::write_fixture_gguf(path, c, w, nullptr, DType::F32, "consumer");

  const oracle::Model m = oracle::Model::load(*open_weights(path));
  const oracle::Model mem = oracle::Model::from_weights(c, w);
  const std::vector<int32_t> prompt = {1, 2, 3};
  oracle::Cache cache = m.new_cache(8);
  const std::vector<float> first = m.prime(prompt, cache);
  const int32_t next = oracle::top_k(first, 1).front().first;
  const oracle::Step step = m.decode_step(next, cache);
  if (static_cast<int64_t>(step.logits.size()) != c.n_vocab) fail("decode_step: wrong row width");
  for (float v : step.logits)
    if (!std::isfinite(v)) fail("decode_step: non-finite logit");
  if (mem.forward_last(prompt) != first) fail("GGUF round trip changed the logits");

  Bank b = make_bank(m, prompt, 2);
  std::ifstream f(path, std::ios::binary);
  b.model_sha256 = sha256_hex(std::string(std::istreambuf_iterator<char>(f), {}));
  b.model_name = "consumer";
  b.arm_tag = "cpu-oracle";
  b.band_coeff = band_coeff_for(0.0);
  write_bank(b, dir + "/consumer-bank.json");
  const Bank back = read_bank(dir + "/consumer-bank.json");
  if (back.tokens != b.tokens || back.tokens.front() != next) fail("bank round trip");

  std::printf("consumer_oracle: %s, vocab %lld, prompt -> %d -> %d; bank of %zu steps read back\n", path.c_str(),
              static_cast<long long>(c.n_vocab), next, oracle::top_k(step.logits, 1).front().first, back.tokens.size());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "consumer_oracle: %s\n", e.what());
  return 1;
}
