#pragma once
// The byte tokenizer of docs/spec.md ("Tokenizer and
// evaluation windows"): token = byte value, V = 256. Any text round-trips,
// whatever its encoding, because nothing is ever merged or normalised.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace phasor {

class ByteTokenizer {
 public:
  static constexpr int64_t kVocabSize = 256;

  int64_t vocab_size() const { return kVocabSize; }
  std::vector<int64_t> encode(std::string_view text) const;
  // Throws phasor::Error naming the first token outside 0..255 and its position.
  std::string decode(std::span<const int64_t> tokens) const;
};

}  // namespace phasor
