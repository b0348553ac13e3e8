#include "model/tensors.h"

#include <algorithm>
#include <array>
#include <charconv>

namespace daisy::model {
namespace {

using LW = LayerWeights;
template <size_t N>
using Rows = std::array<LayerTensor, N>;

// Concatenates groups of rows into one table.
template <size_t... N>
constexpr auto Table(const Rows<N>&... groups) {
  Rows<(N + ...)> out{};
  size_t i = 0;
  ((std::copy(groups.begin(), groups.end(), out.begin() + i), i += N), ...);
  return out;
}

constexpr Rows<5> kAttention = {{
    {"attn_norm.weight", Dim::kOne, Dim::kDModel, &LW::attn_norm, nullptr, true},
    {"attn_q.weight", Dim::kQDim, Dim::kDModel, nullptr, &LW::wq, true},
    {"attn_k.weight", Dim::kKvDim, Dim::kDModel, nullptr, &LW::wk, true},
    {"attn_v.weight", Dim::kKvDim, Dim::kDModel, nullptr, &LW::wv, true},
    {"attn_output.weight", Dim::kDModel, Dim::kQDim, nullptr, &LW::wo, true}}};
constexpr Rows<4> kFfn = {{
    {"ffn_norm.weight", Dim::kOne, Dim::kDModel, &LW::ffn_norm, nullptr, true},
    {"ffn_gate.weight", Dim::kDFF, Dim::kDModel, nullptr, &LW::w_gate, true},
    {"ffn_up.weight", Dim::kDFF, Dim::kDModel, nullptr, &LW::w_up, true},
    {"ffn_down.weight", Dim::kDModel, Dim::kDFF, nullptr, &LW::w_down, true}}};
constexpr Rows<2> kQkNorms = {{
    {"attn_q_norm.weight", Dim::kOne, Dim::kHeadDim, &LW::q_norm, nullptr, true},
    {"attn_k_norm.weight", Dim::kOne, Dim::kHeadDim, &LW::k_norm, nullptr, true}}};

// Llama files may carry attention biases (llama.cpp loads them when present).
constexpr Rows<4> kOptionalBiases = {{{"attn_q.bias", Dim::kOne, Dim::kQDim, &LW::bq, nullptr, false},
                                      {"attn_k.bias", Dim::kOne, Dim::kKvDim, &LW::bk, nullptr, false},
                                      {"attn_v.bias", Dim::kOne, Dim::kKvDim, &LW::bv, nullptr, false},
                                      {"attn_output.bias", Dim::kOne, Dim::kDModel, &LW::bo, nullptr, false}}};
constexpr auto kLlama = Table(kAttention, kOptionalBiases, kFfn);
// Qwen2: q/k/v biases, always.
constexpr Rows<3> kQkvBiases = {{{"attn_q.bias", Dim::kOne, Dim::kQDim, &LW::bq, nullptr, true},
                                 {"attn_k.bias", Dim::kOne, Dim::kKvDim, &LW::bk, nullptr, true},
                                 {"attn_v.bias", Dim::kOne, Dim::kKvDim, &LW::bv, nullptr, true}}};
constexpr auto kQwen2 = Table(kAttention, kQkvBiases, kFfn);
constexpr auto kQwen3 = Table(kAttention, kQkNorms, kFfn);
// Phi-3: fused q/k/v and gate/up.
constexpr Rows<6> kPhi3 = {{{"attn_norm.weight", Dim::kOne, Dim::kDModel, &LW::attn_norm, nullptr, true},
                            {"attn_qkv.weight", Dim::kQkvDim, Dim::kDModel, nullptr, &LW::wqkv, true},
                            {"attn_output.weight", Dim::kDModel, Dim::kQDim, nullptr, &LW::wo, true},
                            {"ffn_norm.weight", Dim::kOne, Dim::kDModel, &LW::ffn_norm, nullptr, true},
                            {"ffn_up.weight", Dim::k2DFF, Dim::kDModel, nullptr, &LW::w_gate_up, true},
                            {"ffn_down.weight", Dim::kDModel, Dim::kDFF, nullptr, &LW::w_down, true}}};
// Gemma 3: q/k norms and the norms after attention and FFN.
constexpr Rows<2> kPostNorms = {
    {{"post_attention_norm.weight", Dim::kOne, Dim::kDModel, &LW::attn_post_norm, nullptr, true},
     {"post_ffw_norm.weight", Dim::kOne, Dim::kDModel, &LW::ffn_post_norm, nullptr, true}}};
constexpr auto kGemma3 = Table(kAttention, kQkNorms, kPostNorms, kFfn);

}  // namespace

int64_t DimValue(const ModelConfig& c, Dim d) {
  switch (d) {
    case Dim::kOne: return 1;
    case Dim::kDModel: return c.d_model;
    case Dim::kQDim: return c.q_dim();
    case Dim::kKvDim: return c.kv_dim();
    case Dim::kQkvDim: return c.q_dim() + 2 * static_cast<int64_t>(c.kv_dim());
    case Dim::kDFF: return c.d_ff;
    case Dim::k2DFF: return 2 * static_cast<int64_t>(c.d_ff);
    case Dim::kVocab: return c.n_vocab;
    case Dim::kHeadDim: return c.head_dim;
    case Dim::kHalfHeadDim: return c.head_dim / 2;
  }
  return 0;
}

std::span<const LayerTensor> LayerTensors(const ModelConfig& c) {
  // A shard's description says the features directly; the tables follow them.
  if (c.post_norms) return kGemma3;
  if (c.qk_norm) return kQwen3;
  if (c.arch == "qwen2") return kQwen2;
  if (c.arch == "phi3") return kPhi3;
  return kLlama;
}

bool IsGlobalTensor(std::string_view name) {
  return name == kTokenEmbd || name == kOutputNorm || name == kOutput || name == kRopeFreqs ||
         name == kRopeFactorsLong || name == kRopeFactorsShort;
}

Status CheckTensorNames(const gguf::Reader& reader, const ModelConfig& c) {
  for (const gguf::TensorInfo& t : reader.tensors()) {
    const std::string_view name = t.name;
    bool known = IsGlobalTensor(name);
    const int layer = LayerOf(name);
    if (layer >= 0 && layer < c.n_layers) {
      const std::string_view rest = name.substr(name.find('.', 4) + 1);
      for (const LayerTensor& lt : LayerTensors(c)) known = known || lt.name == rest;
    }
    if (!known) {
      return Unimplemented("%s: tensor %.*s is not one daisy's %s recipe uses (this model's "
                           "architecture or variant is not supported)", reader.name().c_str(),
                           static_cast<int>(name.size()), name.data(), c.arch.c_str());
    }
  }
  return Status::Ok();
}

int LayerOf(std::string_view name) {
  if (!name.starts_with("blk.")) return -1;
  int layer = -1;
  const char* begin = name.data() + 4;
  const char* end = name.data() + name.size();
  const auto [p, ec] = std::from_chars(begin, end, layer);
  if (ec != std::errc() || p == begin || p == end || *p != '.' || layer < 0) return -1;
  return layer;
}

}  // namespace daisy::model
