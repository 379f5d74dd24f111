#pragma once
// Exact-match scoring of the length-generalisation tasks (models/data/tasks.h):
// accuracy, its Wilson interval, accuracy per passkey depth and the answer's
// log-loss, from what a model predicts at each answer byte; and the JSON line
// `phasor eval --dump-examples` writes per example.
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "models/data/tasks.h"

namespace phasor {

// The score interval of Wilson (1927) for `successes` out of `trials` at
// z standard deviations (1.96: 95%): centre (p + z^2/2n) / (1 + z^2/n),
// half-width z sqrt(p(1-p)/n + z^2/4n^2) / (1 + z^2/n), p = successes / n.
struct WilsonInterval {
  double low = 0, high = 1;
};
WilsonInterval wilson_interval(size_t successes, size_t trials, double z = 1.96);

// What a model predicts for one example under teacher forcing: at each answer
// byte, the argmax of its next-byte distribution given the true bytes before
// it (`predicted`, as long as the answer), and the summed negative
// log-probability of the answer's bytes (`log_loss`, nats).
struct AnswerPrediction {
  std::string predicted;
  double log_loss = 0;
};

struct DepthScore {
  size_t correct = 0, examples = 0;
};

struct TaskScore {
  size_t examples = 0, correct = 0;
  double accuracy = 0;             // correct / examples: every answer byte right
  WilsonInterval interval;         // 95% (z = 1.96)
  double answer_log_loss = 0;      // mean nats per answer byte over all examples
  std::map<int, DepthScore> by_depth;  // passkey: per depth in percent (empty for the other tasks)
  std::vector<bool> correct_each;  // per example, in order
};

// phasor::Error unless there is one prediction of the answer's length per example.
TaskScore score_task(const std::vector<TaskExample>& examples, const std::vector<AnswerPrediction>& predictions);

// {"examples", "correct", "accuracy", "wilson_low", "wilson_high", "answer_log_loss"} and, for passkey,
// "depths": {"0": {"accuracy", "correct", "examples"}, ...}.
nlohmann::json to_json(const TaskScore& score);

// One line of --dump-examples (no newline): {"prompt": ..., "answer": ..., "depth": d (passkey only),
// "correct": true|false}; bytes above 127 and control bytes written as \u00XX, so every byte of
// the example survives any JSON reader (as the code point of the same number).
std::string example_json_line(const TaskExample& example, bool correct);

}  // namespace phasor
