#include "model/arch.h"

namespace daisy::model {
namespace {

// Llama (and the many models converted as Llama: Mistral 7B v0.1-0.3, TinyLlama, ...): pre-norm
// blocks, RoPE on adjacent pairs, SwiGLU, optionally Llama 3.1's rope_freqs.
constexpr ArchSpec kArchs[] = {
    {"llama", kernels::RopeMode::kNorm, Activation::kSilu, false, false, false, nullptr},
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

}  // namespace daisy::model
