#include "models/data/tasks.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <numeric>

#include "models/data/dataset.h"
#include "tensor/error.h"
#include "tensor/random.h"

namespace phasor {

namespace {

struct TaskInfo {
  Task task;
  const char* name;
};
constexpr std::array<TaskInfo, 4> kTasks = {{{Task::Passkey, "passkey"}, {Task::Copy, "copy"}, {Task::Recall, "recall"}, {Task::FlipFlop, "flipflop"}}};

// Lengths beyond the positions any model supports (models/config.h's kMaxPositions).
constexpr int64_t kMaxTaskLength = int64_t{1} << 20;

// ---------------------------------------------------------------- passkey

constexpr std::string_view kPasskeyQuestion = "What is the pass key? The pass key is ";
constexpr size_t kPasskeyDigits = 5;
// "The pass key is NNNNN. Remember it. NNNNN is the pass key. "
std::string passkey_line(const std::string& key) { return "The pass key is " + key + ". Remember it. " + key + " is the pass key. "; }
constexpr size_t kPasskeyLineBytes = 16 + kPasskeyDigits + 15 + kPasskeyDigits + 18;
// The filler's sentences, drawn one at a time (each ends with a space).
constexpr std::array<std::string_view, 8> kFillerSentences = {
    "The grass is green. ",      "The sky is blue. ",         "The sun is yellow. ",   "Here we go. ",
    "There and back again. ",    "The river runs to the sea. ", "A bird sings in the tree. ", "The road goes ever on. "};

// Bytes of filler in an example of `length`: all of it but the newline, the key line, the question and the answer.
int64_t passkey_filler_bytes(int64_t length) {
  return length - 1 - static_cast<int64_t>(kPasskeyLineBytes + kPasskeyQuestion.size() + kPasskeyDigits);
}

TaskExample passkey_example(Generator& gen, int64_t length, int forced_depth) {
  char key[8];
  std::snprintf(key, sizeof key, "%05u", static_cast<unsigned>(uniform_below(gen, 100000)));
  const int drawn_depth = static_cast<int>(uniform_below(gen, 101));
  const int depth = forced_depth >= 0 ? forced_depth : drawn_depth;
  const auto filler_bytes = static_cast<size_t>(passkey_filler_bytes(length));
  std::string filler;
  while (filler.size() < filler_bytes) filler += kFillerSentences[uniform_below(gen, kFillerSentences.size())];
  filler.resize(filler_bytes);
  const size_t before = filler_bytes * static_cast<size_t>(depth) / 100;  // floor(d x F / 100) filler bytes precede the key line
  return {"\n" + filler.substr(0, before) + passkey_line(key) + filler.substr(before) + std::string(kPasskeyQuestion), key, depth};
}

// ---------------------------------------------------------------- copy

constexpr int64_t kCopyAlphabet = 16;  // 'a' .. 'p'

// "\n" + S + separator + S: |S| = floor((L - 2) / 2), the separator "|" or "||" fills the rest.
TaskExample copy_example(Generator& gen, int64_t length) {
  const auto n = static_cast<size_t>((length - 2) / 2);
  std::string s(n, ' ');
  for (char& ch : s) ch = static_cast<char>('a' + uniform_below(gen, kCopyAlphabet));
  const std::string separator(static_cast<size_t>(length) - 1 - 2 * n, '|');
  return {"\n" + s + separator, s};
}

// ---------------------------------------------------------------- recall

constexpr int64_t kRecallKeys = 26 * 26 * 26;  // three lowercase letters
constexpr int64_t kRecallUnit = 7;             // "abc=42 " and "abc:42 "

// N = floor(L / 7) units, Q = max(1, floor(N / 4)) queries, P = N - Q pairs.
struct RecallShape {
  int64_t units, queries, pairs;
};
RecallShape recall_shape(int64_t length) {
  const int64_t units = length / kRecallUnit;
  const int64_t queries = std::max<int64_t>(1, units / 4);
  return {units, queries, units - queries};
}

std::string recall_key(uint64_t k) { return {static_cast<char>('a' + k / 676), static_cast<char>('a' + k / 26 % 26), static_cast<char>('a' + k % 26)}; }
std::string two_digits(uint64_t v) { return {static_cast<char>('0' + v / 10), static_cast<char>('0' + v % 10)}; }

// "\n" + (L mod 7) spaces + P pairs "abc=42 " + Q - 1 queries "abc:42 " + the last query "abc:" whose answer is "42".
TaskExample recall_example(Generator& gen, int64_t length) {
  const RecallShape shape = recall_shape(length);
  std::vector<std::string> keys, values;
  std::vector<bool> used(kRecallKeys, false);
  while (static_cast<int64_t>(keys.size()) < shape.pairs) {
    const uint64_t k = uniform_below(gen, kRecallKeys);
    if (used[k]) continue;  // keys are unique: a repeat is drawn again
    used[k] = true;
    keys.push_back(recall_key(k));
    values.push_back(two_digits(uniform_below(gen, 100)));
  }
  std::string prompt = "\n" + std::string(static_cast<size_t>(length % kRecallUnit), ' ');
  for (size_t i = 0; i < keys.size(); ++i) prompt += keys[i] + "=" + values[i] + " ";
  // Queries of distinct pairs: a partial Fisher-Yates shuffle of the pairs' indices.
  std::vector<size_t> order(keys.size());
  std::iota(order.begin(), order.end(), size_t{0});
  for (int64_t q = 0; q < shape.queries; ++q) {
    const auto j = static_cast<size_t>(q) + uniform_below(gen, static_cast<uint64_t>(shape.pairs - q));
    std::swap(order[static_cast<size_t>(q)], order[j]);
    const size_t pair = order[static_cast<size_t>(q)];
    if (q + 1 < shape.queries) prompt += keys[pair] + ":" + values[pair] + " ";
    else return {prompt + keys[pair] + ":", values[pair]};
  }
  fail("recall: no query");  // unreachable: shape.queries >= 1
}

// ---------------------------------------------------------------- flipflop

// "\n" + (L mod 3) spaces + n = floor(L / 3) instructions of 2 bytes, each but
// the last followed by a space: the first a write, the last "r" whose answer
// is the last written bit; a read in between shows its bit ("r1").
TaskExample flipflop_example(Generator& gen, int64_t length) {
  const int64_t n = length / 3;
  const bool dense = uniform_below(gen, 2) == 1;
  char bit = static_cast<char>('0' + uniform_below(gen, 2));
  std::string prompt = "\n" + std::string(static_cast<size_t>(length % 3), ' ') + "w" + bit + " ";
  for (int64_t i = 1; i + 1 < n; ++i) {
    const uint64_t x = uniform_below(gen, 10);
    // sparse: w 10%, r 10%, i 80%; dense: w 40%, r 40%, i 20%.
    const char op = dense ? (x < 4 ? 'w' : x < 8 ? 'r' : 'i') : (x == 0 ? 'w' : x == 1 ? 'r' : 'i');
    if (op == 'w') bit = static_cast<char>('0' + uniform_below(gen, 2));
    const char shown = op == 'i' ? static_cast<char>('0' + uniform_below(gen, 2)) : bit;
    prompt += std::string{op, shown, ' '};
  }
  return {prompt + "r", std::string(1, bit)};
}

TaskExample one_example(Task task, Generator& gen, int64_t length, int forced_depth) {
  switch (task) {
    case Task::Passkey: return passkey_example(gen, length, forced_depth);
    case Task::Copy: return copy_example(gen, length);
    case Task::Recall: return recall_example(gen, length);
    case Task::FlipFlop: return flipflop_example(gen, length);
  }
  fail("unknown task");
}

}  // namespace

bool is_task(std::string_view name) {
  return std::any_of(kTasks.begin(), kTasks.end(), [&](const TaskInfo& t) { return name == t.name; });
}

Task parse_task(std::string_view name) {
  for (const TaskInfo& t : kTasks)
    if (name == t.name) return t.task;
  fail("unknown task '", name, "' (", task_names(), ")");
}

std::string_view task_name(Task task) {
  for (const TaskInfo& t : kTasks)
    if (t.task == task) return t.name;
  fail("unknown task");
}

std::string task_names() {
  std::string names;
  for (const TaskInfo& t : kTasks) names += (names.empty() ? "" : ", ") + std::string(t.name);
  return names;
}

int64_t task_min_length(Task task) {
  switch (task) {
    case Task::Passkey: return 1 + static_cast<int64_t>(kPasskeyLineBytes + kPasskeyQuestion.size() + kPasskeyDigits);  // no filler
    case Task::Copy: return 4;        // one byte to copy
    case Task::Recall: return 2 * kRecallUnit;  // one pair, one query
    case Task::FlipFlop: return 6;    // a write and the read
  }
  fail("unknown task");
}

int64_t task_max_length(Task task) {
  if (task != Task::Recall) return kMaxTaskLength;
  // The longest whose pairs still have distinct keys (P <= 26^3).
  int64_t length = kMaxTaskLength;
  while (recall_shape(length).pairs > kRecallKeys) --length;
  return length;
}

void check_task_length(Task task, int64_t length, std::string_view what) {
  PHASOR_CHECK(length >= task_min_length(task) && length <= task_max_length(task), what, " ", length, ": a ", task_name(task),
               " example needs from ", task_min_length(task), " to ", task_max_length(task), " bytes");
}

std::vector<TaskExample> task_examples(Task task, int64_t length, size_t count, uint64_t seed, const std::vector<int>& depths) {
  check_task_length(task, length, "task length");
  PHASOR_CHECK(depths.empty() || task == Task::Passkey, "depths are passkey's; the ", task_name(task), " task has none");
  for (int d : depths) PHASOR_CHECK(d >= 0 && d <= 100, "a passkey depth is a percentage from 0 to 100, got ", d);
  Generator gen(seed);
  std::vector<TaskExample> examples;
  examples.reserve(count);
  for (size_t i = 0; i < count; ++i)
    examples.push_back(one_example(task, gen, length, depths.empty() ? -1 : depths[i % depths.size()]));
  return examples;
}

std::string task_training_text(Task task, int64_t length) {
  check_task_length(task, length, "--seq-len");
  const auto count = static_cast<size_t>(std::max<int64_t>((2'000'000 + length - 1) / length, 40));
  std::string text;
  text.reserve(count * static_cast<size_t>(length));
  for (const TaskExample& e : task_examples(task, length, count, kTaskTrainSeed)) text += e.prompt + e.answer;
  return text;
}

}  // namespace phasor
