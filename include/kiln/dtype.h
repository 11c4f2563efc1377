// Element types. Names and promotion rules follow PyTorch's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln {

enum class DType : uint8_t {
  Bool,
  UInt8,
  Int8,
  Int16,
  Int32,
  Int64,
  UInt16,
  UInt32,
  UInt64,
  Float16,
  BFloat16,
  Float32,
  Float8_e4m3fn,
  Float8_e5m2,
  Complex64,
};

inline constexpr int kNumDTypes = 15;

// PyTorch-style short aliases: kiln::float32, kiln::bfloat16, ...
inline constexpr DType bool_ = DType::Bool;
inline constexpr DType uint8 = DType::UInt8;
inline constexpr DType int8 = DType::Int8;
inline constexpr DType int16 = DType::Int16;
inline constexpr DType int32 = DType::Int32;
inline constexpr DType int64 = DType::Int64;
inline constexpr DType uint16 = DType::UInt16;
inline constexpr DType uint32 = DType::UInt32;
inline constexpr DType uint64 = DType::UInt64;
inline constexpr DType float16 = DType::Float16;
inline constexpr DType bfloat16 = DType::BFloat16;
inline constexpr DType float32 = DType::Float32;
inline constexpr DType float8_e4m3fn = DType::Float8_e4m3fn;
inline constexpr DType float8_e5m2 = DType::Float8_e5m2;
inline constexpr DType complex64 = DType::Complex64;

size_t itemsize(DType dt);
// "float32", "bfloat16", ... (PyTorch's names without the "torch." prefix).
const char* dtype_name(DType dt);
// Parses a name as dtype_name prints it; throws on an unknown name.
DType dtype_from_name(const std::string& name);

bool is_floating_point(DType dt);  // float16/bfloat16/float32/float8_*
bool is_complex(DType dt);
bool is_integral(DType dt, bool include_bool = false);
bool is_unsigned(DType dt);  // bool, uint8..uint64
bool is_float8(DType dt);

// torch.promote_types. Throws where PyTorch does (float8 with another type,
// uint16/32/64 with a different type).
DType promote_types(DType a, DType b);

}  // namespace kiln
