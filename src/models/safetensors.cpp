// safetensors: 8 bytes of little-endian header length N, N bytes of JSON
// ({name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}),
// then the data. The header is validated whole (types, shapes, sizes, bounds,
// no overlaps or holes in the data) before the file's bytes are handed out.
#include "kiln/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/check.h"
#include "core/shape.h"
#include "models/json_file.h"

namespace kiln {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the reference implementation's limit

struct Mapping {
  void* base = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (base != MAP_FAILED) munmap(base, size);
  }
};

DType safetensors_dtype(const std::string& path, const std::string& name, const std::string& s) {
  static const std::map<std::string, DType> table = {
      {"F32", DType::Float32},        {"F16", DType::Float16},       {"BF16", DType::BFloat16},
      {"F8_E4M3", DType::Float8_e4m3fn}, {"F8_E5M2", DType::Float8_e5m2}, {"BOOL", DType::Bool},
      {"I8", DType::Int8},            {"I16", DType::Int16},         {"I32", DType::Int32},
      {"I64", DType::Int64},          {"U8", DType::UInt8},          {"U16", DType::UInt16},
      {"U32", DType::UInt32},         {"U64", DType::UInt64}};
  auto it = table.find(s);
  KILN_CHECK(it != table.end(), "safetensors: ", path, ": tensor '", name, "' has dtype '", s,
             "', which kiln does not support");
  return it->second;
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

}  // namespace

SafetensorsFile load_safetensors(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  KILN_CHECK(fd >= 0, "safetensors: cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  auto map = std::make_shared<Mapping>();
  map->size = stat_ok ? static_cast<size_t>(st.st_size) : 0;
  if (stat_ok && map->size > 0) map->base = ::mmap(nullptr, map->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  KILN_CHECK(stat_ok, "safetensors: cannot stat ", path);
  KILN_CHECK(map->size >= 8, "safetensors: ", path, " is ", map->size, " bytes, too short for the 8-byte header length");
  KILN_CHECK(map->base != MAP_FAILED, "safetensors: cannot map ", path, ": ", std::strerror(errno));
  const auto* bytes = static_cast<const unsigned char*>(map->base);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  KILN_CHECK(n <= kMaxHeaderBytes && n <= map->size - 8, "safetensors: ", path, ": header length ", n,
             " does not fit the file (", map->size, " bytes)");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes + 8, bytes + 8 + n);
  } catch (const nlohmann::json::exception& e) {
    throw Error(detail::format("safetensors: ", path, ": the header is not valid JSON: ", e.what()));
  }
  KILN_CHECK(header.is_object(), "safetensors: ", path, ": the header must be a JSON object");
  const uint64_t data_size = map->size - 8 - n;
  SafetensorsFile out;
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const auto& v = it.value();
    if (name == "__metadata__") {
      KILN_CHECK(v.is_object(), "safetensors: ", path, ": __metadata__ must be an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        KILN_CHECK(m.value().is_string(), "safetensors: ", path, ": __metadata__ value '", m.key(), "' is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto bad = [&](const char* what) {
      return Error(detail::format("safetensors: ", path, ": tensor '", name, "': ", what));
    };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      throw bad("needs dtype, shape and data_offsets");
    if (!v["dtype"].is_string()) throw bad("dtype must be a string");
    Entry e{name, safetensors_dtype(path, name, v["dtype"].get<std::string>()), {}, 0, 0};
    if (!v["shape"].is_array()) throw bad("shape must be an array");
    uint64_t numel = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) throw bad("shape entries must be non-negative integers");
      const uint64_t x = d.get<uint64_t>();
      if (x > (uint64_t{1} << 62) || (x != 0 && numel > (uint64_t{1} << 62) / x)) throw bad("shape is too large");
      numel *= x;
      e.shape.push_back(static_cast<int64_t>(x));
    }
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw bad("data_offsets must be two non-negative integers");
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    KILN_CHECK(e.begin <= e.end && e.end <= data_size, "safetensors: ", path, ": tensor '", name, "': data_offsets [",
               e.begin, ", ", e.end, "] exceed the ", data_size, " data bytes of the file");
    const uint64_t want = numel * itemsize(e.dtype);
    KILN_CHECK(e.end - e.begin == want, "safetensors: ", path, ": tensor '", name, "': ", e.end - e.begin,
               " bytes for shape ", e.shape, " of ", e.dtype, ", which needs ", want);
    entries.push_back(std::move(e));
  }
  // The data must be covered exactly once: sorted by offset, each tensor starts where the previous ended.
  std::vector<const Entry*> order;
  for (const auto& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  uint64_t at = 0;
  for (const Entry* e : order) {
    KILN_CHECK(e->begin == at, "safetensors: ", path, ": tensor '", e->name, "' starts at byte ", e->begin, " but ",
               at < e->begin ? "the data before it is not covered" : "it overlaps the tensor before it",
               " (expected ", at, ")");
    at = e->end;
  }
  KILN_CHECK(at == data_size, "safetensors: ", path, ": ", data_size - at, " data bytes at the end belong to no tensor");
  unsigned char* data = static_cast<unsigned char*>(map->base) + 8 + n;
  for (const auto& e : entries) {
    unsigned char* p = data + e.begin;
    const Shape strides = contiguous_strides(e.shape);
    if (reinterpret_cast<uintptr_t>(p) % itemsize(e.dtype) == 0) {
      out.tensors[e.name] = Tensor::from_blob(p, e.shape, strides, e.dtype, kCPU, [map](void*) {});
    } else {  // unaligned for its dtype: a copy, so that typed and vector loads stay legal
      Tensor t = Tensor::empty(e.shape, e.dtype, kCPU);
      if (e.end > e.begin) std::memcpy(t.data_ptr(), p, e.end - e.begin);
      out.tensors[e.name] = t;
    }
  }
  return out;
}

SafetensorsFile load_checkpoint(const std::string& folder) {
  namespace fs = std::filesystem;
  const fs::path dir(folder), index = dir / "model.safetensors.index.json", single = dir / "model.safetensors";
  if (!fs::exists(index)) {
    KILN_CHECK(fs::exists(single), "checkpoint: ", folder, " has neither model.safetensors nor "
               "model.safetensors.index.json");
    return load_safetensors(single.string());
  }
  const nlohmann::json j = read_json_file(index.string(), "checkpoint");
  KILN_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), "checkpoint: ",
             index.string(), " has no weight_map object");
  std::map<std::string, std::vector<std::string>> names_by_shard;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    KILN_CHECK(it.value().is_string(), "checkpoint: ", index.string(), ": weight_map['", it.key(), "'] is not a file name");
    const std::string shard = it.value().get<std::string>();
    KILN_CHECK(fs::path(shard).filename() == fs::path(shard), "checkpoint: ", index.string(), ": shard '", shard,
               "' must be a file name in the folder");
    names_by_shard[shard].push_back(it.key());
  }
  SafetensorsFile out;
  for (const auto& [shard, names] : names_by_shard) {
    SafetensorsFile f = load_safetensors((dir / shard).string());
    for (const auto& name : names)
      KILN_CHECK(f.tensors.count(name), "checkpoint: ", index.string(), " puts '", name, "' in ", shard,
                 ", which does not hold it");
    for (auto& [name, t] : f.tensors) {
      KILN_CHECK(!out.tensors.count(name), "checkpoint: '", name, "' is in more than one shard (", shard, " and another)");
      out.tensors[name] = std::move(t);
    }
    for (auto& [k, v] : f.metadata) out.metadata[k] = v;
  }
  return out;
}

}  // namespace kiln
