#pragma once
// The built-in length-generalisation tasks (passkey, copy, recall, flipflop):
// byte-level examples of a requested length L, generated from a seed with no
// files. Every example is exactly L bytes, starts with "\n" (and holds no other
// newline) and ends with its one scored answer. The formats and the order of
// the random draws are written out in docs/spec.md ("Length-generalisation
// tasks"), so that another program can regenerate the same examples.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace phasor {

enum class Task { Passkey, Copy, Recall, FlipFlop };

// Whether `name` is a task's name (passkey, copy, recall, flipflop).
bool is_task(std::string_view name);
// phasor::Error listing the names for an unknown one.
Task parse_task(std::string_view name);
std::string_view task_name(Task task);
// "passkey, copy, recall, flipflop": for messages and help texts.
std::string task_names();

// The shortest and longest example a task can fill; check_task_length throws
// phasor::Error "<what> L: a passkey example needs at least 103 bytes ...".
int64_t task_min_length(Task task);
int64_t task_max_length(Task task);
void check_task_length(Task task, int64_t length, std::string_view what);

// One example: prompt + answer is exactly L bytes; depth is the passkey's
// depth in percent (0..100), -1 for the other tasks.
struct TaskExample {
  std::string prompt, answer;
  int depth = -1;
};

// Training streams use this seed; evaluation defaults to the other, so that
// the examples a model is scored on are never the ones it trained on.
inline constexpr uint64_t kTaskTrainSeed = 1;
inline constexpr uint64_t kTaskEvalSeed = 2;
// The depths evaluation spreads passkey examples over by default.
inline const std::vector<int> kPasskeyDepths = {0, 25, 50, 75, 100};

// Examples 0 .. count-1 of the task's stream for `seed`: one Philox generator
// (seed, offset 0) draws them in order. For passkey, `depths` (each 0..100),
// when given, replaces example i's drawn depth by depths[i mod depths.size()];
// the other tasks refuse depths.
std::vector<TaskExample> task_examples(Task task, int64_t length, size_t count, uint64_t seed,
                                       const std::vector<int>& depths = {});

// The text a model trains on for a task: whole examples of `length` from
// kTaskTrainSeed, concatenated, max(ceil(2,000,000 / length), 40) of them
// (about 2 MB; at least 40 examples so that the held-out 5% holds two).
std::string task_training_text(Task task, int64_t length);

}  // namespace phasor
