#include "model/quant_mix.h"

#include <cctype>

#include "model/tensors.h"

namespace daisy::model {
namespace {

using kernels::WeightType;

// llama_ftype ids (llama.h) and base types (llama_ftype_get_default_type).
constexpr QuantMix kMixes[] = {
    {"f32", 0, WeightType::kF32, true},       {"f16", 1, WeightType::kF16, true},
    {"bf16", 32, WeightType::kBF16, true},    {"q8_0", 7, WeightType::kQ8_0, false},
    {"q4_0", 2, WeightType::kQ4_0, false},    {"q4_1", 3, WeightType::kQ4_1, false},
    {"q5_0", 8, WeightType::kQ5_0, false},    {"q5_1", 9, WeightType::kQ5_1, false},
    {"q2_k", 10, WeightType::kQ2K, false},    {"q3_k_s", 11, WeightType::kQ3K, false},
    {"q3_k_m", 12, WeightType::kQ3K, false},  {"q3_k_l", 13, WeightType::kQ3K, false},
    {"q4_k_s", 14, WeightType::kQ4K, false},  {"q4_k_m", 15, WeightType::kQ4K, false},
    {"q5_k_s", 16, WeightType::kQ5K, false},  {"q5_k_m", 17, WeightType::kQ5K, false},
    {"q6_k", 18, WeightType::kQ6K, false},    {"iq4_nl", 25, WeightType::kIq4Nl, false},
    {"iq4_xs", 30, WeightType::kIq4Xs, false},
};

enum class Category { kTokenEmbd, kOutput, kAttnV, kAttnK, kAttnQ, kAttnQkv, kAttnOutput, kFfnUp, kFfnGate, kFfnDown, kOther };

Category CategoryOf(std::string_view name) {
  auto has = [name](std::string_view part) { return name.find(part) != std::string_view::npos; };
  if (name == "output.weight") return Category::kOutput;
  if (name == "token_embd.weight") return Category::kTokenEmbd;
  if (has("attn_v.weight")) return Category::kAttnV;
  if (has("attn_k.weight")) return Category::kAttnK;
  if (has("attn_q.weight")) return Category::kAttnQ;
  if (has("attn_qkv.weight")) return Category::kAttnQkv;
  if (has("attn_output.weight")) return Category::kAttnOutput;
  if (has("ffn_up")) return Category::kFfnUp;
  if (has("ffn_gate")) return Category::kFfnGate;
  if (has("ffn_down")) return Category::kFfnDown;
  return Category::kOther;
}

bool Quantized(WeightType t) { return t != WeightType::kF32 && t != WeightType::kF16 && t != WeightType::kBF16; }

int64_t Block(WeightType t) { return kernels::FormatOf(t).block_elems; }

// The first and last eighth of the layers, and every third one between.
bool UseMoreBits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// llama.cpp's choice for one tensor, before the shape fallback.
WeightType Choose(const QuantMix& mix, const MixModel& m, Category cat, int layer, int64_t cols) {
  const std::string_view f = mix.name;
  const int n = m.n_layers;
  const int gqa = m.n_kv_heads > 0 ? m.n_heads / m.n_kv_heads : 1;
  WeightType t = mix.base;
  if (cat == Category::kOutput || (m.tied_embeddings && cat == Category::kTokenEmbd)) {
    if (cols % Block(t) != 0) return WeightType::kQ8_0;
    return t == WeightType::kQ8_0 ? t : WeightType::kQ6K;
  }
  switch (cat) {
    case Category::kAttnV: {
      const int i = layer;
      if (f == "q2_k") {
        t = gqa >= 4 ? WeightType::kQ4K : WeightType::kQ3K;
      } else if (f == "q3_k_m") {
        t = i < 2 ? WeightType::kQ5K : WeightType::kQ4K;
      } else if (f == "q3_k_l") {
        t = WeightType::kQ5K;
      } else if ((f == "iq4_nl" || f == "iq4_xs") && gqa >= 4) {
        t = WeightType::kQ5K;
      } else if ((f == "q4_k_m" || f == "q5_k_m") && UseMoreBits(i, n)) {
        t = WeightType::kQ6K;
      } else if (f == "q4_k_s" && i < 4) {
        t = WeightType::kQ5K;
      }
      // llama.cpp's 70B (80 layers, grouped-query attention): attn_v is 8x smaller than
      // attn_q, so it gets more bits for little size.
      const bool is_70b = n == 80 && m.n_heads != m.n_kv_heads;
      if (is_70b && (t == WeightType::kQ3K || t == WeightType::kQ4K)) t = WeightType::kQ5K;
      return t;
    }
    case Category::kFfnDown: {
      const int i = layer;
      if (f == "q2_k") return WeightType::kQ3K;
      if (f == "q3_k_m") return i < n / 16 ? WeightType::kQ5K : WeightType::kQ4K;
      if (f == "q3_k_l") return WeightType::kQ5K;
      if (f == "q4_k_m") return UseMoreBits(i, n) ? WeightType::kQ6K : t;
      if ((f == "iq4_nl" || f == "iq4_xs") && i < n / 8) return WeightType::kQ5K;
      if (f == "q5_k_m" && UseMoreBits(i, n)) return WeightType::kQ6K;
      if (f == "q4_k_s" && i < n / 8) return WeightType::kQ5K;
      return t;
    }
    case Category::kAttnQkv:  // fused q/k/v (Phi-3)
      if (f == "q3_k_m" || f == "q3_k_l") return WeightType::kQ4K;
      if (f == "q4_k_m") return WeightType::kQ5K;
      if (f == "q5_k_m") return WeightType::kQ6K;
      return t;
    case Category::kAttnOutput:
      if (f == "q2_k") return WeightType::kQ3K;
      if (f == "q3_k_m") return WeightType::kQ4K;
      if (f == "q3_k_l") return WeightType::kQ5K;
      return t;
    default: return t;
  }
}

// A type whose block does not divide the row: llama.cpp's fallback (tensor_type_fallback).
WeightType Fallback(WeightType t, int64_t cols) {
  if (cols % Block(t) == 0) return t;
  switch (t) {
    case WeightType::kQ2K:
    case WeightType::kQ3K: t = WeightType::kQ4_0; break;
    case WeightType::kQ4K: t = WeightType::kQ5_0; break;
    case WeightType::kQ5K: t = WeightType::kQ5_1; break;
    case WeightType::kQ6K: t = WeightType::kQ8_0; break;
    case WeightType::kIq4Xs: t = WeightType::kIq4Nl; break;
    default: break;
  }
  return cols % Block(t) == 0 ? t : WeightType::kF16;
}

}  // namespace

std::optional<QuantMix> FindQuantMix(std::string_view name) {
  auto lower = [](std::string_view v) {
    std::string l(v);
    for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return l;
  };
  const std::string want = lower(name);
  for (const QuantMix& m : kMixes) {
    if (want == m.name) return m;
  }
  for (const kernels::WeightFormat& f : kernels::WeightFormats()) {
    if (want == lower(f.name)) return PureMix(f.type);
  }
  return std::nullopt;
}

QuantMix PureMix(kernels::WeightType type) {
  for (const QuantMix& m : kMixes) {
    if (m.base == type) return Pure(m);  // the first file type of that base: q4_K -> q4_k_s
  }
  return {kernels::WeightTypeName(type), 0, type, true};
}

std::string QuantMixNames() {
  std::string names;
  for (const QuantMix& m : kMixes) names += (names.empty() ? "" : ", ") + std::string(m.name);
  return names;
}

QuantMix Pure(const QuantMix& mix) {
  QuantMix pure = mix;
  pure.pure = true;
  return pure;
}

kernels::WeightType MixTensorType(const QuantMix& mix, const MixModel& model, std::string_view tensor, int64_t cols) {
  if (mix.pure || !Quantized(mix.base)) return Fallback(mix.base, cols);
  return Fallback(Choose(mix, model, CategoryOf(tensor), LayerOf(tensor), cols), cols);
}

}  // namespace daisy::model
