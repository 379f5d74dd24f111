#pragma once
// The training run the simulator's suites time and count (test_sim_sync,
// test_sim_graph): the README model at tiny shapes on the arith corpus, on
// device cuda, one thread, no validation until the end (2 windows).
#include <string>

#include "app/train.h"

namespace phasor::test {

inline TrainOptions tiny_cuda_run(int64_t steps, int64_t log_every, const std::string& run_dir) {
  TrainOptions o;
  o.model.d_model = 32;
  o.model.n_layers = 1;
  o.model.n_heads = 4;
  o.model.d_ff = 48;
  o.model.max_seq_len = 16;
  o.data = "arith";
  o.seq_len = 16;
  o.batch = 2;
  o.steps = steps;
  o.warmup = 2;
  o.log_every = log_every;
  o.eval_every = 0;
  o.eval_windows = 2;
  o.device = "cuda";
  o.threads = 1;
  o.run_dir = run_dir;
  return o;
}

}  // namespace phasor::test
