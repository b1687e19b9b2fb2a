// memra/sampling.h — token selection: greedy and seeded temperature sampling, the host version
// of the contract the GPU sampler mirrors.
//
// SampleSpec{temperature, seed, counter}. temperature 0 is greedy: the largest logit, ties to
// the LOWEST index. temperature > 0 is Gumbel-max sampling, which draws exactly from
// softmax(logits / T):
//     token = argmax_i ( logits[i] / T + g_i ),   g_i = -log(-log(u_i)),
//     u_i   = philox_uniform(seed, counter, i)    in (0, 1)
// (ties to the lowest index again). Every u_i is a pure function of (seed, counter, i) through
// Philox4x32-10 (Salmon et al., SC'11), so a sequence's draw never depends on its batch-mates,
// its row, or the order the vocabulary is reduced in: a GPU can score all i in parallel and
// reduce with the same tie rule. Scores are computed in double.
//
// The caller advances `counter` once per generated token (memra-run: counter = position).
//
// provides: SampleSpec, philox4x32_10, uniform_from_53_bits, philox_uniform, argmax_lowest,
//           sample_token
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace memra {

struct SampleSpec {
  float temperature = 0;  // 0: greedy; > 0: softmax(logits / temperature) sampling
  uint64_t seed = 0;
  uint64_t counter = 0;   // one per generated token
};

// Philox4x32 with 10 rounds: the Random123 reference function (known-answer tested).
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key);

// u in (0, 1) from 53 random bits: (bits + 0.5) * 2^-53 as a double (exact below 2^52, rounded
// to even above, where the half needs a 54th bit). The +0.5 keeps u off 0; bits = 2^53 - 1 alone
// rounds to exactly 1, whose -log(-log(u)) is +inf (that index would win whatever its logit), so
// it is capped at 1 - 2^-53. Every other input keeps its value. The device sampler mirrors this.
double uniform_from_53_bits(uint64_t bits);

// uniform_from_53_bits of Philox's block for ctr = {lo(index), hi(index), lo(counter),
// hi(counter)}, key = {lo(seed), hi(seed)}: 32 bits of word 0 above the top 21 of word 1.
double philox_uniform(uint64_t seed, uint64_t counter, uint64_t index);

// The index of the largest value, the lowest index among equals. Fails on an empty row or a
// NaN (naming its index).
int32_t argmax_lowest(std::span<const float> logits);

// The token the spec selects from a logit row (see the header comment). Fails on a negative or
// non-finite temperature, an empty row, or a NaN logit.
int32_t sample_token(std::span<const float> logits, const SampleSpec& spec);

}  // namespace memra
