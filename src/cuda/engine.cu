// Engine: device selection, stream, properties; checked memory helpers (memra/engine.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/launch.cuh"
#include "memra/cuda_check.h"
#include "memra/engine.h"
#include "memra/error.h"

namespace memra {

void cuda_fail(cudaError_t e, const char* what, const char* file, int line) {
  int dev = -1;
  (void)cudaGetDevice(&dev);  // best effort: the device the failing call ran against
  cudaGetLastError();         // clear a sticky non-fatal error so the next check is about itself
  fail("cuda: ", what, " failed at ", file, ":", line, " on device ", dev, ": ",
       cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
}

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver / no device: not an error for the caller
    return 0;
  }
  return n;
}

Engine Engine::open(int device) {
  const int n = device_count();
  if (device < 0 || device >= n)
    fail("Engine::open: device ", device, " does not exist (", n, " CUDA device(s) visible)");
  Engine e;
  e.device_ = device;
  MEMRA_CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t s = nullptr;
  MEMRA_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  e.stream_ = s;
  cudaDeviceProp p{};
  MEMRA_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  DeviceProps& d = e.props_;
  d.index = device;
  d.name = p.name;
  d.sm = p.major * 10 + p.minor;
  d.sm_count = p.multiProcessorCount;
  d.total_mem = p.totalGlobalMem;
  d.l2_bytes = uint64_t(p.l2CacheSize);
  // Peak HBM estimate. The memory clock is an attribute (the cudaDeviceProp field is gone in
  // CUDA 13); kHz, double data rate.
  int clock_khz = 0, bus_bits = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device) == cudaSuccess &&
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) == cudaSuccess)
    d.hbm_bytes_per_s = 2.0 * double(clock_khz) * 1e3 * double(bus_bits) / 8.0;
  cudaGetLastError();
  return e;
}

Engine& Engine::operator=(Engine&& o) noexcept {
  if (this != &o) {
    if (stream_) cudaStreamDestroy(stream_);
    device_ = o.device_;
    stream_ = std::exchange(o.stream_, nullptr);
    props_ = std::move(o.props_);
  }
  return *this;
}

Engine::~Engine() {
  if (stream_) cudaStreamDestroy(stream_);  // no throw from a destructor
}

void Engine::synchronize() const { MEMRA_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void* device_alloc(size_t bytes, int device) {
  MEMRA_CUDA_CHECK(cudaSetDevice(device));
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail("cuda: cudaMalloc of ", bytes, " bytes on device ", device, " failed: ",
         cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
  }
  return p;
}

void device_free(void* p, int device) noexcept {
  if (!p) return;
  int cur = -1;
  cudaGetDevice(&cur);
  cudaSetDevice(device);
  cudaFree(p);
  if (cur >= 0) cudaSetDevice(cur);
}

void copy_to_device(void* dst, const void* src, size_t bytes, CUstream_st* stream) {
  MEMRA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
}

void copy_to_host(void* dst, const void* src, size_t bytes, CUstream_st* stream) {
  MEMRA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
  MEMRA_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void fill_device_bytes(void* dst, uint8_t byte, size_t bytes, CUstream_st* stream) {
  MEMRA_CUDA_CHECK(cudaMemsetAsync(dst, byte, bytes, stream));
}

void device_buffer_size_error(size_t got, size_t have) {
  fail("DeviceBuffer::upload: ", got, " elements for a buffer of ", have);
}

namespace cuda {

bool& launch_overlap() {
  thread_local bool on = false;
  return on;
}

void allow_dynamic_smem(const void* kernel, size_t smem) {
  struct Limit {
    size_t allowed;  // dynamic bytes a launch may ask for now
  };
  static std::mutex mu;
  static std::map<std::pair<int, const void*>, Limit> limits;
  int dev = 0;
  MEMRA_CUDA_CHECK(cudaGetDevice(&dev));
  const std::lock_guard<std::mutex> lock(mu);
  auto it = limits.find({dev, kernel});
  if (it == limits.end()) {
    cudaFuncAttributes fa{};
    MEMRA_CUDA_CHECK(cudaFuncGetAttributes(&fa, kernel));
    constexpr size_t kDefault = 48 * 1024;  // without the opt-in: static + dynamic <= 48 KB
    it = limits.emplace(std::pair{dev, kernel}, Limit{fa.sharedSizeBytes < kDefault ? kDefault - fa.sharedSizeBytes : 0}).first;
  }
  if (smem <= it->second.allowed) return;
  MEMRA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  it->second.allowed = smem;
}

namespace {

// The current device's value of `attr`, asked once per device ordinal (`cache`: 0 = not asked yet)
int remembered_attr(cudaDeviceAttr attr, std::atomic<int> (&cache)[64], const char* what) {
  int dev = 0;
  MEMRA_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= 64) fail(what, ": device ordinal ", dev, " past the 64 remembered");
  int n = cache[dev].load(std::memory_order_relaxed);
  if (n == 0) {
    MEMRA_CUDA_CHECK(cudaDeviceGetAttribute(&n, attr, dev));
    cache[dev].store(n, std::memory_order_relaxed);
  }
  return n;
}

}  // namespace

int sm_count() {
  static std::atomic<int> counts[64] = {};
  return remembered_attr(cudaDevAttrMultiProcessorCount, counts, "sm_count");
}

size_t spread_smem(size_t smem, int64_t blocks) {
  static std::atomic<int> per_sm[64] = {};
  if (blocks > sm_count()) return smem;
  const size_t half =
      static_cast<size_t>(remembered_attr(cudaDevAttrMaxSharedMemoryPerMultiprocessor, per_sm, "spread_smem")) / 2 + 1;
  return std::max(smem, half);
}

void launch_check(cudaError_t launch_result, const char* name, cudaStream_t s) {
  if (launch_result != cudaSuccess)  // the message is built only on failure: this runs ~330 times a decode step
    cuda_fail(launch_result, (std::string("launch of ") + name).c_str(), __FILE__, __LINE__);
#ifndef NDEBUG
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusNone) {
    const cudaError_t e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) cuda_fail(e, (std::string("run of ") + name).c_str(), __FILE__, __LINE__);
  }
#else
  (void)s;
#endif
}

// --- timeline.h (host side) ---------------------------------------------------------------

namespace timeline {

namespace {
std::vector<void (*)(const Sink&)>& setters() {
  static std::vector<void (*)(const Sink&)> v;  // filled during static initialisation
  return v;
}
Sink g_sink;
}  // namespace

void add_setter(void (*set)(const Sink&)) { setters().push_back(set); }

bool available() { return MEMRA_TIMELINE != 0; }

std::vector<std::string>& launch_names() {
  static std::vector<std::string> v;
  return v;
}
std::vector<uint64_t>& launch_host_ns() {
  static std::vector<uint64_t> v;
  return v;
}
bool& note_launches() {
  static bool on = false;
  return on;
}

void start(uint32_t capacity) {
  if (!available()) fail("timeline: this build has no timeline (configure with -DMEMRA_TIMELINE=ON)");
  if (g_sink.marks) fail("timeline: start() while recording");
  MEMRA_CUDA_CHECK(cudaDeviceSynchronize());
  MEMRA_CUDA_CHECK(cudaMalloc(&g_sink.marks, sizeof(Mark) * capacity));
  MEMRA_CUDA_CHECK(cudaMalloc(&g_sink.count, sizeof(uint32_t)));
  MEMRA_CUDA_CHECK(cudaMemset(g_sink.count, 0, sizeof(uint32_t)));
  g_sink.capacity = capacity;
  for (auto set : setters()) set(g_sink);
  MEMRA_CUDA_CHECK(cudaGetLastError());  // a failed cudaMemcpyToSymbol in a setter
}

std::vector<Mark> stop() {
  if (!g_sink.marks) fail("timeline: stop() without start()");
  MEMRA_CUDA_CHECK(cudaDeviceSynchronize());
  uint32_t n = 0;
  MEMRA_CUDA_CHECK(cudaMemcpy(&n, g_sink.count, sizeof n, cudaMemcpyDeviceToHost));
  std::vector<Mark> marks(std::min(n, g_sink.capacity));
  MEMRA_CUDA_CHECK(cudaMemcpy(marks.data(), g_sink.marks, sizeof(Mark) * marks.size(), cudaMemcpyDeviceToHost));
  const uint32_t capacity = g_sink.capacity;
  const Sink none{};
  for (auto set : setters()) set(none);
  MEMRA_CUDA_CHECK(cudaFree(g_sink.marks));
  MEMRA_CUDA_CHECK(cudaFree(g_sink.count));
  g_sink = none;
  // a truncated record would pass for launches with fewer blocks than they ran
  if (n > capacity) fail("timeline: ", n, " marks recorded into room for ", capacity, ": start() with more");
  return marks;
}

}  // namespace timeline

}  // namespace cuda
}  // namespace memra
