// Chunker: a sequence's tokens walked in forward-sized pieces. The one way prompts (and a draft
// model's catch-up) are cut: Prefill takes a whole prompt in chunks, the scheduler takes one
// chunk per step as the micro-batch has room, and the drafter sends the leading chunks of a long
// catch-up alone and packs the tail with other sequences.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

namespace daisy::coord {

struct Chunk {
  int32_t start = 0;                // position of the first token
  std::span<const int32_t> tokens;  // at least one, unless the chunker was done
};

class Chunker {
 public:
  // `tokens` start at position `start`, of which `taken` are taken already; the span must
  // outlive the chunker.
  Chunker(std::span<const int32_t> tokens, int32_t start, size_t taken = 0)
      : tokens_(tokens), start_(start), taken_(std::min(taken, tokens.size())) {}

  // The next at most `max_rows` (>= 1) tokens.
  Chunk Take(size_t max_rows) {
    const size_t n = std::min(std::max<size_t>(max_rows, 1), left());
    Chunk c{start_ + static_cast<int32_t>(taken_), tokens_.subspan(taken_, n)};
    taken_ += n;
    return c;
  }
  size_t left() const { return tokens_.size() - taken_; }
  bool done() const { return left() == 0; }
  size_t taken() const { return taken_; }

 private:
  std::span<const int32_t> tokens_;
  int32_t start_ = 0;
  size_t taken_ = 0;
};

}  // namespace daisy::coord
