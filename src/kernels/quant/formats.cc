#include "kernels/quant/formats.h"

#include <cstring>

#include "kernels/quant/float_formats.h"
#include "kernels/quant/int_layout.h"
#include "kernels/quant/int_quants.h"
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

// One (row group, block) of a format of the integer family: decompose each row's GGUF block,
// then lay the 16 out (int_layout.h).
template <WeightType kType>
void PackInt(const uint8_t* const blocks[kRowGroup], uint8_t* data, uint16_t* scales) {
  RowBlock rows[kRowGroup];
  const RowBlock* present[kRowGroup];
  for (int l = 0; l < kRowGroup; ++l) {
    present[l] = nullptr;
    if (blocks[l] == nullptr) continue;
    DecomposeBlock(kType, blocks[l], rows[l]);
    present[l] = &rows[l];
  }
  PackIntBlockFor<*IntLayoutOf(kType)>(present, data, scales);
}

// A row of the integer family: {type, name, ggml id, GGUF block elements and bytes, activation}.
constexpr WeightFormat IntFormat(WeightType type, const char* name, uint32_t ggml_type, int block_elems,
                                 int block_bytes, ActType act, const IntLayout& layout,
                                 void (*quantize)(const float*, void*, int64_t),
                                 void (*dequantize)(const void*, float*, int64_t),
                                 void (*pack)(const uint8_t* const[kRowGroup], uint8_t*, uint16_t*)) {
  return {type, name, ggml_type, block_elems, block_bytes, act, true, layout.bytes(), kRowGroup * layout.f16s(),
          &layout, quantize, dequantize, pack, nullptr};
}

// ggml_type ids (ggml.h): F32 0, F16 1, Q4_0 2, Q4_1 3, Q5_0 6, Q5_1 7, Q8_0 8, Q2_K 10,
// Q3_K 11, Q4_K 12, Q5_K 13, Q6_K 14, IQ4_NL 20, IQ4_XS 23, BF16 30.
constexpr WeightFormat kFormats[kNumWeightTypes] = {
    {WeightType::kF32, "f32", 0, 1, 4, ActType::kF32, false, 0, 0, nullptr, QuantizeF32, DequantizeF32, nullptr,
     nullptr},
    {WeightType::kF16, "f16", 1, 1, 2, ActType::kF16Rounded, false, 0, 0, nullptr, QuantizeF16, DequantizeF16,
     nullptr, nullptr},
    {WeightType::kBF16, "bf16", 30, 1, 2, ActType::kBF16Rounded, false, 0, 0, nullptr, QuantizeBF16,
     DequantizeBF16, nullptr, nullptr},
    {WeightType::kQ8_0, "q8_0", 8, kQ8BlockSize, sizeof(BlockQ8_0), ActType::kQ8, true, kQ8_0GroupBlockBytes,
     kRowGroup, nullptr, QuantizeQ8_0, DequantizeQ8_0, PackBlockQ8_0, UnpackBlockQ8_0},
    {WeightType::kQ4_0, "q4_0", 2, kQ4BlockSize, sizeof(BlockQ4_0), ActType::kQ8, true, kQ4_0GroupBlockBytes,
     kRowGroup, nullptr, QuantizeQ4_0, DequantizeQ4_0, PackBlockQ4_0, UnpackBlockQ4_0},
    IntFormat(WeightType::kQ4_1, "q4_1", 3, 32, sizeof(BlockQ4_1), ActType::kQ8_1, *IntLayoutOf(WeightType::kQ4_1),
              QuantizeQ4_1, DequantizeQ4_1, PackInt<WeightType::kQ4_1>),
    IntFormat(WeightType::kQ5_0, "q5_0", 6, 32, sizeof(BlockQ5_0), ActType::kQ8, *IntLayoutOf(WeightType::kQ5_0),
              QuantizeQ5_0, DequantizeQ5_0, PackInt<WeightType::kQ5_0>),
    IntFormat(WeightType::kQ5_1, "q5_1", 7, 32, sizeof(BlockQ5_1), ActType::kQ8_1, *IntLayoutOf(WeightType::kQ5_1),
              QuantizeQ5_1, DequantizeQ5_1, PackInt<WeightType::kQ5_1>),
    IntFormat(WeightType::kIq4Nl, "iq4_nl", 20, 32, sizeof(BlockIq4Nl), ActType::kQ8,
              *IntLayoutOf(WeightType::kIq4Nl), QuantizeIq4Nl, DequantizeIq4Nl, PackInt<WeightType::kIq4Nl>),
    IntFormat(WeightType::kQ2K, "q2_K", 10, 256, sizeof(BlockQ2K), ActType::kQ8K, *IntLayoutOf(WeightType::kQ2K),
              QuantizeQ2K, DequantizeQ2K, PackInt<WeightType::kQ2K>),
    IntFormat(WeightType::kQ3K, "q3_K", 11, 256, sizeof(BlockQ3K), ActType::kQ8K, *IntLayoutOf(WeightType::kQ3K),
              QuantizeQ3K, DequantizeQ3K, PackInt<WeightType::kQ3K>),
    IntFormat(WeightType::kQ4K, "q4_K", 12, 256, sizeof(BlockQ4K), ActType::kQ8K, *IntLayoutOf(WeightType::kQ4K),
              QuantizeQ4K, DequantizeQ4K, PackInt<WeightType::kQ4K>),
    IntFormat(WeightType::kQ5K, "q5_K", 13, 256, sizeof(BlockQ5K), ActType::kQ8K, *IntLayoutOf(WeightType::kQ5K),
              QuantizeQ5K, DequantizeQ5K, PackInt<WeightType::kQ5K>),
    IntFormat(WeightType::kQ6K, "q6_K", 14, 256, sizeof(BlockQ6K), ActType::kQ8K, *IntLayoutOf(WeightType::kQ6K),
              QuantizeQ6K, DequantizeQ6K, PackInt<WeightType::kQ6K>),
    IntFormat(WeightType::kIq4Xs, "iq4_xs", 23, 256, sizeof(BlockIq4Xs), ActType::kQ8K,
              *IntLayoutOf(WeightType::kIq4Xs), QuantizeIq4Xs, DequantizeIq4Xs, PackInt<WeightType::kIq4Xs>),
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
