// kiln.Qwen3Model and kiln.generate: the engine from Python, so that parity
// scripts run kiln and transformers on the same prompt in one process.
#include "models/generate.h"
#include "python/convert.h"

namespace kiln::python {

namespace {
Tensor ids_tensor(py::handle ids) {
  if (py::isinstance<Tensor>(ids)) return ids.cast<Tensor>();
  const auto v = ids.cast<std::vector<int64_t>>();
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, DType::Int64, kCPU);
}

WeightOptions options(py::handle device, const std::string& dtype) {
  WeightOptions o;
  o.device = to_device(device);
  parse_model_dtype(dtype, o);
  return o;
}
}  // namespace

void bind_models(py::module_& m) {
  using py::arg;
  py::class_<Qwen3Model>(m, "Qwen3Model", "a Qwen3 / Qwen3-MoE decoder with its KV cache")
      .def_static("load", [](const std::string& folder, py::object device, const std::string& dtype, int64_t max_context) {
        const WeightOptions o = options(device, dtype);
        py::gil_scoped_release release;
        const ModelConfig c = load_config(folder);
        return std::make_unique<Qwen3Model>(c, load_weights(c, folder, o), max_context);
      }, arg("folder"), arg("device") = "cpu", arg("dtype") = "bf16", arg("max_context") = 4096,
         "a Hugging Face model folder; dtype bf16, fp16, fp32 or fp8 (bf16 with fp8 linear weights)")
      .def_static("random", [](const std::string& config, py::object device, const std::string& dtype,
                               int64_t max_context, uint64_t seed) {
        const WeightOptions o = options(device, dtype);
        py::gil_scoped_release release;
        const ModelConfig c = load_config(config);
        return std::make_unique<Qwen3Model>(c, random_weights(c, o, seed), max_context);
      }, arg("config"), arg("device") = "cpu", arg("dtype") = "bf16", arg("max_context") = 4096, arg("seed") = 0)
      .def("forward", [](Qwen3Model& model, py::handle ids, bool all_logits) {
        const Tensor t = ids_tensor(ids);
        py::gil_scoped_release release;
        return model.forward(t, all_logits);
      }, arg("ids"), arg("all_logits") = false,
         "logits [T, vocab] (all_logits) or [1, vocab] of ids run after the cached context")
      .def("reset", &Qwen3Model::reset)
      .def_property("cuda_graphs", &Qwen3Model::cuda_graphs, &Qwen3Model::set_cuda_graphs,
                    "one-token steps replay a captured CUDA graph (CUDA, bfloat16 / float16)")
      .def_property_readonly("length", &Qwen3Model::length)
      .def_property_readonly("capacity", &Qwen3Model::capacity)
      .def_property_readonly("device", &Qwen3Model::device)
      .def_property_readonly("dtype", &Qwen3Model::dtype);
  m.def("generate", [](Qwen3Model& model, const std::vector<int32_t>& prompt, int64_t max_new_tokens,
                       double temperature, int64_t top_k, double top_p, uint64_t seed,
                       const std::vector<int64_t>& stop_ids) {
    std::vector<int32_t> out;
    py::gil_scoped_release release;
    generate(model, prompt, max_new_tokens, SamplingParams{temperature, top_k, top_p, seed}, stop_ids,
             [&](int32_t id) { out.push_back(id); return true; });
    return out;
  }, arg("model"), arg("prompt"), arg("max_new_tokens"), py::kw_only(), arg("temperature") = 0.0, arg("top_k") = 0,
     arg("top_p") = 1.0, arg("seed") = 0, arg("stop_ids") = std::vector<int64_t>{},
     "the new token ids after prompt (greedy at temperature 0)");
}

}  // namespace kiln::python
