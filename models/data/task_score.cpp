#include "models/data/task_score.h"

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "tensor/error.h"

namespace phasor {

WilsonInterval wilson_interval(size_t successes, size_t trials, double z) {
  PHASOR_CHECK(trials > 0 && successes <= trials, "wilson_interval: ", successes, " successes out of ", trials, " trials");
  const auto n = static_cast<double>(trials);
  const double p = static_cast<double>(successes) / n, z2 = z * z;
  const double centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const double half = z * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n);
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

TaskScore score_task(const std::vector<TaskExample>& examples, const std::vector<AnswerPrediction>& predictions) {
  PHASOR_CHECK(!examples.empty(), "score_task: no examples to score");
  PHASOR_CHECK(predictions.size() == examples.size(), "score_task: ", predictions.size(), " predictions for ", examples.size(), " examples");
  TaskScore s;
  s.examples = examples.size();
  double nats = 0;
  size_t answer_bytes = 0;
  for (size_t i = 0; i < examples.size(); ++i) {
    const TaskExample& e = examples[i];
    PHASOR_CHECK(predictions[i].predicted.size() == e.answer.size(), "score_task: example ", i, " predicts ",
                 predictions[i].predicted.size(), " bytes for an answer of ", e.answer.size());
    const bool right = predictions[i].predicted == e.answer;
    s.correct += right;
    s.correct_each.push_back(right);
    nats += predictions[i].log_loss;
    answer_bytes += e.answer.size();
    if (e.depth >= 0) {
      DepthScore& d = s.by_depth[e.depth];
      d.correct += right;
      ++d.examples;
    }
  }
  s.accuracy = static_cast<double>(s.correct) / static_cast<double>(s.examples);
  s.interval = wilson_interval(s.correct, s.examples);
  s.answer_log_loss = answer_bytes > 0 ? nats / static_cast<double>(answer_bytes) : 0;
  return s;
}

nlohmann::json to_json(const TaskScore& s) {
  nlohmann::json j = {{"examples", s.examples},         {"correct", s.correct},
                      {"accuracy", s.accuracy},         {"wilson_low", s.interval.low},
                      {"wilson_high", s.interval.high}, {"answer_log_loss", s.answer_log_loss}};
  if (!s.by_depth.empty()) {
    nlohmann::json depths = nlohmann::json::object();
    for (const auto& [depth, d] : s.by_depth)
      depths[std::to_string(depth)] = {{"accuracy", static_cast<double>(d.correct) / static_cast<double>(d.examples)},
                                       {"correct", d.correct},
                                       {"examples", d.examples}};
    j["depths"] = depths;
  }
  return j;
}

namespace {
// A JSON string of raw bytes: " and \ escaped, bytes below 32, 127 and above as \u00XX.
std::string json_bytes(const std::string& bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c >= 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}
}  // namespace

std::string example_json_line(const TaskExample& e, bool correct) {
  std::string line = "{\"prompt\": " + json_bytes(e.prompt) + ", \"answer\": " + json_bytes(e.answer);
  if (e.depth >= 0) line += ", \"depth\": " + std::to_string(e.depth);
  return line + ", \"correct\": " + (correct ? "true" : "false") + "}";
}

}  // namespace phasor
