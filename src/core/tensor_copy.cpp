// Copies, casts, device transfers and host access of Tensor.
#include <sstream>

#include "core/allocator.h"
#include "core/backend.h"
#include "core/check.h"
#include "core/dispatch.h"
#include "core/shape.h"
#include "kiln/ops.h"
#include "kiln/stream.h"

namespace kiln {

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = Tensor::empty(shape_, dtype_, device());
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType dtype, bool saturate) const { return to(device(), dtype, saturate); }
Tensor Tensor::to(Device device) const { return to(device, dtype_); }

Tensor Tensor::to(Device device, DType dtype, bool saturate) const {
  KILN_CHECK(defined(), "to: the tensor is undefined");
  if (device == this->device() && dtype == dtype_) return *this;
  Tensor out = Tensor::empty(shape_, dtype, device);
  out.copy_(*this, saturate);
  return out;
}

namespace {
bool may_overlap(const Tensor& a, const Tensor& b) {
  if (!a.is_alias_of(b) || a.numel() == 0 || b.numel() == 0) return false;
  const char* a0 = static_cast<const char*>(a.data_ptr());
  const char* b0 = static_cast<const char*>(b.data_ptr());
  const char* a1 = a0 + storage_span(a.shape(), a.strides()) * a.itemsize();
  const char* b1 = b0 + storage_span(b.shape(), b.strides()) * b.itemsize();
  return a0 < b1 && b0 < a1;
}
}  // namespace

const Tensor& Tensor::copy_(const Tensor& src_in, bool saturate) const {
  KILN_CHECK(defined() && src_in.defined(), "copy_: undefined tensor");
  Tensor src = src_in.expand(shape_);  // throws on shapes that do not broadcast
  if (numel() == 0) return *this;
  if (src.device() == device()) {
    if (may_overlap(*this, src)) src = src.clone();
    KILN_ON_DEVICE(device(), copy, *this, src, saturate);
    return *this;
  }
  // Across devices: cast and compact on the source side (fewer bytes to move),
  // move bytes, then scatter into this tensor's layout on its side.
  Tensor staged = src_in.to(src_in.device(), dtype_, saturate).contiguous();
  Tensor landing = is_contiguous() && src_in.shape() == shape_ ? *this : Tensor::empty(src_in.shape(), dtype_, device());
  {
    const Device gpu = device().is_cuda() ? device() : src.device();
    cuda_backend::DeviceGuard guard(gpu.index);
    cuda_backend::copy_bytes(landing.data_ptr(), device(), staged.data_ptr(), staged.device(), staged.nbytes());
  }
  if (!landing.is_alias_of(*this)) copy_(landing, saturate);
  return *this;
}

const Tensor& Tensor::fill_(const Scalar& value) const {
  KILN_CHECK(defined(), "fill_: the tensor is undefined");
  if (numel() == 0) return *this;
  KILN_ON_DEVICE(device(), fill, *this, value);
  return *this;
}

void Tensor::record_stream(const Stream& stream) const {
  KILN_CHECK(device().is_cuda(), "record_stream: expects a CUDA tensor, got one on ", device().str());
  KILN_CHECK(stream.device() == device(), "record_stream: stream is on ", stream.device().str(),
             " but the tensor is on ", device().str());
  if (storage_->data) cuda_backend::record_stream(storage_->data, stream);
}

// ---- host access ----

namespace {
template <class T>
Scalar to_scalar(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return Scalar(v);
  } else if constexpr (std::is_same_v<T, std::complex<float>>) {
    return Scalar(v);
  } else if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_unsigned_v<T>) return Scalar(static_cast<unsigned long long>(v));
    return Scalar(static_cast<long long>(v));
  } else {
    return Scalar(static_cast<double>(static_cast<float>(v)));
  }
}

// Element i (row-major) of a contiguous CPU tensor as U.
template <class U>
void read_all(const Tensor& cpu_contig, std::vector<U>& out) {
  const int64_t n = cpu_contig.numel();
  out.resize(n);
  detail::dispatch_real(cpu_contig.dtype(), "tolist", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = cpu_contig.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<U, bool>) {
        out[i] = static_cast<detail::compute_t<T>>(p[i]) != 0;
      } else {
        out[i] = static_cast<U>(static_cast<detail::compute_t<T>>(p[i]));
      }
    }
  });
}
}  // namespace

Scalar Tensor::item() const {
  KILN_CHECK(numel() == 1, "item: a Tensor with ", numel(), " elements cannot be converted to Scalar");
  Tensor c = to(kCPU).contiguous();
  if (dtype_ == DType::Complex64) return Scalar(*c.data<std::complex<float>>());
  Scalar s;
  detail::dispatch_real(dtype_, "item", [&](auto tag) {
    using T = typename decltype(tag)::type;
    s = to_scalar(*c.data<T>());
  });
  return s;
}

template <class T>
T Tensor::item() const {
  const Scalar s = item();
  if constexpr (std::is_same_v<T, bool>) return s.to_bool();
  else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) return static_cast<T>(s.to_uint64());
  else if constexpr (std::is_integral_v<T>) return static_cast<T>(s.to_int64());
  else return static_cast<T>(s.to_double());
}

template <class T>
std::vector<T> Tensor::tolist() const {
  KILN_CHECK(defined(), "tolist: the tensor is undefined");
  Tensor c = to(kCPU).contiguous();
  std::vector<T> out;
  if constexpr (std::is_same_v<T, std::complex<float>>) {
    KILN_CHECK(dtype_ == DType::Complex64, "tolist<complex>: tensor is ", dtype_name(dtype_));
    const auto* p = c.data<std::complex<float>>();
    out.assign(p, p + c.numel());
  } else {
    KILN_CHECK(dtype_ != DType::Complex64, "tolist: a complex64 tensor needs tolist<std::complex<float>>");
    read_all(c, out);
  }
  return out;
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape, DType dtype, Device device) {
  check_shape("from_vector", shape);
  KILN_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "from_vector: ", values.size(),
             " values for shape ", shape);
  Tensor host = Tensor::empty(shape, dtype, kCPU);
  if constexpr (std::is_same_v<T, std::complex<float>>) {
    KILN_CHECK(dtype == DType::Complex64, "from_vector: complex values need dtype complex64, got ",
               dtype_name(dtype));
    std::copy(values.begin(), values.end(), host.data<std::complex<float>>());
  } else if (dtype == DType::Complex64) {
    auto* p = host.data<std::complex<float>>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = std::complex<float>(static_cast<float>(values[i]), 0.f);
  } else {
    detail::dispatch_real(dtype, "from_vector", [&](auto tag) {
      using D = typename decltype(tag)::type;
      D* p = host.data<D>();
      for (size_t i = 0; i < values.size(); ++i) {
        if constexpr (std::is_same_v<D, bool>) p[i] = values[i] != T(0);
        else p[i] = static_cast<D>(static_cast<detail::compute_t<D>>(values[i]));
      }
    });
  }
  return device.is_cpu() ? host : host.to(device);
}

#define KILN_INSTANTIATE_HOST_ACCESS(T)                                                         \
  template T Tensor::item<T>() const;                                                           \
  template std::vector<T> Tensor::tolist<T>() const;                                            \
  template Tensor Tensor::from_vector<T>(const std::vector<T>&, const Shape&, DType, Device);
KILN_INSTANTIATE_HOST_ACCESS(float)
KILN_INSTANTIATE_HOST_ACCESS(double)
KILN_INSTANTIATE_HOST_ACCESS(bool)
KILN_INSTANTIATE_HOST_ACCESS(int8_t)
KILN_INSTANTIATE_HOST_ACCESS(int16_t)
KILN_INSTANTIATE_HOST_ACCESS(int32_t)
KILN_INSTANTIATE_HOST_ACCESS(int64_t)
KILN_INSTANTIATE_HOST_ACCESS(uint8_t)
KILN_INSTANTIATE_HOST_ACCESS(uint16_t)
KILN_INSTANTIATE_HOST_ACCESS(uint32_t)
KILN_INSTANTIATE_HOST_ACCESS(uint64_t)
#undef KILN_INSTANTIATE_HOST_ACCESS
template std::vector<std::complex<float>> Tensor::tolist<std::complex<float>>() const;
template Tensor Tensor::from_vector<std::complex<float>>(const std::vector<std::complex<float>>&, const Shape&,
                                                         DType, Device);

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::ostringstream os;
  os << "tensor(";
  const int64_t n = numel();
  if (n > 1000) {
    os << "<" << n << " elements>";
  } else if (dtype_ == DType::Complex64) {
    auto v = tolist<std::complex<float>>();
    os << "[";
    for (int64_t i = 0; i < n; ++i) os << (i ? ", " : "") << v[i].real() << (v[i].imag() < 0 ? "" : "+") << v[i].imag() << "j";
    os << "]";
  } else {
    auto v = tolist<double>();
    // Nested brackets by shape.
    std::function<void(int64_t, int64_t&)> rec = [&](int64_t d, int64_t& pos) {
      if (d == dim()) {
        os << v[pos++];
        return;
      }
      os << "[";
      for (int64_t i = 0; i < shape_[d]; ++i) {
        if (i) os << ", ";
        rec(d + 1, pos);
      }
      os << "]";
    };
    int64_t pos = 0;
    rec(0, pos);
  }
  os << ", shape=" << shape_str(shape_) << ", dtype=" << dtype_name(dtype_);
  if (!device().is_cpu()) os << ", device='" << device().str() << "'";
  os << ")";
  return os.str();
}

}  // namespace kiln
