// The `kiln._kiln` extension: dtypes, devices, CUDA runtime (streams, events,
// memory) and the shared Python<->kiln conversions. Tensor and op bindings live
// in tensor_bindings.cpp and op_bindings.cpp; python/kiln/ adds the torch-style
// package layout (kiln.nn.functional, kiln.cuda) in plain Python.
#include <pybind11/complex.h>
#include <pybind11/operators.h>

#include <complex>

#include "python/convert.h"

namespace kiln::python {

bool is_python_number(py::handle obj) {
  return PyBool_Check(obj.ptr()) || PyLong_Check(obj.ptr()) || PyFloat_Check(obj.ptr()) || PyComplex_Check(obj.ptr());
}

Scalar to_scalar(py::handle obj, const char* what) {
  if (PyBool_Check(obj.ptr())) return Scalar(obj.cast<bool>());
  if (PyLong_Check(obj.ptr())) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
    if (overflow == 0) return Scalar(static_cast<long long>(v));
    if (overflow > 0) {
      const unsigned long long u = PyLong_AsUnsignedLongLong(obj.ptr());
      if (!PyErr_Occurred()) return Scalar(u);
      PyErr_Clear();
    }
    throw py::value_error(std::string(what) + ": integer " + py::str(obj).cast<std::string>() +
                          " does not fit in 64 bits");
  }
  if (PyFloat_Check(obj.ptr())) return Scalar(obj.cast<double>());
  if (PyComplex_Check(obj.ptr())) return Scalar(obj.cast<std::complex<double>>());
  throw py::type_error(std::string(what) + ": expected a number, got " +
                       py::str(py::type::of(obj).attr("__name__")).cast<std::string>());
}

py::object scalar_to_py(const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool: return py::bool_(s.to_bool());
    case Scalar::Kind::Int: return py::int_(s.to_int64());
    case Scalar::Kind::UInt: return py::int_(s.to_uint64());
    case Scalar::Kind::Float: return py::float_(s.to_double());
    case Scalar::Kind::Complex: return py::cast(s.to_complex());
  }
  return py::none();
}

Device to_device(py::handle obj) {
  if (obj.is_none()) return kCPU;
  if (py::isinstance<Device>(obj)) return obj.cast<Device>();
  if (py::isinstance<py::str>(obj)) return Device(obj.cast<std::string>());
  if (PyLong_Check(obj.ptr())) return Device(DeviceType::CUDA, obj.cast<int>());  // torch: an int is a CUDA index
  throw py::type_error("expected a device (kiln.device, 'cpu', 'cuda:0' or an int), got " +
                       py::str(py::type::of(obj).attr("__name__")).cast<std::string>());
}

Device to_cuda_device(py::handle obj) { return obj.is_none() ? Device("cuda") : to_device(obj); }

Shape to_shape(const py::args& args) {
  if (args.size() == 1 && !PyLong_Check(args[0].ptr())) return args[0].cast<Shape>();
  Shape s;
  for (auto a : args) s.push_back(a.cast<int64_t>());
  return s;
}

std::vector<int64_t> to_dims(py::handle obj) {
  if (obj.is_none()) return {};
  if (PyLong_Check(obj.ptr())) return {obj.cast<int64_t>()};
  return obj.cast<std::vector<int64_t>>();
}

Tensor scalar_tensor(const Scalar& s, Device device) {
  switch (s.kind()) {
    case Scalar::Kind::Bool: return full({}, s, DType::Bool, device);
    case Scalar::Kind::Int:
    case Scalar::Kind::UInt: return full({}, s, DType::Int64, device);
    case Scalar::Kind::Float: return full({}, s, DType::Float32, device);
    case Scalar::Kind::Complex: return full({}, s, DType::Complex64, device);
  }
  return {};
}

Tensor as_tensor_like(py::handle obj, const Tensor& like, const char* op) {
  if (py::isinstance<Tensor>(obj)) return obj.cast<Tensor>();
  return scalar_tensor(to_scalar(obj, op), like.device());
}

namespace {

void bind_dtypes(py::module_& m) {
  py::enum_<DType> dt(m, "dtype");
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto d = static_cast<DType>(i);
    dt.value(dtype_name(d), d);
  }
  // Replaces (not overloads) py::enum_'s own repr: torch prints torch.float32.
  auto name = [](DType d) { return std::string("kiln.") + dtype_name(d); };
  dt.attr("__repr__") = py::cpp_function(name, py::is_method(dt));
  dt.attr("__str__") = py::cpp_function(name, py::is_method(dt));
  dt.def_property_readonly("itemsize", [](DType d) { return itemsize(d); });
  dt.def_property_readonly("is_floating_point", [](DType d) { return is_floating_point(d); });
  dt.def_property_readonly("is_complex", [](DType d) { return is_complex(d); });
  dt.def_property_readonly("is_signed", [](DType d) { return !is_unsigned(d); });
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto d = static_cast<DType>(i);
    m.attr(dtype_name(d)) = d;  // kiln.float32, kiln.float8_e4m3fn, ...
  }
  m.attr("bool") = DType::Bool;
  m.attr("half") = DType::Float16;
  m.attr("float") = DType::Float32;
  m.attr("long") = DType::Int64;
  m.attr("int") = DType::Int32;
  m.def("promote_types", &promote_types);
  m.def("dtype_from_name", &dtype_from_name);
}

void bind_devices(py::module_& m) {
  py::class_<Device>(m, "device")
      .def(py::init([](const std::string& spec) { return Device(spec); }), py::arg("spec"))
      .def(py::init([](const std::string& type, int index) {
             return Device(type + ":" + std::to_string(index));
           }),
           py::arg("type"), py::arg("index"))
      .def_property_readonly("type", [](const Device& d) { return d.is_cuda() ? "cuda" : "cpu"; })
      .def_property_readonly("index", [](const Device& d) -> py::object {
        return d.is_cuda() ? py::object(py::int_(d.index)) : py::object(py::none());
      })
      .def("__str__", &Device::str)
      .def("__repr__", [](const Device& d) {
        return d.is_cuda() ? "device(type='cuda', index=" + std::to_string(d.index) + ")"
                           : std::string("device(type='cpu')");
      })
      .def("__eq__", [](const Device& a, py::handle b) {
        try {
          return a == to_device(b);
        } catch (...) {
          return false;
        }
      })
      .def("__hash__", [](const Device& d) { return static_cast<int>(d.type) * 1024 + d.index; });
  py::implicitly_convertible<py::str, Device>();
}

void bind_cuda(py::module_& m) {
  auto c = m.def_submodule("_cuda", "CUDA runtime: availability, streams, events, memory");
  py::class_<cuda::Availability>(c, "Availability")
      .def_readonly("available", &cuda::Availability::available)
      .def_readonly("reason", &cuda::Availability::reason)
      .def_readonly("driver_version", &cuda::Availability::driver_version)
      .def_readonly("runtime_version", &cuda::Availability::runtime_version)
      .def_readonly("device_count", &cuda::Availability::device_count);
  py::class_<cuda::DeviceProperties>(c, "DeviceProperties")
      .def_readonly("name", &cuda::DeviceProperties::name)
      .def_readonly("total_memory", &cuda::DeviceProperties::total_memory)
      .def_readonly("major", &cuda::DeviceProperties::major)
      .def_readonly("minor", &cuda::DeviceProperties::minor)
      .def_readonly("multi_processor_count", &cuda::DeviceProperties::multiprocessors)
      .def_readonly("l2_cache_size", &cuda::DeviceProperties::l2_cache_bytes)
      .def_readonly("usable", &cuda::DeviceProperties::usable)
      .def_readonly("reason", &cuda::DeviceProperties::reason);
  c.def("built_with_cuda", &cuda::built_with_cuda);
  c.def("availability", &cuda::availability, py::return_value_policy::copy);
  c.def("is_available", &cuda::is_available);
  c.def("device_count", &cuda::device_count);
  c.def("get_device_properties", &cuda::get_device_properties, py::arg("device") = 0);
  c.def("synchronize", [](py::object device) {
    cuda::synchronize(device.is_none() ? -1 : to_device(device).index);
  }, py::arg("device") = py::none());

  py::class_<Stream>(c, "Stream")
      .def_property_readonly("device", &Stream::device)
      .def_property_readonly("cuda_stream", &Stream::handle)  // the name torch.cuda.Stream uses
      .def("synchronize", &Stream::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("query", &Stream::query)
      .def("wait_event", [](const Stream& s, const Event& e) { s.wait(e); })
      .def("wait_stream", [](const Stream& s, const Stream& o) { s.wait(o); })
      .def("__eq__", [](const Stream& a, const Stream& b) { return a == b; })
      .def("__repr__", [](const Stream& s) {
        return "<kiln.cuda.Stream device=" + s.device().str() + " cuda_stream=" + std::to_string(s.handle()) + ">";
      });
  c.def("current_stream", [](py::object d) { return Stream::current(to_cuda_device(d)); },
        py::arg("device") = py::none());
  c.def("default_stream", [](py::object d) { return Stream::default_stream(to_cuda_device(d)); },
        py::arg("device") = py::none());
  c.def("new_stream", [](py::object d, int priority) {
    return Stream::create(to_cuda_device(d), priority);
  }, py::arg("device") = py::none(), py::arg("priority") = 0);
  // Wraps a cudaStream_t owned by someone else (torch.cuda.current_stream().cuda_stream).
  c.def("external_stream", [](uintptr_t handle, py::object d) {
    return Stream::from_handle(to_cuda_device(d), handle);
  }, py::arg("handle"), py::arg("device") = py::none());
  py::class_<StreamGuard>(c, "_StreamGuard").def(py::init<const Stream&>());

  py::class_<Event>(c, "Event")
      .def(py::init([](bool enable_timing, py::object d) {
             return std::make_unique<Event>(to_cuda_device(d), enable_timing);
           }),
           py::arg("enable_timing") = false, py::arg("device") = py::none())
      .def("record", [](Event& e, py::object s) {
        if (s.is_none()) e.record();
        else e.record(s.cast<Stream>());
      }, py::arg("stream") = py::none())
      .def("synchronize", &Event::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("query", &Event::query)
      .def("elapsed_time", &Event::elapsed_time)
      .def("wait", [](const Event& e, py::object s) {
        (s.is_none() ? Stream::current(e.device()) : s.cast<Stream>()).wait(e);
      }, py::arg("stream") = py::none());

  c.def("memory_allocated", [](py::object d) { return memory_stats(to_cuda_device(d)).allocated; },
        py::arg("device") = py::none());
  c.def("memory_reserved", [](py::object d) { return memory_stats(to_cuda_device(d)).reserved; },
        py::arg("device") = py::none());
  c.def("max_memory_allocated", [](py::object d) {
    return memory_stats(to_cuda_device(d)).peak_allocated;
  }, py::arg("device") = py::none());
  c.def("reset_peak_memory_stats", [](py::object d) {
    reset_peak_memory_stats(to_cuda_device(d));
  }, py::arg("device") = py::none());
  c.def("empty_cache", [] { empty_cache(Device("cuda")); });
}

}  // namespace

void bind_runtime(py::module_& m) {
  bind_dtypes(m);
  bind_devices(m);
  bind_cuda(m);
  py::class_<Generator>(m, "Generator")
      .def(py::init<uint64_t>(), py::arg("seed") = 0)
      .def("manual_seed", [](Generator& g, uint64_t s) -> Generator& {
        g.seed = s;
        g.offset = 0;
        return g;
      }, py::return_value_policy::reference_internal)
      .def("initial_seed", [](const Generator& g) { return g.seed; });
  m.def("manual_seed", &manual_seed, py::arg("seed"));
}

}  // namespace kiln::python

PYBIND11_MODULE(_kiln, m) {
  namespace py = pybind11;
  using namespace kiln::python;
  m.doc() = "kiln: a tensor backend and local-inference engine (C++ core)";
  static py::exception<kiln::Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<kiln::NotImplementedError> not_impl(m, "NotImplementedError", PyExc_NotImplementedError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const kiln::NotImplementedError& e) {
      PyErr_SetString(not_impl.ptr(), e.what());
    } catch (const kiln::Error& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });
  bind_runtime(m);
  bind_tensor(m);
  bind_ops(m);
  bind_models(m);
  bind_linalg(m);
}
