// Tensor metadata and views. Nothing here touches element data except through
// the backends' copy kernel.
#include "kiln/tensor.h"

#include <algorithm>
#include <numeric>

#include "core/allocator.h"
#include "core/check.h"
#include "core/shape.h"

namespace kiln {

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype)
    : storage_(std::move(storage)), shape_(std::move(shape)), strides_(std::move(strides)), offset_(offset),
      dtype_(dtype) {}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  check_shape("empty", shape);
  auto storage = allocate_storage(checked_nbytes("empty", shape_numel(shape), kiln::itemsize(dtype)), device);
  return Tensor(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
}

Tensor Tensor::empty_strided(const Shape& shape, const Shape& strides, DType dtype, Device device) {
  check_shape("empty_strided", shape);
  const int64_t span = checked_storage_span("empty_strided", shape, strides);
  auto storage = allocate_storage(checked_nbytes("empty_strided", span, kiln::itemsize(dtype)), device);
  return Tensor(std::move(storage), shape, strides, 0, dtype);
}

Tensor Tensor::from_blob(void* data, const Shape& shape, const Shape& strides, DType dtype, Device device,
                         std::function<void(void*)> deleter) {
  check_shape("from_blob", shape);
  const size_t nbytes =
      checked_nbytes("from_blob", checked_storage_span("from_blob", shape, strides), kiln::itemsize(dtype));
  auto storage = std::make_shared<Storage>(data, nbytes, device, std::move(deleter));
  return Tensor(std::move(storage), shape, strides, 0, dtype);
}

int64_t Tensor::size(int64_t dim) const { return shape_[wrap_dim("size", dim, this->dim())]; }
int64_t Tensor::stride(int64_t dim) const { return strides_[wrap_dim("stride", dim, this->dim())]; }
int64_t Tensor::numel() const { return shape_numel(shape_); }
Device Tensor::device() const { return storage_ ? storage_->device : kCPU; }

void* Tensor::data_ptr() const {
  KILN_CHECK(defined(), "data_ptr: the tensor is undefined");
  if (!storage_->data) return nullptr;
  return static_cast<char*>(storage_->data) + offset_ * static_cast<int64_t>(itemsize());
}

bool Tensor::is_contiguous() const { return kiln::is_contiguous(shape_, strides_); }

// ---- views ----

Tensor Tensor::view(const Shape& shape) const {
  const Shape target = infer_size("view", shape, numel());
  auto strides = view_strides(shape_, strides_, target);
  KILN_CHECK(strides.has_value(), "view: size ", target, " is not compatible with the input's size ", shape_,
             " and strides ", strides_, " (at least one dimension spans two contiguous subspaces); use reshape");
  return Tensor(storage_, target, *strides, offset_, dtype_);
}

Tensor Tensor::view(DType dtype) const {
  KILN_CHECK(kiln::itemsize(dtype) == itemsize(), "view: cannot view ", dtype_name(dtype_), " as ",
             dtype_name(dtype), " (element sizes ", itemsize(), " and ", kiln::itemsize(dtype), " differ)");
  return Tensor(storage_, shape_, strides_, offset_, dtype);
}

Tensor Tensor::reshape(const Shape& shape) const {
  const Shape target = infer_size("reshape", shape, numel());
  if (auto strides = view_strides(shape_, strides_, target)) return Tensor(storage_, target, *strides, offset_, dtype_);
  return contiguous().view(target);
}

Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) const {
  KILN_CHECK(this->dim() > 0, "slice: cannot slice a 0-d tensor");
  const int64_t d = wrap_dim("slice", dim, this->dim());
  KILN_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t n = shape_[d];
  auto clamp = [n](int64_t v) { return v < 0 ? std::max<int64_t>(v + n, 0) : std::min(v, n); };
  const int64_t s = start ? clamp(*start) : 0;
  const int64_t e = std::max(s, end ? clamp(*end) : n);
  Shape shape = shape_, strides = strides_;
  shape[d] = (e - s + step - 1) / step;
  strides[d] = strides_[d] * step;
  return Tensor(storage_, shape, strides, offset_ + s * strides_[d], dtype_);
}

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  KILN_CHECK(this->dim() > 0, "narrow: cannot narrow a 0-d tensor");
  const int64_t d = wrap_dim("narrow", dim, this->dim());
  const int64_t n = shape_[d];
  if (start < 0) start += n;
  KILN_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow: start ", start, " and length ", length,
             " are out of range for dimension ", d, " of size ", n);
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  KILN_CHECK(this->dim() > 0, "select: cannot select on a 0-d tensor");
  const int64_t d = wrap_dim("select", dim, this->dim());
  const int64_t n = shape_[d];
  KILN_CHECK(index >= -n && index < n, "select: index ", index, " is out of range for dimension ", d,
             " of size ", n);
  if (index < 0) index += n;
  Shape shape = shape_, strides = strides_;
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return Tensor(storage_, shape, strides, offset_ + index * strides_[d], dtype_);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  const int64_t nd = std::max<int64_t>(this->dim(), 1);
  const int64_t a = wrap_dim("transpose", dim0, nd), b = wrap_dim("transpose", dim1, nd);
  if (this->dim() == 0) return *this;
  Shape shape = shape_, strides = strides_;
  std::swap(shape[a], shape[b]);
  std::swap(strides[a], strides[b]);
  return Tensor(storage_, shape, strides, offset_, dtype_);
}

Tensor Tensor::t() const {
  KILN_CHECK(dim() <= 2, "t: expects a tensor with <= 2 dimensions, got ", dim());
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::permute(const Shape& dims) const {
  KILN_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute: ", dims.size(), " dims given for a ", dim(),
             "-d tensor");
  Shape shape(dims.size()), strides(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim("permute", dims[i], dim());
    KILN_CHECK(!seen[d], "permute: dim ", d, " appears twice in ", dims);
    seen[d] = true;
    shape[i] = shape_[d];
    strides[i] = strides_[d];
  }
  return Tensor(storage_, shape, strides, offset_, dtype_);
}

Tensor Tensor::expand(const Shape& shape) const {
  KILN_CHECK(shape.size() >= shape_.size(), "expand: the number of sizes ", shape,
             " must be at least the tensor's dimensions ", shape_);
  const size_t lead = shape.size() - shape_.size();
  Shape out(shape.size()), strides(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      KILN_CHECK(shape[i] >= 0, "expand: size ", shape[i], " is not allowed for a new leading dimension");
      out[i] = shape[i];
      strides[i] = 0;
      continue;
    }
    const int64_t have = shape_[i - lead];
    const int64_t want = shape[i] == -1 ? have : shape[i];
    if (have == want) {
      out[i] = have;
      strides[i] = strides_[i - lead];
    } else {
      KILN_CHECK(have == 1, "expand: the expanded size ", want, " must match the existing size ", have,
                 " at dimension ", i, " (tensor of shape ", shape_, " to ", shape, ")");
      out[i] = want;
      strides[i] = 0;
    }
  }
  check_shape("expand", out);
  return Tensor(storage_, out, strides, offset_, dtype_);
}

Tensor Tensor::squeeze() const {
  Shape shape, strides;
  for (size_t i = 0; i < shape_.size(); ++i)
    if (shape_[i] != 1) {
      shape.push_back(shape_[i]);
      strides.push_back(strides_[i]);
    }
  return Tensor(storage_, shape, strides, offset_, dtype_);
}

Tensor Tensor::squeeze(int64_t dim) const {
  if (this->dim() == 0) {
    wrap_dim("squeeze", dim, 1);
    return *this;
  }
  const int64_t d = wrap_dim("squeeze", dim, this->dim());
  if (shape_[d] != 1) return *this;
  Shape shape = shape_, strides = strides_;
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return Tensor(storage_, shape, strides, offset_, dtype_);
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  const int64_t d = wrap_dim("unsqueeze", dim, this->dim() + 1);
  Shape shape = shape_, strides = strides_;
  const int64_t st = d < this->dim() ? shape_[d] * strides_[d] : 1;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, st);
  return Tensor(storage_, shape, strides, offset_, dtype_);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const int64_t s = wrap_dim("flatten", start_dim, dim()), e = wrap_dim("flatten", end_dim, dim());
  KILN_CHECK(s <= e, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim);
  Shape shape(shape_.begin(), shape_.begin() + s);
  int64_t n = 1;
  for (int64_t i = s; i <= e; ++i) n *= shape_[i];
  shape.push_back(n);
  shape.insert(shape.end(), shape_.begin() + e + 1, shape_.end());
  return reshape(shape);
}

Tensor Tensor::as_strided(const Shape& shape, const Shape& strides, std::optional<int64_t> offset) const {
  check_shape("as_strided", shape);
  const int64_t off = offset.value_or(offset_);
  KILN_CHECK(off >= 0, "as_strided: negative storage offset ", off);
  const int64_t reach = checked_storage_span("as_strided", shape, strides);
  int64_t span = 0;
  KILN_CHECK(reach == 0 || !__builtin_add_overflow(off, reach, &span), "as_strided: offset ", off, " plus shape ",
             shape, " with strides ", strides, " reaches past the int64 range of element offsets");
  const size_t need = checked_nbytes("as_strided", span, itemsize());
  KILN_CHECK(need <= storage_->nbytes, "as_strided: shape ", shape, " strides ", strides, " offset ", off, " need ",
             need, " bytes but the storage has ", storage_->nbytes);
  return Tensor(storage_, shape, strides, off, dtype_);
}

}  // namespace kiln
