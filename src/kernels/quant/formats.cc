#include "kernels/quant/formats.h"

#include <cstring>

#include "kernels/quant/float_formats.h"
#include "kernels/quant/q4_0.h"
#include "kernels/quant/q8_0.h"

namespace daisy::kernels {
namespace {

void QuantizeF32(const float* x, void* out, int64_t n) { std::memcpy(out, x, n * sizeof(float)); }
void DequantizeF32(const void* in, float* y, int64_t n) { std::memcpy(y, in, n * sizeof(float)); }
void QuantizeF16(const float* x, void* out, int64_t n) { Fp32ToFp16Row(x, static_cast<uint16_t*>(out), n); }
void DequantizeF16(const void* in, float* y, int64_t n) { Fp16ToFp32Row(static_cast<const uint16_t*>(in), y, n); }
void QuantizeBF16(const float* x, void* out, int64_t n) { Fp32ToBf16Row(x, static_cast<uint16_t*>(out), n); }
void DequantizeBF16(const void* in, float* y, int64_t n) { Bf16ToFp32Row(static_cast<const uint16_t*>(in), y, n); }

// ggml_type ids (ggml.h): F32 0, F16 1, Q4_0 2, Q8_0 8, BF16 30.
constexpr WeightFormat kFormats[kNumWeightTypes] = {
    {WeightType::kF32, "f32", 0, 1, 4, ActType::kF32, false, 0, QuantizeF32, DequantizeF32, nullptr, nullptr},
    {WeightType::kF16, "f16", 1, 1, 2, ActType::kF16Rounded, false, 0, QuantizeF16, DequantizeF16, nullptr, nullptr},
    {WeightType::kBF16, "bf16", 30, 1, 2, ActType::kBF16Rounded, false, 0, QuantizeBF16, DequantizeBF16, nullptr,
     nullptr},
    {WeightType::kQ8_0, "q8_0", 8, kQ8BlockSize, sizeof(BlockQ8_0), ActType::kQ8, true, kQ8_0GroupBlockBytes,
     QuantizeQ8_0, DequantizeQ8_0, PackBlockQ8_0, UnpackBlockQ8_0},
    {WeightType::kQ4_0, "q4_0", 2, kQ4BlockSize, sizeof(BlockQ4_0), ActType::kQ8, true, kQ4_0GroupBlockBytes,
     QuantizeQ4_0, DequantizeQ4_0, PackBlockQ4_0, UnpackBlockQ4_0},
};

constexpr bool InTypeOrder() {
  for (int i = 0; i < kNumWeightTypes; ++i) {
    if (static_cast<int>(kFormats[i].type) != i) return false;
  }
  return true;
}
static_assert(InTypeOrder(), "kFormats rows must be in WeightType order");

}  // namespace

std::span<const WeightFormat> WeightFormats() { return kFormats; }

const WeightFormat& FormatOf(WeightType type) { return kFormats[static_cast<int>(type)]; }

const WeightFormat* FindFormat(uint32_t ggml_type) {
  for (const WeightFormat& f : kFormats) {
    if (f.ggml_type == ggml_type) return &f;
  }
  return nullptr;
}

const WeightFormat* FindFormat(std::string_view name) {
  for (const WeightFormat& f : kFormats) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

std::string WeightFormatNames() {
  std::string names;
  for (const WeightFormat& f : kFormats) names += (names.empty() ? "" : ", ") + std::string(f.name);
  return names;
}

const char* WeightTypeName(WeightType type) {
  const int i = static_cast<int>(type);
  return i >= 0 && i < kNumWeightTypes ? kFormats[i].name : "?";
}

int64_t ColsMultiple(WeightType type) {
  const int64_t block = FormatOf(type).block_elems;
  return block > kQBlock ? block : kQBlock;
}

}  // namespace daisy::kernels
