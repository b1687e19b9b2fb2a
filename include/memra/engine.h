// memra/engine.h — Engine: one CUDA device, its stream and properties; device memory RAII.
//
// Host code includes this without any CUDA header (the stream is an opaque pointer), so tools,
// tests and the oracle side can hold an Engine; every CUDA call behind it is checked and fails
// as memra::Error naming the call, file:line and device (memra/cuda_check.h). device_count()
// is safe on a machine without a driver or GPU: it returns 0.
//
// provides: device_count, DeviceProps, Engine, DeviceBuffer, device_alloc, device_free,
//           copy_to_device, copy_to_host, fill_device_bytes
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

struct CUstream_st;  // cudaStream_t without the CUDA headers

namespace memra {

// Visible CUDA devices; 0 (never an error) without a driver, without a GPU, or when the
// runtime cannot initialise.
int device_count() noexcept;

struct DeviceProps {
  int index = 0;
  std::string name;
  int sm = 0;                   // compute capability as 10*major + minor: 90 for H100/H200
  int sm_count = 0;             // streaming multiprocessors
  uint64_t total_mem = 0;       // bytes
  uint64_t l2_bytes = 0;
  double hbm_bytes_per_s = 0;   // peak estimate: 2 * memory clock * bus width; 0 if unknown
};

class Engine {
 public:
  // Selects `device`, creates a non-blocking stream, reads the properties. Throws memra::Error
  // for a device index that does not exist (naming how many there are).
  static Engine open(int device);

  Engine(Engine&& o) noexcept : device_(o.device_), stream_(std::exchange(o.stream_, nullptr)), props_(std::move(o.props_)) {}
  Engine& operator=(Engine&& o) noexcept;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine();

  int device() const { return device_; }
  const DeviceProps& props() const { return props_; }
  CUstream_st* stream() const { return stream_; }
  // Waits for the stream and surfaces any asynchronous kernel error, named.
  void synchronize() const;

 private:
  Engine() = default;
  int device_ = -1;
  CUstream_st* stream_ = nullptr;
  DeviceProps props_;
};

// Raw device memory on `device` (the calls select it first). Errors are memra::Error.
void* device_alloc(size_t bytes, int device);
void device_free(void* p, int device) noexcept;
void copy_to_device(void* dst, const void* src, size_t bytes, CUstream_st* stream);
void copy_to_host(void* dst, const void* src, size_t bytes, CUstream_st* stream);  // synchronous
void fill_device_bytes(void* dst, uint8_t byte, size_t bytes, CUstream_st* stream);

// An owning typed device array. Moves, never copies.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const Engine& e, size_t n)
      : ptr_(static_cast<T*>(n ? device_alloc(n * sizeof(T), e.device()) : nullptr)),
        n_(n), device_(e.device()), stream_(e.stream()) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept { swap(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    DeviceBuffer tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_) device_free(ptr_, device_);
  }

  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }

  void upload(std::span<const T> host) {
    if (host.size() != n_) upload_size_error(host.size());
    if (n_) copy_to_device(ptr_, host.data(), bytes(), stream_);
  }
  std::vector<T> download() const {
    std::vector<T> h(n_);
    if (n_) copy_to_host(h.data(), ptr_, bytes(), stream_);
    return h;
  }
  // Every byte set to `byte`: 0xFF poisons f32 outputs with NaN, so an element a kernel never
  // wrote cannot pass for a result.
  void fill_bytes(uint8_t byte) {
    if (n_) fill_device_bytes(ptr_, byte, bytes(), stream_);
  }

 private:
  void swap(DeviceBuffer& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(n_, o.n_);
    std::swap(device_, o.device_);
    std::swap(stream_, o.stream_);
  }
  [[noreturn]] void upload_size_error(size_t got) const;
  T* ptr_ = nullptr;
  size_t n_ = 0;
  int device_ = 0;
  CUstream_st* stream_ = nullptr;
};

[[noreturn]] void device_buffer_size_error(size_t got, size_t have);
template <class T>
void DeviceBuffer<T>::upload_size_error(size_t got) const {
  device_buffer_size_error(got, n_);
}

}  // namespace memra
