#include "core/shape.h"

#include <algorithm>
#include <climits>
#include <sstream>

#include "core/check.h"

namespace kiln {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t st = 1;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = st;
    st *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

bool is_contiguous(const Shape& shape, const Shape& strides) {
  if (shape_numel(shape) == 0) return true;
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

int64_t storage_span(const Shape& shape, const Shape& strides) {
  if (shape_numel(shape) == 0) return 0;
  int64_t last = 0;
  for (size_t i = 0; i < shape.size(); ++i) last += (shape[i] - 1) * strides[i];
  return last + 1;
}

int64_t checked_storage_span(const char* op, const Shape& shape, const Shape& strides) {
  KILN_CHECK(shape.size() == strides.size(), op, ": shape ", shape, " and strides ", strides, " differ in length");
  for (int64_t st : strides) KILN_CHECK(st >= 0, op, ": negative strides are not supported: ", strides);
  if (shape_numel(shape) == 0) return 0;
  int64_t last = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t reach = 0;
    KILN_CHECK(!__builtin_mul_overflow(shape[i] - 1, strides[i], &reach) &&
                   !__builtin_add_overflow(last, reach, &last) && last < INT64_MAX,
               op, ": shape ", shape, " with strides ", strides, " reaches past the int64 range of element offsets");
  }
  return last + 1;
}

namespace {
// The product of the sizes other than -1, checked: one that wrapped would size a buffer too
// short for the shape, or match a view's numel. A zero size makes it 0 whatever the others.
int64_t checked_product(const char* op, const Shape& shape) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  int64_t n = 1;
  for (int64_t s : shape)
    if (s != -1)
      KILN_CHECK(!__builtin_mul_overflow(n, s, &n), op, ": shape ", shape, " has more elements than an int64 can count");
  return n;
}
}  // namespace

void check_shape(const char* op, const Shape& shape) {
  for (int64_t s : shape) KILN_CHECK(s >= 0, op, ": negative size ", s, " in shape ", shape);
  checked_product(op, shape);
}

size_t checked_nbytes(const char* op, int64_t n, size_t itemsize) {
  int64_t bytes = 0;
  KILN_CHECK(n >= 0 && !__builtin_mul_overflow(n, static_cast<int64_t>(itemsize), &bytes), op, ": ", n,
             " elements of ", itemsize, " bytes are more bytes than an int64 can count");
  return static_cast<size_t>(bytes);
}

int64_t wrap_dim(const char* op, int64_t dim, int64_t ndim) {
  const int64_t n = std::max<int64_t>(ndim, 1);  // a 0-d tensor accepts dim 0 and -1, as torch
  KILN_CHECK(dim >= -n && dim < n, op, ": dimension out of range (expected to be in range of [", -n, ", ",
             n - 1, "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

Shape infer_size(const char* op, const Shape& shape, int64_t numel) {
  Shape out = shape;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      KILN_CHECK(infer < 0, op, ": only one dimension can be inferred in shape ", shape);
      infer = static_cast<int>(i);
    } else {
      KILN_CHECK(shape[i] >= 0, op, ": invalid shape dimension ", shape[i], " in ", shape);
    }
  }
  const int64_t known = checked_product(op, shape);
  if (infer >= 0) {
    KILN_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape, " is invalid for input of size ", numel);
    out[infer] = numel / known;
  } else {
    KILN_CHECK(known == numel, op, ": shape ", shape, " is invalid for input of size ", numel);
  }
  return out;
}

// Walks the old dims from the innermost out, grouping them into chunks that are
// contiguous in memory; each chunk must be covered exactly by consecutive new
// dims. This is the condition under which torch.Tensor.view succeeds.
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides, const Shape& target) {
  if (shape.empty()) return Shape(target.size(), 1);
  const int64_t numel = shape_numel(shape);
  if (numel == 0) {
    if (shape == target) return strides;
    return contiguous_strides(target);
  }
  Shape out(target.size());
  int64_t view_d = static_cast<int64_t>(target.size()) - 1;
  int64_t chunk_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    const bool chunk_ends = d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || target[view_d] == 1)) {
      out[view_d] = view_numel * chunk_stride;
      view_numel *= target[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_stride = strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    KILN_CHECK(da == db || da == 1 || db == 1, "shapes ", a, " and ", b,
               " cannot be broadcast together: size ", da, " vs ", db, " at dimension ", i);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

}  // namespace kiln
