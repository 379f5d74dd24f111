#include "app/evaluate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/functions.h"
#include "autograd/fused.h"
#include "autograd/grad_mode.h"
#include "models/data/corpus.h"
#include "models/data/dataset.h"
#include "models/data/tokenizer.h"

namespace phasor {

EvalResult evaluate(const CausalLM& model, const std::vector<int64_t>& tokens, int64_t seq_len, int64_t max_windows, int64_t batch) {
  PHASOR_CHECK(seq_len > 0, "eval: seq_len must be positive, got ", seq_len);
  NoGradGuard no_grad;
  const EvalWindows windows(tokens, seq_len, max_windows);
  double total = 0;  // summed nats over all predictions
  for (int64_t first = 0; first < windows.count(); first += batch) {
    const Batch b = windows.batch(first, batch);
    const Tensor inputs = from_vector(b.inputs, {b.batch, b.seq_len});
    const Tensor targets = from_vector(b.targets, {b.batch * b.seq_len});
    const Tensor logits = model.forward(inputs);
    total += cross_entropy(reshape(logits, {-1, model.config().vocab_size}), ops::to_device(targets, logits.device()), -100, false).item<double>();
  }
  EvalResult r;
  r.tokens = windows.predictions();
  r.windows = windows.count();
  r.seq_len = seq_len;
  r.loss = total / static_cast<double>(r.tokens);
  r.ppl = std::exp(r.loss);
  return r;
}

namespace {
// `seen`: whether each token is in the context so far (for the repetition penalty).
int64_t sample(const Tensor& logits_row, const SampleOptions& o, const std::vector<char>& seen, Generator& gen) {
  std::vector<double> l = logits_row.to_vector<double>();
  if (o.repetition_penalty != 1.0)
    for (size_t i = 0; i < l.size() && i < seen.size(); ++i)
      if (seen[i]) l[i] = l[i] > 0 ? l[i] / o.repetition_penalty : l[i] * o.repetition_penalty;
  if (o.temperature <= 0) return std::max_element(l.begin(), l.end()) - l.begin();
  if (o.top_k > 0 && o.top_k < static_cast<int64_t>(l.size())) {
    std::vector<double> sorted = l;
    std::nth_element(sorted.begin(), sorted.begin() + (o.top_k - 1), sorted.end(), std::greater<>());
    const double cut = sorted[o.top_k - 1];
    for (double& v : l)
      if (v < cut) v = -INFINITY;
  }
  const double mx = *std::max_element(l.begin(), l.end());
  double sum = 0;
  for (double& v : l) sum += (v = std::exp((v - mx) / o.temperature));
  if (o.top_p < 1.0) {  // nucleus: keep the likeliest tokens until their mass reaches top_p (at least one)
    std::vector<size_t> order(l.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return l[a] > l[b]; });
    double kept = 0;
    size_t n = 0;
    while (n < order.size() && (n == 0 || kept < o.top_p * sum)) kept += l[order[n++]];
    for (size_t i = n; i < order.size(); ++i) l[order[i]] = 0;
    sum = kept;
  }
  double u = gen.next_unit() * sum;
  for (size_t i = 0; i < l.size(); ++i)
    if ((u -= l[i]) <= 0) return static_cast<int64_t>(i);
  return static_cast<int64_t>(l.size() - 1);
}
}  // namespace

std::vector<int64_t> encode_prompt(const std::string& text, int64_t vocab) {
  std::vector<int64_t> ids = ByteTokenizer().encode(text);
  for (int64_t t : ids) PHASOR_CHECK(t < vocab, "generate: prompt byte ", t, " is outside the model's vocabulary of ", vocab);
  return ids;
}

std::vector<int64_t> generate(const CausalLM& model, const std::vector<int64_t>& prompt, const SampleOptions& options,
                              const std::function<void(int64_t)>& on_token) {
  PHASOR_CHECK(!prompt.empty(), "generate: the prompt is empty (give at least one token)");
  PHASOR_CHECK(options.tokens >= 0, "generate: --tokens must be non-negative, got ", options.tokens);
  PHASOR_CHECK(std::isfinite(options.temperature) && options.temperature >= 0,
               "generate: --temperature must be a finite number >= 0, got ", options.temperature);
  PHASOR_CHECK(options.top_p > 0 && options.top_p <= 1, "generate: --top-p must be in (0, 1], got ", options.top_p);
  PHASOR_CHECK(std::isfinite(options.repetition_penalty) && options.repetition_penalty > 0,
               "generate: --repetition-penalty must be a finite number > 0, got ", options.repetition_penalty);
  for (const auto& s : options.stop) PHASOR_CHECK(!s.empty(), "generate: a --stop string is empty; give at least one byte");
  // The KV cache grows with the tokens actually generated (KVCache::reserve), so
  // memory follows the output. A request past the positions a model supports
  // (models/config.h) is refused up front, before the sum below can overflow.
  PHASOR_CHECK(options.tokens <= kMaxPositions && static_cast<int64_t>(prompt.size()) <= kMaxPositions - options.tokens,
               "generate: a prompt of ", prompt.size(), " tokens plus --tokens ", options.tokens, " is more than the limit of ",
               kMaxPositions, " positions");
  NoGradGuard no_grad;
  const int64_t total = static_cast<int64_t>(prompt.size()) + options.tokens;
  KVCache cache = model.make_cache(1, total);  // refuses a request past a 'learned' model's max_seq_len
  Generator gen(options.seed);
  std::vector<int64_t> out;
  std::vector<char> seen(static_cast<size_t>(model.config().vocab_size), 0);
  const auto mark = [&](int64_t t) {
    if (t >= 0 && t < static_cast<int64_t>(seen.size())) seen[static_cast<size_t>(t)] = 1;
  };
  for (int64_t t : prompt) mark(t);
  const auto stopped = [&] {
    return std::ranges::any_of(options.stop, [&](const std::vector<int64_t>& s) {
      return out.size() >= s.size() && std::equal(s.begin(), s.end(), out.end() - static_cast<std::ptrdiff_t>(s.size()));
    });
  };
  Tensor logits = model.forward(from_vector(prompt, {1, static_cast<int64_t>(prompt.size())}), &cache);
  for (int64_t i = 0; i < options.tokens; ++i) {
    const int64_t next = sample(logits.select(0, 0).select(0, -1), options, seen, gen);
    out.push_back(next);
    mark(next);
    if (on_token) on_token(next);
    if (stopped()) break;
    if (i + 1 < options.tokens) logits = model.forward(from_vector(std::vector<int64_t>{next}, {1, 1}), &cache);
  }
  return out;
}

double arith_exact_match(const CausalLM& model, size_t problems) {
  const ByteTokenizer tokenizer;
  SampleOptions greedy;
  greedy.temperature = 0;
  return exact_match(arith_heldout_problems(problems), [&](const std::string& prompt, size_t max_len) {
    greedy.tokens = static_cast<int64_t>(max_len);
    return tokenizer.decode(generate(model, tokenizer.encode("\n" + prompt), greedy));
  });
}

std::vector<AnswerPrediction> predict_answers(const CausalLM& model, const std::vector<TaskExample>& examples, int64_t batch) {
  PHASOR_CHECK(!examples.empty(), "predict_answers: no examples");
  const size_t prompt_len = examples.front().prompt.size(), answer_len = examples.front().answer.size();
  for (const TaskExample& e : examples)
    PHASOR_CHECK(e.prompt.size() == prompt_len && e.answer.size() == answer_len && answer_len > 0,
                 "predict_answers: the examples must share one prompt and answer length");
  const auto inputs_len = static_cast<int64_t>(prompt_len + answer_len - 1);
  if (batch <= 0) batch = std::max<int64_t>(1, 8192 / inputs_len);
  const int64_t vocab = model.config().vocab_size;
  NoGradGuard no_grad;
  std::vector<AnswerPrediction> out;
  for (size_t first = 0; first < examples.size(); first += static_cast<size_t>(batch)) {
    const size_t rows = std::min(examples.size() - first, static_cast<size_t>(batch));
    std::vector<int64_t> ids;
    for (size_t r = 0; r < rows; ++r) {
      const TaskExample& e = examples[first + r];
      const std::vector<int64_t> bytes = encode_prompt(e.prompt + e.answer.substr(0, answer_len - 1), vocab);
      ids.insert(ids.end(), bytes.begin(), bytes.end());
    }
    const Tensor logits = model.forward(from_vector(ids, {static_cast<int64_t>(rows), inputs_len}));
    // Only the positions that predict an answer byte: prompt_len - 1 .. inputs_len - 1.
    const std::vector<float> logp =
        log_softmax(narrow(logits, 1, static_cast<int64_t>(prompt_len) - 1, static_cast<int64_t>(answer_len)), -1).to_vector<float>();
    for (size_t r = 0; r < rows; ++r) {
      const std::string& answer = examples[first + r].answer;
      AnswerPrediction p;
      for (size_t j = 0; j < answer_len; ++j) {
        const float* row = logp.data() + (r * answer_len + j) * static_cast<size_t>(vocab);
        p.predicted.push_back(static_cast<char>(std::max_element(row, row + vocab) - row));
        const auto target = static_cast<unsigned char>(answer[j]);
        PHASOR_CHECK(target < vocab, "predict_answers: answer byte ", int(target), " is outside the model's vocabulary of ", vocab);
        p.log_loss -= row[target];
      }
      out.push_back(std::move(p));
    }
  }
  return out;
}

TaskEvaluation evaluate_task(const CausalLM& model, const TaskEvalOptions& o) {
  check_task_length(o.task, o.length, "--seq-len");
  PHASOR_CHECK(o.examples >= 1 && o.examples <= 1'000'000, "--examples must be from 1 to 1000000, got ", o.examples);
  check_positions_fit(model.config(), o.length - 1, "--seq-len");  // the example less its last byte
  std::vector<int> depths = o.depths;
  if (depths.empty() && o.task == Task::Passkey) depths = kPasskeyDepths;
  TaskEvaluation e;
  e.examples = task_examples(o.task, o.length, static_cast<size_t>(o.examples), o.seed, depths);
  e.score = score_task(e.examples, predict_answers(model, e.examples, o.batch));
  return e;
}

}  // namespace phasor
