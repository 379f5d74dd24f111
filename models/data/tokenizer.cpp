#include "models/data/tokenizer.h"

#include "tensor/error.h"

namespace phasor {

std::vector<int64_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> tokens;
  tokens.reserve(text.size());
  // Through unsigned char: a plain char is signed here, and bytes >= 128 must map to 128..255.
  for (unsigned char byte : text) tokens.push_back(byte);
  return tokens;
}

std::string ByteTokenizer::decode(std::span<const int64_t> tokens) const {
  std::string text;
  text.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int64_t token = tokens[i];
    PHASOR_CHECK(token >= 0 && token < kVocabSize, "decode: token ", token, " at position ", i,
                 " is outside the byte vocabulary 0..", kVocabSize - 1);
    text.push_back(static_cast<char>(static_cast<unsigned char>(token)));
  }
  return text;
}

}  // namespace phasor
