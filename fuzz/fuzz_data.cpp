// libFuzzer target for the data path on arbitrary bytes: ByteTokenizer
// (encode/decode round trip), split_tokens, EvalWindows and BatchSampler, with
// their parameters (seq_len, validation fraction, window cap, batch size,
// rank/world size, seed) drawn from the first bytes of the input, including
// zero, negative and huge values. Each must either work, and then return
// exactly the windows the spec describes, or throw phasor::Error; anything
// else (a crash, a sanitizer report, another exception type, a wrong window)
// is a bug. Built and run by scripts/ci_fuzz.sh; seeds in fuzz/corpus/data.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "models/data/dataset.h"
#include "models/data/tokenizer.h"
#include "tensor/error.h"

namespace {

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "fuzz_data: %s\n", what);
  std::abort();
}

// Reads parameters off the front of the input; what is left is the text.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t byte() { return size_ ? (--size_, *data_++) : 0; }
  int64_t raw64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | byte();
    int64_t out;
    std::memcpy(&out, &v, sizeof out);
    return out;
  }
  // Mostly small values around zero; with the top bit set, any 64-bit value.
  int64_t small_or_raw(int64_t bias) {
    const uint8_t b = byte();
    return (b & 0x80) ? raw64() : static_cast<int64_t>(b) - bias;
  }
  std::string_view rest() const { return {reinterpret_cast<const char*>(data_), size_}; }

 private:
  const uint8_t* data_;
  size_t size_;
};

double fraction(uint8_t b) {
  switch (b) {
    case 0xff: return std::numeric_limits<double>::quiet_NaN();
    case 0xfe: return std::numeric_limits<double>::infinity();
    case 0xfd: return -0.5;
    default: return b / 250.0;  // 0 .. 1.012
  }
}

void check_window(const phasor::Batch& b, int64_t row, std::span<const int64_t> tokens, int64_t start) {
  for (int64_t i = 0; i < b.seq_len; ++i) {
    const size_t at = static_cast<size_t>(row * b.seq_len + i);
    if (b.inputs[at] != tokens[static_cast<size_t>(start + i)]) bug("input is not the text at its window");
    if (b.targets[at] != tokens[static_cast<size_t>(start + i + 1)]) bug("target is not the next token");
  }
}

void eval_windows(std::span<const int64_t> tokens, int64_t seq_len, int64_t max_windows, int64_t step) {
  try {
    const phasor::EvalWindows windows(tokens, seq_len, max_windows);
    const int64_t T = static_cast<int64_t>(tokens.size());
    int64_t want = (T - 1) / seq_len;
    if (max_windows > 0) want = std::min(want, max_windows);
    if (windows.count() != want || windows.count() <= 0) bug("EvalWindows count is not floor((T - 1) / L), capped");
    if (step <= 0) step = 1;
    for (int64_t first = 0; first < windows.count(); first += step) {
      const phasor::Batch b = windows.batch(first, step);
      const int64_t n = std::min(step, windows.count() - first);
      if (b.batch != n || b.seq_len != seq_len || b.inputs.size() != static_cast<size_t>(n * seq_len) ||
          b.targets.size() != b.inputs.size())
        bug("EvalWindows batch has the wrong size");
      for (int64_t r = 0; r < n; ++r) check_window(b, r, tokens, (first + r) * seq_len);
    }
  } catch (const phasor::Error&) {
  }
}

void sampler(std::span<const int64_t> tokens, int64_t batch, int64_t seq_len, uint64_t seed, int64_t rank, int64_t world) {
  try {
    phasor::BatchSampler s(std::vector<int64_t>(tokens.begin(), tokens.end()), batch, seq_len, seed, rank, world);
    const uint64_t offset = s.offset();
    std::vector<phasor::Batch> drawn;
    for (int k = 0; k < 3; ++k) {
      drawn.push_back(s.next());
      const phasor::Batch& b = drawn.back();
      if (b.batch != batch || b.seq_len != seq_len || b.inputs.size() != static_cast<size_t>(batch * seq_len))
        bug("BatchSampler batch has the wrong size");
      for (int64_t r = 0; r < batch; ++r) {
        // Targets are the inputs shifted by one.
        if (!std::equal(b.inputs.begin() + r * seq_len + 1, b.inputs.begin() + (r + 1) * seq_len,
                        b.targets.begin() + r * seq_len))
          bug("BatchSampler targets are not the inputs shifted by one");
        // Each row is some window of the text: find where it starts (when that is cheap).
        if (static_cast<int64_t>(tokens.size()) * seq_len > (1 << 16)) continue;
        bool found = false;
        for (int64_t start = 0; !found && start + seq_len < static_cast<int64_t>(tokens.size()); ++start) {
          found = std::equal(tokens.begin() + start, tokens.begin() + start + seq_len,
                             b.inputs.begin() + r * seq_len) &&
                  std::equal(tokens.begin() + start + 1, tokens.begin() + start + seq_len + 1,
                             b.targets.begin() + r * seq_len);
        }
        if (!found) bug("BatchSampler row is not a window of the text");
      }
    }
    // The (seed, offset) state replays the same stream.
    s.restore(seed, offset);
    for (const phasor::Batch& b : drawn) {
      const phasor::Batch again = s.next();
      if (again.inputs != b.inputs || again.targets != b.targets) bug("BatchSampler restore does not replay the stream");
    }
  } catch (const phasor::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in(data, size);
  const int64_t seq_len = in.small_or_raw(8);        // -8 .. 119, or any
  const double validation = fraction(in.byte());
  const int64_t max_windows = in.small_or_raw(2);    // -2 .. 125, or any
  const int64_t step = in.byte() % 9;                // windows per batch() call
  const int64_t batch = static_cast<int64_t>(in.byte() % 12) - 2;
  const int64_t world = static_cast<int64_t>(in.byte() % 5) - 1;
  const int64_t rank = static_cast<int64_t>(in.byte() % 5) - 1;
  const uint64_t seed = in.byte();
  const std::string_view text = in.rest();

  const phasor::ByteTokenizer tokenizer;
  const std::vector<int64_t> tokens = tokenizer.encode(text);
  if (tokens.size() != text.size()) bug("one token per byte");
  for (int64_t t : tokens)
    if (t < 0 || t >= tokenizer.vocab_size()) bug("token outside the byte vocabulary");
  if (tokenizer.decode(tokens) != text) bug("decode(encode(text)) != text");

  eval_windows(tokens, seq_len, max_windows, step);

  try {
    const phasor::TextSplit split = phasor::split_tokens(tokens, validation, seq_len);
    if (split.train.size() + split.validation.size() != tokens.size()) bug("split loses tokens");
    if (!std::equal(split.train.begin(), split.train.end(), tokens.begin()) ||
        !std::equal(split.validation.begin(), split.validation.end(), tokens.begin() + split.train.size()))
      bug("split reorders tokens");
    if (split.train.size() < static_cast<size_t>(seq_len) + 1 || split.validation.size() < static_cast<size_t>(seq_len) + 1)
      bug("split part holds no window");
    eval_windows(split.validation, seq_len, max_windows, step);
    sampler(split.train, batch, seq_len, seed, rank, world);
  } catch (const phasor::Error&) {
  }
  // The sampler on the whole text too, whatever split_tokens thought of it.
  sampler(tokens, batch, seq_len, seed, rank, world);

  // decode refuses ids outside 0..255 with phasor::Error.
  if (!tokens.empty()) {
    std::vector<int64_t> bad = tokens;
    bad[bad.size() / 2] = (tokens.front() & 1) ? -1 - tokens.front() : 256 + tokens.front();
    try {
      (void)tokenizer.decode(bad);
      bug("decode accepted a token outside 0..255");
    } catch (const phasor::Error&) {
    }
  }
  return 0;
}
