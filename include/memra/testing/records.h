// memra/testing/records.h — the records a gate's verdict is computed from, and the rules.
//
// Everything here is pure host code over logit rows and token streams, so every rule is unit
// tested on hand-made rows before a GPU ever feeds it:
//   - top-2 of a row, its margin, the margin distribution of a prompt and a position's rank
//     in it, and the classification of a prefill-vs-decode window (the ArgmaxMargin gate);
//   - Divergence: where two greedy streams first part, with both arms' deciding rows quoted at
//     both candidate ids and the reference arm's entry-point noise there (ArmFork gate);
//   - teacher-forced row classification against a banked oracle top-k (TeacherForced gate);
//   - the config-mode fraction rule (DecodeBatch gate1);
//   - sha256 of a logits stream (run-to-run determinism).
// Token ids are int32_t throughout; greedy ties break to the lowest index (DESIGN.md).
//
// provides: Top2, top2, argmax, GreedyStream, Divergence, first_divergence, floor_position,
//           BankRow, check_bank_row (both memra/bank.h's), TfStep, TfClass, TfRow, BandRule,
//           classify_tf_row, TfSummary, summarize, MarginStats, top2_margins, margin_stats,
//           percentile_rank, MarginClass, MarginPosition, MarginWindow, classify_margin_window,
//           FractionRule, FractionVerdict, apply_fraction_rule, logits_stream_sha256, PrintTo (Divergence,
//           TfStep, TfRow, MarginWindow; BankRow's is memra/bank.h's)
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memra/bank.h"

namespace memra::testing {

// ---- top-2 and margins --------------------------------------------------------------------

struct Top2 {
  int32_t id1 = -1;
  float logit1 = 0;
  int32_t id2 = -1;
  float logit2 = 0;
  float margin() const { return logit1 - logit2; }
};

// Lowest index wins ties (the engine's greedy rule). A row with fewer than two elements or a
// NaN anywhere is an error: a margin over NaN is meaningless and must not pass silently.
Top2 top2(std::span<const float> row);
int32_t argmax(std::span<const float> row);

// ---- greedy streams and their first divergence -------------------------------------------

// A greedy continuation with its deciding rows: rows[p] is the logit row whose argmax
// produced tokens[p]. Gates keep rows so a divergence can be classified, not just located.
struct GreedyStream {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> rows;
};

// First index where two token streams differ; nullopt if they agree over the common length.
std::optional<size_t> floor_position(std::span<const int32_t> a, std::span<const int32_t> b);

// Where a test arm's serving stream first leaves the reference arm's, and whether the fork is
// a coin flip the engine cannot resolve in any arm. Up to `position` both arms decoded the same
// prefix, so their deciding rows there are directly comparable.
struct Divergence {
  std::optional<size_t> position;  // nullopt: the streams agree over `compared` tokens
  size_t compared = 0;             // tokens compared (the shorter stream's length)
  int32_t ref_token = -1;          // the reference arm's pick at `position`
  int32_t test_token = -1;         // the test arm's pick at `position`
  // Both arms' deciding-row logits at both candidate ids.
  float ref_logit_ref_id = 0, ref_logit_test_id = 0;
  float test_logit_ref_id = 0, test_logit_test_id = 0;
  float ref_margin = 0;   // ref row: logit[ref_token] - logit[test_token] (>= 0 for a greedy pick)
  float test_margin = 0;  // test row: logit[test_token] - logit[ref_token]
  float row_maxdiff = 0;  // max |ref row - test row| at `position`
  // The reference arm's entry-point noise at `position`: |batched - tokenwise| of its own two
  // deciding rows at ref_token plus at test_token. Valid only if the reference arm's own two
  // streams still agree up to `position` (noise_floor is nullopt or > position); otherwise the
  // tokenwise row decided a different prefix and says nothing about this decision.
  float entry_noise = 0;
  // The noise stream's (tokenwise) deciding row at `position`, at both candidate ids: the rows
  // entry_noise is measured from, so a reader can check the sum. Set only when noise_measurable.
  float noise_logit_ref_id = 0, noise_logit_test_id = 0;
  std::optional<size_t> noise_floor;  // where the reference's own two streams separate
  bool noise_measurable = false;

  bool diverged() const { return position.has_value(); }
  // The ArmFork verdict: no fork, or a fork whose reference margin is within measurable noise.
  bool within_entry_noise() const;
};

// `ref` and `test` are the two arms' serving streams; `ref_noise` is the reference arm's
// stream built through the other entry point (tokenwise), the noise floor. Streams must carry
// one row per token; row widths must agree. Throws memra::Error naming the stream and index.
Divergence first_divergence(const GreedyStream& ref, const GreedyStream& test,
                            const GreedyStream& ref_noise);

// ---- teacher-forced rows against a banked oracle top-k -----------------------------------

// BankRow (one banked step) and check_bank_row are the bank format's: memra/bank.h.
using memra::BankRow;
using memra::check_bank_row;

enum class TfClass { agree, in_band, out_of_band, unresolved };
std::string_view to_string(TfClass c);

// The band for one row, in logits. A parameter of the gate (and of the InBand matcher):
// calibrated from measured reference-vs-reference noise and stored in the bank.
struct BandRule {
  std::string description;                    // e.g. "0.01*|top1|"
  std::function<double(const BankRow&)> band;
};
BandRule absolute_band(double logits);         // band = logits
BandRule relative_band(double coeff);          // band = coeff * |top1 logit|

struct TfRow {
  size_t step = 0;
  int32_t pick = -1;     // the GPU's argmax at this step (it was fed the banked prefix)
  int32_t banked = -1;   // the oracle's token
  TfClass cls = TfClass::agree;
  // Oracle top1 logit minus the oracle logit of `pick`. When `pick` is outside the banked
  // top-k only a lower bound is known (top1 - topk), and margin_is_lower_bound is set.
  double margin = 0;
  bool margin_is_lower_bound = false;
  // The pick was beyond the banked top-k and its margin was read from the oracle's whole row
  // (CPU adjudication, TfStep::oracle_row): exact, no longer a bound.
  bool adjudicated = false;
  double band = 0;
  bool passes() const { return cls == TfClass::agree || cls == TfClass::in_band; }
};

// What a teacher-forced pass observes at one step: the GPU's pick after being fed the banked
// prefix, and the bank's row for that step. The InBand matcher classifies these.
struct TfStep {
  size_t step = 0;
  int32_t pick = -1;
  BankRow bank;
  // The oracle's whole logit row at this step (the seed's "CPU adjudication"), for a pick the
  // bank cannot resolve; empty otherwise. testing::adjudicate_unresolved fills it.
  std::vector<float> oracle_row = {};
};

// agree; in band iff margin <= band; out of band iff margin (or its lower bound) > band;
// a pick outside the top-k whose lower bound is within the band is unresolved, which the
// gate FAILS: the bank cannot show it is a near tie. Unless `oracle_row` (the oracle's whole row
// at this step) is given: then it must reproduce the banked top-k bit for bit (ids by
// oracle::top_k's rule, logits exactly; else memra::Error naming the step — it is another
// reference), and the pick's exact margin top1 - oracle_row[pick] decides in or out of band.
TfRow classify_tf_row(size_t step, int32_t pick, const BankRow& bank, const BandRule& rule,
                      std::span<const float> oracle_row = {});

struct TfSummary {
  size_t agree = 0, in_band = 0, out_of_band = 0, unresolved = 0;
  size_t adjudicated = 0;  // of the in/out-of-band rows, those resolved by the oracle's whole row
  size_t total() const { return agree + in_band + out_of_band + unresolved; }
  bool passes() const { return out_of_band == 0 && unresolved == 0; }
};
TfSummary summarize(std::span<const TfRow> rows);

// ---- margin distribution ------------------------------------------------------------------

std::vector<float> top2_margins(std::span<const std::vector<float>> rows);

struct MarginStats {
  size_t n = 0;
  float min = 0, p10 = 0, p50 = 0, p90 = 0, max = 0;
};
// Nearest-rank percentiles (index round((n-1)*q) of the sorted margins). Empty input is an error.
MarginStats margin_stats(std::span<const float> margins);
// Fraction of `margins` strictly below `value`, in [0, 1]: where a decision margin sits.
double percentile_rank(std::span<const float> margins, float value);

// ---- the ArgmaxMargin window (prefill-vs-decode flip calibration) -------------------------

// The seed's five verdict classes (argmax_margin_probe.rs). The first three pass.
enum class MarginClass { stable, near_tie_exposed, near_tie, unexplained, systematic };
// "STABLE", "NEAR-TIE-EXPOSED", "NEAR-TIE", "UNEXPLAINED", "SYSTEMATIC" (the seed's words).
std::string_view to_string(MarginClass c);

// One position of the window under both configs: A is the tokenwise decode row at that
// position, B the batched prefill row (forward_last on the prompt truncated after it).
struct MarginPosition {
  size_t position = 0;  // in the prompt
  Top2 a, b;
  // The config delta at the contending ids: max |B[id] - A[id]| over {a.id1, a.id2, b.id1,
  // b.id2}, the quantity that must exceed a margin for a flip to be possible at all.
  float delta_at_ids = 0;
  bool agree = true;  // a.id1 == b.id1
};

struct MarginWindow {
  std::vector<MarginPosition> positions;
  size_t flips = 0;                  // positions whose top-1 differ
  MarginStats margins_a, margins_b;  // top-2 margin distributions: A = decode, B = prefill
  size_t decision = 0;               // index into `positions` of the decision (the window's last)
  // Fraction of config A's margins strictly below the decision's config-A margin (percentile_rank).
  double decision_percentile = 0;
  bool exposed = false;  // delta_at_ids > min(a margin, b margin) at the decision position
  MarginClass cls = MarginClass::stable;

  const MarginPosition& at_decision() const { return positions.at(decision); }
  bool passes() const;  // stable, near-tie-exposed and near-tie pass; unexplained, systematic fail
};

// Classifies a window as the seed does. rows_a[k] and rows_b[k] are the two configs' logit rows
// at prompt position first_position + k. Per position: top-2 of each row (ties to the lowest
// index), margin = logit1 - logit2, delta_at_ids, agreement of the top-1s. flips = disagreeing
// positions; with exposure judged at the decision position:
//   0 flips, not exposed -> STABLE     0 flips, exposed -> NEAR-TIE-EXPOSED
//   1 flip,  exposed     -> NEAR-TIE   1 flip,  not exposed -> UNEXPLAINED
//   >= 2 flips           -> SYSTEMATIC
// The decision position is the window's last (the gate's position), as in the seed's code:
// exposure there asks whether the decision the gate makes is a coin the two configs can turn.
// A single flip elsewhere in the window while the decision position is safe is UNEXPLAINED:
// judged at its own position a flip would always look covered (at a flip, margin_a + margin_b
// <= 2 * delta, so the delta reaches the smaller margin), and the class would say nothing.
// Errors (memra::Error): an empty window, rows_a.size() != rows_b.size(), rows of one position
// differing in width, a row with fewer than two logits or a NaN (these three name the position).
MarginWindow classify_margin_window(std::span<const std::vector<float>> rows_a,
                                    std::span<const std::vector<float>> rows_b, size_t first_position);

// ---- the config-mode fraction rule --------------------------------------------------------

// FAIL iff at least k of the draws diverge before step `early_step`. A plumbing bug (wrong
// token fed, KV misindexed) diverges early on every draw; floating-point composition drift is
// a near-tie coin that hits few draws early.
struct FractionRule {
  size_t k = 4;
  size_t early_step = 3;
};
struct FractionVerdict {
  size_t draws = 0;
  size_t early = 0;  // draws that diverged at a step < early_step
  bool fail = false;
};
// One entry per draw: the step at which it diverged, nullopt if it never did.
FractionVerdict apply_fraction_rule(std::span<const std::optional<size_t>> first_divergence_step,
                                    const FractionRule& rule);

// ---- determinism --------------------------------------------------------------------------

// sha256 over the rows in order: each row as its length (8 little-endian bytes), then each
// float as its 4 little-endian bytes (the bank's format). Equal hashes mean bit-identical
// streams, row boundaries included, on any host.
std::string logits_stream_sha256(std::span<const std::vector<float>> rows);

// ---- printing (gtest finds these by ADL) --------------------------------------------------

// A one-line summary of each record, so a failed EXPECT_THAT opens with "Actual: Divergence{...}"
// instead of gtest's byte dump of the struct (padding bytes included); the matcher's
// explanation that follows carries the detail.
void PrintTo(const Divergence& d, std::ostream* os);
void PrintTo(const TfStep& s, std::ostream* os);
void PrintTo(const TfRow& r, std::ostream* os);
void PrintTo(const MarginWindow& w, std::ostream* os);

}  // namespace memra::testing
