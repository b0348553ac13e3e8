#include "model/arch.h"

#include <cmath>

namespace daisy::model {
namespace {

// Gemma 3: every sixth layer global (RoPE base from the file, linear scaling when the file has
// a factor), the others local over `sliding_window` positions with base 10000 (llama.cpp's
// fixed values for the family); q multiplied by 1 / sqrt(head_dim) (27B: sqrt(d_model /
// n_heads)) before attention.
void Gemma3Implied(ModelConfig& c) {
  c.swa_pattern = 6;
  c.rope_theta_swa = 10000.0f;
  const bool is_27b = c.n_layers == 62;
  c.attn_q_scale = 1.0f / std::sqrt(static_cast<float>(is_27b && c.n_heads > 0 ? c.d_model / c.n_heads : c.head_dim));
}

Status Gemma3Read(const gguf::Reader& r, ModelConfig& c) {
  const std::string key = c.arch + ".attention.sliding_window";
  DAISY_ASSIGN_OR_RETURN(uint64_t window, r.GetUint(key));
  if (window == 0 || window > (1u << 24)) {
    return DataLoss("%s: %s = %llu is out of range", r.name().c_str(), key.c_str(),
                    static_cast<unsigned long long>(window));
  }
  c.sliding_window = static_cast<int32_t>(window);  // the rest ApplyArch set (Gemma3Implied)
  return Status::Ok();
}

void Gemma3Write(const ModelConfig& c, gguf::Writer& w) {
  w.AddUint32(c.arch + ".attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
}

// Phi-3: q multiplied by 1 / sqrt(head_dim) before attention (as Gemma). Its sliding window
// key is read by llama.cpp and then disabled ("Phi SWA is currently disabled"): so here too.
void Phi3Implied(ModelConfig& c) {
  c.attn_q_scale = c.head_dim > 0 ? 1.0f / std::sqrt(static_cast<float>(c.head_dim)) : 0;
}

constexpr ArchSpec kArchs[] = {
    // Llama (and the many models converted as Llama: Mistral 7B, TinyLlama, SmolLM, ...):
    // pre-norm blocks, RoPE on adjacent pairs, SwiGLU, optionally Llama 3.1's rope_freqs and
    // attention biases.
    {"llama", kernels::RopeMode::kNorm, Activation::kSilu, false, false, false, false, nullptr, nullptr, nullptr},
    // Qwen2, Qwen2.5, DeepSeek-R1-Distill-Qwen: Llama's block with q/k/v biases, NeoX RoPE.
    {"qwen2", kernels::RopeMode::kNeox, Activation::kSilu, false, false, false, true, nullptr, nullptr, nullptr},
    // Qwen3 (dense): per-head RMS norms on q and k before RoPE, no biases, head_dim its own key.
    {"qwen3", kernels::RopeMode::kNeox, Activation::kSilu, false, true, false, false, nullptr, nullptr, nullptr},
    // Gemma 3 (text): scaled embeddings, GELU(tanh) gating, norms before and after attention
    // and FFN, q/k norms, interleaved local and global layers, tied head.
    {"gemma3", kernels::RopeMode::kNeox, Activation::kGeluTanh, true, true, true, false, Gemma3Read, Gemma3Write,
     Gemma3Implied},
    // Phi-3, Phi-3.5, Phi-4 (dense): fused q/k/v and gate/up matrices, NeoX RoPE, q scaled.
    {"phi3", kernels::RopeMode::kNeox, Activation::kSilu, false, false, false, false, nullptr, nullptr, Phi3Implied},
};

}  // namespace

const ArchSpec* FindArch(std::string_view name) {
  for (const ArchSpec& a : kArchs) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::string ArchNames() {
  std::string names;
  for (const ArchSpec& a : kArchs) names += (names.empty() ? "" : ", ") + std::string(a.name);
  return names;
}

void ApplyArch(const ArchSpec& arch, ModelConfig& c) {
  c.arch = std::string(arch.name);
  c.rope_mode = arch.rope_mode;
  c.activation = arch.activation;
  c.embed_scale = arch.embed_scale;
  c.qk_norm = arch.qk_norm;
  c.post_norms = arch.post_norms;
  c.swa_pattern = 0;
  c.attn_q_scale = 0;
  if (arch.implied != nullptr) arch.implied(c);
  c.layers.clear();
}

}  // namespace daisy::model
