// Shape arithmetic: strides, dims, PyTorch's view rule, broadcasting.
#pragma once

#include <optional>

#include "kiln/tensor.h"

namespace kiln {

int64_t shape_numel(const Shape& shape);
Shape contiguous_strides(const Shape& shape);
// Contiguous in PyTorch's sense: size-1 dims may have any stride.
bool is_contiguous(const Shape& shape, const Shape& strides);
// 1 + the largest element offset the view can reach (0 for an empty shape).
int64_t storage_span(const Shape& shape, const Shape& strides);
// The same for a layout a caller hands in: throws naming `op` when the lengths differ,
// a stride is negative or the span does not fit in an int64.
int64_t checked_storage_span(const char* op, const Shape& shape, const Shape& strides);
// Throws when a size is negative or the element count does not fit in an int64 (it
// would wrap to a small number and size a buffer too short for the shape).
void check_shape(const char* op, const Shape& shape);
// n elements of itemsize bytes, as a byte count; throws naming `op` when that does not
// fit in an int64.
size_t checked_nbytes(const char* op, int64_t n, size_t itemsize);
// Wraps a negative dim; throws naming `op` when out of [-ndim, ndim).
int64_t wrap_dim(const char* op, int64_t dim, int64_t ndim);
// Replaces one -1 in `shape` so that it has `numel` elements; throws when impossible.
Shape infer_size(const char* op, const Shape& shape, int64_t numel);
// Strides under which (shape, strides) can be viewed as `target` without a copy, if any.
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides, const Shape& target);

}  // namespace kiln
