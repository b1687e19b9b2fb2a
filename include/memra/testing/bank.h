// memra/testing/bank.h — the gate side of banks: the format itself (Bank, read_bank, write_bank,
// make_bank, band calibration) is the library's bank layer, memra/bank.h, whose names are
// available here in memra::testing too; this adds what a gate builds from a bank.
//
//   const Bank bank = read_bank("bank.json");          // integrity checked before any verdict
//   // feed bank.tokens to the arm under test (teacher forcing), collect its argmax per step:
//   EXPECT_THAT(tf_steps(bank, picks), InBand(relative_band(band_coeff_for(bank, arm_noise))));
//
// provides: tf_steps, adjudicate_unresolved; from memra/bank.h: Bank, kBankFormat, read_bank,
//           write_bank, validate_bank, make_bank, teacher_forced_rows, reference_noise_rel,
//           kF32ResolutionRel, band_coeff_for
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "memra/bank.h"
#include "memra/oracle.h"
#include "memra/testing/records.h"

namespace memra::testing {

using memra::band_coeff_for;
using memra::Bank;
using memra::kBankFormat;
using memra::kF32ResolutionRel;
using memra::make_bank;
using memra::read_bank;
using memra::reference_noise_rel;
using memra::teacher_forced_rows;
using memra::validate_bank;
using memra::write_bank;

// The TfSteps of a teacher-forced pass: picks[i] is the arm's argmax at step i. Fails unless
// there is one pick per banked row.
std::vector<TfStep> tf_steps(const Bank& b, std::span<const int32_t> picks);

// CPU adjudication (seed dsv4_gpu_tf_gate.rs: an unresolved row is "CPU adjudication owed"). A
// pick beyond the banked top-k whose lower bound is within the band cannot be judged from the
// bank; the oracle's whole row at that step can. When some step of `steps` is unresolved under
// `rule`, calls `oracle_rows()` once — the oracle teacher-forced along the bank's tokens,
// teacher_forced_rows(oracle, bank.prompt, bank.tokens): row s decided banked step s — and
// attaches to each unresolved step its row (TfStep::oracle_row); classify_tf_row / InBand then
// check that the row reproduces the bank and judge the exact margin. Returns how many steps it
// attached rows to; `oracle_rows` is not called when none is unresolved. Fails when a step owed
// a row is past the rows given.
size_t adjudicate_unresolved(std::vector<TfStep>& steps, const BandRule& rule,
                             const std::function<std::vector<std::vector<float>>()>& oracle_rows);

}  // namespace memra::testing
