#pragma once
// Training text by name: a file, or one of the built-in corpora, prepared into
// a cache folder on first use and read back from there after. Also the
// held-out arithmetic problems and their exact-match score.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace phasor {

// $PHASOR_CACHE if set, else $XDG_CACHE_HOME/phasor, else ~/.cache/phasor.
std::string corpus_cache_dir();

// The contents of the file name_or_path if it exists (a folder: all of its
// files, in path order, each ended by a newline); otherwise a built-in corpus:
//   kjv    the King James Bible, as printed by `bible -l0 "gen1:1-rev22:21"` (Debian's bible-kjv)
//   code   Python standard library sources under /usr/lib/python3*, sorted by path, about 8 MB
//   arith  about 2 MB of problems such as "482+1937=2419", one per line, never a held-out one
//   passkey, copy, recall, flipflop   a task's training stream (models/data/tasks.h):
//          whole examples of example_length bytes, generated (not cached)
// Throws phasor::Error for an unknown name, an empty file, a missing tool, and
// a task without an example length it can fill (0: none given).
std::string load_text(const std::string& name_or_path, int64_t example_length = 0);
// Whether `name` is a built-in corpus's or task's name (kjv, code, arith, passkey, copy, recall, flipflop).
bool is_builtin_corpus(std::string_view name);

// What a run records of its data so that it can be found and checked again:
// a file's absolute path (a built-in corpus keeps its name), and the text's
// size and hash ("fnv1a64:" and 16 hex digits; FNV-1a, the same on every platform).
std::string data_location(const std::string& name_or_path);
std::string text_hash(std::string_view text);

// Reads a whole regular file of at most 1 GiB as bytes; phasor::Error names the
// file if it cannot be read, is not a regular file or is larger (the message
// ends "more than the limit of <limit_text>").
std::string read_text_file(const std::string& path);
std::string read_text_file(const std::string& path, std::string_view limit_text);
// write_file_atomic (nn/atomic_file.h): a new temporary with an unpredictable
// name in the same folder, synced, then renamed, so readers never see a
// half-written file (see docs/design.md, "Crash-safe files").
void write_text_atomically(const std::string& path, std::string_view text);

// A prompt such as "482+1937=" and its answer "2419".
using ArithProblem = std::pair<std::string, std::string>;

// The arith corpus draws with seed 1; held-out sets default to another seed.
inline constexpr uint64_t kArithHeldoutSeed = 2;

// `count` distinct problems from the held-out bucket (a hash of the prompt
// picks about 1 in 20 problems): the arith corpus never contains them, and
// they come in the same mix of operations and sizes as the corpus.
std::vector<ArithProblem> arith_heldout_problems(size_t count, uint64_t seed = kArithHeldoutSeed);

// Text a model continues `prompt` with, at most max_len characters (greedy decoding).
using Completer = std::function<std::string(const std::string& prompt, size_t max_len)>;

// Fraction of problems whose completion, cut at its first newline, equals the
// answer. max_len is the answer's length plus one (room for the newline): any
// completion that differs within those characters is wrong anyway.
double exact_match(const std::vector<ArithProblem>& problems, const Completer& complete);

}  // namespace phasor
