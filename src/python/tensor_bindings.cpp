// kiln.Tensor in Python: metadata, views, indexing, copies, host values and
// the DLPack protocol (__dlpack__ / __dlpack_device__, kiln.from_dlpack).
#include <complex>

#include <pybind11/complex.h>

#include "core/check.h"
#include "python/convert.h"
#include "python/dlpack.h"

namespace kiln::python {
namespace {

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";

py::tuple to_tuple(const Shape& s) {
  py::tuple t(s.size());
  for (size_t i = 0; i < s.size(); ++i) t[i] = py::int_(s[i]);
  return t;
}

// ---- tolist: nested lists of Python numbers, as torch ----
template <class T>
py::object nest(const std::vector<T>& flat, const Shape& shape, size_t dim, size_t& pos) {
  if (dim == shape.size()) {
    if constexpr (std::is_same_v<T, std::complex<float>>) return py::cast(std::complex<double>(flat[pos++]));
    else return py::cast(flat[pos++]);
  }
  py::list out(shape[dim]);
  for (int64_t i = 0; i < shape[dim]; ++i) out[i] = nest(flat, shape, dim + 1, pos);
  return out;
}

template <class T>
py::object tolist_as(const Tensor& t) {
  std::vector<T> flat;
  {
    py::gil_scoped_release release;
    flat = t.tolist<T>();
  }
  size_t pos = 0;
  return nest(flat, t.shape(), 0, pos);
}

py::object tensor_tolist(const Tensor& t) {
  const DType d = t.dtype();
  if (d == DType::Bool) return tolist_as<bool>(t);
  if (d == DType::UInt64) return tolist_as<uint64_t>(t);
  if (is_integral(d)) return tolist_as<int64_t>(t);
  if (is_complex(d)) return tolist_as<std::complex<float>>(t);
  return tolist_as<double>(t);
}

// ---- indexing: ints, slices, None, Ellipsis (basic indexing gives views) ----
Tensor index(const Tensor& self, py::handle key) {
  py::tuple items = py::isinstance<py::tuple>(key) ? py::reinterpret_borrow<py::tuple>(key) : py::make_tuple(key);
  int64_t consumed = 0;  // dims of self the key addresses
  bool has_ellipsis = false;
  for (auto it : items) {
    if (it.is_none()) continue;
    if (it.ptr() == Py_Ellipsis) {
      KILN_CHECK(!has_ellipsis, "index: an index can only have a single ellipsis ('...')");
      has_ellipsis = true;
      continue;
    }
    if (py::isinstance<Tensor>(it) || py::isinstance<py::list>(it))
      throw NotImplementedError("index: indexing with a tensor or list (advanced indexing) is not supported yet; "
                                "kiln supports ints, slices, None and '...'");
    ++consumed;
  }
  KILN_CHECK(consumed <= self.dim(), "index: too many indices for a tensor of dimension ", self.dim(), " (got ",
             consumed, ")");
  Tensor out = self;
  int64_t dim = 0;
  for (auto it : items) {
    if (it.is_none()) {
      out = out.unsqueeze(dim++);
    } else if (it.ptr() == Py_Ellipsis) {
      dim += self.dim() - consumed;
    } else if (PyLong_Check(it.ptr()) || PyBool_Check(it.ptr())) {
      const int64_t i = it.cast<int64_t>();
      const int64_t n = out.size(dim);
      KILN_CHECK(i >= -n && i < n, "index: index ", i, " is out of bounds for dimension ", dim, " with size ", n);
      out = out.select(dim, i);
    } else if (PySlice_Check(it.ptr())) {
      auto sl = py::reinterpret_borrow<py::slice>(it);
      auto get = [](py::object o) -> std::optional<int64_t> {
        if (o.is_none()) return std::nullopt;
        return o.cast<int64_t>();
      };
      const auto start = get(sl.attr("start")), stop = get(sl.attr("stop")), step = get(sl.attr("step"));
      KILN_CHECK(!step || *step > 0, "index: slice step must be positive, got ", step.value_or(0));
      out = out.slice(dim, start, stop, step.value_or(1));
      ++dim;
    } else {
      throw py::type_error("index: unsupported index of type " +
                           py::str(py::type::of(it).attr("__name__")).cast<std::string>());
    }
  }
  return out;
}

void set_index(const Tensor& self, py::handle key, py::handle value) {
  Tensor target = index(self, key);
  if (py::isinstance<Tensor>(value)) target.copy_(value.cast<Tensor>());
  else target.fill_(to_scalar(value, "__setitem__"));
}

// ---- DLPack ----
// The consumer's stream per the array API standard: 1 = legacy default stream,
// 2 = per-thread default stream, anything else a cudaStream_t; -1 = no sync.
void sync_for_consumer(const Tensor& t, py::handle stream) {
  if (!t.is_cuda() || stream.is_none()) return;
  const int64_t s = stream.cast<int64_t>();
  if (s == -1) return;
  KILN_CHECK(s != 0, "__dlpack__: stream 0 is ambiguous for CUDA (use 1 for the legacy default stream)");
  const Stream consumer = Stream::from_handle(t.device(), s == 1 ? 0 : static_cast<uintptr_t>(s));
  const Stream producer = Stream::current(t.device());
  if (consumer != producer) consumer.wait(producer);
}

py::capsule make_capsule(const Tensor& t) {
  DLManagedTensor* managed = to_dlpack(t);
  return py::capsule(managed, kCapsuleName, [](PyObject* cap) {
    // Runs when the capsule dies; a consumer that took it renamed it and owns it.
    if (PyCapsule_IsValid(cap, kCapsuleName)) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, kCapsuleName));
      if (m && m->deleter) m->deleter(m);
    }
  });
}

Tensor tensor_from_capsule(py::capsule cap) {
  KILN_CHECK(PyCapsule_IsValid(cap.ptr(), kCapsuleName), "from_dlpack: expected a 'dltensor' capsule that has not been "
             "consumed yet");
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), kCapsuleName));
  PyCapsule_SetName(cap.ptr(), kUsedCapsuleName);  // kiln owns `managed` from here, also when from_dlpack throws
  return from_dlpack(managed, [](DLManagedTensor* m) {
    // Producers' deleters (numpy's, torch's) may touch Python objects: hold the GIL.
    if (!m->deleter || !Py_IsInitialized()) return;
    PyGILState_STATE g = PyGILState_Ensure();
    m->deleter(m);
    PyGILState_Release(g);
  });
}

// kiln.from_dlpack(x): any object with __dlpack__ (torch, numpy, cupy, jax) or a capsule.
Tensor tensor_from_dlpack(py::object obj) {
  if (py::isinstance<Tensor>(obj)) return obj.cast<Tensor>();
  if (PyCapsule_CheckExact(obj.ptr())) return tensor_from_capsule(py::reinterpret_borrow<py::capsule>(obj));
  KILN_CHECK(py::hasattr(obj, "__dlpack__"), "from_dlpack: ",
             py::str(py::type::of(obj).attr("__name__")).cast<std::string>(), " has no __dlpack__ method");
  py::object stream = py::none();
  if (py::hasattr(obj, "__dlpack_device__")) {
    py::tuple dev = obj.attr("__dlpack_device__")();
    if (dev[0].cast<int>() == dl_device::kCUDA) {
      const uintptr_t h = Stream::current(Device(DeviceType::CUDA, dev[1].cast<int>())).handle();
      stream = py::int_(h == 0 ? 1 : h);  // the producer orders its work before this stream
    }
  }
  py::object cap = stream.is_none() ? obj.attr("__dlpack__")() : obj.attr("__dlpack__")(py::arg("stream") = stream);
  return tensor_from_capsule(cap.cast<py::capsule>());
}

Tensor to_impl(const Tensor& t, py::args args, py::kwargs kwargs) {
  std::optional<Device> device;
  std::optional<DType> dtype;
  bool saturate = true;
  auto take = [&](py::handle a) {
    if (py::isinstance<DType>(a)) dtype = a.cast<DType>();
    else if (py::isinstance<Tensor>(a)) {
      dtype = a.cast<Tensor>().dtype();
      device = a.cast<Tensor>().device();
    } else device = to_device(a);
  };
  for (auto a : args) take(a);
  if (kwargs.contains("device") && !kwargs["device"].is_none()) device = to_device(kwargs["device"]);
  if (kwargs.contains("dtype") && !kwargs["dtype"].is_none()) dtype = kwargs["dtype"].cast<DType>();
  if (kwargs.contains("saturate")) saturate = kwargs["saturate"].cast<bool>();
  py::gil_scoped_release release;
  return t.to(device.value_or(t.device()), dtype.value_or(t.dtype()), saturate);
}

}  // namespace

void bind_tensor(py::module_& m) {
  py::class_<Tensor> cls(m, "Tensor");
  cls.def_property_readonly("shape", [](const Tensor& t) { return to_tuple(t.shape()); })
      .def("size", [](const Tensor& t, py::object dim) -> py::object {
        if (dim.is_none()) return to_tuple(t.shape());
        return py::int_(t.size(dim.cast<int64_t>()));
      }, py::arg("dim") = py::none())
      .def("stride", [](const Tensor& t, py::object dim) -> py::object {
        if (dim.is_none()) return to_tuple(t.strides());
        return py::int_(t.stride(dim.cast<int64_t>()));
      }, py::arg("dim") = py::none())
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("device", &Tensor::device)
      .def_property_readonly("ndim", &Tensor::dim)
      .def_property_readonly("is_cuda", &Tensor::is_cuda)
      .def_property_readonly("itemsize", &Tensor::itemsize)
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def_property_readonly("T", [](const Tensor& t) {
        Shape dims(t.dim());
        for (int64_t i = 0; i < t.dim(); ++i) dims[i] = t.dim() - 1 - i;
        return t.permute(dims);
      })
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("element_size", &Tensor::itemsize)
      .def("storage_offset", &Tensor::storage_offset)
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); })
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("is_floating_point", [](const Tensor& t) { return is_floating_point(t.dtype()); })
      .def("__len__", [](const Tensor& t) {
        KILN_CHECK(t.dim() > 0, "len() of a 0-d tensor");
        return t.size(0);
      })
      // ---- views ----
      .def("view", [](const Tensor& t, py::args args) {
        if (args.size() == 1 && py::isinstance<DType>(args[0])) return t.view(args[0].cast<DType>());
        return t.view(to_shape(args));
      })
      .def("reshape", [](const Tensor& t, py::args args) { return t.reshape(to_shape(args)); })
      .def("expand", [](const Tensor& t, py::args args) { return t.expand(to_shape(args)); })
      .def("permute", [](const Tensor& t, py::args args) { return t.permute(to_shape(args)); })
      .def("transpose", &Tensor::transpose, py::arg("dim0"), py::arg("dim1"))
      .def("t", &Tensor::t)
      .def("narrow", &Tensor::narrow, py::arg("dim"), py::arg("start"), py::arg("length"))
      .def("select", &Tensor::select, py::arg("dim"), py::arg("index"))
      .def("squeeze", [](const Tensor& t, py::object dim) {
        return dim.is_none() ? t.squeeze() : t.squeeze(dim.cast<int64_t>());
      }, py::arg("dim") = py::none())
      .def("unsqueeze", &Tensor::unsqueeze, py::arg("dim"))
      .def("flatten", &Tensor::flatten, py::arg("start_dim") = 0, py::arg("end_dim") = -1)
      .def("as_strided", [](const Tensor& t, const Shape& size, const Shape& stride, std::optional<int64_t> off) {
        return t.as_strided(size, stride, off);
      }, py::arg("size"), py::arg("stride"), py::arg("storage_offset") = py::none())
      .def("__getitem__", &index)
      .def("__setitem__", &set_index)
      // ---- copies ----
      .def("contiguous", &Tensor::contiguous, py::call_guard<py::gil_scoped_release>())
      .def("clone", &Tensor::clone, py::call_guard<py::gil_scoped_release>())
      .def("to", &to_impl)
      .def("cpu", &Tensor::cpu, py::call_guard<py::gil_scoped_release>())
      .def("cuda", [](const Tensor& t, int i) { return t.cuda(i); }, py::arg("device") = 0,
           py::call_guard<py::gil_scoped_release>())
      .def("float", [](const Tensor& t) { return t.to(DType::Float32); })
      .def("half", [](const Tensor& t) { return t.to(DType::Float16); })
      .def("bfloat16", [](const Tensor& t) { return t.to(DType::BFloat16); })
      .def("copy_", [](const Tensor& t, const Tensor& src, bool saturate) { t.copy_(src, saturate); return t; },
           py::arg("src"), py::arg("saturate") = true)
      .def("fill_", [](const Tensor& t, py::handle v) { t.fill_(to_scalar(v, "fill_")); return t; })
      .def("zero_", [](const Tensor& t) { t.zero_(); return t; })
      .def("record_stream", &Tensor::record_stream)
      // ---- values to the host ----
      .def("item", [](const Tensor& t) { return scalar_to_py(t.item()); })
      .def("tolist", &tensor_tolist)
      .def("__repr__", &Tensor::str)
      .def("__bool__", [](const Tensor& t) {
        KILN_CHECK(t.numel() == 1, "Boolean value of a tensor with ", t.numel(), " elements is ambiguous");
        return t.item().to_bool();
      })
      .def("__float__", [](const Tensor& t) { return t.item().to_double(); })
      .def("__int__", [](const Tensor& t) { return t.item().to_int64(); })
      // ---- DLPack ----
      .def("__dlpack__", [](const Tensor& t, py::object stream, py::object max_version, py::object dl_device,
                            py::object copy) {
        KILN_CHECK(copy.is_none() || !copy.cast<bool>(), "__dlpack__: copy=True is not supported; kiln exports "
                   "without a copy");
        sync_for_consumer(t, stream);
        return make_capsule(t);
      }, py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
         py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
      .def("__dlpack_device__", [](const Tensor& t) {
        return py::make_tuple(t.is_cuda() ? dl_device::kCUDA : dl_device::kCPU, t.is_cuda() ? t.device().index : 0);
      });

  m.def("from_dlpack", &tensor_from_dlpack, py::arg("obj"),
        "A kiln.Tensor sharing memory with any DLPack producer (torch, numpy, ...), without a copy.");
  m.def("to_dlpack", [](const Tensor& t) { return make_capsule(t); }, py::arg("tensor"));
  m.def("_from_flat", [](py::list values, const Shape& shape, DType dtype, py::object device) {
    // Backs kiln.tensor(): `values` are Python numbers of one kind, flattened.
    const Device dev = to_device(device);
    const size_t n = values.size();
    bool any_complex = false, any_float = false;
    for (auto v : values) {
      any_complex |= PyComplex_Check(v.ptr()) != 0;
      any_float |= PyFloat_Check(v.ptr()) != 0;
    }
    if (any_complex) {
      std::vector<std::complex<float>> c(n);
      for (size_t i = 0; i < n; ++i) c[i] = std::complex<float>(values[i].cast<std::complex<double>>());
      return Tensor::from_vector(c, shape, dtype, dev);
    }
    if (any_float || is_floating_point(dtype)) {
      std::vector<double> d(n);
      for (size_t i = 0; i < n; ++i) d[i] = values[i].cast<double>();
      return Tensor::from_vector(d, shape, dtype, dev);
    }
    if (dtype == DType::UInt64) {
      std::vector<uint64_t> u(n);
      for (size_t i = 0; i < n; ++i) u[i] = values[i].cast<uint64_t>();
      return Tensor::from_vector(u, shape, dtype, dev);
    }
    std::vector<int64_t> d(n);
    for (size_t i = 0; i < n; ++i) d[i] = values[i].cast<int64_t>();
    return Tensor::from_vector(d, shape, dtype, dev);
  });
}

}  // namespace kiln::python
