// kiln::Tensor: a strided view of shared storage on a device.
#pragma once

#include <complex>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/scalar_types.h"

namespace kiln {

using Shape = std::vector<int64_t>;
class Stream;

// A number passed to an op (torch's Python scalars). Keeps its category, so that
// `uint8_tensor < -1` compares mathematically and `int_tensor * 0.5` gives float.
class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, UInt, Float, Complex };
  Scalar() : kind_(Kind::Int) {}
  Scalar(bool v) : kind_(Kind::Bool), i_(v) {}                 // NOLINT
  Scalar(int v) : kind_(Kind::Int), i_(v) {}                   // NOLINT
  Scalar(long v) : kind_(Kind::Int), i_(v) {}                  // NOLINT
  Scalar(long long v) : kind_(Kind::Int), i_(v) {}             // NOLINT
  Scalar(unsigned v) : kind_(Kind::Int), i_(v) {}              // NOLINT
  Scalar(unsigned long v) : kind_(v > INT64_MAX ? Kind::UInt : Kind::Int), u_(v) {}       // NOLINT
  Scalar(unsigned long long v) : kind_(v > INT64_MAX ? Kind::UInt : Kind::Int), u_(v) {}  // NOLINT
  Scalar(float v) : kind_(Kind::Float), d_(v) {}               // NOLINT
  Scalar(double v) : kind_(Kind::Float), d_(v) {}              // NOLINT
  Scalar(std::complex<float> v) : kind_(Kind::Complex), d_(v.real()), im_(v.imag()) {}  // NOLINT
  Scalar(std::complex<double> v) : kind_(Kind::Complex), d_(v.real()), im_(v.imag()) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_floating_point() const { return kind_ == Kind::Float; }
  bool is_complex() const { return kind_ == Kind::Complex; }
  bool is_integral() const { return kind_ == Kind::Int || kind_ == Kind::UInt || kind_ == Kind::Bool; }
  double to_double() const;
  int64_t to_int64() const;
  uint64_t to_uint64() const;
  bool to_bool() const;
  std::complex<double> to_complex() const;
  std::string str() const;

 private:
  Kind kind_;
  union {
    int64_t i_;
    uint64_t u_;
    double d_ = 0.0;
  };
  double im_ = 0.0;
};

// Reference-counted memory on one device. Tensors that are views of each other
// share one Storage.
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  std::function<void(void*)> deleter;  // frees `data`; empty for borrowed memory
  Storage() = default;
  Storage(void* d, size_t n, Device dev, std::function<void(void*)> del)
      : data(d), nbytes(n), device(dev), deleter(std::move(del)) {}
  ~Storage() {
    if (deleter) deleter(data);
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

class Tensor {
 public:
  Tensor() = default;  // undefined tensor
  Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype);

  // ---- creation ----
  static Tensor empty(const Shape& shape, DType dtype = float32, Device device = kCPU);
  static Tensor empty_strided(const Shape& shape, const Shape& strides, DType dtype = float32,
                              Device device = kCPU);
  // Wraps memory kiln does not own. `deleter` runs when the last view goes away.
  static Tensor from_blob(void* data, const Shape& shape, const Shape& strides, DType dtype, Device device,
                          std::function<void(void*)> deleter = {});
  // Copies host values into a new tensor of `dtype` on `device`.
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape, DType dtype, Device device = kCPU);

  // ---- metadata ----
  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Shape& sizes() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const;
  DType dtype() const { return dtype_; }
  Device device() const;
  int64_t storage_offset() const { return offset_; }
  size_t itemsize() const { return kiln::itemsize(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * itemsize(); }
  bool is_contiguous() const;
  bool is_cuda() const { return device().is_cuda(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  // Address of element [0, 0, ...] (the storage offset applied).
  void* data_ptr() const;
  template <class T>
  T* data() const { return static_cast<T*>(data_ptr()); }
  bool is_alias_of(const Tensor& other) const { return storage_ == other.storage_; }

  // ---- views (share storage) ----
  Tensor view(const Shape& shape) const;     // throws if strides make it impossible, as torch
  Tensor view(DType dtype) const;            // reinterpret; same itemsize only
  // t.view({2, 3}); also keeps t.view({}) from meaning view(DType{}) (it is ambiguous: say Shape{}).
  Tensor view(std::initializer_list<int64_t> shape) const { return view(Shape(shape)); }
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a copy
  Tensor slice(int64_t dim, std::optional<int64_t> start = {}, std::optional<int64_t> end = {}, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  // 2-D transpose (0-D/1-D unchanged)
  Tensor permute(const Shape& dims) const;
  Tensor expand(const Shape& shape) const;  // -1 keeps a size
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor as_strided(const Shape& shape, const Shape& strides, std::optional<int64_t> offset = {}) const;

  // ---- copies ----
  Tensor contiguous() const;
  Tensor clone() const;
  // saturate applies to float8_e4m3fn targets (see scalar_types.h).
  Tensor to(DType dtype, bool saturate = true) const;
  Tensor to(Device device) const;
  Tensor to(Device device, DType dtype, bool saturate = true) const;
  Tensor cpu() const { return to(kCPU); }
  Tensor cuda(int index = 0) const { return to(Device(DeviceType::CUDA, index)); }
  // Copies src (broadcast to this shape, cast to this dtype, from any device) into this.
  const Tensor& copy_(const Tensor& src, bool saturate = true) const;
  const Tensor& fill_(const Scalar& value) const;
  const Tensor& zero_() const { return fill_(0); }

  // ---- values to the host ----
  Scalar item() const;
  template <class T>
  T item() const;
  // All elements in row-major order, converted to T.
  template <class T>
  std::vector<T> tolist() const;
  std::string str() const;

  // Marks that `stream` uses this tensor's memory: the CUDA caching allocator
  // will not hand the memory out again until `stream` has passed this point.
  void record_stream(const Stream& stream) const;

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;
  DType dtype_ = float32;
};

// C++ type for each dtype's storage.
template <DType D> struct dtype_traits;
template <> struct dtype_traits<DType::Bool> { using type = bool; };
template <> struct dtype_traits<DType::UInt8> { using type = uint8_t; };
template <> struct dtype_traits<DType::Int8> { using type = int8_t; };
template <> struct dtype_traits<DType::Int16> { using type = int16_t; };
template <> struct dtype_traits<DType::Int32> { using type = int32_t; };
template <> struct dtype_traits<DType::Int64> { using type = int64_t; };
template <> struct dtype_traits<DType::UInt16> { using type = uint16_t; };
template <> struct dtype_traits<DType::UInt32> { using type = uint32_t; };
template <> struct dtype_traits<DType::UInt64> { using type = uint64_t; };
template <> struct dtype_traits<DType::Float16> { using type = Half; };
template <> struct dtype_traits<DType::BFloat16> { using type = BFloat16; };
template <> struct dtype_traits<DType::Float32> { using type = float; };
template <> struct dtype_traits<DType::Float8_e4m3fn> { using type = Float8_e4m3fn; };
template <> struct dtype_traits<DType::Float8_e5m2> { using type = Float8_e5m2; };
template <> struct dtype_traits<DType::Complex64> { using type = std::complex<float>; };

namespace detail {
template <class T, int I = 0>
constexpr DType dtype_holding() {
  static_assert(I < kNumDTypes, "dtype_of: no kiln dtype holds this C++ type");
  if constexpr (I < kNumDTypes) {
    constexpr DType d = static_cast<DType>(I);
    if constexpr (std::is_same_v<T, typename dtype_traits<d>::type>) return d;
    else return dtype_holding<T, I + 1>();
  } else {
    return DType::Bool;  // never reached: the assertion above stops the build
  }
}
}  // namespace detail

// The dtype of a C++ element type (for from_vector / tolist): the inverse of dtype_traits.
template <class T>
constexpr DType dtype_of() {
  return detail::dtype_holding<std::remove_cv_t<T>>();
}

}  // namespace kiln
