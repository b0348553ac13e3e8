#include "shard/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace daisy::shard {
namespace {

// Contiguous partition of n layers into s stages (each >= 1 layer) minimising the largest
// cost(stage, begin, end). Dynamic programming over (stage, end): O(s * n^2), n <= a few hundred.
template <typename Cost>
Result<std::vector<int>> MinMaxPartition(int n, int s, Cost cost) {
  if (s < 1) return InvalidArgument("the number of stages must be at least 1 (got %d)", s);
  if (s > n) {
    return InvalidArgument("cannot split %d layers into %d stages: every stage needs at least "
                           "one layer", n, s);
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[k][e]: the best max-cost of stages 0..k-1 covering layers [0, e); from[k][e]: where
  // stage k-1 begins.
  std::vector<std::vector<double>> best(s + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<int>> from(s + 1, std::vector<int>(n + 1, -1));
  best[0][0] = 0;
  for (int k = 1; k <= s; ++k) {
    for (int e = k; e <= n - (s - k); ++e) {
      for (int b = k - 1; b < e; ++b) {
        if (best[k - 1][b] == kInf) continue;
        const double c = std::max(best[k - 1][b], cost(k - 1, b, e));
        if (c < best[k][e]) {  // strict: ties keep the earliest boundary (deterministic)
          best[k][e] = c;
          from[k][e] = b;
        }
      }
    }
  }
  std::vector<int> bounds(s + 1);
  bounds[s] = n;
  for (int k = s; k >= 1; --k) bounds[k - 1] = from[k][bounds[k]];
  return bounds;
}

uint64_t LayerSum(const SplitCosts& c, int begin, int end) {
  uint64_t sum = 0;
  for (int l = begin; l < end; ++l) sum += c.layer_bytes[l];
  return sum;
}

}  // namespace

uint64_t StoredBytes(const SplitCosts& c, std::span<const int> bounds, int stage, bool tied) {
  const int n_stages = static_cast<int>(bounds.size()) - 1;
  uint64_t bytes = c.shared_bytes + LayerSum(c, bounds[stage], bounds[stage + 1]);
  if (stage == 0) bytes += c.embed_bytes;
  if (stage == n_stages - 1) bytes += c.head_bytes + (tied && stage != 0 ? c.embed_bytes : 0);
  return bytes;
}

Result<std::vector<int>> PlanBalanced(const SplitCosts& c, int n_stages) {
  const int n = static_cast<int>(c.layer_bytes.size());
  return MinMaxPartition(n, n_stages, [&](int stage, int b, int e) {
    return static_cast<double>(LayerSum(c, b, e) + (stage == n_stages - 1 ? c.head_bytes : 0));
  });
}

Result<std::vector<int>> PlanByMemory(const SplitCosts& c, std::span<const uint64_t> memory) {
  const int n = static_cast<int>(c.layer_bytes.size());
  const int s = static_cast<int>(memory.size());
  for (uint64_t m : memory) {
    if (m == 0) return InvalidArgument("--memory: every node needs a positive size");
  }
  // Tied heads store the embeddings on the last stage too; the caller passes head_bytes with them.
  DAISY_ASSIGN_OR_RETURN(std::vector<int> bounds,
                         MinMaxPartition(n, s, [&](int stage, int b, int e) {
                           uint64_t bytes = c.shared_bytes + LayerSum(c, b, e);
                           if (stage == 0) bytes += c.embed_bytes;
                           if (stage == s - 1) bytes += c.head_bytes;
                           return static_cast<double>(bytes) / static_cast<double>(memory[stage]);
                         }));
  for (int i = 0; i < s; ++i) {
    uint64_t bytes = c.shared_bytes + LayerSum(c, bounds[i], bounds[i + 1]);
    if (i == 0) bytes += c.embed_bytes;
    if (i == s - 1) bytes += c.head_bytes;
    if (bytes > memory[i]) {
      return InvalidArgument("the model does not fit: the best split still puts %.2f GB of weights "
                             "on stage %d, which has %.2f GB (layers %d-%d)", bytes / 1e9, i,
                             memory[i] / 1e9, bounds[i], bounds[i + 1] - 1);
    }
  }
  return bounds;
}

Result<std::vector<int>> PlanExplicit(int n_layers, std::span<const int> counts) {
  std::vector<int> bounds{0};
  for (int c : counts) {
    if (c < 1) return InvalidArgument("--layers: every stage needs at least one layer (got %d)", c);
    bounds.push_back(bounds.back() + c);
  }
  if (bounds.back() != n_layers) {
    return InvalidArgument("--layers: the counts add up to %d layers, the model has %d",
                           bounds.back(), n_layers);
  }
  return bounds;
}

Result<uint64_t> ParseBytes(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  double mult = 1;
  const std::string unit = end != nullptr ? std::string(end) : "";
  if (unit == "" || unit == "B") mult = 1;
  else if (unit == "K" || unit == "KB" || unit == "KiB") mult = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MiB") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GiB") mult = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TB" || unit == "TiB") mult = 1024.0 * 1024 * 1024 * 1024;
  else return InvalidArgument("'%s' is not a size (examples: 16G, 512M, 1073741824)", text.c_str());
  if (text.empty() || end == text.c_str() || !(v > 0) || !std::isfinite(v * mult) || v * mult > 1e18) {
    return InvalidArgument("'%s' is not a positive size", text.c_str());
  }
  return static_cast<uint64_t>(v * mult);
}

}  // namespace daisy::shard
