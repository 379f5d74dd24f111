#pragma once
// Loss and perplexity over the spec's evaluation windows, and sampling.
#include <functional>
#include <string>
#include <vector>

#include "models/data/task_score.h"
#include "models/data/tasks.h"
#include "models/transformer.h"

namespace phasor {

struct EvalResult {
  double loss = 0;  // mean nats per token over W * L predictions
  double ppl = 0;
  int64_t tokens = 0;  // predictions scored (W * L)
  int64_t windows = 0;
  int64_t seq_len = 0;
};

// W = floor((T - 1) / L) windows (at most max_windows when > 0), each from position 0.
EvalResult evaluate(const CausalLM& model, const std::vector<int64_t>& tokens, int64_t seq_len, int64_t max_windows = 0,
                    int64_t batch = 8);

struct SampleOptions {
  int64_t tokens = 200;
  double temperature = 0.8;  // 0 = greedy
  int64_t top_k = 0;         // 0 = no cut
  double top_p = 1.0;        // nucleus: the likeliest tokens whose probabilities sum to top_p (1 = no cut)
  uint64_t seed = 0;
  // CTRL's penalty (Keskar et al. 2019) on every token already in the prompt
  // or the output: its logit divided by this when positive, multiplied when
  // negative, before the temperature (1 = none; > 1 discourages repeats).
  double repetition_penalty = 1.0;
  // Generation ends once the output ends with one of these (which stays in the returned tokens).
  std::vector<std::vector<int64_t>> stop;
};
// A prompt's tokens (one per byte); phasor::Error for a byte outside the vocabulary.
std::vector<int64_t> encode_prompt(const std::string& text, int64_t vocab);
// Continues `prompt` with the KV cache; `on_token` sees each new token as it is
// drawn. Ends after options.tokens tokens, or at a stop sequence.
std::vector<int64_t> generate(const CausalLM& model, const std::vector<int64_t>& prompt, const SampleOptions& options,
                              const std::function<void(int64_t)>& on_token = nullptr);

// Exact-match accuracy on `problems` held-out arithmetic problems (see
// arith_heldout_problems), decoding greedily after "\n" + prompt: in the arith
// corpus every problem starts a line.
double arith_exact_match(const CausalLM& model, size_t problems);

// Teacher-forced predictions of each example's answer (AnswerPrediction): the
// example less its last byte is one sequence from position 0, and the argmax
// at each answer byte's preceding position is the predicted byte (the lowest
// byte on a tie). All examples must be of one length; `batch` at a time
// (0: as many as make about 8192 positions).
std::vector<AnswerPrediction> predict_answers(const CausalLM& model, const std::vector<TaskExample>& examples, int64_t batch = 0);

struct TaskEvalOptions {
  Task task = Task::Passkey;
  int64_t length = 128;
  int64_t examples = 100;
  uint64_t seed = kTaskEvalSeed;
  std::vector<int> depths;  // passkey: spread evenly over these (empty: kPasskeyDepths); refused for the other tasks
  int64_t batch = 0;
};
struct TaskEvaluation {
  std::vector<TaskExample> examples;
  TaskScore score;
};
// Exact-match accuracy on `examples` examples of the task's evaluation stream:
// phasor::Error for a length the task cannot fill or the model cannot reach.
TaskEvaluation evaluate_task(const CausalLM& model, const TaskEvalOptions& options);

}  // namespace phasor
