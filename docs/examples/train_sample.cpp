// Train a small ComplexFormer on the built-in arithmetic corpus and sample from
// it (what `phasor train` and `phasor generate` do), in under 50 lines. ctest
// runs it (example_train_sample) into build/examples/run; alone:
//   build/examples/train_sample /tmp/run
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>

#include "app/evaluate.h"
#include "app/train.h"
#include "models/model_io.h"

int main(int argc, char** argv) {
  using namespace phasor;
  TrainOptions o;  // the model defaults to complexformer
  o.run_dir = argc > 1 ? argv[1] : "runs/example";
  o.data = "arith";  // problems such as "482+1937=2419", one per line
  o.model.d_model = 32, o.model.n_layers = 2, o.model.n_heads = 2, o.model.d_ff = 64;
  o.seq_len = 32, o.batch = 8, o.steps = 400, o.warmup = 10, o.lr = 1e-2;
  o.eval_every = 0, o.eval_windows = 8, o.log_every = 100;
  std::filesystem::remove_all(o.run_dir);  // train() refuses a folder that holds a run
  const TrainSummary s = train(o);
  std::printf("trained %ld steps: loss %.3f, validation loss %.3f (a uniform guess: 5.545)\n",
              static_cast<long>(s.steps_done), s.final_loss, s.final_val_loss);

  const auto model = load_model(latest_checkpoint(o.run_dir) + "/model.safetensors");
  SampleOptions greedy;
  greedy.tokens = 24, greedy.temperature = 0;
  const std::string prompt = "\n12+";
  const std::vector<int64_t> out = generate(*model, encode_prompt(prompt, 256), greedy);
  const std::string text = prompt + std::string(out.begin(), out.end());
  std::printf("sample: %s\n", text.c_str());
  // The corpus is lines like "474+78=552": the sample's complete lines (at least
  // two) must have that form, whether or not the sums are right.
  const std::regex problem("[0-9]+[-+*][0-9]+=[0-9]+");
  int lines = 0;
  bool formed = true;
  for (size_t begin = 1, end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1, ++lines)
    formed = formed && std::regex_match(text.substr(begin, end - begin), problem);
  const bool ok = s.final_val_loss < 2.3 && lines >= 2 && formed;
  if (!ok) std::printf("MISMATCH: expected a validation loss below 2.3 and at least two lines like 12+3=15\n");
  return ok ? 0 : 1;
}
