#include "memra/bank.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "memra/error.h"
#include "memra/oracle.h"

namespace memra {
namespace {

using nlohmann::json;

std::string type_word(json::value_t t) {
  switch (t) {
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::number_integer:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    default:
      return "?";
  }
}

const json& get(const json& j, const char* name, json::value_t type, const std::string& where) {
  const auto it = j.find(name);
  if (it == j.end()) fail(where, ": missing field '", name, "'");
  bool ok = false;
  switch (type) {
    case json::value_t::number_integer:
      ok = it->is_number_integer();
      break;
    case json::value_t::number_float:
      ok = it->is_number();
      break;
    default:
      ok = it->type() == type;
  }
  if (!ok) fail(where, ": field '", name, "' is ", it->type_name(), ", expected ", type_word(type));
  return *it;
}

std::vector<int32_t> ids(const json& arr, const std::string& where) {
  std::vector<int32_t> out;
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& v = arr[i];
    if (!v.is_number_integer()) fail(where, "[", i, "] is ", v.type_name(), ", expected a token id");
    const int64_t x = v.get<int64_t>();
    if (x < 0 || x > std::numeric_limits<int32_t>::max()) fail(where, "[", i, "] = ", x, " is not a token id");
    out.push_back(static_cast<int32_t>(x));
  }
  return out;
}

std::vector<float> logits(const json& arr, const std::string& where) {
  std::vector<float> out;
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    if (!arr[i].is_number()) fail(where, "[", i, "] is ", arr[i].type_name(), ", expected a logit");
    const double d = arr[i].get<double>();
    const float f = static_cast<float>(d);
    // Banks hold f32 logits written exactly; a value that is not an f32 was not written by us.
    if (!std::isfinite(f) || static_cast<double>(f) != d) fail(where, "[", i, "] = ", d, " is not a finite f32 value");
    out.push_back(f);
  }
  return out;
}

bool is_hex64(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

void check_bank_row(size_t step, const BankRow& row) {
  MEMRA_CHECK(row.top_ids.size() == row.top_logits.size(), "bank step ", step, ": ", row.top_ids.size(),
              " top ids but ", row.top_logits.size(), " top logits");
  MEMRA_CHECK(row.top_ids.size() >= 2, "bank step ", step, ": top-k has ", row.top_ids.size(),
              " entries, need at least 2");
  MEMRA_CHECK(row.top_ids[0] == row.token, "bank step ", step, ": oracle top-1 id ", row.top_ids[0],
              " is not the banked token ", row.token);
  for (size_t k = 1; k < row.top_logits.size(); ++k)
    MEMRA_CHECK(row.top_logits[k] <= row.top_logits[k - 1], "bank step ", step, ": top-k logits not sorted at rank ", k,
                " (", row.top_logits[k - 1], " then ", row.top_logits[k], ")");
}

void PrintTo(const BankRow& r, std::ostream* os) {
  *os << "BankRow{token " << r.token << ", top-" << r.top_ids.size();
  if (!r.top_logits.empty()) *os << " from logit " << r.top_logits.front() << " to " << r.top_logits.back();
  *os << "}";
}

void validate_bank(const Bank& b, const std::string& where) {
  if (!is_hex64(b.model_sha256)) fail(where, ": model_sha256 '", b.model_sha256, "' is not 64 lowercase hex digits");
  if (b.prompt.empty()) fail(where, ": empty prompt");
  if (b.tokens.empty()) fail(where, ": no banked tokens");
  if (b.rows.size() < b.tokens.size())
    fail(where, ": bank step ", b.rows.size(), ": no row for tokens[", b.rows.size(), "] (", b.rows.size(),
         " rows for ", b.tokens.size(), " tokens, one row per step)");
  if (b.rows.size() > b.tokens.size())
    fail(where, ": bank step ", b.tokens.size(), ": a row without a banked token (", b.rows.size(), " rows for ",
         b.tokens.size(), " tokens, one row per step)");
  for (double v : {b.band_coeff, b.measured_noise_rel})
    if (!std::isfinite(v) || v < 0) fail(where, ": calibration value ", v, " is not a finite non-negative number");
  for (size_t i = 0; i < b.rows.size(); ++i) {
    with_context(where, [&] { check_bank_row(i, b.rows[i]); });
    if (b.rows[i].token != b.tokens[i])
      fail(where, ": bank step ", i, ": row token ", b.rows[i].token, " is not tokens[", i, "] = ", b.tokens[i]);
  }
}

Bank read_bank(const std::string& path) {
  const std::string where = "bank " + path;
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(where, ": cannot open");
  json j;
  try {
    j = json::parse(f);
  } catch (const json::exception& e) { fail(where, ": not JSON: ", e.what()); }
  if (!j.is_object()) fail(where, ": top level is ", j.type_name(), ", expected an object");
  using T = json::value_t;
  const std::string format = get(j, "format", T::string, where).get<std::string>();
  if (format != kBankFormat) fail(where, ": format '", format, "', expected '", kBankFormat, "'");
  Bank b;
  b.model_sha256 = get(j, "model_sha256", T::string, where).get<std::string>();
  b.model_name = get(j, "model_name", T::string, where).get<std::string>();
  b.arm_tag = get(j, "arm_tag", T::string, where).get<std::string>();
  b.prompt = ids(get(j, "prompt", T::array, where), where + ": prompt");
  b.tokens = ids(get(j, "tokens", T::array, where), where + ": tokens");
  const json& cal = get(j, "calibration", T::object, where);
  const std::string cw = where + ": calibration";
  b.measured_noise_rel = get(cal, "measured_noise_rel", T::number_float, cw).get<double>();
  b.band_coeff = get(cal, "band_coeff", T::number_float, cw).get<double>();
  b.calibration_note = get(cal, "note", T::string, cw).get<std::string>();
  const json& rows = get(j, "rows", T::array, where);
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string rw = where + ": bank step " + std::to_string(i);
    if (!rows[i].is_object()) fail(rw, ": row is ", rows[i].type_name(), ", expected an object");
    BankRow r;
    const json& tok = get(rows[i], "token", T::number_integer, rw);
    const int64_t t = tok.get<int64_t>();
    if (t < 0 || t > std::numeric_limits<int32_t>::max()) fail(rw, ": token ", t, " is not a token id");
    r.token = static_cast<int32_t>(t);
    r.top_ids = ids(get(rows[i], "top_ids", T::array, rw), rw + ": top_ids");
    r.top_logits = logits(get(rows[i], "top_logits", T::array, rw), rw + ": top_logits");
    b.rows.push_back(std::move(r));
  }
  validate_bank(b, where);
  return b;
}

void write_bank(const Bank& b, const std::string& path) {
  validate_bank(b, "bank " + path);
  json rows = json::array();
  for (const BankRow& r : b.rows) {
    json lg = json::array();
    // Through double: nlohmann prints the shortest decimal that reads back to the same double,
    // and an f32 widened to double is exact, so reading narrows back to the same f32.
    for (float v : r.top_logits) lg.push_back(static_cast<double>(v));
    rows.push_back({{"token", r.token}, {"top_ids", r.top_ids}, {"top_logits", std::move(lg)}});
  }
  const json j = {
      {"format", kBankFormat},
      {"model_sha256", b.model_sha256},
      {"model_name", b.model_name},
      {"arm_tag", b.arm_tag},
      {"prompt", b.prompt},
      {"tokens", b.tokens},
      {"calibration",
       {{"measured_noise_rel", b.measured_noise_rel},
        {"band_coeff", b.band_coeff},
        {"rule",
         "band = band_coeff*|top1|; band_coeff = 3*sqrt(2)*(C_arm + max(measured_noise_rel, "
         "2^-23)), stored with C_arm = 0 (memra/bank.h)"},
        {"note", b.calibration_note}}},
      {"rows", std::move(rows)},
  };
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail("bank ", path, ": cannot open for writing");
  f << j.dump(1) << "\n";
  f.close();
  if (!f) fail("bank ", path, ": write failed");
}

std::vector<std::vector<float>> teacher_forced_rows(const oracle::Model& m, std::span<const int32_t> prompt,
                                                    std::span<const int32_t> tokens) {
  MEMRA_CHECK(!prompt.empty(), "teacher forcing: empty prompt");
  std::vector<std::vector<float>> rows;
  if (tokens.empty()) return rows;
  oracle::Cache cache = m.new_cache(static_cast<int64_t>(prompt.size() + tokens.size()));
  rows.reserve(tokens.size());
  rows.push_back(m.prime(prompt, cache));
  for (size_t i = 0; i + 1 < tokens.size(); ++i) rows.push_back(m.decode_step(tokens[i], cache).logits);
  return rows;
}

Bank make_bank(const oracle::Model& m, std::span<const int32_t> prompt, int steps, int k) {
  const int64_t vocab = m.config().n_vocab;
  if (steps < 1) fail("make_bank: steps = ", steps, ", need at least 1");
  if (k < 2 || k > vocab) fail("make_bank: k = ", k, ", need 2 <= k <= n_vocab (", vocab, ")");
  if (prompt.empty()) fail("make_bank: empty prompt");
  const int64_t ctx = static_cast<int64_t>(prompt.size()) + steps;
  if (ctx > m.config().n_ctx_train)
    fail("make_bank: prompt (", prompt.size(), ") + steps (", steps, ") = ", ctx, " tokens, over the context of ",
         m.config().n_ctx_train);
  Bank b;
  b.prompt.assign(prompt.begin(), prompt.end());
  oracle::Cache cache = m.new_cache(ctx);
  std::vector<float> logits = m.prime(prompt, cache);
  for (int s = 0; s < steps; ++s) {
    const auto top = oracle::top_k(logits, k);
    BankRow r;
    r.token = top.front().first;  // greedy: top_k breaks ties to the lower id, as argmax does
    for (const auto& [id, v] : top) {
      r.top_ids.push_back(id);
      r.top_logits.push_back(v);
    }
    b.tokens.push_back(r.token);
    b.rows.push_back(std::move(r));
    if (s + 1 < steps) logits = m.decode_step(b.tokens.back(), cache).logits;
  }
  return b;
}

double reference_noise_rel(oracle::Model& m, std::span<const int32_t> prompt, std::span<const int32_t> tokens) {
  const oracle::Options saved = m.options();
  std::vector<std::vector<float>> chunked, recurrent;
  try {
    oracle::Options o = saved;
    o.gdn_prefill = GdnPrefill::chunked;
    m.set_options(o);
    chunked = teacher_forced_rows(m, prompt, tokens);
    o.gdn_prefill = GdnPrefill::recurrent;
    m.set_options(o);
    recurrent = teacher_forced_rows(m, prompt, tokens);
  } catch (...) {
    m.set_options(saved);
    throw;
  }
  m.set_options(saved);
  double worst = 0;
  for (size_t i = 0; i < chunked.size(); ++i) {
    const auto top = oracle::top_k(chunked[i], 1);
    const double top1 = std::fabs(static_cast<double>(top.front().second));
    double d = 0;
    for (size_t j = 0; j < chunked[i].size(); ++j)
      d = std::max(d, std::fabs(static_cast<double>(chunked[i][j]) - recurrent[i][j]));
    if (d == 0) continue;
    if (top1 == 0) fail("reference noise: step ", i, ": top-1 logit is 0, relative noise undefined");
    worst = std::max(worst, d / top1);
  }
  return worst;
}

double band_coeff_for(double ref_noise_rel, double arm_noise_rel) {
  MEMRA_CHECK(std::isfinite(ref_noise_rel) && ref_noise_rel >= 0, "band: reference noise ", ref_noise_rel);
  MEMRA_CHECK(std::isfinite(arm_noise_rel) && arm_noise_rel >= 0, "band: arm noise ", arm_noise_rel);
  // The banked logits are f32: the reference is only known to half an ulp per logit, so a
  // margin below ~1 ulp of |top1| cannot be resolved whatever was measured.
  return 3.0 * std::sqrt(2.0) * (arm_noise_rel + std::max(ref_noise_rel, kF32ResolutionRel));
}

}  // namespace memra
