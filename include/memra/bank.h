// memra/bank.h — the bank format: a banked CPU-oracle trajectory ("memra-bank/1" JSON), what
// memra-bank writes and the TeacherForced gate consumes (the gate side, which needs GoogleTest,
// is memra/testing/bank.h).
//
//   oracle::Model m = oracle::Model::load(*open_weights(path));
//   Bank b = make_bank(m, prompt, 32);                 // greedy along the oracle, top-8 per step
//   b.model_sha256 = ...; b.model_name = ...; b.arm_tag = ...;
//   b.measured_noise_rel = reference_noise_rel(m, b.prompt, b.tokens);
//   b.band_coeff = band_coeff_for(b.measured_noise_rel);
//   write_bank(b, "bank.json");
//   ...
//   const Bank bank = read_bank("bank.json");          // integrity checked before any verdict
//   // a gate feeds bank.tokens to the arm under test (teacher forcing): memra/testing/bank.h
//
// The file (JSON, "format": "memra-bank/1"):
//   {"format", "model_sha256" (64 lowercase hex), "model_name", "arm_tag",
//    "prompt": [ids], "tokens": [ids],          // tokens[i]: the oracle's greedy pick at step i
//    "calibration": {"measured_noise_rel", "band_coeff", "rule", "note"},
//    "rows": [{"token", "top_ids": [k ids], "top_logits": [k logits]}, ...]}   // one per token
// Logits are f32 values written as the shortest decimal that reads back to the same double, so a
// write/read round trip is bit-exact.
//
// Step i's row is the logit row that decided tokens[i]: row 0 is prime(prompt)'s last position,
// row i > 0 is decode_step(tokens[i-1]) — so an arm that teacher-forces the banked tokens sees at
// step i exactly the prefix the oracle saw.
//
// Band calibration (GATES.md §3; also docs/testing.md "Banks"). The reference-vs-reference noise
// C_ref is measured on the banked trajectory itself: the oracle teacher-forced along the banked
// tokens once with chunked and once with recurrent GDN prefill (two algebraically identical
// evaluations of the same model), C_ref = max over steps of max_j |chunked_j - recurrent_j| /
// |top1 logit|. Without GDN layers the two are the same computation and C_ref = 0; the oracle
// keeps the GDN state in f64, so C_ref is at most f32 rounding and often exactly 0 too. The band
// uses max(C_ref, 2^-23) (f32 resolution, see band_coeff_for). The seed's rule
// band = 3*sqrt(2)*(C_arm + C_ref)*|top1| is kept: the bank stores C_ref and the coefficient for an
// arm that reproduces the oracle's arithmetic (C_arm = 0); a gate for an arm with its own noise
// (a quantized arm, GPU reductions) adds its separately calibrated C_arm via band_coeff_for. A
// flip needs margin <= |d(top1)| + |d(pick)| <= 2*max|d|, so 3*sqrt(2) leaves ~2x headroom over a
// worst-case flip for the measured constant, while a real error (a wrong layer) moves logits by
// far more than that.
//
// provides: BankRow, check_bank_row, PrintTo (BankRow), Bank, kBankFormat, read_bank, write_bank,
//           validate_bank, make_bank, teacher_forced_rows, reference_noise_rel, kF32ResolutionRel,
//           band_coeff_for
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

namespace memra {

namespace oracle {
class Model;  // memra/oracle.h
}

inline constexpr const char* kBankFormat = "memra-bank/1";

// One banked step: the oracle's greedy token and its top-k (ids, logits), best first.
struct BankRow {
  int32_t token = -1;
  std::vector<int32_t> top_ids;
  std::vector<float> top_logits;
};

// Bank integrity (checked before any verdict): top_ids[0] == token, k >= 2, ids and logits of
// equal length, logits non-increasing. Throws memra::Error naming the step.
void check_bank_row(size_t step, const BankRow& row);

// "BankRow{token 7, top-8 from logit 3.5 to 1.25}": a failed EXPECT_THAT prints this (gtest finds
// PrintTo by argument-dependent lookup) instead of a byte dump of the struct.
void PrintTo(const BankRow& r, std::ostream* os);

struct Bank {
  std::string model_sha256;  // sha256 of the source model file (see tools/memra-bank.cpp)
  std::string model_name;
  std::string arm_tag;  // which reference produced it, e.g. "cpu-oracle/gdn-chunked"
  std::vector<int32_t> prompt;
  std::vector<int32_t> tokens;  // the oracle's greedy continuation, one per row
  std::vector<BankRow> rows;    // rows[i].token == tokens[i]
  // Calibration (see the header comment): band = band_coeff * |top1| for an exact arm.
  double band_coeff = 0;
  double measured_noise_rel = 0;  // C_ref
  std::string calibration_note;   // how C_ref was measured, or why it is 0
};

// Reads and validates a bank: JSON syntax and schema (every field, its type; ids >= 0; sha256
// 64 hex digits; calibration finite and >= 0), every row through check_bank_row, as many rows as
// tokens and rows[i].token == tokens[i]. Throws memra::Error naming the file and, for a row
// problem, the step.
Bank read_bank(const std::string& path);
// Validates as read_bank does (a bank that cannot be read back is never written), then writes.
void write_bank(const Bank& b, const std::string& path);
// Checks what read_bank checks after parsing; `where` prefixes the messages.
void validate_bank(const Bank& b, const std::string& where);

// Greedy along the oracle: prime(prompt), then `steps` picks, each fed back by decode_step. Row i
// holds oracle::top_k(logits, k) (ties to the lower id) of the row that decided tokens[i]. The
// calibration and identity fields are left for the caller. Fails on steps < 1, k < 2, k > n_vocab,
// an empty prompt or prompt + steps over the context.
Bank make_bank(const oracle::Model& m, std::span<const int32_t> prompt, int steps, int k = 8);

// The logit rows an arm sees when it is fed `tokens` after `prompt` (teacher forcing): row 0 is
// prime(prompt), row i is decode_step(tokens[i-1]); tokens.size() rows.
std::vector<std::vector<float>> teacher_forced_rows(const oracle::Model& m, std::span<const int32_t> prompt,
                                                    std::span<const int32_t> tokens);

// C_ref of the header comment: teacher_forced_rows with chunked and with recurrent GDN prefill,
// max over steps of max |difference| / |top1 logit of the chunked row|. 0 for a model without
// GDN layers (the same computation). `m`'s options are restored before returning.
double reference_noise_rel(oracle::Model& m, std::span<const int32_t> prompt, std::span<const int32_t> tokens);

// 3*sqrt(2)*(arm_noise_rel + max(ref_noise_rel, 2^-23)); the bank's band_coeff is
// band_coeff_for(C_ref). The floor: banked logits are f32, so the reference itself is only known
// to ~1 ulp of |top1| (the oracle's f64 GDN state often makes chunked == recurrent bit for bit
// after rounding to f32, a measured C_ref of 0 that must not mean "no band at all").
inline constexpr double kF32ResolutionRel = 1.0 / (1 << 23);
double band_coeff_for(double ref_noise_rel, double arm_noise_rel = 0);
inline double band_coeff_for(const Bank& b, double arm_noise_rel) {
  return band_coeff_for(b.measured_noise_rel, arm_noise_rel);
}

}  // namespace memra
