// Conversions between Python objects and kiln values, shared by the binding files.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::python {
namespace py = pybind11;

// bool / int / float / complex -> Scalar (keeps the category, as torch's Python scalars).
Scalar to_scalar(py::handle obj, const char* what);
py::object scalar_to_py(const Scalar& s);
bool is_python_number(py::handle obj);

// A device given as kiln.device, a string ("cuda:0") or None (= cpu).
Device to_device(py::handle obj);

// A shape given as f(2, 3), f((2, 3)) or f([2, 3]).
Shape to_shape(const py::args& args);

// A CUDA device given as in to_device, with None meaning the current one ("cuda").
Device to_cuda_device(py::handle obj);

// dim=None -> all dims; an int or a sequence of ints.
std::vector<int64_t> to_dims(py::handle obj);

// A 0-d tensor holding a Python number, on `device`, with the dtype torch gives
// a wrapped number (bool, int64, float32, complex64). Used for `2 - t`.
Tensor scalar_tensor(const Scalar& s, Device device);

// Tensor or Python number -> Tensor on `like`'s device.
Tensor as_tensor_like(py::handle obj, const Tensor& like, const char* op);

void bind_tensor(py::module_& m);
void bind_ops(py::module_& m);
void bind_runtime(py::module_& m);
void bind_models(py::module_& m);
void bind_linalg(py::module_& m);

}  // namespace kiln::python
