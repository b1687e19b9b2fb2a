// Arms: defaults, env parsing (the one reader of MEMRA_* arm variables), errors on bad values,
// and the table (MEMRA_ARMS) as the one source of the env names, reports and docs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "memra/arms.h"
#include "memra/error.h"
#include "memra/oracle.h"
#include "memra/testing/report.h"

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
  EXPECT_EQ(a.gdn_prefill, memra::GdnPrefill::recurrent);
  EXPECT_EQ(a.prefill_matmul, memra::PrefillMatmul::mmvq);
  EXPECT_EQ(a.mla_decode, memra::MlaDecode::expanded);
  EXPECT_EQ(a.prefill_attn, memra::PrefillAttn::split);
  EXPECT_EQ(a.nvfp4_dot, memra::Nvfp4Dot::sub16);
  EXPECT_EQ(from_map({}), a);
}

TEST(Arms, ToStringListsEveryFieldInOrder) {
  EXPECT_EQ(memra::to_string(memra::Arms{}),
            "prefill_act=w4a8 decode_matvec=mmvq fuse_norm_quant=on b1_fast=on decode_graph=off "
            "graph_recapture=on launch_overlap=on gdn_prefill=recurrent prefill_matmul=mmvq "
            "mla_decode=expanded prefill_attn=split nvfp4_dot=sub16");
  EXPECT_EQ(memra::to_string(memra::Arms::equalised()),
            "prefill_act=w4a8 decode_matvec=dp4a fuse_norm_quant=off b1_fast=on decode_graph=off "
            "graph_recapture=on launch_overlap=on gdn_prefill=recurrent prefill_matmul=mmvq "
            "mla_decode=expanded prefill_attn=split nvfp4_dot=sub16");
}

TEST(Arms, FromEnvReadsEveryField) {
  const memra::Arms a = from_map({{"MEMRA_PREFILL_ACT", "w4a4"},
                                  {"MEMRA_DECODE_MATVEC", "dp4a"},
                                  {"MEMRA_FUSE_NORM_QUANT", "0"},
                                  {"MEMRA_B1_FAST", "off"},
                                  {"MEMRA_DECODE_GRAPH", "true"},
                                  {"MEMRA_GRAPH_RECAPTURE", "false"},
                                  {"MEMRA_LAUNCH_OVERLAP", "off"},
                                  {"MEMRA_GDN_PREFILL", "chunked"},
                                  {"MEMRA_PREFILL_MATMUL", "mma"},
                                  {"MEMRA_MLA_DECODE", "latent"},
                                  {"MEMRA_PREFILL_ATTN", "flash"},
                                  {"MEMRA_NVFP4_DOT", "pair32"},
                                  {"MEMRA_UNRELATED", "whatever"}});
  EXPECT_EQ(a.prefill_act, memra::PrefillAct::w4a4);
  EXPECT_EQ(a.decode_matvec, memra::DecodeMatvec::dp4a);
  EXPECT_FALSE(a.fuse_norm_quant);
  EXPECT_FALSE(a.b1_fast);
  EXPECT_TRUE(a.decode_graph);
  EXPECT_FALSE(a.graph_recapture);
  EXPECT_FALSE(a.launch_overlap);
  EXPECT_EQ(a.gdn_prefill, memra::GdnPrefill::chunked);
  EXPECT_EQ(a.prefill_matmul, memra::PrefillMatmul::mma);
  EXPECT_EQ(a.mla_decode, memra::MlaDecode::latent);
  EXPECT_EQ(a.prefill_attn, memra::PrefillAttn::flash);
  EXPECT_EQ(a.nvfp4_dot, memra::Nvfp4Dot::pair32);
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
  a.gdn_prefill = memra::GdnPrefill::chunked;
  a.prefill_matmul = memra::PrefillMatmul::mma;
  a.mla_decode = memra::MlaDecode::latent;
  a.prefill_attn = memra::PrefillAttn::flash;
  a.nvfp4_dot = memra::Nvfp4Dot::pair32;
  memra::Arms b;
  for (const auto& [k, v] : a.fields()) b.set(k, v);
  EXPECT_EQ(a, b);
  EXPECT_EQ(memra::Arms::env_name("graph_recapture"), "MEMRA_GRAPH_RECAPTURE");
}

// One default per arm: the oracle's GDN prefill form is the Arms default, not a second one.
TEST(Arms, OracleStartsFromTheArmsDefault) {
  EXPECT_EQ(memra::oracle::Options{}.gdn_prefill, memra::Arms{}.gdn_prefill);
  EXPECT_EQ(memra::oracle::Options{}.mla_decode, memra::Arms{}.mla_decode);
  EXPECT_EQ(memra::Arms{}.gdn_prefill, memra::GdnPrefill::recurrent) << "the documented default is the form "
                                                                        "bit-identical to decode";
}

// Every value of every arm in the table round-trips: environment -> Arms -> fields() -> the
// report's JSON, and the other fields keep their defaults.
TEST(Arms, EveryArmRoundTripsThroughEnvironmentAndReport) {
  const auto specs = memra::arm_specs();
  ASSERT_EQ(specs.size(), memra::Arms{}.fields().size());
  std::map<std::string_view, std::string_view> defaults;
  for (const auto& [field, value] : memra::Arms{}.fields()) defaults[field] = value;
  int checked = 0;
  for (const memra::ArmSpec& s : specs) {
    ASSERT_GE(s.values.size(), 2u) << s.field << ": an arm has at least two values";
    EXPECT_EQ(s.env, memra::Arms::env_name(s.field));
    EXPECT_EQ(s.default_value, defaults.at(s.field));
    for (std::string_view v : s.values) {
      SCOPED_TRACE(s.env + "=" + std::string(v));
      const memra::Arms a = from_map({{s.env, std::string(v)}});
      const nlohmann::json j = memra::testing::to_json(a);
      for (const auto& [field, value] : a.fields()) {
        const std::string_view want = field == s.field ? v : defaults.at(field);
        EXPECT_EQ(value, want) << field;
        EXPECT_EQ(j.at(std::string(field)).get<std::string>(), want) << field << " in the report";
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 18);
}

TEST(Arms, EqualisedIsTheTablesColumn) {
  const memra::Arms eq = memra::Arms::equalised();
  const auto fields = eq.fields();
  const auto specs = memra::arm_specs();
  ASSERT_EQ(fields.size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(fields[i].first, specs[i].field);
    EXPECT_EQ(fields[i].second, specs[i].equalised_value);
  }
  EXPECT_EQ(eq.decode_matvec, memra::DecodeMatvec::dp4a);
  EXPECT_FALSE(eq.fuse_norm_quant);
}

// docs/gpu.md carries the generated table between its markers; a new or changed arm must be
// reflected there (the failure prints the table to paste).
TEST(Arms, DocsTableIsTheTable) {
  std::ifstream f(std::string(MEMRA_SOURCE_DIR) + "/docs/gpu.md");
  ASSERT_TRUE(f) << "docs/gpu.md not found";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  const std::string begin = "<!-- arms-table: generated from MEMRA_ARMS (memra/arms.h); unit_arms checks it -->\n";
  const std::string end = "<!-- arms-table end -->";
  const size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos) << "docs/gpu.md lacks the marker line: " << begin;
  ASSERT_NE(e, std::string::npos) << "docs/gpu.md lacks the marker: " << end;
  const std::string table = doc.substr(b + begin.size(), e - b - begin.size());
  EXPECT_EQ(table, memra::arms_markdown_table()) << "docs/gpu.md's arms table is stale; paste:\n"
                                                 << memra::arms_markdown_table();
}

}  // namespace
