// memra/testing/report.h — one JSON report per gate case, plus the key figures as properties.
//
// Dashboards read the JSON (<results>/<suite>.<case>.json: verdict, arms, GPU, commit, and
// whatever the gate records — first divergence, margins, noise floors); the JUnit XML that
// ctest --output-junit writes carries the key figures through RecordProperty, so one failing
// case can be read in either place. <results> is $MEMRA_TEST_RESULTS, else ./test-results
// (CTest runs every test in the build directory, so that is <build>/test-results).
//
// provides: Report, results_dir, to_json (Arms, Divergence, TfRow, TfSummary, MarginStats,
//           FractionVerdict, GpuInfo)
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
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

  // An explicit verdict ("PASS"/"FAIL"); without one, write() takes the current test's result.
  void set_verdict(bool pass, std::string why = {});
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

nlohmann::json to_json(const Arms& a);
nlohmann::json to_json(const Divergence& d);
nlohmann::json to_json(const TfRow& r);
nlohmann::json to_json(const TfSummary& s);
nlohmann::json to_json(const MarginStats& m);
nlohmann::json to_json(const FractionVerdict& v);
nlohmann::json to_json(const GpuInfo& g);

}  // namespace memra::testing
