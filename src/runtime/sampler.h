// Sampler: picks the next token from logits. Greedy (temperature 0) is the argmax, ties to the
// lowest id. Otherwise, in llama.cpp's default order: repetition penalty, top-k, top-p, min-p,
// temperature, then a draw from a generator seeded by (seed, position): the same seed gives the
// same tokens, and the draw carries no state from one token to the next, so the last stage of a
// pipeline can sample with nothing but the seed and the position.
// Thread-compatible.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace daisy::runtime {

struct SamplingParams {
  float temperature = 0.0f;   // <= 0: greedy
  int top_k = 40;             // <= 0: off
  float top_p = 0.95f;        // >= 1: off
  float min_p = 0.05f;        // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int repeat_last_n = 64;
  uint64_t seed = 0;
};

// The ids of the k largest logits, best first, ties to the lower id (k is clamped to the size).
void TopK(std::span<const float> logits, int k, std::vector<int32_t>& ids);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params) : params_(params) {}

  // `history`: the tokens so far (the penalty looks at the last repeat_last_n of them); the
  // new token's position is history.size().
  int32_t Sample(std::span<const float> logits, std::span<const int32_t> history);
  // The same with only the tail of the history at hand: the new token is at `position`.
  int32_t Sample(std::span<const float> logits, std::span<const int32_t> history, uint64_t position);
  const SamplingParams& params() const { return params_; }
  static uint64_t DrawSeed(uint64_t seed, uint64_t position);

  // The distribution Sample draws from when temperature > 0 (penalty, top-k, top-p, min-p,
  // temperature applied), as candidates with unnormalised weights, best first; returns the
  // weights' sum. Speculative verification compares it with the draft's.
  struct Weighted {
    int32_t id;
    double weight;
  };
  double Distribution(std::span<const float> logits, std::span<const int32_t> history,
                      std::vector<Weighted>& out);
  // A uniform draw in [0, 1) for (seed, position, stream): independent of Sample's draw.
  static double Uniform(uint64_t seed, uint64_t position, uint64_t stream);

  static int32_t Argmax(std::span<const float> logits);

 private:
  struct Candidate {
    int32_t id;
    float logit;
  };
  // candidates_ = the logits with the repetition penalty applied.
  void Penalize(std::span<const float> logits, std::span<const int32_t> history);
  SamplingParams params_;
  std::vector<Candidate> candidates_;
};

}  // namespace daisy::runtime
