// Train a small ComplexFormer on the built-in arithmetic corpus and sample from
// it (what `phasor train` and `phasor generate` do), in under 40 lines. ctest
// runs it (example_train_sample) into build/examples/run; alone:
//   build/examples/train_sample /tmp/run
#include <cstdio>
#include <filesystem>

#include "app/evaluate.h"
#include "app/train.h"
#include "models/model_io.h"

int main(int argc, char** argv) {
  using namespace phasor;
  TrainOptions o;  // the model defaults to complexformer
  o.run_dir = argc > 1 ? argv[1] : "runs/example";
  o.data = "arith";  // problems such as "482+1937=2419", one per line
  o.model.d_model = 32, o.model.n_layers = 2, o.model.n_heads = 2, o.model.d_ff = 64;
  o.seq_len = 32, o.batch = 8, o.steps = 60, o.warmup = 6, o.lr = 1e-2;
  o.eval_every = 0, o.eval_windows = 8, o.log_every = 20;
  std::filesystem::remove_all(o.run_dir);  // train() refuses a folder that holds a run
  const TrainSummary s = train(o);
  std::printf("trained %ld steps: loss %.3f, validation loss %.3f (a uniform guess: 5.545)\n",
              static_cast<long>(s.steps_done), s.final_loss, s.final_val_loss);

  const auto model = load_model(latest_checkpoint(o.run_dir) + "/model.safetensors");
  SampleOptions greedy;
  greedy.tokens = 24, greedy.temperature = 0;
  const std::string prompt = "\n12+";
  const std::vector<int64_t> out = generate(*model, encode_prompt(prompt, 256), greedy);
  std::printf("sample: %s\n", std::string(out.begin(), out.end()).c_str());
  // The corpus is digits, '+', '=' and newlines: the model must have learnt that much.
  const bool ok = s.final_val_loss < 3.0 && std::string(out.begin(), out.end()).find_first_not_of("0123456789+=\n") == std::string::npos;
  if (!ok) std::printf("MISMATCH: expected a validation loss below 3.0 and a sample of digits, '+', '=' and newlines\n");
  return ok ? 0 : 1;
}
