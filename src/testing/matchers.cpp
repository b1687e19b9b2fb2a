#include "memra/testing/matchers.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "memra/dtype.h"

namespace memra::testing {
namespace detail {

const char* kind_name(BitsKind k) {
  switch (k) {
    case BitsKind::f32: return "float32";
    case BitsKind::f16: return "float16";
    case BitsKind::bf16: return "bfloat16";
    case BitsKind::token: return "token";
  }
  return "?";
}

namespace {

int width_bits(BitsKind k) { return k == BitsKind::f32 ? 32 : 16; }

double value_of(BitsKind k, uint64_t b) {
  switch (k) {
    case BitsKind::f32: return std::bit_cast<float>(uint32_t(b));
    case BitsKind::f16: return fp16_to_f32(uint16_t(b));
    case BitsKind::bf16: return bf16_to_f32(uint16_t(b));
    case BitsKind::token: return double(int64_t(b));
  }
  return 0;
}

// Sign-magnitude bits mapped onto a monotone integer line, so that adjacent floats are 1 apart
// and +0/-0 coincide.
int64_t ordered(BitsKind k, uint64_t b) {
  const int w = width_bits(k);
  const uint64_t sign = uint64_t(1) << (w - 1);
  const int64_t mag = int64_t(b & (sign - 1));
  return (b & sign) ? -mag : mag;
}

void hex(std::ostream& os, BitsKind k, uint64_t b) {
  os << "0x" << std::hex << std::setw(width_bits(k) / 4) << std::setfill('0') << b << std::dec
     << std::setfill(' ');
}

std::string amount(BitsKind k, size_t n) {
  std::ostringstream os;
  os << n << (k == BitsKind::token ? (n == 1 ? " token" : " tokens") : n == 1 ? " element" : " elements");
  return os.str();
}

}  // namespace

bool bit_compare(BitsKind kind, std::span<const uint64_t> got, std::span<const uint64_t> ref,
                 std::ostream* os) {
  if (got.size() != ref.size()) {
    if (os) *os << "which has " << amount(kind, got.size()) << ", the reference " << ref.size();
    return false;
  }
  const auto first = std::mismatch(got.begin(), got.end(), ref.begin());
  if (first.first == got.end()) return true;
  if (!os) return false;

  const size_t i0 = size_t(first.first - got.begin());
  size_t n_diff = 0, nan_got = 0, nan_ref = 0;
  int64_t max_ulp = 0;
  double max_abs = 0;
  for (size_t i = i0; i < got.size(); ++i) {
    if (got[i] == ref[i]) continue;
    ++n_diff;
    if (kind == BitsKind::token) continue;
    const double g = value_of(kind, got[i]), r = value_of(kind, ref[i]);
    nan_got += std::isnan(g);
    nan_ref += std::isnan(r);
    if (std::isnan(g) || std::isnan(r)) continue;
    max_ulp = std::max(max_ulp, std::abs(ordered(kind, got[i]) - ordered(kind, ref[i])));
    max_abs = std::max(max_abs, std::fabs(g - r));
  }
  *os << "which differs in " << n_diff << " of " << amount(kind, got.size()) << "; first at ["
      << i0 << "]: ";
  if (kind == BitsKind::token) {
    *os << int64_t(got[i0]) << " vs " << int64_t(ref[i0]);
    return false;
  }
  hex(*os, kind, got[i0]);
  *os << " vs ";
  hex(*os, kind, ref[i0]);
  *os << std::setprecision(9) << " (" << value_of(kind, got[i0]) << " vs "
      << value_of(kind, ref[i0]) << "); max " << max_ulp << " ulp, max |diff| " << max_abs;
  if (nan_got + nan_ref > 0)
    *os << "; NaN among the differing: " << nan_got << " in the value, " << nan_ref
        << " in the reference (excluded from ulp and |diff|)";
  return false;
}

}  // namespace detail

namespace {

template <class T>
std::vector<uint64_t> to_bits(std::span<const T> s) {
  std::vector<uint64_t> b;
  b.reserve(s.size());
  for (const T& v : s) b.push_back(detail::element_bits(v));
  return b;
}

}  // namespace

BitIdenticalMatcher BitIdentical(std::span<const float> ref) {
  return {detail::BitsKind::f32, to_bits(ref)};
}
BitIdenticalMatcher BitIdentical(std::span<const uint16_t> ref, Half16 encoding) {
  return {encoding == Half16::bf16 ? detail::BitsKind::bf16 : detail::BitsKind::f16, to_bits(ref)};
}
BitIdenticalMatcher BitIdentical(std::span<const int32_t> ref) {
  return {detail::BitsKind::token, to_bits(ref)};
}
BitIdenticalMatcher BitIdentical(std::span<const uint32_t> ref) {
  return {detail::BitsKind::token, to_bits(ref)};
}

namespace {

// "1 float16 value", "3 float32 values", "1 token", "5 tokens".
std::string count_of(detail::BitsKind k, size_t n) {
  std::ostringstream os;
  os << n << " " << detail::kind_name(k);
  if (k != detail::BitsKind::token) os << " value";
  if (n != 1) os << "s";
  return os.str();
}

}  // namespace

void BitIdenticalMatcher::DescribeTo(std::ostream* os) const {
  *os << "is bit-identical to the reference (" << count_of(kind_, ref_.size()) << ")";
}

void BitIdenticalMatcher::DescribeNegationTo(std::ostream* os) const {
  *os << "differs in at least one bit from the reference (" << count_of(kind_, ref_.size()) << ")";
}

// ---- WithinEntryNoise -----------------------------------------------------------------------

std::string describe_divergence(const Divergence& d) {
  std::ostringstream os;
  if (!d.diverged()) {
    os << "no divergence over " << d.compared << " tokens";
    return os.str();
  }
  const int32_t r = d.ref_token, t = d.test_token;
  os << "position " << *d.position << ": reference token " << r << " vs test token " << t
     << "; reference row [" << r << "]=" << d.ref_logit_ref_id << " [" << t
     << "]=" << d.ref_logit_test_id << ", test row [" << r << "]=" << d.test_logit_ref_id << " ["
     << t << "]=" << d.test_logit_test_id;
  // The noise stream's row only speaks for this decision while it decided the same prefix.
  if (d.noise_measurable)
    os << ", noise row [" << r << "]=" << d.noise_logit_ref_id << " [" << t << "]=" << d.noise_logit_test_id;
  os << "; reference margin " << d.ref_margin;
  if (!d.noise_measurable) {
    os << ", entry noise not measurable (the reference arm's own streams separate at position "
       << (d.noise_floor ? std::to_string(*d.noise_floor) : std::string("?")) << ", before the fork)";
  } else {
    os << (std::fabs(d.ref_margin) <= d.entry_noise ? " <= " : " > ") << "entry noise "
       << d.entry_noise;
  }
  return os.str();
}

bool WithinEntryNoiseMatcher::MatchAndExplain(const Divergence& d, std::ostream* os) const {
  const bool ok = d.within_entry_noise();
  if (os) {
    if (!d.diverged()) {
      *os << "which agrees over all " << d.compared << " tokens";
    } else {
      *os << "which diverges at " << describe_divergence(d)
          << (ok ? ": a near tie the engine cannot resolve in any arm"
                 : d.noise_measurable ? ": a structural fork, not a near tie"
                                      : ": cannot be shown to be a near tie");
    }
  }
  return ok;
}

void WithinEntryNoiseMatcher::DescribeTo(std::ostream* os) const {
  *os << "does not diverge, or diverges where the reference margin is within the reference "
         "arm's entry-point noise";
}

void WithinEntryNoiseMatcher::DescribeNegationTo(std::ostream* os) const {
  *os << "diverges where the reference margin exceeds the reference arm's entry-point noise";
}

// ---- InBand ---------------------------------------------------------------------------------

std::string describe_tf_row(const TfRow& r) {
  std::ostringstream os;
  os << "step " << r.step << ": GPU pick " << r.pick << " vs banked " << r.banked;
  if (r.cls != TfClass::agree) {
    os << "; oracle margin " << (r.margin_is_lower_bound ? ">= " : "") << r.margin
       << (r.margin > r.band ? " > " : " <= ") << "band " << r.band;
    if (r.margin_is_lower_bound) os << " (pick beyond the banked top-k)";
    if (r.adjudicated) os << " (pick beyond the banked top-k, adjudicated by the oracle's whole row)";
  }
  os << " -> " << to_string(r.cls);
  return os.str();
}

bool InBandMatcher::MatchAndExplain(const TfStep& s, std::ostream* os) const {
  const TfRow r = classify_tf_row(s.step, s.pick, s.bank, rule_, s.oracle_row);
  if (os) *os << "which is " << describe_tf_row(r);
  return r.passes();
}

bool InBandMatcher::MatchAndExplain(std::span<const TfStep> steps, std::ostream* os) const {
  std::vector<TfRow> rows;
  rows.reserve(steps.size());
  for (const auto& s : steps) rows.push_back(classify_tf_row(s.step, s.pick, s.bank, rule_, s.oracle_row));
  const TfSummary sum = summarize(rows);
  if (os) {
    const size_t bad = sum.out_of_band + sum.unresolved;
    *os << "which has " << bad << " of " << sum.total() << " rows failing (agree " << sum.agree << ", in band "
        << sum.in_band << ", out of band " << sum.out_of_band << ", unresolved " << sum.unresolved;
    if (sum.adjudicated > 0) *os << "; " << sum.adjudicated << " adjudicated by the oracle";
    *os << ")";
    constexpr size_t kListed = 5;
    size_t listed = 0;
    for (const auto& r : rows) {
      if (r.passes()) continue;
      if (listed == kListed) {
        *os << "; and " << bad - kListed << " more";
        break;
      }
      *os << "; " << describe_tf_row(r);
      ++listed;
    }
  }
  return sum.passes();
}

void InBandMatcher::DescribeTo(std::ostream* os) const {
  *os << "agrees with the banked token, or picks one within the band (" << rule_.description
      << ") of the oracle top-1";
}

void InBandMatcher::DescribeNegationTo(std::ostream* os) const {
  *os << "picks a token outside the band (" << rule_.description
      << ") of the oracle top-1, or one the bank cannot resolve";
}

// ---- MarginClassPasses ----------------------------------------------------------------------

std::string describe_margin_window(const MarginWindow& w) {
  std::ostringstream os;
  os << to_string(w.cls) << ": " << w.flips << (w.flips == 1 ? " flip" : " flips") << " in " << w.positions.size()
     << (w.positions.size() == 1 ? " position" : " positions");
  if (w.positions.empty()) return os.str();
  if (w.flips > 0) {
    constexpr size_t kListed = 5;
    os << " (at ";
    size_t listed = 0;
    for (const auto& p : w.positions) {
      if (p.agree) continue;
      if (listed == kListed) {
        os << ", and " << w.flips - kListed << " more";
        break;
      }
      os << (listed > 0 ? ", " : "") << p.position;
      ++listed;
    }
    os << ")";
  }
  const MarginPosition& d = w.at_decision();
  const float min_margin = std::min(d.a.margin(), d.b.margin());
  const size_t below = size_t(std::count_if(w.positions.begin(), w.positions.end(),
                                            [&](const MarginPosition& p) { return p.a.margin() < d.a.margin(); }));
  os << "; decision position " << d.position << ": decode top-1 " << d.a.id1 << " margin " << d.a.margin()
     << ", prefill top-1 " << d.b.id1 << " margin " << d.b.margin() << "; delta at the ids " << d.delta_at_ids
     << (w.exposed ? " > " : " <= ") << "min margin " << min_margin << (w.exposed ? " (exposed)" : " (not exposed)")
     << "; " << below << " of " << w.positions.size() << " decode margins below the decision's (percentile "
     << w.decision_percentile << "); decode margins min " << w.margins_a.min << " p10 " << w.margins_a.p10 << " p50 "
     << w.margins_a.p50 << " p90 " << w.margins_a.p90 << " max " << w.margins_a.max << ", prefill margins min "
     << w.margins_b.min << " p50 " << w.margins_b.p50 << " max " << w.margins_b.max;
  return os.str();
}

bool MarginClassPassesMatcher::MatchAndExplain(const MarginWindow& w, std::ostream* os) const {
  if (os) {
    *os << "which is " << describe_margin_window(w);
    switch (w.cls) {
      case MarginClass::stable:
        *os << ": the config spread cannot reach across the decision margin";
        break;
      case MarginClass::near_tie_exposed:
        *os << ": a near-tie coin that landed the same way in both configs";
        break;
      case MarginClass::near_tie:
        *os << ": cross-config drift at a near tie, not a numeric defect";
        break;
      case MarginClass::unexplained:
        *os << ": a flip the config spread at the decision position does not cover, a real defect";
        break;
      case MarginClass::systematic:
        *os << ": several positions disagree, not a near-tie coin";
        break;
    }
  }
  return w.passes();
}

void MarginClassPassesMatcher::DescribeTo(std::ostream* os) const {
  *os << "classifies as STABLE, NEAR-TIE-EXPOSED or NEAR-TIE (no flip, or a single flip with the "
         "decision position exposed)";
}

void MarginClassPassesMatcher::DescribeNegationTo(std::ostream* os) const {
  *os << "classifies as UNEXPLAINED or SYSTEMATIC (a single flip with the decision position not exposed, "
         "or more than one flip)";
}

}  // namespace memra::testing
