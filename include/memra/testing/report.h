// memra/testing/report.h — one JSON report per gate case, plus the key figures as properties.
//
// Dashboards read the JSON (<results>/<suite>.<case>.json: verdict, arms, GPU, commit, and
// whatever the gate records — first divergence, margins, noise floors); the JUnit XML that
// ctest --output-junit writes carries the key figures through RecordProperty, so one failing
// case can be read in either place. <results> is $MEMRA_TEST_RESULTS, else ./test-results
// (CTest runs every test in the build directory, so that is <build>/test-results).
//
// provides: Report, ReportPart, results_dir, to_json (Arms, Divergence, TfRow, TfSummary, MarginStats,
//           MarginWindow, FractionVerdict, GpuInfo)
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "memra/arms.h"
#include "memra/testing/gpu.h"
#include "memra/testing/records.h"

namespace memra::testing {

std::filesystem::path results_dir();

class Report {
 public:
  // Named after the running GTest case ("Suite/Instance.Test/Param" -> file-safe); outside a
  // test, "no_test".
  static Report for_current_test();
  Report(std::string suite, std::string name);

  // Free-form sections: report["first_divergence"] = to_json(d);
  nlohmann::json& operator[](const std::string& key) { return json_[key]; }
  const nlohmann::json& json() const { return json_; }

  // A key figure: in the JSON under "figures" and a GTest property (only inside a test).
  void figure(const std::string& name, double value);
  void figure(const std::string& name, int64_t value);
  void figure(const std::string& name, const std::string& value);
  void figure(const std::string& name, int value) { figure(name, int64_t(value)); }
  void figure(const std::string& name, size_t value) { figure(name, int64_t(value)); }
  void figure(const std::string& name, const char* value) { figure(name, std::string(value)); }

  // An explicit verdict ("PASS"/"FAIL"); without one, write() takes the current test's result
  // and, for a test that failed or skipped, its first message as "why" (all of them, up to 8,
  // under "messages").
  void set_verdict(bool pass, std::string why = {});
  // Takes an explicit verdict back out ({"verdict", "why"}), or nullopt: a canary's gate body
  // sets the gate's verdict, which is the canary's observation, not the case's result.
  std::optional<nlohmann::json> take_verdict();
  void set_arms(const std::string& role, const Arms& arms);

  // Writes <results>/<suite>.<name>.json (creating the folder) and returns its path. The
  // report is stamped with time, GPU (if any) and commit ($MEMRA_COMMIT, set by gpu-ci.sh).
  std::filesystem::path write();
  std::filesystem::path path() const;

 private:
  std::string suite_, name_;
  nlohmann::json json_;
  bool verdict_set_ = false;
};

// The part of a report that one of several runs of a case fills (a case that walks several
// fixture models): its sections under report[name], its figures named "<name>_<figure>". An
// empty name is the report's top level, so one gate body serves both kinds of case.
class ReportPart {
 public:
  ReportPart(Report& r, std::string name = {}) : report_(r), name_(std::move(name)) {}
  nlohmann::json& operator[](const std::string& key) { return name_.empty() ? report_[key] : report_[name_][key]; }
  template <class T>
  void figure(const std::string& name, T value) {
    report_.figure(name_.empty() ? name : name_ + "_" + name, value);
  }
  void set_arms(const std::string& role, const Arms& arms);
  const std::string& name() const { return name_; }

 private:
  Report& report_;
  std::string name_;
};

nlohmann::json to_json(const Arms& a);
nlohmann::json to_json(const Divergence& d);
nlohmann::json to_json(const TfRow& r);
nlohmann::json to_json(const TfSummary& s);
nlohmann::json to_json(const MarginStats& m);
nlohmann::json to_json(const MarginWindow& w);
nlohmann::json to_json(const FractionVerdict& v);
nlohmann::json to_json(const GpuInfo& g);

}  // namespace memra::testing
