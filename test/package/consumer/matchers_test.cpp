// consumer_matchers — memra::testing from an installed memra: its matchers in a GoogleTest
// program of another project.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "memra/testing/matchers.h"
#include "memra/testing/records.h"

namespace mt = memra::testing;

TEST(Consumer, BitIdenticalMatches) {
  const std::vector<float> a = {1.0f, -0.5f, 3.25f};
  EXPECT_THAT(a, mt::BitIdentical(a));
  const std::vector<float> b = {1.0f, -0.5f, 3.5f};
  EXPECT_THAT(b, ::testing::Not(mt::BitIdentical(a)));
}

TEST(Consumer, InBandClassifiesATeacherForcedStep) {
  const mt::BankRow row{7, {7, 9, 4}, {10.0f, 9.5f, 8.0f}};
  EXPECT_THAT((mt::TfStep{0, 7, row}), mt::InBand(mt::absolute_band(0.1)));
  EXPECT_THAT((mt::TfStep{0, 9, row}), mt::InBand(mt::absolute_band(1.0)));
  EXPECT_THAT((mt::TfStep{0, 4, row}), ::testing::Not(mt::InBand(mt::absolute_band(1.0))));
}
