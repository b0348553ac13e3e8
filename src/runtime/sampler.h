// Sampler: picks the next token from logits. Greedy (temperature 0) is the argmax, ties to the
// lowest id. Otherwise, in llama.cpp's default order: repetition penalty, top-k, top-p, min-p,
// temperature, then a draw from the seeded generator (same seed, same tokens).
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

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

  // `history`: the tokens so far (the penalty looks at the last repeat_last_n of them).
  int32_t Sample(std::span<const float> logits, std::span<const int32_t> history);

  static int32_t Argmax(std::span<const float> logits);

 private:
  struct Candidate {
    int32_t id;
    float logit;
  };
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<Candidate> candidates_;
};

}  // namespace daisy::runtime
