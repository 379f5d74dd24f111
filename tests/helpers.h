#pragma once
// What the test suites share: scratch folders, files and run folders, the
// sample text, running the `phasor` command line, small model configurations,
// gradient checks and error measures (close / check_close, relative to the
// expected value unless an atol is given), and the LibTorch preamble.
//
// A suite uses it with `using namespace phasor::test;`. A LibTorch suite
// (tests/torch_*.cpp) defines PHASOR_TEST_WITH_TORCH and includes this header
// first: LibTorch comes in before doctest, and the torch conversions below
// are compiled.
#ifdef PHASOR_TEST_WITH_TORCH
#include <torch/torch.h>
// Debian's LibTorch pulls in glog, whose CHECK* macros would replace doctest's:
// drop them before doctest defines its own.
#undef CHECK
#undef CHECK_EQ
#undef CHECK_NE
#undef CHECK_LT
#undef CHECK_LE
#undef CHECK_GT
#undef CHECK_GE
#endif
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "models/config.h"
#include "models/transformer.h"
#include "nn/atomic_file.h"
#include "nn/checkpoint.h"
#include "phasor.h"

namespace phasor::test {

namespace fs = std::filesystem;

// ------------------------------------------------------------ scratch folders

// The scratch folder of a test binary: <PHASOR_TEST_TMP, or the system's temp
// folder>/phasor_<suite>_<pid>, emptied and made on first use in the process;
// with remove_at_exit, removed again when the process exits.
inline fs::path scratch_root(const std::string& suite, bool remove_at_exit = false) {
#ifdef PHASOR_TEST_TMP
  const fs::path parent = PHASOR_TEST_TMP;
#else
  const fs::path parent = fs::temp_directory_path();
#endif
  const fs::path root = parent / ("phasor_" + suite + "_" + std::to_string(::getpid()));
  // Made once per suite; the folders to remove are removed by this static's destructor.
  struct Made {
    std::set<std::string> suites;
    std::vector<fs::path> to_remove;
    ~Made() {
      std::error_code ec;
      for (const fs::path& p : to_remove) fs::remove_all(p, ec);
    }
  };
  static Made made;
  if (made.suites.insert(suite).second) {
    fs::remove_all(root);
    fs::create_directories(root);
    if (remove_at_exit) made.to_remove.push_back(root);
  }
  return root;
}

// `dir`, emptied (made if missing).
inline fs::path fresh_folder(const fs::path& dir) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// ------------------------------------------------------------ files and run folders

// The bytes of a file; "" when it cannot be read.
inline std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in.good()) return "";
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Writes `bytes` to p (making its folder if needed); returns p.
inline fs::path write_bytes(const fs::path& p, const std::string& bytes) {
  if (!p.parent_path().empty()) fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
  return p;
}

// Every file and folder under dir (relative name -> bytes, "<dir>" for a
// folder), but for the relative names in `skip`.
inline std::map<std::string, std::string> tree_bytes(const fs::path& dir, const std::set<std::string>& skip = {}) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string name = fs::relative(e.path(), dir).string();
    if (skip.contains(name)) continue;
    out[name] = e.is_regular_file() ? read_bytes(e.path()) : "<dir>";
  }
  return out;
}

// Paths of the temporary files (*.tmp.*) anywhere under dir.
inline std::vector<std::string> temporaries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) out.push_back(e.path().string());
  return out;
}

// The checkpoint folder a run folder's `latest` names ("" when there is none).
// Every tensor of safetensors file a equals b's of the same name, bit for bit;
// b may hold more tensors when `b_may_hold_more` (a probe's extra outputs).
inline void check_same_tensors(const fs::path& a, const fs::path& b, bool b_may_hold_more = false) {
  const nn::StateDict ta = nn::load_tensors(a.string()), tb = nn::load_tensors(b.string());
  REQUIRE(!ta.empty());
  if (!b_may_hold_more) REQUIRE(ta.size() == tb.size());
  for (const auto& entry : ta) {
    const auto& t = entry.second;
    const std::string& name = entry.first;
    CAPTURE(name);
    REQUIRE(tb.count(name) == 1);
    const Tensor& u = tb.at(name);
    REQUIRE(t.shape() == u.shape());
    REQUIRE(t.dtype() == u.dtype());
    CHECK(std::memcmp(t.contiguous().raw_data(), u.contiguous().raw_data(), t.nbytes()) == 0);
  }
}

inline std::string latest_name(const fs::path& run_dir) {
  std::string name = read_bytes(run_dir / "latest");
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  return name;
}

// The path of that folder; the test stops when there is none.
inline fs::path latest_folder(const fs::path& run_dir) {
  const std::string name = latest_name(run_dir);
  REQUIRE_MESSAGE(!name.empty(), run_dir);
  return run_dir / name;
}

// 8 little-endian bytes of v (the length prefix of a safetensors file), and back.
inline std::string le64(uint64_t v) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}
inline uint64_t read_le64(const std::string& bytes) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  return v;
}

// Injects a write failure after `after_bytes` bytes (see nn/atomic_file.h), and
// turns it off again even when a check fails.
struct WriteFault {
  explicit WriteFault(size_t after_bytes) { set_write_fault_after_bytes(after_bytes); }
  ~WriteFault() { set_write_fault_after_bytes(std::nullopt); }
  WriteFault(const WriteFault&) = delete;
  WriteFault& operator=(const WriteFault&) = delete;
};

// How many times `piece` occurs in `text` (overlapping occurrences count).
inline size_t count_of(const std::string& text, const std::string& piece) {
  size_t n = 0;
  for (size_t at = text.find(piece); at != std::string::npos; at = text.find(piece, at + 1)) ++n;
  return n;
}

// ------------------------------------------------------------ sample text

// Deterministic verses, whole ones, until there are at least min_bytes.
inline std::string verse_text(size_t min_bytes) {
  std::string text;
  for (int i = 0; text.size() < min_bytes; ++i)
    text += "Verse " + std::to_string(i) + ". And the " + (i % 3 ? "light" : "water") + " was divided from the " +
            (i % 2 ? "darkness" : "firmament") + ", " + std::to_string(i * 37 % 101) + " times over.\n";
  return text;
}

// A few KB of text for training runs: the verses, cut at `bytes`.
inline std::string sample_text(size_t bytes) { return verse_text(bytes).substr(0, bytes); }

// ------------------------------------------------------------ the command line

// s in single quotes for the shell (a quote inside becomes '\'').
inline std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}
inline std::string quote(const fs::path& p) { return quote(p.string()); }

struct Cli {
  int status = -1;  // the exit status; -1 when the command did not exit normally
  std::string out, err;
  double seconds = 0;
};

// Runs a shell command with stdin from /dev/null, capturing stdout and stderr
// separately (through files in `folder`, removed again) and timing it.
inline Cli run_shell(const std::string& command, const fs::path& folder) {
  static int counter = 0;
  const fs::path o = folder / ("stdout." + std::to_string(counter)), e = folder / ("stderr." + std::to_string(counter));
  ++counter;
  const std::string cmd = command + " > " + quote(o) + " 2> " + quote(e) + " < /dev/null";
  const auto start = std::chrono::steady_clock::now();
  const int rc = std::system(cmd.c_str());
  Cli r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.status = (rc != -1 && WIFEXITED(rc)) ? WEXITSTATUS(rc) : -1;
  r.out = read_bytes(o);
  r.err = read_bytes(e);
  fs::remove(o);
  fs::remove(e);
  return r;
}

#ifdef PHASOR_CLI_PATH
// The built `phasor` binary, quoted for the shell.
inline std::string phasor_command() { return quote(std::string(PHASOR_CLI_PATH)); }
#endif

// A failure as the design asks: a non-zero exit (not a crash), exactly one
// line on stderr, mentioning `must_mention` (when given).
inline void check_one_line_failure(const Cli& r, const std::string& must_mention = "") {
  CHECK(r.status != 0);
  CHECK(r.status != -1);
  CHECK_MESSAGE(std::count(r.err.begin(), r.err.end(), '\n') == 1, "stderr: ", r.err);
  CHECK_MESSAGE((!r.err.empty() && r.err.back() == '\n'), "stderr: ", r.err);
  if (!must_mention.empty())
    CHECK_MESSAGE(r.err.find(must_mention) != std::string::npos, "stderr: ", r.err, "should mention: ", must_mention);
}

// ------------------------------------------------------------ errors

// The message of the phasor::Error that f throws; "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The same, failing the test when f throws no phasor::Error.
inline std::string expect_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("expected a phasor::Error");
  return "";
}

inline bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

// ------------------------------------------------------------ model configurations

// A model configuration of the given position variant; the sizes (and any
// other field) come from `fields`, written with designated initializers:
//   model_config(Position::Rope, {.d_model = 16, .n_layers = 1, .n_heads = 2, .d_ff = 32, .max_seq_len = 32})
inline ModelConfig model_config(Position position, ModelConfig fields) {
  fields.position = position;
  return fields;
}

// The tiny model of the command-line suites (bad input, faults).
inline ModelConfig tiny_cli_config(Position position = Position::Rope) {
  return model_config(position, {.d_model = 16, .n_layers = 1, .n_heads = 2, .d_ff = 32, .max_seq_len = 32});
}

// The model of the LibTorch parity suites (torch_grad, torch_model_parity):
// d = 8, P = 4, and a visible xPos scale at their short lengths.
inline ModelConfig parity_config(Position position, CmhaInit cmha_init, bool tie) {
  return model_config(position, {.d_model = 32, .n_layers = 2, .n_heads = 4, .d_ff = 64, .max_seq_len = 24, .tie_embeddings = tie,
                                 .xpos_scale_base = 64.0, .cmha_init = cmha_init});
}

// A model with every parameter that starts at a constant moved off it, so that
// every term of the maths counts: phase_bias uniform in [-3, 3], beta 1 +
// uniform [-0.5, 1] (0.5 .. 2), delta plus N(0, 0.3), norm gains N(1, 0.2).
inline std::unique_ptr<CausalLM> parity_model(const ModelConfig& c, uint64_t seed) {
  auto model = std::make_unique<CausalLM>(c, seed);
  Generator gen(seed + 1000);
  NoGradGuard no_grad;
  for (const auto& [name, p] : model->named_parameters()) {
    Tensor noise;
    if (name.ends_with(".phase_bias")) {
      noise = uniform(p.shape(), -3.0, 3.0, DType::Float32, &gen);
    } else if (name.ends_with(".beta")) {
      noise = uniform(p.shape(), -0.5, 1.0, DType::Float32, &gen);
    } else if (name.ends_with(".delta")) {
      noise = normal(p.shape(), 0.0, 0.3, DType::Float32, &gen);
    } else if (name.ends_with("norm.weight")) {
      noise = normal(p.shape(), 0.0, 0.2, DType::Float32, &gen);
    } else {
      continue;
    }
    ops::axpy_(p, noise, 1.0);
  }
  return model;
}

// ------------------------------------------------------------ gradients

// A leaf that requires grad, drawn from g.
inline Tensor leaf(Generator& g, const Dims& shape, DType dt = DType::Float64) {
  Tensor t = randn(shape, dt, &g);
  t.requires_grad_();
  return t;
}

// Runs gradcheck and (unless second_order is false: large inputs, where it
// costs seconds) gradgradcheck, the derivative of the gradient under
// create_graph; reports the worst entry on failure.
inline void check_grad(const std::string& what, const TensorFunction& f, const std::vector<Tensor>& inputs,
                       const GradcheckOptions& opt = {}, bool second_order = true) {
  const GradcheckResult r = gradcheck(f, inputs, opt);
  CHECK_MESSAGE(r.ok, what, ": ", r.message);
  if (!second_order) return;
  const GradcheckResult r2 = gradgradcheck(f, inputs, opt);
  CHECK_MESSAGE(r2.ok, what, " (second order): ", r2.message);
}

// ------------------------------------------------------------ error measures

// max |a - b| over the elements of two tensors of one shape, and max |a|.
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}
inline double max_abs(const Tensor& a) {
  double m = 0;
  for (double v : a.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

// A tolerance |got - want| <= atol + rtol |want|. Written with designated
// initializers, {.rtol = 1e-6}, {.atol = 1e-12} or both, so that a relative
// and an absolute bound cannot be mistaken for each other. An atol is only
// for values that can be exactly 0 (or cancel): on values far below it, it is
// all that is checked.
struct Tol {
  double rtol = 0;
  double atol = 0;
};

// The outcome of close(): true when within the tolerance (NaN never is);
// doctest prints both values and the bound when a CHECK(close(...)) fails.
struct Closeness {
  double got, want;
  Tol tol;
  double bound() const { return tol.atol + tol.rtol * std::abs(want); }
  explicit operator bool() const { return std::abs(got - want) <= bound(); }
};
inline std::ostream& operator<<(std::ostream& os, const Closeness& c) {
  const auto old = os.precision(17);
  os << "got " << c.got << ", want " << c.want << ": |diff| " << std::abs(c.got - c.want) << (c ? " <= " : " > ") << c.bound()
     << " (rtol " << c.tol.rtol << ", atol " << c.tol.atol << ")";
  os.precision(old);
  return os;
}

// CHECK(close(got, want, {.rtol = 1e-6})).
inline Closeness close(double got, double want, Tol tol) { return {got, want, tol}; }

// close() element by element, naming the element that is not.
template <class T>
void check_close(const std::vector<T>& got, const std::vector<T>& want, Tol tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK_MESSAGE(std::abs(got[i] - want[i]) <= tol.atol + tol.rtol * std::abs(want[i]), "element ", i, ": ", got[i], " vs ", want[i],
                  " (rtol ", tol.rtol, ", atol ", tol.atol, ")");
}

// ------------------------------------------------------------ LibTorch

#ifdef PHASOR_TEST_WITH_TORCH
inline torch::ScalarType torch_dtype(DType d) {
  switch (d) {
    case DType::Bool: return torch::kBool;
    case DType::Int64: return torch::kLong;
    case DType::Float32: return torch::kFloat;
    case DType::Float64: return torch::kDouble;
    case DType::Complex64: return torch::kComplexFloat;
    case DType::Complex128: return torch::kComplexDouble;
    case DType::BFloat16: return torch::kBFloat16;
  }
  return torch::kFloat;
}

inline std::vector<int64_t> sizes_of(const Dims& d) { return {d.begin(), d.end()}; }

// A LibTorch copy of a Phasor tensor (same dtype, shape and values).
inline torch::Tensor to_torch(const Tensor& p) {
  const Tensor c = ops::contiguous(p);
  return torch::from_blob(c.raw_data(), sizes_of(p.shape()), torch::TensorOptions().dtype(torch_dtype(p.dtype()))).clone();
}
#endif

}  // namespace phasor::test
