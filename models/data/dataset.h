#pragma once
// Token streams for training and evaluation: a deterministic train/validation
// split, a seeded sampler of random training windows that can be resumed and
// sharded across data-parallel ranks, and the fixed evaluation windows of
// docs/spec.md ("Tokenizer and evaluation windows").
#include <cstdint>
#include <span>
#include <vector>

#include "tensor/random.h"

namespace phasor {

// Uniform integer in [0, n) from one 64-bit draw (multiply-high, so no modulo
// bias worth speaking of for any n a corpus can have). n must be positive.
uint64_t uniform_below(Generator& gen, uint64_t n);

struct TextSplit {
  std::vector<int64_t> train, validation;
};

// Where a training window may start. A task's stream (models/data/tasks.h) is
// whole examples of exactly L = seq_len tokens, so a window that starts at a
// multiple of L holds one whole example as its inputs; one that starts anywhere
// mostly cuts two in half, and the question rarely shares a window with its key.
enum class WindowStarts { Anywhere, ExampleBoundaries };

// The first (1 - validation_fraction) of the tokens train, the rest validate.
// With ExampleBoundaries the held-out part is rounded down to whole examples
// of seq_len, so that its evaluation windows are whole examples too.
// Each part must hold at least one window of seq_len (seq_len + 1 tokens);
// otherwise phasor::Error says how many tokens each part has and needs.
TextSplit split_tokens(std::vector<int64_t> tokens, double validation_fraction, int64_t seq_len,
                       WindowStarts starts = WindowStarts::Anywhere);
// Two texts as the parts (a separate validation file): each must hold a window as above.
TextSplit separate_texts(std::vector<int64_t> train, std::vector<int64_t> validation, int64_t seq_len);

// Row-major [batch, seq_len] token ids: targets are the inputs shifted by one.
struct Batch {
  std::vector<int64_t> inputs, targets;
  int64_t batch = 0, seq_len = 0;
};

// Draws batches of random windows: row i starts at s uniform in [0, T-L-1]
// (Anywhere) or at s = L * k, k uniform in [0, floor((T-1)/L) - 1]
// (ExampleBoundaries: the spec's evaluation windows, drawn at random), one
// draw either way; inputs t[s..s+L-1], targets t[s+1..s+L]. For data parallelism the global
// batch has world_size * batch_size rows, all drawn from one generator stream;
// rank r returns rows [r*B, (r+1)*B), so ranks see disjoint, deterministic rows.
// The whole state is (seed, offset): save both to resume the exact stream.
class BatchSampler {
 public:
  BatchSampler(std::vector<int64_t> tokens, int64_t batch_size, int64_t seq_len, uint64_t seed,
               int64_t rank = 0, int64_t world_size = 1, WindowStarts starts = WindowStarts::Anywhere);

  Batch next();

  uint64_t seed() const { return gen_.seed(); }
  uint64_t offset() const { return gen_.offset(); }
  void restore(uint64_t seed, uint64_t offset) { gen_.set_state(seed, offset); }

  int64_t batch_size() const { return batch_size_; }
  int64_t seq_len() const { return seq_len_; }
  int64_t rank() const { return rank_; }
  int64_t world_size() const { return world_size_; }
  WindowStarts window_starts() const { return starts_; }

 private:
  void copy_window(int64_t start, int64_t row, Batch& out) const;

  std::vector<int64_t> tokens_;
  int64_t batch_size_, seq_len_, rank_, world_size_;
  WindowStarts starts_;
  Generator gen_;
};

// The evaluation windows of the spec for T tokens and length L:
// W = floor((T - 1) / L) windows, window w has inputs t[wL .. wL+L-1] and
// targets t[wL+1 .. wL+L]; the tail that does not fill a window is dropped.
// max_windows > 0 keeps only the first max_windows windows (0 keeps all).
class EvalWindows {
 public:
  EvalWindows(std::span<const int64_t> tokens, int64_t seq_len, int64_t max_windows = 0);

  int64_t count() const { return count_; }
  int64_t seq_len() const { return seq_len_; }
  int64_t predictions() const { return count_ * seq_len_; }  // the W * L terms the loss averages

  // Windows [first, first + n) as one batch; n is clipped at the last window.
  Batch batch(int64_t first, int64_t n) const;

 private:
  std::vector<int64_t> tokens_;  // t_0 .. t_{W*L}: exactly what the windows read
  int64_t seq_len_, count_;
};

}  // namespace phasor
