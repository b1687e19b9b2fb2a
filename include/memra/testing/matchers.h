// memra/testing/matchers.h — the gMock matchers that carry the gates' verdicts.
//
//   EXPECT_THAT(batched_logits, BitIdentical(isolated_logits));      // floats, 16-bit, tokens
//   EXPECT_THAT(first_divergence(ref, test, noise), WithinEntryNoise());
//   EXPECT_THAT(tf_steps, InBand(relative_band(0.01)));              // one TfStep or all of them
//   EXPECT_THAT(classify_margin_window(decode, prefill, t - w), MarginClassPasses());
//
// Grammar (googletest): DescribeTo completes "Expected: ...", the explanation completes
// "Actual: ... which ...". A failure message is for a person who has to act on it, so it
// localises: the first differing element with both values in hex, the count, max ULP and max
// |diff|; the fork position with both arms' logits at both ids, margin and noise; the step,
// both tokens, margin, band and class. Matchers are pure (no EXPECT_* inside) and copy their
// reference, so BitIdentical(run_reference()) on a temporary is safe. The expensive
// explanation is only built when gtest wants it (a null stream means "not interested").
//
// What a failure prints before the explanation ("Actual: <value>") is gtest's print of the
// argument: the records print a one-line summary (PrintTo in records.h), and std::span prints its
// elements like a container (below) instead of gtest's byte dump of a pointer and a size.
//
// provides: BitIdentical, Half16, WithinEntryNoise, InBand, MarginClassPasses, describe_tf_row,
//           describe_divergence, describe_margin_window, the gtest printer of std::span
#pragma once

#include <gtest/gtest-printers.h>

#include <cstdint>
#include <cstring>
#include <iomanip>
#include <iterator>
#include <ostream>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "memra/testing/records.h"

namespace memra::testing {

// Which 16-bit float encoding a uint16_t span holds (needed for ULP and |diff| only: equality
// is on bits either way).
enum class Half16 { f16, bf16 };

namespace detail {

enum class BitsKind { f32, f16, bf16, token };
const char* kind_name(BitsKind k);

// The comparison behind BitIdentical, out of line so the template below stays thin.
// Returns true iff same length and every element's bits are equal; writes the explanation to
// `os` when it is not null.
bool bit_compare(BitsKind kind, std::span<const uint64_t> got, std::span<const uint64_t> ref,
                 std::ostream* os);

template <class T>
uint64_t element_bits(const T& v) {
  if constexpr (std::is_same_v<T, float>) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    return b;
  } else if constexpr (std::is_signed_v<T>) {
    return uint64_t(int64_t(v));
  } else {
    return uint64_t(v);
  }
}

template <class T>
constexpr bool kComparableElement = std::is_same_v<T, float> || std::is_integral_v<T>;

}  // namespace detail

class BitIdenticalMatcher {
 public:
  using is_gtest_matcher = void;

  BitIdenticalMatcher(detail::BitsKind kind, std::vector<uint64_t> ref)
      : kind_(kind), ref_(std::move(ref)) {}

  template <class Range>
  bool MatchAndExplain(const Range& got, std::ostream* os) const {
    using T = std::remove_cvref_t<decltype(*std::begin(got))>;
    static_assert(detail::kComparableElement<T>,
                  "BitIdentical compares ranges of float, uint16_t (f16/bf16) or integer tokens");
    const detail::BitsKind got_kind = std::is_same_v<T, float> ? detail::BitsKind::f32
                                      : std::is_same_v<T, uint16_t>
                                          ? (kind_ == detail::BitsKind::bf16 ? detail::BitsKind::bf16
                                                                              : detail::BitsKind::f16)
                                          : detail::BitsKind::token;
    if (got_kind != kind_) {
      if (os) *os << "which holds " << detail::kind_name(got_kind) << " values, the reference "
                  << detail::kind_name(kind_);
      return false;
    }
    std::vector<uint64_t> bits;
    bits.reserve(size_t(std::size(got)));
    for (const auto& v : got) bits.push_back(detail::element_bits(v));
    return detail::bit_compare(kind_, bits, ref_, os);
  }
  void DescribeTo(std::ostream* os) const;
  void DescribeNegationTo(std::ostream* os) const;

 private:
  detail::BitsKind kind_;
  std::vector<uint64_t> ref_;
};

BitIdenticalMatcher BitIdentical(std::span<const float> ref);
BitIdenticalMatcher BitIdentical(std::span<const uint16_t> ref, Half16 encoding);
BitIdenticalMatcher BitIdentical(std::span<const int32_t> ref);
BitIdenticalMatcher BitIdentical(std::span<const uint32_t> ref);

// Passes iff the streams did not diverge, or the reference arm's margin at the fork is within
// its own measurable entry-point noise there (the ArmFork verdict, Divergence::within_entry_noise).
class WithinEntryNoiseMatcher {
 public:
  using is_gtest_matcher = void;
  bool MatchAndExplain(const Divergence& d, std::ostream* os) const;
  void DescribeTo(std::ostream* os) const;
  void DescribeNegationTo(std::ostream* os) const;
};
inline WithinEntryNoiseMatcher WithinEntryNoise() { return {}; }

// Passes iff the GPU pick agrees with the banked token or the oracle margin to it is within the
// band; unresolved rows (pick beyond the banked top-k, lower bound within the band) fail. On a
// range of TfStep every row must pass; the explanation counts the classes and lists the
// failing rows.
class InBandMatcher {
 public:
  using is_gtest_matcher = void;
  explicit InBandMatcher(BandRule rule) : rule_(std::move(rule)) {}
  bool MatchAndExplain(const TfStep& s, std::ostream* os) const;
  bool MatchAndExplain(std::span<const TfStep> steps, std::ostream* os) const;
  bool MatchAndExplain(const std::vector<TfStep>& steps, std::ostream* os) const {
    return MatchAndExplain(std::span<const TfStep>(steps), os);
  }
  void DescribeTo(std::ostream* os) const;
  void DescribeNegationTo(std::ostream* os) const;

 private:
  BandRule rule_;
};
inline InBandMatcher InBand(BandRule rule) { return InBandMatcher(std::move(rule)); }

// Passes iff an ArgmaxMargin window classifies as STABLE, NEAR-TIE-EXPOSED or NEAR-TIE
// (classify_margin_window): no flip, or a single flip with the decision position (the window's
// last) exposed.
// The explanation gives the class, the flips (and where), the decision position with both
// configs' top-1 and margins, the delta at the contending ids, and the decision margin's
// percentile in config A's margin distribution.
class MarginClassPassesMatcher {
 public:
  using is_gtest_matcher = void;
  bool MatchAndExplain(const MarginWindow& w, std::ostream* os) const;
  void DescribeTo(std::ostream* os) const;
  void DescribeNegationTo(std::ostream* os) const;
};
inline MarginClassPassesMatcher MarginClassPasses() { return {}; }

// One line for a classified row, as the InBand explanation and the reports print it:
// "step 4: GPU pick 9 vs banked 7; oracle margin 0.5 > band 0.125 -> out of band".
std::string describe_tf_row(const TfRow& r);
// "position 7: reference token 11 vs test token 12; ..." (as WithinEntryNoise explains it).
std::string describe_divergence(const Divergence& d);
// "SYSTEMATIC: 2 flips in 4 positions (at 11, 13); decision position 13: ..." (as
// MarginClassPasses explains it).
std::string describe_margin_window(const MarginWindow& w);

namespace detail {

// A span the way gtest prints a container, "{ 1, 2.5, 3 }", the first 32 elements then "...".
// Floats print with 9 significant digits, as the explanations do: gtest's 6 would show an
// element one ulp off as its reference ("3" for 3.00000024). 16-bit elements are f16 or bf16
// bits (the span cannot say which), so they print in hex.
template <class T, size_t Extent>
void print_span(std::span<T, Extent> s, std::ostream* os) {
  constexpr size_t kMaxCount = 32;  // gtest's ContainerPrinter limit
  *os << '{';
  size_t count = 0;
  for (const auto& v : s) {
    if (count > 0) *os << ',';
    if (count == kMaxCount) {
      *os << " ...";
      break;
    }
    *os << ' ';
    if constexpr (std::is_same_v<std::remove_cv_t<T>, uint16_t>) {
      *os << "0x" << std::hex << std::setw(4) << std::setfill('0') << v << std::dec
          << std::setfill(' ');
    } else if constexpr (std::is_same_v<std::remove_cv_t<T>, float>) {
      const auto precision = os->precision(9);
      *os << v;
      os->precision(precision);
    } else {
      ::testing::internal::UniversalPrint(v, os);
    }
    ++count;
  }
  if (count > 0) *os << ' ';
  *os << '}';
}

}  // namespace detail
}  // namespace memra::testing

// gtest 1.12 treats a type as a container only if it has a const_iterator, which std::span
// lacks before C++23, so EXPECT_THAT(span, BitIdentical(...)) would print "16-byte object
// <...>". ADL cannot reach a PrintTo for a std type without adding to namespace std, so the
// span printer is a specialisation of gtest's UniversalPrinter, the class template it
// dispatches every print through (and specialises itself for optional, variant and any).
namespace testing::internal {
template <class T, std::size_t Extent>
class UniversalPrinter<std::span<T, Extent>> {
 public:
  static void Print(const std::span<T, Extent>& s, ::std::ostream* os) {
    memra::testing::detail::print_span(s, os);
  }
};
}  // namespace testing::internal
