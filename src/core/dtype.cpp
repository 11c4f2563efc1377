#include "kiln/dtype.h"

#include "core/check.h"

namespace kiln {

namespace {
struct Info {
  const char* name;
  size_t size;
};
constexpr Info kInfo[kNumDTypes] = {
    {"bool", 1},    {"uint8", 1},   {"int8", 1},     {"int16", 2},   {"int32", 4},
    {"int64", 8},   {"uint16", 2},  {"uint32", 4},   {"uint64", 8},  {"float16", 2},
    {"bfloat16", 2}, {"float32", 4}, {"float8_e4m3fn", 1}, {"float8_e5m2", 1}, {"complex64", 8},
};
int idx(DType dt) { return static_cast<int>(dt); }

// Rank among the integer types for promotion; unsigned 16/32/64 are handled apart.
int int_rank(DType d) {
  switch (d) {
    case DType::Bool: return 0;
    case DType::UInt8: return 1;
    case DType::Int8: return 1;
    case DType::Int16: return 2;
    case DType::Int32: return 3;
    case DType::Int64: return 4;
    default: return -1;
  }
}
}  // namespace

size_t itemsize(DType dt) { return kInfo[idx(dt)].size; }
const char* dtype_name(DType dt) { return kInfo[idx(dt)].name; }

DType dtype_from_name(const std::string& name) {
  std::string n = name.rfind("torch.", 0) == 0 ? name.substr(6) : name;
  if (n == "float") n = "float32";
  if (n == "half") n = "float16";
  if (n == "long") n = "int64";
  if (n == "int") n = "int32";
  if (n == "bf16") n = "bfloat16";
  if (n == "fp16") n = "float16";
  if (n == "fp32") n = "float32";
  if (n == "fp8") n = "float8_e4m3fn";
  for (int i = 0; i < kNumDTypes; ++i)
    if (n == kInfo[i].name) return static_cast<DType>(i);
  throw Error("unknown dtype name '" + name + "'");
}

bool is_float8(DType dt) { return dt == DType::Float8_e4m3fn || dt == DType::Float8_e5m2; }
bool is_floating_point(DType dt) {
  return dt == DType::Float16 || dt == DType::BFloat16 || dt == DType::Float32 || is_float8(dt);
}
bool is_complex(DType dt) { return dt == DType::Complex64; }
bool is_integral(DType dt, bool include_bool) {
  if (dt == DType::Bool) return include_bool;
  return !is_floating_point(dt) && !is_complex(dt);
}
bool is_unsigned(DType dt) {
  return dt == DType::Bool || dt == DType::UInt8 || dt == DType::UInt16 || dt == DType::UInt32 ||
         dt == DType::UInt64;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (is_float8(a) || is_float8(b))
    throw Error(detail::format("promote_types: promotion of float8 types is not supported (",
                               dtype_name(a), " and ", dtype_name(b), ")"));
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  if (is_complex(a) || is_complex(b)) return DType::Complex64;
  const bool fa = is_floating_point(a), fb = is_floating_point(b);
  if (fa && fb) return DType::Float32;  // float16 with bfloat16, or either with float32
  if (fa) return a;
  if (fb) return b;
  // both integers
  auto big_unsigned = [](DType d) { return d == DType::UInt16 || d == DType::UInt32 || d == DType::UInt64; };
  if (big_unsigned(a) || big_unsigned(b))
    throw Error(detail::format("promote_types: promotion of uint16, uint32 and uint64 with other types is not "
                               "supported (", dtype_name(a), " and ", dtype_name(b), ")"));
  if ((a == DType::UInt8 && b == DType::Int8) || (a == DType::Int8 && b == DType::UInt8)) return DType::Int16;
  return int_rank(a) >= int_rank(b) ? a : b;
}

}  // namespace kiln
