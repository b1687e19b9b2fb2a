#include "memra/testing/gpu.h"

#include <dlfcn.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <sstream>

#include "memra/error.h"

namespace memra::testing {
namespace {

// The few driver entry points the query needs, declared here so no CUDA header is required.
using CUresult = int;
using CUdevice = int;
constexpr int kAttrSmCount = 16;        // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kAttrCcMajor = 75;        // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrCcMinor = 76;        // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

std::vector<GpuInfo> query_driver() {
  std::vector<GpuInfo> out;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return out;  // no driver: no GPU
  auto sym = [&](const char* name) { return dlsym(lib, name); };
  auto cu_init = reinterpret_cast<CUresult (*)(unsigned)>(sym("cuInit"));
  auto cu_count = reinterpret_cast<CUresult (*)(int*)>(sym("cuDeviceGetCount"));
  auto cu_get = reinterpret_cast<CUresult (*)(CUdevice*, int)>(sym("cuDeviceGet"));
  auto cu_name = reinterpret_cast<CUresult (*)(char*, int, CUdevice)>(sym("cuDeviceGetName"));
  auto cu_attr = reinterpret_cast<CUresult (*)(int*, int, CUdevice)>(sym("cuDeviceGetAttribute"));
  auto cu_mem = reinterpret_cast<CUresult (*)(size_t*, CUdevice)>(sym("cuDeviceTotalMem_v2"));
  int n = 0;
  if (!cu_init || !cu_count || !cu_get || !cu_name || !cu_attr || cu_init(0) != 0 ||
      cu_count(&n) != 0)
    return out;  // a driver without a usable device (e.g. container without /dev/nvidia*)
  for (int i = 0; i < n; ++i) {
    CUdevice d = 0;
    if (cu_get(&d, i) != 0) continue;
    GpuInfo g;
    g.index = i;
    char name[256] = {};
    if (cu_name(name, sizeof name, d) == 0) g.name = name;
    cu_attr(&g.cc_major, kAttrCcMajor, d);
    cu_attr(&g.cc_minor, kAttrCcMinor, d);
    cu_attr(&g.sm_count, kAttrSmCount, d);
    size_t mem = 0;
    if (cu_mem && cu_mem(&mem, d) == 0) g.total_mem = mem;
    out.push_back(std::move(g));
  }
  // The library stays loaded: the CUDA runtime in the same process uses it anyway.
  return out;
}

std::vector<std::string_view> split_archs(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i <= s.size()) {
    const size_t j = s.find_first_of(";, ", i);
    const std::string_view part = s.substr(i, j == std::string_view::npos ? s.npos : j - i);
    if (!part.empty()) out.push_back(part);
    if (j == std::string_view::npos) break;
    i = j + 1;
  }
  return out;
}

}  // namespace

const std::vector<GpuInfo>& query_gpus() {
  static const std::vector<GpuInfo> gpus = query_driver();
  return gpus;
}

namespace {

// The arch table (cmake/archs.txt, the one table CMake and ctest/gpu-ci.sh read too), generated
// into the build tree by cmake/MemraArchs.cmake: a family is added there, not here.
struct ArchRow {
  int cc_major;
  const char* label;
  const char* sm;
  const char* cuda_arch;
  const char* parts;
};
constexpr ArchRow kArchTable[] = {
#include "memra_arch_table.inc"
};

}  // namespace

std::string_view arch_label(int cc_major) {
  for (const ArchRow& r : kArchTable)
    if (r.cc_major == cc_major) return r.label;
  return "";
}

bool strict_gpu_mode() {
  const char* v = std::getenv("MEMRA_REQUIRE_GPU");
  if (v == nullptr || *v == '\0' || std::string_view(v) == "0") return false;
  if (std::string_view(v) == "1") return true;
  fail("environment MEMRA_REQUIRE_GPU='", v, "' is not 0 or 1");
}

namespace {

// A non-negative decimal integer, or an error naming the variable that held it.
int parse_index(std::string_view var, std::string_view value, std::string_view text) {
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0)
    fail("environment ", var, "='", value, "': '", text, "' is not a device index");
  return v;
}

// The ids of one CTEST_RESOURCE_GROUP_<i>_GPUS value: "id:<id>,slots:<n>" entries joined by ';'.
void append_group_ids(std::string_view var, std::string_view value, std::vector<int>& out) {
  size_t i = 0;
  while (i <= value.size()) {
    const size_t j = std::min(value.find(';', i), value.size());
    const std::string_view entry = value.substr(i, j - i);
    if (!entry.empty()) {
      std::optional<int> id;
      size_t k = 0;
      while (k <= entry.size()) {
        const size_t c = std::min(entry.find(',', k), entry.size());
        const std::string_view field = entry.substr(k, c - k);
        if (field.starts_with("id:")) id = parse_index(var, value, field.substr(3));
        k = c + 1;
      }
      if (!id) fail("environment ", var, "='", value, "': entry '", entry, "' has no id:");
      out.push_back(*id);
    }
    i = j + 1;
  }
}

std::string device_list(const std::vector<int>& devices) {
  std::ostringstream os;
  for (size_t i = 0; i < devices.size(); ++i) os << (i ? ", " : "") << devices[i];
  return os.str();
}

}  // namespace

std::vector<int> test_devices(int n, const EnvLookup& env) {
  std::vector<int> out;
  const auto group_var = [](int g) { return "CTEST_RESOURCE_GROUP_" + std::to_string(g) + "_GPUS"; };
  const char* count = env("CTEST_RESOURCE_GROUP_COUNT");
  if (count != nullptr && *count != '\0') {
    const int groups = parse_index("CTEST_RESOURCE_GROUP_COUNT", count, count);
    for (int g = 0; g < groups; ++g) {
      const std::string var = group_var(g);
      // A group of another resource type has no _GPUS variable.
      if (const char* v = env(var.c_str())) append_group_ids(var, v, out);
    }
    return out;
  }
  // CTest always sets the count with an allocation; groups without it (set by hand) are read
  // up to the first one missing.
  for (int g = 0;; ++g) {
    const std::string var = group_var(g);
    const char* v = env(var.c_str());
    if (v == nullptr) break;
    append_group_ids(var, v, out);
  }
  if (out.empty())
    for (int i = 0; i < n; ++i) out.push_back(i);
  return out;
}

std::vector<int> test_devices(int n) {
  return test_devices(n, [](const char* name) -> const char* { return std::getenv(name); });
}

int test_device() {
  const auto d = test_devices(1);
  return d.empty() ? 0 : d.front();
}

std::optional<GpuInfo> test_gpu() {
  const int d = test_device();
  for (const GpuInfo& g : query_gpus())
    if (g.index == d) return g;
  return std::nullopt;
}

std::optional<std::string> gpu_unavailable(const std::vector<GpuInfo>& gpus,
                                           const std::vector<int>& devices, std::string_view archs,
                                           int min_devices) {
  const auto wanted = split_archs(archs);
  std::ostringstream why;
  const auto list = [&] {
    std::string l;
    for (auto a : wanted) l += (l.empty() ? "" : "/") + std::string(a);
    return l;
  };
  if (wanted.empty()) return "test declares no GPU arch";
  if (gpus.empty()) {
    if (min_devices > 1) why << "needs " << min_devices << " GPUs (" << list() << "), none found";
    else why << "needs a GPU (" << list() << "), none found";
    return why.str();
  }
  if (int(devices.size()) < min_devices) {
    why << "needs " << min_devices << " GPU(s), was given " << devices.size() << " (device"
        << (devices.size() == 1 ? " " : "s ") << device_list(devices) << ")";
    return why.str();
  }
  for (const int d : devices) {
    if (d >= 0 && d < int(gpus.size())) continue;
    // Contiguous from the first (the hand-run default) reads as a range; CTest's ids as a list.
    bool contiguous = true;
    for (size_t i = 1; i < devices.size(); ++i) contiguous &= devices[i] == devices[0] + int(i);
    why << "needs " << min_devices << " GPU(s) ";
    if (contiguous) why << "from device " << devices.front();
    else why << "(devices " << device_list(devices) << ")";
    why << ", have " << gpus.size();
    return why.str();
  }
  for (const int d : devices) {
    const GpuInfo& g = gpus[size_t(d)];
    const std::string_view have = arch_label(g.cc_major);
    if (std::find(wanted.begin(), wanted.end(), have) != wanted.end()) continue;
    why << "needs " << list() << ", device " << d << " is " << g.name << " (" << g.sm()
        << (have.empty() ? "" : ", " + std::string(have)) << ")";
    return why.str();
  }
  return std::nullopt;
}

std::optional<std::string> gpu_unavailable(const std::vector<GpuInfo>& gpus, int device,
                                           std::string_view archs, int min_devices) {
  std::vector<int> devices;
  for (int i = 0; i < std::max(min_devices, 1); ++i) devices.push_back(device + i);
  return gpu_unavailable(gpus, devices, archs, min_devices);
}

std::optional<std::string> gpu_unavailable(std::string_view archs, int min_devices) {
  return gpu_unavailable(query_gpus(), test_devices(min_devices), archs, min_devices);
}

}  // namespace memra::testing
