// The model level: phasor.load(checkpoint) -> Model, and what the CLI does with
// one: evaluate a text (`phasor eval`), the gradients of one evaluation window
// (`phasor grad`), generate (`phasor generate`), score a task's examples by
// exact match (`phasor eval --data TASK`), the Hessian's eigenpairs
// (`phasor curvature`); the same functions of app/,
// so the numbers and the error messages are the CLI's, except where a message
// names an argument: then it names Python's (seq_len, not --seq-len).
#include <memory>

#include <pybind11/stl.h>

#include "app/checkpoint_path.h"
#include "app/curvature.h"
#include "app/evaluate.h"
#include "app/gradient.h"
#include "models/data/corpus.h"
#include "models/data/task_score.h"
#include "models/data/tasks.h"
#include "models/data/tokenizer.h"
#include "models/model_io.h"
#include "python/bindings.h"
#include "python/gil.h"

namespace py = pybind11;
using namespace py::literals;

namespace phasor::python {

namespace {

py::dict named(const nn::NamedTensors& tensors) {
  py::dict out;
  for (const auto& [name, t] : tensors) out[py::str(name)] = t;
  return out;
}

py::object json_to_python(const nlohmann::json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

SpectrumEnd spectrum_end(const std::string& which) {
  if (which == "largest") return SpectrumEnd::Largest;
  if (which == "smallest") return SpectrumEnd::Smallest;
  if (which == "both") return SpectrumEnd::Both;
  throw py::value_error("curvature: which must be 'largest', 'smallest' or 'both', got '" + which + "'");
}

// `phasor curvature --json` as a dict, with the eigenvalues [K] and the
// eigenvectors [K, n] (the selected parameters concatenated in model order,
// as "parameters" lists them) as float64 tensors.
py::dict curvature_of(const CausalLM& model, const std::string& text, int64_t seq_len, int64_t window, int64_t windows,
                      const std::vector<std::string>& params, std::optional<int64_t> top, const std::string& which, int64_t max_hvps,
                      double tol, uint64_t seed) {
  check_positions_fit(model.config(), seq_len, "curvature: seq_len");
  PHASOR_CHECK(!top || *top > 0, "curvature: top must be positive, or None for the exact Hessian, got ", top.value_or(0));
  CurvatureOptions o{.seq_len = seq_len, .window = window, .window_count = windows, .params = params, .top = top.value_or(0),
                     .which = spectrum_end(which), .max_products = max_hvps, .tolerance = tol, .seed = seed};
  const CurvatureResult r = without_gil([&] { return curvature(model, ByteTokenizer().encode(text), o); });
  py::dict out = json_to_python(curvature_json(r));
  const int64_t k = static_cast<int64_t>(r.eigenvalues.size());
  std::vector<double> rows;
  for (const auto& y : r.eigenvectors) rows.insert(rows.end(), y.begin(), y.end());
  out["eigenvalues"] = from_vector(r.eigenvalues, {k});
  out["eigenvectors"] = from_vector(rows, {k, r.dimension});
  return out;
}

}  // namespace

void bind_models(py::module_& m) {
  py::class_<CausalLM, std::shared_ptr<CausalLM>>(m, "Model", "a causal language model loaded from a checkpoint")
      .def_property_readonly("config", [](const CausalLM& model) { return json_to_python(to_json(model.config())); })
      .def("parameters", [](const CausalLM& model) { return named(model.named_parameters()); },
           "the parameters by checkpoint name (tensors sharing the model's memory)")
      .def("forward", [](const CausalLM& model, const Tensor& tokens) { return model.forward(tokens); }, "tokens"_a, ReleaseGil(),
           "logits [B, N, vocab] of int64 tokens [B, N]")
      .def("loss", [](const CausalLM& model, const Tensor& tokens, const Tensor& targets) { return model.loss(tokens, targets); },
           "tokens"_a, "targets"_a, ReleaseGil(), "mean cross-entropy of the next-token predictions (differentiable)")
      .def("evaluate", [](const CausalLM& model, const std::string& text, int64_t seq_len, int64_t max_windows, int64_t batch) {
             check_positions_fit(model.config(), seq_len, "Model.evaluate: seq_len");  // in Python's words, not the CLI's
             const EvalResult r = without_gil([&] { return evaluate(model, ByteTokenizer().encode(text), seq_len, max_windows, batch); });
             return py::dict("loss"_a = r.loss, "ppl"_a = r.ppl, "tokens"_a = r.tokens, "windows"_a = r.windows,
                             "seq_len"_a = r.seq_len);
           }, "text"_a, "seq_len"_a = 128, "max_windows"_a = 0, "batch"_a = 8,
           "loss and perplexity over the spec's evaluation windows of `text`, as `phasor eval --json`: the text itself "
           "(str or bytes, one token per byte), not a path; phasor.load_text(name_or_path) reads a file or a built-in "
           "corpus, and a run folder's validation.txt is the text its training held out")
      .def("evaluate_task", [](const CausalLM& model, const std::string& task, int64_t seq_len, int64_t examples,
                               const std::vector<int>& depths, uint64_t seed, int64_t batch) {
             TaskEvalOptions o;
             o.task = parse_task(task);
             o.length = seq_len;
             o.examples = examples;
             o.depths = depths;
             o.seed = seed;
             o.batch = batch;
             check_task_length(o.task, seq_len, "Model.evaluate_task: seq_len");  // in Python's words
             PHASOR_CHECK(examples >= 1 && examples <= 1'000'000, "Model.evaluate_task: examples must be from 1 to 1000000, got ", examples);
             const TaskEvaluation e = without_gil([&] { return evaluate_task(model, o); });
             nlohmann::json out = to_json(e.score);
             out["task"] = task, out["seq_len"] = seq_len, out["seed"] = seed;
             py::dict result = json_to_python(out);
             py::list each;
             for (size_t i = 0; i < e.examples.size(); ++i) {
               py::dict example("prompt"_a = py::bytes(e.examples[i].prompt), "answer"_a = py::bytes(e.examples[i].answer),
                                "correct"_a = static_cast<bool>(e.score.correct_each[i]));
               if (e.examples[i].depth >= 0) example["depth"] = e.examples[i].depth;
               each.append(example);
             }
             result["scored"] = each;
             return result;
           }, "task"_a, "seq_len"_a, "examples"_a = 100, "depths"_a = std::vector<int>{}, "seed"_a = kTaskEvalSeed, "batch"_a = 0,
           "exact-match accuracy on `examples` examples of a built-in task (passkey, copy, recall, flipflop) of seq_len bytes, "
           "as `phasor eval --data TASK --json`: accuracy, wilson_low/high (95%), answer_log_loss (nats per answer byte), "
           "depths (passkey: spread over `depths`, by default 0, 25, 50, 75, 100) and `scored`, each example's prompt, "
           "answer (bytes), depth and whether it was right (as --dump-examples writes them)")
      .def("gradients", [](const CausalLM& model, const std::string& text, int64_t seq_len, int64_t window, bool activations) {
             const WindowGradients g = without_gil([&] {
               return window_gradients(model, ByteTokenizer().encode(text), seq_len, window, activations,
                                       {"Model.gradients", "seq_len", "window", "activations"});
             });
             return py::dict("loss"_a = g.loss, "window"_a = g.window, "windows"_a = g.windows, "seq_len"_a = g.seq_len,
                             "parameters"_a = named(g.parameters), "activations"_a = named(g.activations));
           }, "text"_a, "seq_len"_a, "window"_a = 0, "activations"_a = false,
           "the gradient of one evaluation window's loss w.r.t. every parameter (and with activations=True, dL/dr and "
           "dL/dphi at each layer's Euler transform), as `phasor grad` writes them")
      .def("generate", [](const CausalLM& model, const std::string& prompt, int64_t tokens, double temperature, int64_t top_k,
                          uint64_t seed, double top_p) {
             const std::vector<int64_t> ids = encode_prompt(prompt, model.config().vocab_size);
             const std::string text = without_gil([&] {
               return ByteTokenizer().decode(generate(model, ids, SampleOptions{tokens, temperature, top_k, top_p, seed}));
             });
             return py::bytes(text);
           }, "prompt"_a, "tokens"_a = 200, "temperature"_a = 0.8, "top_k"_a = 0, "seed"_a = 0, "top_p"_a = 1.0,
           "the continuation of `prompt` (bytes: one token per byte), as `phasor generate` streams it");
  m.def("load", [](const std::string& path) { return std::shared_ptr<CausalLM>(load_model(model_file_of(path))); }, "checkpoint"_a, ReleaseGil(),
        "a model from a checkpoint: a model.safetensors file, its checkpoint folder, or a run folder (its latest checkpoint)");
  m.def("curvature", [](const py::object& model_or_checkpoint, const std::string& text, int64_t seq_len, int64_t window, int64_t windows,
                        const std::vector<std::string>& params, std::optional<int64_t> top, const std::string& which, int64_t max_hvps,
                        double tol, uint64_t seed) {
          std::shared_ptr<CausalLM> model = py::isinstance<CausalLM>(model_or_checkpoint)
                                                ? model_or_checkpoint.cast<std::shared_ptr<CausalLM>>()
                                                : std::shared_ptr<CausalLM>(load_model(model_file_of(py::str(model_or_checkpoint))));
          return curvature_of(*model, text, seq_len, window, windows, params, top, which, max_hvps, tol, seed);
        }, "model_or_checkpoint"_a, "text"_a, "seq_len"_a, "window"_a = 0, "windows"_a = 1,
        "params"_a = std::vector<std::string>{"delta", "phase_bias", "beta"}, "top"_a = 5, "which"_a = "largest", "max_hvps"_a = 300,
        "tol"_a = 1e-6, "seed"_a = 0,
        "eigenpairs of the Hessian of one evaluation window's loss (or the mean of `windows` consecutive ones) over the "
        "parameters `params` selects (names, dotted suffixes, or 'all'), as `phasor curvature --json`: the `top` largest "
        "(which='largest'), smallest (the negative end, 'smallest') or both (top of each), by Lanczos; top=None forms the "
        "exact Hessian. eigenvalues [K] and eigenvectors [K, n] are float64 tensors; model_or_checkpoint is a Model or a "
        "checkpoint path");
  m.def("load_text", [](const std::string& name_or_path, int64_t length) { return py::bytes(load_text(name_or_path, length)); },
        "name_or_path"_a, "length"_a = 0,
        "a text file, a built-in corpus (kjv, code, arith) or a task's training stream (passkey, copy, recall, flipflop: "
        "whole examples of `length` bytes, which it then needs), as --data reads it");
}

}  // namespace phasor::python
