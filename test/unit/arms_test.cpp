// Arms: defaults, env parsing (the one reader of MEMRA_* arm variables), errors on bad values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "memra/arms.h"
#include "memra/error.h"

namespace {

using ::testing::HasSubstr;

// A fake environment: from_env must see only what the map holds.
memra::Arms from_map(const std::map<std::string, std::string>& env) {
  return memra::Arms::from_env([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const std::map<std::string, std::string>& env) {
  try {
    from_map(env);
  } catch (const memra::Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Arms, DefaultsAreTheReferenceArms) {
  const memra::Arms a;
  EXPECT_EQ(a.prefill_act, memra::PrefillAct::w4a8);
  EXPECT_EQ(a.decode_matvec, memra::DecodeMatvec::mmvq);
  EXPECT_TRUE(a.fuse_norm_quant);
  EXPECT_TRUE(a.b1_fast);
  EXPECT_FALSE(a.decode_graph);
  EXPECT_TRUE(a.graph_recapture);
  EXPECT_TRUE(a.launch_overlap);
  EXPECT_EQ(a.gdn_prefill, memra::GdnPrefill::chunked);
  EXPECT_EQ(a.prefill_matmul, memra::PrefillMatmul::mmvq);
  EXPECT_EQ(from_map({}), a);
}

TEST(Arms, ToStringListsEveryFieldInOrder) {
  EXPECT_EQ(memra::to_string(memra::Arms{}),
            "prefill_act=w4a8 decode_matvec=mmvq fuse_norm_quant=on b1_fast=on decode_graph=off "
            "graph_recapture=on launch_overlap=on gdn_prefill=chunked prefill_matmul=mmvq");
  EXPECT_EQ(memra::to_string(memra::Arms::equalised()),
            "prefill_act=w4a8 decode_matvec=dp4a fuse_norm_quant=off b1_fast=on decode_graph=off "
            "graph_recapture=on launch_overlap=on gdn_prefill=chunked prefill_matmul=mmvq");
}

TEST(Arms, FromEnvReadsEveryField) {
  const memra::Arms a = from_map({{"MEMRA_PREFILL_ACT", "w4a4"},
                                  {"MEMRA_DECODE_MATVEC", "dp4a"},
                                  {"MEMRA_FUSE_NORM_QUANT", "0"},
                                  {"MEMRA_B1_FAST", "off"},
                                  {"MEMRA_DECODE_GRAPH", "true"},
                                  {"MEMRA_GRAPH_RECAPTURE", "false"},
                                  {"MEMRA_LAUNCH_OVERLAP", "off"},
                                  {"MEMRA_GDN_PREFILL", "recurrent"},
                                  {"MEMRA_PREFILL_MATMUL", "mma"},
                                  {"MEMRA_UNRELATED", "whatever"}});
  EXPECT_EQ(a.prefill_act, memra::PrefillAct::w4a4);
  EXPECT_EQ(a.decode_matvec, memra::DecodeMatvec::dp4a);
  EXPECT_FALSE(a.fuse_norm_quant);
  EXPECT_FALSE(a.b1_fast);
  EXPECT_TRUE(a.decode_graph);
  EXPECT_FALSE(a.graph_recapture);
  EXPECT_FALSE(a.launch_overlap);
  EXPECT_EQ(a.gdn_prefill, memra::GdnPrefill::recurrent);
  EXPECT_EQ(a.prefill_matmul, memra::PrefillMatmul::mma);
}

TEST(Arms, EmptyVariableKeepsTheDefault) {
  EXPECT_EQ(from_map({{"MEMRA_PREFILL_ACT", ""}}), memra::Arms{});
}

TEST(Arms, BadEnumValueNamesVariableValueAndChoices) {
  const std::string e = error_of({{"MEMRA_PREFILL_ACT", "w4a16"}});
  EXPECT_THAT(e, HasSubstr("environment MEMRA_PREFILL_ACT"));
  EXPECT_THAT(e, HasSubstr("'w4a16'"));
  EXPECT_THAT(e, HasSubstr("w4a8, w4a4"));
}

TEST(Arms, BadBoolValueIsAnError) {
  const std::string e = error_of({{"MEMRA_DECODE_GRAPH", "yes"}});
  EXPECT_THAT(e, HasSubstr("MEMRA_DECODE_GRAPH"));
  EXPECT_THAT(e, HasSubstr("decode_graph='yes'"));
}

TEST(Arms, SetRejectsUnknownField) {
  memra::Arms a;
  try {
    a.set("prefil_act", "w4a4");
    FAIL() << "no error";
  } catch (const memra::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown field 'prefil_act'"));
    EXPECT_THAT(e.what(), HasSubstr("prefill_act"));
  }
}

TEST(Arms, FieldsRoundTripThroughSet) {
  memra::Arms a;
  a.prefill_act = memra::PrefillAct::w4a4;
  a.b1_fast = false;
  a.gdn_prefill = memra::GdnPrefill::recurrent;
  a.prefill_matmul = memra::PrefillMatmul::mma;
  memra::Arms b;
  for (const auto& [k, v] : a.fields()) b.set(k, v);
  EXPECT_EQ(a, b);
  EXPECT_EQ(memra::Arms::env_name("graph_recapture"), "MEMRA_GRAPH_RECAPTURE");
}

}  // namespace
