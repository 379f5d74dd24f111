#include "models/data/dataset.h"

#include <algorithm>

#include "tensor/error.h"

namespace phasor {

uint64_t uniform_below(Generator& gen, uint64_t n) {
  PHASOR_CHECK(n > 0, "uniform_below: empty range");
  return static_cast<uint64_t>((static_cast<unsigned __int128>(gen.next_u64()) * n) >> 64);
}

namespace {

// One window of length L reads L + 1 tokens (the targets run one further).
void check_holds_a_window(const char* what, const char* part, size_t tokens, int64_t seq_len) {
  PHASOR_CHECK(seq_len > 0, what, ": seq_len must be positive, got ", seq_len);
  // (unsigned: seq_len + 1 overflows for seq_len = INT64_MAX)
  PHASOR_CHECK(tokens >= static_cast<size_t>(seq_len) + 1, what, ": the ", part, " has ", tokens,
               " tokens but one window of seq_len ", seq_len, " needs ", static_cast<uint64_t>(seq_len) + 1);
}

}  // namespace

TextSplit split_tokens(std::vector<int64_t> tokens, double validation_fraction, int64_t seq_len, WindowStarts starts) {
  PHASOR_CHECK(validation_fraction > 0.0 && validation_fraction < 1.0,
               "split_tokens: validation_fraction must lie in (0, 1), got ", validation_fraction);
  auto validation_size = static_cast<size_t>(static_cast<double>(tokens.size()) * validation_fraction);
  if (starts == WindowStarts::ExampleBoundaries && seq_len > 0)
    validation_size -= validation_size % static_cast<size_t>(seq_len);
  const size_t train_size = tokens.size() - validation_size;
  check_holds_a_window("split_tokens", "training part", train_size, seq_len);
  check_holds_a_window("split_tokens", "validation part", validation_size, seq_len);

  TextSplit split;
  split.validation.assign(tokens.begin() + static_cast<std::ptrdiff_t>(train_size), tokens.end());
  tokens.resize(train_size);
  split.train = std::move(tokens);
  return split;
}

TextSplit separate_texts(std::vector<int64_t> train, std::vector<int64_t> validation, int64_t seq_len) {
  check_holds_a_window("separate_texts", "training text", train.size(), seq_len);
  check_holds_a_window("separate_texts", "validation text", validation.size(), seq_len);
  return TextSplit{std::move(train), std::move(validation)};
}

BatchSampler::BatchSampler(std::vector<int64_t> tokens, int64_t batch_size, int64_t seq_len, uint64_t seed,
                           int64_t rank, int64_t world_size, WindowStarts starts)
    : tokens_(std::move(tokens)),
      batch_size_(batch_size),
      seq_len_(seq_len),
      rank_(rank),
      world_size_(world_size),
      starts_(starts),
      gen_(seed) {
  PHASOR_CHECK(batch_size > 0, "BatchSampler: batch_size must be positive, got ", batch_size);
  PHASOR_CHECK(world_size > 0 && rank >= 0 && rank < world_size, "BatchSampler: rank ", rank,
               " is not in [0, world_size = ", world_size, ")");
  check_holds_a_window("BatchSampler", "token stream", tokens_.size(), seq_len);
  // Bounds world_size * batch_size * seq_len, so the sizes below cannot overflow.
  PHASOR_CHECK(batch_size <= (int64_t{1} << 40) / world_size / seq_len, "BatchSampler: ", world_size, " x ", batch_size,
               " rows of ", seq_len, " tokens is too large a batch");
}

void BatchSampler::copy_window(int64_t start, int64_t row, Batch& out) const {
  const auto first = tokens_.begin() + start;
  std::copy_n(first, seq_len_, out.inputs.begin() + row * seq_len_);
  std::copy_n(first + 1, seq_len_, out.targets.begin() + row * seq_len_);
}

Batch BatchSampler::next() {
  // Every rank reserves the whole global batch, so all ranks' generators stay
  // in step; being counter-based, this rank then jumps straight to its rows.
  const uint64_t global_rows = static_cast<uint64_t>(world_size_ * batch_size_);
  const uint64_t first_block = gen_.reserve(global_rows);
  Generator rows(gen_.seed(), first_block + static_cast<uint64_t>(rank_ * batch_size_));

  Batch out{std::vector<int64_t>(static_cast<size_t>(batch_size_ * seq_len_)),
            std::vector<int64_t>(static_cast<size_t>(batch_size_ * seq_len_)), batch_size_, seq_len_};
  const auto length = static_cast<uint64_t>(seq_len_);
  if (starts_ == WindowStarts::Anywhere) {
    const uint64_t starts = tokens_.size() - length;  // s in [0, T-L-1]
    for (int64_t row = 0; row < batch_size_; ++row)
      copy_window(static_cast<int64_t>(uniform_below(rows, starts)), row, out);
  } else {
    const uint64_t examples = (tokens_.size() - 1) / length;  // s = L k with s + L <= T - 1
    for (int64_t row = 0; row < batch_size_; ++row)
      copy_window(static_cast<int64_t>(length * uniform_below(rows, examples)), row, out);
  }
  return out;
}

EvalWindows::EvalWindows(std::span<const int64_t> tokens, int64_t seq_len, int64_t max_windows)
    : seq_len_(seq_len), count_(0) {
  PHASOR_CHECK(seq_len > 0, "EvalWindows: seq_len must be positive, got ", seq_len);
  PHASOR_CHECK(max_windows >= 0, "EvalWindows: max_windows must be >= 0 (0 keeps all), got ", max_windows);
  const auto total = static_cast<int64_t>(tokens.size());
  count_ = total > 0 ? (total - 1) / seq_len : 0;
  PHASOR_CHECK(count_ > 0, "EvalWindows: ", total, " tokens hold no window of seq_len ", seq_len,
               " (W = floor((T - 1) / L) = 0; needs at least ", static_cast<uint64_t>(seq_len) + 1, " tokens)");
  if (max_windows > 0) count_ = std::min(count_, max_windows);
  tokens_.assign(tokens.begin(), tokens.begin() + count_ * seq_len + 1);
}

Batch EvalWindows::batch(int64_t first, int64_t n) const {
  PHASOR_CHECK(first >= 0 && first < count_, "EvalWindows::batch: window ", first, " is not in [0, ", count_, ")");
  PHASOR_CHECK(n > 0, "EvalWindows::batch: count must be positive, got ", n);
  n = std::min(n, count_ - first);
  // Consecutive windows tile the text, so the rows are two contiguous runs.
  const auto start = tokens_.begin() + first * seq_len_;
  const auto length = n * seq_len_;
  return Batch{std::vector<int64_t>(start, start + length), std::vector<int64_t>(start + 1, start + 1 + length), n,
               seq_len_};
}

}  // namespace phasor
