#include "memra/testing/report.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "memra/error.h"

namespace memra::testing {
namespace {

// GTest names hold '/' (parameterised suites); file names must not.
std::string file_safe(std::string s) {
  for (char& c : s)
    if (c == '/' || c == '\\' || c == ' ' || c == ':') c = '_';
  return s;
}

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

constexpr size_t kMaxMessages = 8;

bool in_test() { return ::testing::UnitTest::GetInstance()->current_test_info() != nullptr; }

}  // namespace

std::filesystem::path results_dir() {
  if (const char* v = std::getenv("MEMRA_TEST_RESULTS"); v && *v) return v;
  return std::filesystem::current_path() / "test-results";
}

Report Report::for_current_test() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (!info) return Report("no_test", "no_test");
  return Report(info->test_suite_name(), info->name());
}

Report::Report(std::string suite, std::string name)
    : suite_(std::move(suite)), name_(std::move(name)) {
  json_["suite"] = suite_;
  json_["case"] = name_;
  json_["figures"] = nlohmann::json::object();
  if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
      info && info->value_param())
    json_["param"] = info->value_param();
}

void Report::figure(const std::string& name, double value) {
  json_["figures"][name] = value;
  if (in_test()) {
    std::ostringstream os;
    os.precision(9);
    os << value;
    ::testing::Test::RecordProperty(name, os.str());
  }
}

void Report::figure(const std::string& name, int64_t value) {
  json_["figures"][name] = value;
  if (in_test()) ::testing::Test::RecordProperty(name, std::to_string(value));
}

void Report::figure(const std::string& name, const std::string& value) {
  json_["figures"][name] = value;
  if (in_test()) ::testing::Test::RecordProperty(name, value);
}

void Report::set_verdict(bool pass, std::string why) {
  json_["verdict"] = pass ? "PASS" : "FAIL";
  if (!why.empty()) json_["why"] = std::move(why);
  verdict_set_ = true;
}

std::optional<nlohmann::json> Report::take_verdict() {
  if (!verdict_set_) return std::nullopt;
  nlohmann::json v = {{"verdict", json_["verdict"]}, {"why", json_.value("why", "")}};
  json_.erase("verdict");
  json_.erase("why");
  verdict_set_ = false;
  return v;
}

void ReportPart::set_arms(const std::string& role, const Arms& arms) {
  (*this)["arms"][role] = to_json(arms);
}

void Report::set_arms(const std::string& role, const Arms& arms) { json_["arms"][role] = to_json(arms); }

std::filesystem::path Report::path() const {
  return results_dir() / (file_safe(suite_) + "." + file_safe(name_) + ".json");
}

std::filesystem::path Report::write() {
  if (!verdict_set_) {
    const bool failed = in_test() && ::testing::Test::HasFailure();
    const bool skipped = in_test() && ::testing::Test::IsSkipped();
    json_["verdict"] = failed ? "FAIL" : skipped ? "SKIP" : "PASS";
    if (failed || skipped) {
      // Why, in GTest's words: the failed assertions (or the skip), where they are.
      nlohmann::json msgs = nlohmann::json::array();
      const ::testing::TestResult& r = *::testing::UnitTest::GetInstance()->current_test_info()->result();
      for (int i = 0; i < r.total_part_count() && msgs.size() < kMaxMessages; ++i) {
        const ::testing::TestPartResult& part = r.GetTestPartResult(i);
        if (!part.failed() && !part.skipped()) continue;
        std::string where = part.file_name() ? std::string(part.file_name()) + ":" + std::to_string(part.line_number()) : "";
        msgs.push_back({{"where", where}, {"message", std::string(part.message())}});
      }
      if (!msgs.empty()) {
        json_["why"] = msgs.front()["message"];
        json_["messages"] = msgs;
      }
    }
  }
  json_["time"] = utc_now();
  const char* commit = std::getenv("MEMRA_COMMIT");
  json_["commit"] = commit && *commit ? commit : "unknown";
  const auto& gpus = query_gpus();
  if (!gpus.empty()) {
    const int d = test_device();
    json_["gpu"] = d < int(gpus.size()) ? to_json(gpus[size_t(d)]) : nlohmann::json(nullptr);
  } else {
    json_["gpu"] = nullptr;
  }
  const auto p = path();
  std::error_code ec;
  std::filesystem::create_directories(p.parent_path(), ec);
  if (ec) fail("report: cannot create ", p.parent_path().string(), ": ", ec.message());
  std::ofstream f(p);
  // Decoded text of a token stream may end inside a multi-byte character (byte-level BPE): such
  // bytes are written as U+FFFD rather than failing the whole report.
  f << json_.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  f.close();
  if (!f) fail("report: cannot write ", p.string());
  return p;
}

nlohmann::json to_json(const Arms& a) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : a.fields()) j[std::string(k)] = std::string(v);
  return j;
}

nlohmann::json to_json(const Divergence& d) {
  nlohmann::json j;
  j["compared"] = d.compared;
  j["noise_floor"] = d.noise_floor ? nlohmann::json(*d.noise_floor) : nlohmann::json(nullptr);
  if (!d.diverged()) {
    j["position"] = nullptr;
    return j;
  }
  j["position"] = *d.position;
  j["ref_token"] = d.ref_token;
  j["test_token"] = d.test_token;
  j["ref_logit_ref_id"] = d.ref_logit_ref_id;
  j["ref_logit_test_id"] = d.ref_logit_test_id;
  j["test_logit_ref_id"] = d.test_logit_ref_id;
  j["test_logit_test_id"] = d.test_logit_test_id;
  j["ref_margin"] = d.ref_margin;
  j["test_margin"] = d.test_margin;
  j["row_maxdiff"] = d.row_maxdiff;
  j["entry_noise"] = d.entry_noise;
  j["noise_measurable"] = d.noise_measurable;
  if (d.noise_measurable) {  // the noise row the entry noise is measured from, at both ids
    j["noise_logit_ref_id"] = d.noise_logit_ref_id;
    j["noise_logit_test_id"] = d.noise_logit_test_id;
  }
  j["within_entry_noise"] = d.within_entry_noise();
  return j;
}

nlohmann::json to_json(const TfRow& r) {
  return {{"step", r.step},
          {"pick", r.pick},
          {"banked", r.banked},
          {"class", std::string(to_string(r.cls))},
          {"margin", r.margin},
          {"margin_is_lower_bound", r.margin_is_lower_bound},
          {"adjudicated", r.adjudicated},
          {"band", r.band}};
}

nlohmann::json to_json(const TfSummary& s) {
  return {{"agree", s.agree},           {"in_band", s.in_band},         {"out_of_band", s.out_of_band},
          {"unresolved", s.unresolved}, {"adjudicated", s.adjudicated}, {"total", s.total()}};
}

nlohmann::json to_json(const MarginStats& m) {
  return {{"n", m.n}, {"min", m.min}, {"p10", m.p10}, {"p50", m.p50}, {"p90", m.p90}, {"max", m.max}};
}

namespace {

nlohmann::json to_json(const Top2& t) {
  return {{"id1", t.id1}, {"logit1", t.logit1}, {"id2", t.id2}, {"logit2", t.logit2}, {"margin", t.margin()}};
}

}  // namespace

nlohmann::json to_json(const MarginWindow& w) {
  nlohmann::json positions = nlohmann::json::array();
  for (const auto& p : w.positions)
    positions.push_back({{"position", p.position},
                         {"decode", to_json(p.a)},
                         {"prefill", to_json(p.b)},
                         {"delta_at_ids", p.delta_at_ids},
                         {"agree", p.agree}});
  nlohmann::json j = {{"class", std::string(to_string(w.cls))},
                      {"passes", w.passes()},
                      {"flips", w.flips},
                      {"window", w.positions.size()},
                      {"margins_decode", to_json(w.margins_a)},
                      {"margins_prefill", to_json(w.margins_b)},
                      {"decision_percentile", w.decision_percentile},
                      {"exposed", w.exposed},
                      {"positions", std::move(positions)}};
  j["decision_position"] = w.positions.empty() ? nlohmann::json(nullptr) : nlohmann::json(w.at_decision().position);
  return j;
}

nlohmann::json to_json(const FractionVerdict& v) {
  return {{"draws", v.draws}, {"early", v.early}, {"fail", v.fail}};
}

nlohmann::json to_json(const GpuInfo& g) {
  return {{"index", g.index}, {"name", g.name},         {"sm", g.sm()},
          {"arch", std::string(arch_label(g.cc_major))}, {"sm_count", g.sm_count},
          {"total_mem", g.total_mem}};
}

}  // namespace memra::testing
