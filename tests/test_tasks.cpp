// The length-generalisation tasks (models/data/tasks.h), their exact-match
// scoring (models/data/task_score.h) and a model's teacher-forced predictions
// (app/evaluate.h).
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "app/evaluate.h"
#include "models/data/corpus.h"
#include "models/data/dataset.h"
#include "models/data/tokenizer.h"
#include "models/data/task_score.h"
#include "models/data/tasks.h"
#include "tensor/error.h"
#include "tests/helpers.h"

using namespace phasor;
using namespace phasor::test;

namespace {

const std::vector<Task> kAllTasks = {Task::Passkey, Task::Copy, Task::Recall, Task::FlipFlop};

std::string whole(const TaskExample& e) { return e.prompt + e.answer; }

// What a model that always answers `answer_of(example)` predicts.
template <class AnswerOf>
std::vector<AnswerPrediction> predictions(const std::vector<TaskExample>& examples, AnswerOf answer_of) {
  std::vector<AnswerPrediction> out;
  for (const TaskExample& e : examples) out.push_back({answer_of(e), 1.0});
  return out;
}

}  // namespace

TEST_CASE("every task's examples are exactly L bytes, start with their only newline and end with the answer") {
  for (Task task : kAllTasks) {
    for (int64_t length = task_min_length(task); length < task_min_length(task) + 40; ++length) {
      for (const TaskExample& e : task_examples(task, length, 6, 7)) {
        CAPTURE(task_name(task));
        CAPTURE(length);
        REQUIRE(static_cast<int64_t>(whole(e).size()) == length);
        CHECK(whole(e).front() == '\n');
        CHECK(whole(e).find('\n', 1) == std::string::npos);
        CHECK(!e.answer.empty());
        CHECK((e.depth >= 0) == (task == Task::Passkey));
      }
    }
    for (int64_t length : {128, 256, 1000, 2048})
      for (const TaskExample& e : task_examples(task, length, 3, 1)) CHECK(static_cast<int64_t>(whole(e).size()) == length);
  }
}

TEST_CASE("the generators are deterministic per seed, and seeds differ") {
  for (Task task : kAllTasks) {
    CAPTURE(task_name(task));
    const auto a = task_examples(task, 200, 20, 5), b = task_examples(task, 200, 20, 5), c = task_examples(task, 200, 20, 6);
    std::string text_a, text_b, text_c;
    for (size_t i = 0; i < a.size(); ++i) text_a += whole(a[i]), text_b += whole(b[i]), text_c += whole(c[i]);
    CHECK(text_a == text_b);
    CHECK(text_a != text_c);
    // The first examples of a longer request are the shorter request's.
    CHECK(whole(task_examples(task, 200, 5, 5)[3]) == whole(a[3]));
  }
}

TEST_CASE("the answers are what the formats say") {
  SUBCASE("passkey: the key line holds the answer, after floor(d x F / 100) filler bytes") {
    const int64_t length = 300;
    const size_t filler = static_cast<size_t>(length - task_min_length(Task::Passkey));
    const auto examples = task_examples(Task::Passkey, length, 10, 3, {0, 50, 100});
    for (size_t i = 0; i < examples.size(); ++i) {
      const TaskExample& e = examples[i];
      CHECK(e.depth == std::vector<int>{0, 50, 100}[i % 3]);
      const std::string line = "The pass key is " + e.answer + ". Remember it. " + e.answer + " is the pass key. ";
      CHECK(e.prompt.find(line) == 1 + filler * static_cast<size_t>(e.depth) / 100);
      CHECK(e.prompt.ends_with("What is the pass key? The pass key is "));
      CHECK(e.answer.size() == 5);
      CHECK(e.answer.find_first_not_of("0123456789") == std::string::npos);
    }
    // Without depths, each example's depth is drawn, and the draws are the same either way.
    const auto drawn = task_examples(Task::Passkey, length, 10, 3);
    CHECK(drawn[4].answer == examples[4].answer);
  }
  SUBCASE("copy: the answer repeats the string before the separator") {
    for (const TaskExample& e : task_examples(Task::Copy, 51, 5, 2)) {
      CHECK(e.answer.size() == 24);
      CHECK(e.prompt == "\n" + e.answer + "||");
      CHECK(e.answer.find_first_not_of("abcdefghijklmnop") == std::string::npos);
    }
    CHECK(task_examples(Task::Copy, 52, 1, 2)[0].prompt.ends_with("|"));
  }
  SUBCASE("recall: the last query's key was paired with the answer, once") {
    for (const TaskExample& e : task_examples(Task::Recall, 150, 10, 4)) {
      const std::string key = e.prompt.substr(e.prompt.size() - 4, 3);
      CHECK(e.prompt.back() == ':');
      CHECK(e.prompt.find(key + "=" + e.answer + " ") != std::string::npos);
      CHECK(e.prompt.find(key + "=") == e.prompt.rfind(key + "="));
      CHECK(e.prompt.find(key + ":") == e.prompt.size() - 4);  // queries are of distinct pairs
    }
  }
  SUBCASE("flipflop: the answer is the last written bit") {
    for (const TaskExample& e : task_examples(Task::FlipFlop, 120, 20, 9)) {
      const size_t last_write = e.prompt.rfind('w');
      REQUIRE(last_write != std::string::npos);
      CHECK(e.answer == e.prompt.substr(last_write + 1, 1));
      CHECK(e.prompt.ends_with(" r"));
    }
  }
}

TEST_CASE("lengths an example cannot fill are refused with one line") {
  CHECK(task_min_length(Task::Passkey) == 103);
  CHECK_THROWS_WITH_AS(task_examples(Task::Passkey, 102, 1, 1), "task length 102: a passkey example needs from 103 to 1048576 bytes", Error);
  CHECK_THROWS_WITH_AS(task_examples(Task::Copy, 3, 1, 1), doctest::Contains("a copy example needs from 4"), Error);
  CHECK_THROWS_WITH_AS(task_examples(Task::Recall, 13, 1, 1), doctest::Contains("a recall example needs from 14"), Error);
  CHECK_THROWS_WITH_AS(task_examples(Task::Recall, task_max_length(Task::Recall) + 1, 1, 1), doctest::Contains("a recall example needs"), Error);
  CHECK_THROWS_WITH_AS(task_examples(Task::FlipFlop, 5, 1, 1), doctest::Contains("a flipflop example needs from 6"), Error);
  CHECK_THROWS_WITH_AS(task_examples(Task::Copy, 40, 1, 1, {50}), "depths are passkey's; the copy task has none", Error);
  CHECK_THROWS_WITH_AS(task_examples(Task::Passkey, 200, 1, 1, {101}), doctest::Contains("from 0 to 100, got 101"), Error);
  CHECK_THROWS_WITH_AS(parse_task("needle"), "unknown task 'needle' (passkey, copy, recall, flipflop)", Error);
  CHECK_THROWS_WITH_AS(load_text("passkey"), doctest::Contains("is a task whose examples are as long as the window"), Error);
  CHECK_THROWS_WITH_AS(load_text("copy", 2), "--seq-len 2: a copy example needs from 4 to 1048576 bytes", Error);
}

TEST_CASE("a task's training text is its seed-1 examples, whole, about 2 MB") {
  const std::string text = load_text("flipflop", 500);
  CHECK(text.size() == 4000 * 500);
  const auto first = task_examples(Task::FlipFlop, 500, 2, kTaskTrainSeed);
  CHECK(text.substr(0, 1000) == whole(first[0]) + whole(first[1]));
  CHECK(load_text("flipflop", 500) == text);
  CHECK(load_text("passkey", 100'000).size() == 40 * 100'000);  // at least 40 examples
  CHECK(is_builtin_corpus("recall"));
}

TEST_CASE("an aligned training window holds one whole example: its inputs the example, its targets the example shifted and the next one's newline") {
  for (Task task : kAllTasks) {
    const int64_t length = std::max<int64_t>(task_min_length(task), 17);  // odd: copy's and recall's padding show
    std::string stream;
    const std::vector<TaskExample> examples = task_examples(task, length, 9, kTaskTrainSeed);
    for (const TaskExample& e : examples) stream += whole(e);
    stream += whole(examples[0]).substr(0, length / 2);  // a cut example at the end, as the held-out split leaves one
    const std::vector<int64_t> tokens = ByteTokenizer().encode(stream);
    BatchSampler sampler(tokens, 32, length, 5, 0, 1, WindowStarts::ExampleBoundaries);
    std::set<std::string> drawn;
    for (int step = 0; step < 4; ++step) {
      const Batch b = sampler.next();
      for (int64_t row = 0; row < b.batch; ++row) {
        const auto at = [&b, row, length](const std::vector<int64_t>& ids, int64_t from) {
          std::string out;
          for (int64_t j = from; j < length; ++j) out += static_cast<char>(ids[static_cast<size_t>(row * length + j)]);
          return out;
        };
        const std::string inputs = at(b.inputs, 0), targets = at(b.targets, 0);
        CAPTURE(task_name(task));
        CAPTURE(inputs);
        const auto example = std::find_if(examples.begin(), examples.end(), [&inputs](const TaskExample& e) { return whole(e) == inputs; });
        REQUIRE(example != examples.end());
        CHECK(targets == inputs.substr(1) + "\n");  // the next example starts with its newline
        drawn.insert(inputs);
      }
    }
    // Every whole example can be drawn (the last, whose target's newline opens the cut one, too); the cut one never.
    CHECK(drawn.size() == examples.size());
  }
}

TEST_CASE("a model that outputs the answer scores 1, one that outputs anything else 0") {
  for (Task task : kAllTasks) {
    CAPTURE(task_name(task));
    const auto examples = task_examples(task, 150, 25, kTaskEvalSeed, task == Task::Passkey ? kPasskeyDepths : std::vector<int>{});
    const TaskScore right = score_task(examples, predictions(examples, [](const TaskExample& e) { return e.answer; }));
    CHECK(right.accuracy == 1.0);
    CHECK(right.correct == 25);
    CHECK(right.answer_log_loss == doctest::Approx(25.0 / (25.0 * static_cast<double>(examples[0].answer.size()))));
    // Wrong in one byte: the last (or the only) one.
    const TaskScore wrong = score_task(examples, predictions(examples, [](const TaskExample& e) {
                                         std::string a = e.answer;
                                         a.back() = a.back() == 'x' ? 'y' : 'x';
                                         return a;
                                       }));
    CHECK(wrong.accuracy == 0.0);
    CHECK(wrong.interval.low == 0.0);
    if (task == Task::Passkey) {
      REQUIRE(right.by_depth.size() == 5);
      for (const auto& [depth, d] : right.by_depth) CHECK(d.correct == d.examples);
      CHECK(right.by_depth.at(0).examples == 5);
    } else {
      CHECK(right.by_depth.empty());
    }
  }
  const auto examples = task_examples(Task::Copy, 20, 2, 1);
  CHECK_THROWS_WITH_AS(score_task(examples, predictions(examples, [](const TaskExample&) { return std::string("ab"); })),
                       doctest::Contains("predicts 2 bytes for an answer of 9"), Error);
}

TEST_CASE("the Wilson interval matches published values") {
  // Newcombe (1998), Statistics in Medicine 17:857, table I: 81/263 and 0/10.
  const WilsonInterval a = wilson_interval(81, 263);
  CHECK(a.low == doctest::Approx(0.2553).epsilon(1e-4));
  CHECK(a.high == doctest::Approx(0.3662).epsilon(1e-4));
  const WilsonInterval b = wilson_interval(0, 10);
  CHECK(b.low == 0.0);
  CHECK(b.high == doctest::Approx(0.2775).epsilon(1e-4));
  const WilsonInterval c = wilson_interval(5, 10);
  CHECK(c.low == doctest::Approx(0.23659).epsilon(1e-4));
  CHECK(c.high == doctest::Approx(0.76341).epsilon(1e-4));
  const WilsonInterval d = wilson_interval(10, 10);
  CHECK(d.low == doctest::Approx(0.72246).epsilon(1e-4));
  CHECK(d.high == 1.0);
  CHECK_THROWS_AS(wilson_interval(0, 0), Error);
}

TEST_CASE("dumped examples escape bytes above 127 and say whether each was right") {
  CHECK(example_json_line({"\nab\"c\\", "12", 50}, true) == R"({"prompt": "\nab\"c\\", "answer": "12", "depth": 50, "correct": true})");
  CHECK(example_json_line({std::string("x\xe9\x01"), "y", -1}, false) == R"({"prompt": "x\u00e9\u0001", "answer": "y", "correct": false})");
}

TEST_CASE("a model's teacher-forced argmax is what greedy decoding continues with") {
  const CausalLM model(model_config(Position::Rope, {.d_model = 16, .n_layers = 1, .n_heads = 2, .d_ff = 32, .max_seq_len = 256}), 3);
  const auto examples = task_examples(Task::Recall, 60, 5, kTaskEvalSeed);
  const std::vector<AnswerPrediction> tf = predict_answers(model, examples, 2);
  REQUIRE(tf.size() == 5);
  SampleOptions greedy;
  greedy.temperature = 0;
  greedy.tokens = 1;
  for (size_t i = 0; i < examples.size(); ++i) {
    CHECK(tf[i].predicted.size() == 2);
    CHECK(tf[i].log_loss > 0);
    const auto next = generate(model, encode_prompt(examples[i].prompt, 256), greedy);
    CHECK(static_cast<char>(next.at(0)) == tf[i].predicted[0]);
  }
  // One batch or several: the same predictions.
  const std::vector<AnswerPrediction> one_batch = predict_answers(model, examples);
  for (size_t i = 0; i < examples.size(); ++i) {
    CHECK(one_batch[i].predicted == tf[i].predicted);
    CHECK(one_batch[i].log_loss == doctest::Approx(tf[i].log_loss).epsilon(1e-5));
  }
  TaskEvalOptions o;
  o.task = Task::Passkey;
  o.length = 120;
  o.examples = 10;
  const TaskEvaluation e = evaluate_task(model, o);
  CHECK(e.score.examples == 10);
  CHECK(e.score.by_depth.size() == 5);
  CHECK(e.score.accuracy == evaluate_task(model, o).score.accuracy);
  o.length = 102;
  CHECK_THROWS_WITH_AS(evaluate_task(model, o), "--seq-len 102: a passkey example needs from 103 to 1048576 bytes", Error);
  o.length = 120;
  o.depths = {10};
  CHECK(evaluate_task(model, o).examples[3].depth == 10);
}
