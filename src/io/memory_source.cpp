#include "memra/memory_source.h"

#include <algorithm>
#include <cstring>

#include "memra/error.h"

namespace memra {

MemorySource::MemorySource(MetaStyle style, std::string path)
    : style_(style), path_(std::move(path)) {}

std::vector<std::string> MemorySource::tensor_names() const { return order_; }

const TensorView* MemorySource::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second.view;
}

void MemorySource::add(std::string name, DType type, std::vector<int64_t> ne,
                       std::vector<std::byte> bytes) {
  if (name.empty()) fail(path_, ": empty tensor name");
  if (ne.empty() || ne.size() > 4) fail(path_, ": tensor '", name, "': ", ne.size(), " dims (1..4 allowed)");
  int64_t rows = 1;
  for (size_t i = 0; i < ne.size(); ++i) {
    if (ne[i] <= 0) fail(path_, ": tensor '", name, "': ne[", i, "] = ", ne[i]);
    if (i > 0) rows *= ne[i];
  }
  const int64_t want = with_context(path_ + ": tensor '" + name + "'",
                                    [&] { return row_bytes(type, ne[0]) * rows; });
  if (static_cast<int64_t>(bytes.size()) != want)
    fail(path_, ": tensor '", name, "': ", bytes.size(), " bytes given, ", dtype_name(type),
         " shape needs ", want);
  auto [it, inserted] = tensors_.try_emplace(name);
  if (inserted) order_.push_back(name);
  Entry& e = it->second;
  e.bytes = std::move(bytes);
  e.view.name = name;
  e.view.type = type;
  e.view.ne = std::move(ne);
  e.view.data = std::span<const std::byte>(e.bytes.data(), e.bytes.size());
}

void MemorySource::add_f32(std::string name, std::vector<int64_t> ne, std::span<const float> values) {
  std::vector<std::byte> bytes(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  add(std::move(name), DType::F32, std::move(ne), std::move(bytes));
}

void MemorySource::remove(std::string_view name) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail(path_, ": cannot remove tensor '", name, "': not present");
  tensors_.erase(it);
  order_.erase(std::find(order_.begin(), order_.end(), name));
}

void MemorySource::erase_meta(std::string_view key) {
  auto it = meta_.find(key);
  if (it != meta_.end()) meta_.erase(it);
}

const MetaValue* MemorySource::meta(std::string_view key) const {
  auto it = meta_.find(key);
  return it == meta_.end() ? nullptr : &it->second;
}

}  // namespace memra
