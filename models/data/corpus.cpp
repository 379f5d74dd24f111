#include "models/data/corpus.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "models/data/dataset.h"
#include "models/data/tasks.h"
#include "nn/atomic_file.h"
#include "tensor/error.h"
#include "tensor/random.h"

namespace phasor {

namespace fs = std::filesystem;

// ---------------------------------------------------------------- files

// Every byte becomes an 8-byte token, and the split copies them: a larger file
// is refused up front rather than read until memory runs out.
constexpr uint64_t kMaxTextBytes = uint64_t{1} << 30;

std::string read_text_file(const std::string& path) { return read_text_file(path, "1 GiB for a text file"); }

std::string read_text_file(const std::string& path, std::string_view limit_text) {
  PHASOR_CHECK(!fs::is_directory(path), "'", path, "' is a folder, not a text file");
  // Regular files only (a FIFO or /dev/zero would hang or never end), read with a bound.
  return read_file_bytes(path, kMaxTextBytes, limit_text);
}

// One implementation of crash-safe writing (nn/atomic_file.h): an unpredictable
// temporary created with O_EXCL | O_NOFOLLOW, synced, then renamed.
void write_text_atomically(const std::string& path, std::string_view text) { write_file_atomic(path, text); }

namespace {

std::string read_nonempty_file(const std::string& path) {
  std::string text = read_text_file(path, "1 GiB for a data file");
  PHASOR_CHECK(!text.empty(), "'", path, "' is empty: there is nothing to train or evaluate on");
  return text;
}

// A folder of texts: every regular file under it (hidden ones left out), in
// the order of their paths, each ended by a newline, as one text of at most 1 GiB.
std::string read_folder_of_texts(const fs::path& folder) {
  std::vector<fs::path> files;
  std::error_code error;
  fs::recursive_directory_iterator it(folder, fs::directory_options::skip_permission_denied, error), end;
  PHASOR_CHECK(!error, "data folder '", folder.string(), "' cannot be read: ", error.message());
  for (; !error && it != end; it.increment(error)) {
    const bool hidden = it->path().filename().string().starts_with(".");
    if (hidden && it->is_directory(error)) it.disable_recursion_pending();
    else if (!hidden && it->is_regular_file(error)) files.push_back(it->path());
  }
  PHASOR_CHECK(!error, "data folder '", folder.string(), "' cannot be read: ", error.message());
  std::sort(files.begin(), files.end());  // directory order differs between machines
  std::string text;
  for (const fs::path& file : files) {
    std::string part = read_text_file(file.string(), "1 GiB for a data file");
    if (part.empty()) continue;
    if (part.back() != '\n') part.push_back('\n');
    PHASOR_CHECK(text.size() + part.size() <= kMaxTextBytes, "data folder '", folder.string(), "' holds more than 1 GiB of text");
    text += part;
  }
  PHASOR_CHECK(!text.empty(), "data folder '", folder.string(), "' holds no text (no non-empty regular file): there is nothing to train or evaluate on");
  return text;
}

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// ---------------------------------------------------------------- kjv

std::string make_kjv() {
  const char* const bible = "/usr/bin/bible";
  PHASOR_CHECK(fs::exists(bible), "corpus 'kjv' needs Debian's bible-kjv package (apt-get install bible-kjv)");
  // -l0: no line wrapping, so every verse is one line.
  const std::string command = std::string(bible) + " -l0 'gen1:1-rev22:21'";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  PHASOR_CHECK(pipe, "corpus 'kjv': cannot run ", command, ": ", std::strerror(errno));
  std::string text;
  char buffer[1 << 16];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) text.append(buffer, n);
  const int status = ::pclose(pipe);
  PHASOR_CHECK(status == 0, "corpus 'kjv': `", command, "` failed (status ", status, ")");
  return text;
}

// ---------------------------------------------------------------- code

constexpr size_t kCodeCorpusBytes = 8u << 20;

// Test suites are large and repetitive; installed third-party packages vary by machine.
bool is_skipped_folder(const fs::path& folder) {
  static const std::set<std::string> skipped = {"test",          "tests",         "idle_test",
                                                "site-packages", "dist-packages", "__pycache__"};
  return skipped.count(folder.filename().string()) > 0;
}

void collect_python_sources(const fs::path& root, std::vector<std::string>& sources) {
  std::error_code error;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, error), end;
  for (; !error && it != end; it.increment(error)) {
    if (it->is_directory(error) && is_skipped_folder(it->path()))
      it.disable_recursion_pending();
    else if (it->is_regular_file(error) && it->path().extension() == ".py")
      sources.push_back(it->path().string());
  }
}

std::vector<std::string> python_standard_library_sources() {
  std::vector<std::string> sources;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/usr/lib", error))
    if (entry.path().filename().string().starts_with("python3") && entry.is_directory(error))
      collect_python_sources(entry.path(), sources);
  std::sort(sources.begin(), sources.end());  // directory order differs between machines
  return sources;
}

std::string make_code() {
  const std::vector<std::string> sources = python_standard_library_sources();
  PHASOR_CHECK(!sources.empty(),
               "corpus 'code' found no Python standard library sources under /usr/lib/python3* (apt-get install "
               "python3)");
  std::string text;
  for (const std::string& path : sources) {
    std::string source = read_text_file(path);
    if (!source.empty() && source.back() != '\n') source.push_back('\n');
    if (text.size() + source.size() > kCodeCorpusBytes) break;  // whole files only; a sorted prefix
    text += source;
  }
  return text;
}

// ---------------------------------------------------------------- arith

constexpr uint64_t kArithCorpusSeed = 1;
constexpr size_t kArithCorpusBytes = 2'000'000;
constexpr uint64_t kHeldoutBuckets = 20;

// FNV-1a: fixed on every platform, unlike std::hash.
uint64_t fnv1a(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char byte : text) hash = (hash ^ byte) * 0x100000001b3ull;
  return hash;
}

bool is_heldout(const std::string& prompt) { return fnv1a(prompt) % kHeldoutBuckets == 0; }

// Digit count first, then the number: short and long operands are equally common.
int64_t number_with_up_to(Generator& gen, int max_digits) {
  const int digits = 1 + static_cast<int>(uniform_below(gen, static_cast<uint64_t>(max_digits)));
  int64_t low = 1;
  for (int d = 1; d < digits; ++d) low *= 10;
  const int64_t lowest = digits == 1 ? 0 : low;
  return lowest + static_cast<int64_t>(uniform_below(gen, static_cast<uint64_t>(low * 10 - lowest)));
}

// Additions and subtractions of up to 4-digit numbers (never negative),
// multiplications of up to 3 by up to 2 digits.
ArithProblem random_arith_problem(Generator& gen) {
  const char op = "+-*"[uniform_below(gen, 3)];
  int64_t a = number_with_up_to(gen, op == '*' ? 3 : 4);
  int64_t b = number_with_up_to(gen, op == '*' ? 2 : 4);
  if (op == '-' && a < b) std::swap(a, b);
  const int64_t answer = op == '+' ? a + b : op == '-' ? a - b : a * b;
  return {std::to_string(a) + op + std::to_string(b) + "=", std::to_string(answer)};
}

std::string make_arith() {
  Generator gen(kArithCorpusSeed);
  std::string text;
  while (text.size() < kArithCorpusBytes) {
    auto [prompt, answer] = random_arith_problem(gen);
    if (!is_heldout(prompt)) text += prompt + answer + "\n";
  }
  return text;
}

// ---------------------------------------------------------------- built-ins

struct BuiltinCorpus {
  const char* name;
  const char* cache_file;  // versioned: bump it when the generator's output changes
  std::string (*make)();
};

const BuiltinCorpus kBuiltins[] = {
    {"kjv", "kjv-v1.txt", make_kjv},
    {"code", "code-v1.txt", make_code},
    {"arith", "arith-v1.txt", make_arith},
};

std::string load_builtin(const BuiltinCorpus& corpus) {
  const fs::path cached = fs::path(corpus_cache_dir()) / corpus.cache_file;
  if (fs::exists(cached)) return read_nonempty_file(cached.string());
  const std::string text = corpus.make();
  PHASOR_CHECK(!text.empty(), "corpus '", corpus.name, "' came out empty");
  std::error_code error;
  fs::create_directories(cached.parent_path(), error);
  PHASOR_CHECK(!error, "cannot create the cache folder '", cached.parent_path().string(), "': ", error.message());
  write_text_atomically(cached.string(), text);
  return text;
}

}  // namespace

std::string corpus_cache_dir() {
  if (const std::string dir = env("PHASOR_CACHE"); !dir.empty()) return dir;
  if (const std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) return (fs::path(xdg) / "phasor").string();
  const std::string home = env("HOME");
  PHASOR_CHECK(!home.empty(), "no cache folder: set PHASOR_CACHE (or XDG_CACHE_HOME or HOME)");
  return (fs::path(home) / ".cache" / "phasor").string();
}

std::string load_text(const std::string& name_or_path, int64_t example_length) {
  if (std::error_code ec; fs::is_directory(name_or_path, ec)) return read_folder_of_texts(name_or_path);
  if (fs::exists(name_or_path)) return read_nonempty_file(name_or_path);
  for (const BuiltinCorpus& corpus : kBuiltins)
    if (name_or_path == corpus.name) return load_builtin(corpus);
  if (is_task(name_or_path)) {
    PHASOR_CHECK(example_length > 0, "data '", name_or_path, "' is a task whose examples are as long as the window: give its length (--seq-len)");
    return task_training_text(parse_task(name_or_path), example_length);
  }
  fail("data '", name_or_path, "' is neither a file nor a built-in corpus (kjv, code, arith) or task (", task_names(), ")");
}

bool is_builtin_corpus(std::string_view name) {
  return is_task(name) || std::ranges::any_of(kBuiltins, [&](const BuiltinCorpus& corpus) { return name == corpus.name; });
}

std::string data_location(const std::string& name_or_path) {
  std::error_code ec;
  if (!fs::exists(name_or_path, ec)) return name_or_path;
  const fs::path absolute = fs::absolute(name_or_path, ec);
  return ec ? name_or_path : absolute.lexically_normal().string();
}

std::string text_hash(std::string_view text) {
  char hex[32];
  std::snprintf(hex, sizeof hex, "fnv1a64:%016llx", static_cast<unsigned long long>(fnv1a(text)));
  return hex;
}

std::vector<ArithProblem> arith_heldout_problems(size_t count, uint64_t seed) {
  PHASOR_CHECK(count <= 100'000, "arith_heldout_problems: at most 100000 problems, asked for ", count);
  Generator gen(seed);
  std::set<std::string> seen;
  std::vector<ArithProblem> problems;
  while (problems.size() < count) {
    ArithProblem problem = random_arith_problem(gen);
    if (is_heldout(problem.first) && seen.insert(problem.first).second) problems.push_back(std::move(problem));
  }
  return problems;
}

double exact_match(const std::vector<ArithProblem>& problems, const Completer& complete) {
  PHASOR_CHECK(!problems.empty(), "exact_match: no problems to score");
  size_t correct = 0;
  for (const auto& [prompt, answer] : problems) {
    const std::string completion = complete(prompt, answer.size() + 1);
    correct += completion.substr(0, completion.find('\n')) == answer;
  }
  return static_cast<double>(correct) / static_cast<double>(problems.size());
}

}  // namespace phasor
