#include "memra/testing/gpu.h"

#include <dlfcn.h>

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

std::string_view arch_label(int cc_major) {
  switch (cc_major) {
    case 9: return "h100";
    case 10: return "b200";
    case 12: return "rtx5090";
    default: return "";
  }
}

bool strict_gpu_mode() {
  const char* v = std::getenv("MEMRA_REQUIRE_GPU");
  if (v == nullptr || *v == '\0' || std::string_view(v) == "0") return false;
  if (std::string_view(v) == "1") return true;
  fail("environment MEMRA_REQUIRE_GPU='", v, "' is not 0 or 1");
}

int test_device() {
  // CTest's resource allocation: "id:<id>,slots:<n>" (one entry per GPU of group 0).
  const char* v = std::getenv("CTEST_RESOURCE_GROUP_0_GPUS");
  if (v == nullptr) return 0;
  const std::string_view s(v);
  const size_t p = s.find("id:");
  if (p == s.npos) fail("CTEST_RESOURCE_GROUP_0_GPUS='", s, "' has no id:");
  return std::atoi(std::string(s.substr(p + 3)).c_str());
}

std::optional<std::string> gpu_unavailable(const std::vector<GpuInfo>& gpus, int device,
                                           std::string_view archs, int min_devices) {
  const auto wanted = split_archs(archs);
  std::ostringstream why;
  const auto list = [&] {
    std::string l;
    for (auto a : wanted) l += (l.empty() ? "" : "/") + std::string(a);
    return l;
  };
  if (wanted.empty()) return "test declares no GPU arch";
  if (gpus.empty()) {
    why << "needs a GPU (" << list() << "), none found";
    return why.str();
  }
  if (device < 0 || device + min_devices > int(gpus.size())) {
    why << "needs " << min_devices << " GPU(s) from device " << device << ", have "
        << gpus.size();
    return why.str();
  }
  const GpuInfo& g = gpus[size_t(device)];
  const std::string_view have = arch_label(g.cc_major);
  for (auto a : wanted)
    if (a == have) return std::nullopt;
  why << "needs " << list() << ", device " << device << " is " << g.name << " (" << g.sm()
      << (have.empty() ? "" : ", " + std::string(have)) << ")";
  return why.str();
}

std::optional<std::string> gpu_unavailable(std::string_view archs, int min_devices) {
  return gpu_unavailable(query_gpus(), test_device(), archs, min_devices);
}

}  // namespace memra::testing
