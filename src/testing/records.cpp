#include "memra/testing/records.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <ostream>
#include <sstream>

#include "memra/error.h"
#include "memra/hash.h"
#include "memra/oracle.h"

namespace memra::testing {

Top2 top2(std::span<const float> row) {
  MEMRA_CHECK(row.size() >= 2, "top2: row has ", row.size(), " elements, need at least 2");
  Top2 t;
  t.logit1 = -INFINITY;
  t.logit2 = -INFINITY;
  for (size_t i = 0; i < row.size(); ++i) {
    const float v = row[i];
    if (std::isnan(v)) fail("top2: NaN at index ", i, " of a ", row.size(), "-wide row");
    // Strict '>' keeps the lowest index on ties, for the best and the runner-up alike.
    if (t.id1 < 0 || v > t.logit1) {
      t.id2 = t.id1;
      t.logit2 = t.logit1;
      t.id1 = int32_t(i);
      t.logit1 = v;
    } else if (t.id2 < 0 || v > t.logit2) {
      t.id2 = int32_t(i);
      t.logit2 = v;
    }
  }
  return t;
}

int32_t argmax(std::span<const float> row) {
  MEMRA_CHECK(!row.empty(), "argmax: empty row");
  int32_t best = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    if (std::isnan(row[i])) fail("argmax: NaN at index ", i, " of a ", row.size(), "-wide row");
    if (row[i] > row[size_t(best)]) best = int32_t(i);
  }
  return best;
}

std::optional<size_t> floor_position(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return i;
  return std::nullopt;
}

bool Divergence::within_entry_noise() const {
  if (!diverged()) return true;
  return noise_measurable && std::fabs(ref_margin) <= entry_noise;
}

namespace {

void check_stream(std::string_view name, const GreedyStream& s) {
  MEMRA_CHECK(s.rows.size() == s.tokens.size(), "first_divergence: ", name, " stream has ",
              s.tokens.size(), " tokens but ", s.rows.size(), " deciding rows");
}

float row_at(std::string_view name, const std::vector<float>& row, int32_t id, size_t pos) {
  MEMRA_CHECK(id >= 0 && size_t(id) < row.size(), "first_divergence: ", name, " row at position ",
              pos, " has ", row.size(), " logits, token id ", id, " is outside it");
  return row[size_t(id)];
}

}  // namespace

Divergence first_divergence(const GreedyStream& ref, const GreedyStream& test,
                            const GreedyStream& ref_noise) {
  check_stream("reference", ref);
  check_stream("test", test);
  check_stream("reference noise", ref_noise);
  Divergence d;
  d.compared = std::min(ref.tokens.size(), test.tokens.size());
  d.position = floor_position(ref.tokens, test.tokens);
  d.noise_floor = floor_position(ref.tokens, ref_noise.tokens);
  if (!d.position) return d;
  const size_t p = *d.position;
  d.ref_token = ref.tokens[p];
  d.test_token = test.tokens[p];
  const auto& rr = ref.rows[p];
  const auto& tr = test.rows[p];
  MEMRA_CHECK(rr.size() == tr.size(), "first_divergence: rows at position ", p,
              " differ in width: reference ", rr.size(), ", test ", tr.size());
  d.ref_logit_ref_id = row_at("reference", rr, d.ref_token, p);
  d.ref_logit_test_id = row_at("reference", rr, d.test_token, p);
  d.test_logit_ref_id = row_at("test", tr, d.ref_token, p);
  d.test_logit_test_id = row_at("test", tr, d.test_token, p);
  d.ref_margin = d.ref_logit_ref_id - d.ref_logit_test_id;
  d.test_margin = d.test_logit_test_id - d.test_logit_ref_id;
  for (size_t i = 0; i < rr.size(); ++i) d.row_maxdiff = std::max(d.row_maxdiff, std::fabs(rr[i] - tr[i]));
  // The noise stream's row at p decided the same prefix only if it has not yet left the
  // reference stream before p (it may differ *at* p: that is the noise showing).
  d.noise_measurable = p < ref_noise.tokens.size() && (!d.noise_floor || *d.noise_floor >= p);
  if (d.noise_measurable) {
    const auto& nr = ref_noise.rows[p];
    MEMRA_CHECK(nr.size() == rr.size(), "first_divergence: noise row at position ", p,
                " has width ", nr.size(), ", reference ", rr.size());
    d.noise_logit_ref_id = row_at("reference noise", nr, d.ref_token, p);
    d.noise_logit_test_id = row_at("reference noise", nr, d.test_token, p);
    d.entry_noise = std::fabs(d.ref_logit_ref_id - d.noise_logit_ref_id) +
                    std::fabs(d.ref_logit_test_id - d.noise_logit_test_id);
  }
  return d;
}

std::string_view to_string(TfClass c) {
  switch (c) {
    case TfClass::agree: return "agree";
    case TfClass::in_band: return "in band";
    case TfClass::out_of_band: return "out of band";
    case TfClass::unresolved: return "unresolved";
  }
  return "?";
}

BandRule absolute_band(double logits) {
  std::ostringstream os;
  os << logits;
  return {os.str(), [logits](const BankRow&) { return logits; }};
}

BandRule relative_band(double coeff) {
  std::ostringstream os;
  os << coeff << "*|top1|";
  return {os.str(), [coeff](const BankRow& r) { return coeff * std::fabs(double(r.top_logits.at(0))); }};
}

namespace {

// The oracle's whole row at `step` must be the row the bank was cut from: its top-k (ids by
// oracle::top_k's rule, ties to the lower id) equal to the banked ids and logits bit for bit.
// Anything else is another reference, whose margin would judge nothing.
void check_adjudication_row(size_t step, int32_t pick, const BankRow& bank, std::span<const float> row) {
  if (pick < 0 || size_t(pick) >= row.size())
    fail("CPU adjudication, step ", step, ": pick ", pick, " is outside the oracle's row of ", row.size(), " logits");
  const auto top = oracle::top_k(row, int(bank.top_ids.size()));
  for (size_t k = 0; k < top.size(); ++k)
    if (top[k].first != bank.top_ids[k] ||
        std::bit_cast<uint32_t>(top[k].second) != std::bit_cast<uint32_t>(bank.top_logits[k]))
      fail("CPU adjudication, step ", step, ": the oracle's row does not reproduce the bank at rank ", k,
           " (oracle id ", top[k].first, " logit ", top[k].second, ", bank id ", bank.top_ids[k], " logit ",
           bank.top_logits[k], "): it is not the bank's reference");
}

}  // namespace

TfRow classify_tf_row(size_t step, int32_t pick, const BankRow& bank, const BandRule& rule,
                      std::span<const float> oracle_row) {
  check_bank_row(step, bank);
  TfRow r;
  r.step = step;
  r.pick = pick;
  r.banked = bank.token;
  r.band = rule.band(bank);
  if (pick == bank.token) {
    r.cls = TfClass::agree;
    return r;
  }
  const double top1 = bank.top_logits[0];
  const auto it = std::find(bank.top_ids.begin(), bank.top_ids.end(), pick);
  if (it != bank.top_ids.end()) {
    r.margin = top1 - bank.top_logits[size_t(it - bank.top_ids.begin())];
    r.cls = r.margin <= r.band ? TfClass::in_band : TfClass::out_of_band;
  } else {
    r.margin = top1 - bank.top_logits.back();
    r.margin_is_lower_bound = true;
    r.cls = r.margin > r.band ? TfClass::out_of_band : TfClass::unresolved;
    if (r.cls == TfClass::unresolved && !oracle_row.empty()) {
      check_adjudication_row(step, pick, bank, oracle_row);
      r.margin = top1 - double(oracle_row[size_t(pick)]);
      r.margin_is_lower_bound = false;
      r.adjudicated = true;
      r.cls = r.margin <= r.band ? TfClass::in_band : TfClass::out_of_band;
    }
  }
  return r;
}

TfSummary summarize(std::span<const TfRow> rows) {
  TfSummary s;
  for (const auto& r : rows) {
    switch (r.cls) {
      case TfClass::agree: ++s.agree; break;
      case TfClass::in_band: ++s.in_band; break;
      case TfClass::out_of_band: ++s.out_of_band; break;
      case TfClass::unresolved: ++s.unresolved; break;
    }
    s.adjudicated += r.adjudicated;
  }
  return s;
}

std::vector<float> top2_margins(std::span<const std::vector<float>> rows) {
  std::vector<float> m;
  m.reserve(rows.size());
  for (const auto& r : rows) m.push_back(top2(r).margin());
  return m;
}

MarginStats margin_stats(std::span<const float> margins) {
  MEMRA_CHECK(!margins.empty(), "margin_stats: no margins");
  std::vector<float> s(margins.begin(), margins.end());
  std::sort(s.begin(), s.end());
  const auto at = [&](double q) { return s[size_t(std::lround(double(s.size() - 1) * q))]; };
  return {s.size(), s.front(), at(0.10), at(0.50), at(0.90), s.back()};
}

double percentile_rank(std::span<const float> margins, float value) {
  MEMRA_CHECK(!margins.empty(), "percentile_rank: no margins");
  const auto below = std::count_if(margins.begin(), margins.end(), [&](float m) { return m < value; });
  return double(below) / double(margins.size());
}

std::string_view to_string(MarginClass c) {
  switch (c) {
    case MarginClass::stable:
      return "STABLE";
    case MarginClass::near_tie_exposed:
      return "NEAR-TIE-EXPOSED";
    case MarginClass::near_tie:
      return "NEAR-TIE";
    case MarginClass::unexplained:
      return "UNEXPLAINED";
    case MarginClass::systematic:
      return "SYSTEMATIC";
  }
  return "?";
}

bool MarginWindow::passes() const {
  return cls == MarginClass::stable || cls == MarginClass::near_tie_exposed || cls == MarginClass::near_tie;
}

MarginWindow classify_margin_window(std::span<const std::vector<float>> rows_a,
                                    std::span<const std::vector<float>> rows_b, size_t first_position) {
  MEMRA_CHECK(!rows_a.empty() || !rows_b.empty(), "classify_margin_window: empty window (no rows in either config)");
  MEMRA_CHECK(rows_a.size() == rows_b.size(), "classify_margin_window: config A (decode) has ", rows_a.size(),
              " rows, config B (prefill) ", rows_b.size());
  MarginWindow w;
  w.positions.reserve(rows_a.size());
  std::vector<float> margins_a, margins_b;
  margins_a.reserve(rows_a.size());
  margins_b.reserve(rows_a.size());
  for (size_t k = 0; k < rows_a.size(); ++k) {
    const auto& ra = rows_a[k];
    const auto& rb = rows_b[k];
    MarginPosition p;
    p.position = first_position + k;
    MEMRA_CHECK(ra.size() == rb.size(), "classify_margin_window: rows at position ", p.position,
                " differ in width: config A (decode) ", ra.size(), ", config B (prefill) ", rb.size());
    const auto row_top2 = [&](std::string_view config, const std::vector<float>& row) {
      const std::string where =
          ::memra::detail::concat("classify_margin_window: config ", config, " row at position ", p.position);
      return with_context(where, [&] { return top2(row); });
    };
    p.a = row_top2("A (decode)", ra);
    p.b = row_top2("B (prefill)", rb);
    for (const int32_t id : {p.a.id1, p.a.id2, p.b.id1, p.b.id2})
      p.delta_at_ids = std::max(p.delta_at_ids, std::fabs(rb[size_t(id)] - ra[size_t(id)]));
    p.agree = p.a.id1 == p.b.id1;
    if (!p.agree) ++w.flips;
    margins_a.push_back(p.a.margin());
    margins_b.push_back(p.b.margin());
    w.positions.push_back(p);
  }
  w.margins_a = margin_stats(margins_a);
  w.margins_b = margin_stats(margins_b);
  // The gate decides at the window's last position (the seed's code; records.h says why).
  w.decision = w.positions.size() - 1;
  const MarginPosition& d = w.positions[w.decision];
  w.decision_percentile = percentile_rank(margins_a, d.a.margin());
  w.exposed = d.delta_at_ids > std::min(d.a.margin(), d.b.margin());
  if (w.flips == 0)
    w.cls = w.exposed ? MarginClass::near_tie_exposed : MarginClass::stable;
  else if (w.flips == 1)
    w.cls = w.exposed ? MarginClass::near_tie : MarginClass::unexplained;
  else
    w.cls = MarginClass::systematic;
  return w;
}

FractionVerdict apply_fraction_rule(std::span<const std::optional<size_t>> first_divergence_step,
                                    const FractionRule& rule) {
  MEMRA_CHECK(rule.k >= 1, "fraction rule: k must be >= 1 (k=0 would fail every run)");
  FractionVerdict v;
  v.draws = first_divergence_step.size();
  MEMRA_CHECK(v.draws >= rule.k, "fraction rule: ", v.draws, " draws cannot reach k=", rule.k,
              " (the rule could never fail)");
  for (const auto& s : first_divergence_step)
    if (s && *s < rule.early_step) ++v.early;
  v.fail = v.early >= rule.k;
  return v;
}

std::string logits_stream_sha256(std::span<const std::vector<float>> rows) {
  Sha256 h;
  for (const auto& row : rows) {
    // The row's length first, so the row boundaries are hashed too: without it [[a, b], [c]]
    // and [[a], [b, c]] hash alike.
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(row.size()) >> (8 * i));
    h.update(len, sizeof len);
    if constexpr (std::endian::native == std::endian::little) {
      h.update(row.data(), row.size() * sizeof(float));
    } else {
      for (float f : row) {
        const uint32_t b = std::bit_cast<uint32_t>(f);
        const uint8_t le[4] = {uint8_t(b), uint8_t(b >> 8), uint8_t(b >> 16), uint8_t(b >> 24)};
        h.update(le, 4);
      }
    }
  }
  return h.finish_hex();
}

void PrintTo(const Divergence& d, std::ostream* os) {
  if (!d.diverged()) {
    *os << "Divergence{none over " << d.compared << " tokens}";
    return;
  }
  *os << "Divergence{position " << *d.position << ", reference token " << d.ref_token
      << ", test token " << d.test_token << ", reference margin " << d.ref_margin << ", entry noise ";
  if (d.noise_measurable) *os << d.entry_noise;
  else *os << "not measurable";
  *os << "}";
}

void PrintTo(const TfStep& s, std::ostream* os) {
  *os << "TfStep{step " << s.step << ", pick " << s.pick << ", ";
  PrintTo(s.bank, os);
  *os << "}";
}

void PrintTo(const MarginWindow& w, std::ostream* os) {
  *os << "MarginWindow{";
  if (w.positions.empty()) {
    *os << "empty}";
    return;
  }
  *os << "positions " << w.positions.front().position << ".." << w.positions.back().position << ", " << w.flips
      << (w.flips == 1 ? " flip" : " flips") << ", decision position " << w.at_decision().position << ", "
      << to_string(w.cls) << "}";
}

void PrintTo(const TfRow& r, std::ostream* os) {
  *os << "TfRow{step " << r.step << ", pick " << r.pick << ", banked " << r.banked << ", "
      << to_string(r.cls) << "}";
}

}  // namespace memra::testing
