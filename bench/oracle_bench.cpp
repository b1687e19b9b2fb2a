// bench_oracle — the CPU oracle's speed (Google Benchmark, wall clock). A decode step with the
// real Qwen3 vocabulary (151936 rows) is dominated by the lm_head; the teacher-forced gates and
// memra-bank take one such step per banked position, so this number bounds their run time.
// Speed lives here, not in a unit test: a loaded CI machine (or a sanitizer build) must not fail
// a correctness suite for being slow.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "memra/fixture.h"
#include "memra/oracle.h"
#include "memra/weights.h"

namespace {

using namespace memra;

// the unit qwen3 shapes with D = 128, tied, and the real vocabulary; threads: 0 = hardware
// concurrency.
void BM_OracleDecodeStep(benchmark::State& st) {
  ModelConfig c =
      fixture::fixture_config({.family = Family::Qwen3, .preset = fixture::Preset::Unit, .n_vocab = 151936});
  c.n_embd = 128;
  c.tied_embeddings = true;
  oracle::Options o;
  o.threads = static_cast<int>(st.range(0));
  const oracle::Model m = oracle::Model::from_weights(c, random_weights(c, 14), o);
  oracle::Cache cache = m.new_cache(4096);
  int32_t tok = 1000;
  for (auto _ : st) {
    if (cache.pos + 1 >= cache.max_ctx) cache = m.new_cache(cache.max_ctx);
    oracle::Step s = m.decode_step(tok, cache);
    benchmark::DoNotOptimize(s.logits.data());
    tok = (tok + 1) % 151936;
  }
  st.SetItemsProcessed(st.iterations());
}
BENCHMARK(BM_OracleDecodeStep)
    ->Name("OracleDecodeStep/qwen3-vocab151936")
    ->Arg(0)
    ->Arg(1)
    ->ArgName("threads")
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
