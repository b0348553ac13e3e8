#include "gguf/types.h"

#include <array>
#include <cctype>

#include "base/check.h"

namespace daisy::gguf {
namespace {

constexpr std::array<TensorTypeTraits, 32> kTensorTypes = {{
    {TensorType::kF32, "f32", 1, 4},
    {TensorType::kF16, "f16", 1, 2},
    {TensorType::kQ4_0, "q4_0", 32, 18},
    {TensorType::kQ4_1, "q4_1", 32, 20},
    {TensorType::kQ5_0, "q5_0", 32, 22},
    {TensorType::kQ5_1, "q5_1", 32, 24},
    {TensorType::kQ8_0, "q8_0", 32, 34},
    {TensorType::kQ8_1, "q8_1", 32, 36},
    {TensorType::kQ2_K, "q2_K", 256, 84},
    {TensorType::kQ3_K, "q3_K", 256, 110},
    {TensorType::kQ4_K, "q4_K", 256, 144},
    {TensorType::kQ5_K, "q5_K", 256, 176},
    {TensorType::kQ6_K, "q6_K", 256, 210},
    {TensorType::kQ8_K, "q8_K", 256, 292},
    {TensorType::kIQ2_XXS, "iq2_xxs", 256, 66},
    {TensorType::kIQ2_XS, "iq2_xs", 256, 74},
    {TensorType::kIQ3_XXS, "iq3_xxs", 256, 98},
    {TensorType::kIQ1_S, "iq1_s", 256, 50},
    {TensorType::kIQ4_NL, "iq4_nl", 32, 18},
    {TensorType::kIQ3_S, "iq3_s", 256, 110},
    {TensorType::kIQ2_S, "iq2_s", 256, 82},
    {TensorType::kIQ4_XS, "iq4_xs", 256, 136},
    {TensorType::kI8, "i8", 1, 1},
    {TensorType::kI16, "i16", 1, 2},
    {TensorType::kI32, "i32", 1, 4},
    {TensorType::kI64, "i64", 1, 8},
    {TensorType::kF64, "f64", 1, 8},
    {TensorType::kIQ1_M, "iq1_m", 256, 56},
    {TensorType::kBF16, "bf16", 1, 2},
    {TensorType::kTQ1_0, "tq1_0", 256, 54},
    {TensorType::kTQ2_0, "tq2_0", 256, 66},
    {TensorType::kMXFP4, "mxfp4", 32, 17},
}};

}  // namespace

const char* ValueTypeName(ValueType type) {
  switch (type) {
    case ValueType::kUint8: return "uint8";
    case ValueType::kInt8: return "int8";
    case ValueType::kUint16: return "uint16";
    case ValueType::kInt16: return "int16";
    case ValueType::kUint32: return "uint32";
    case ValueType::kInt32: return "int32";
    case ValueType::kFloat32: return "float32";
    case ValueType::kBool: return "bool";
    case ValueType::kString: return "string";
    case ValueType::kArray: return "array";
    case ValueType::kUint64: return "uint64";
    case ValueType::kInt64: return "int64";
    case ValueType::kFloat64: return "float64";
  }
  return "?";
}

size_t ValueTypeSize(ValueType type) {
  switch (type) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool: return 1;
    case ValueType::kUint16:
    case ValueType::kInt16: return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32: return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64: return 8;
    case ValueType::kString:
    case ValueType::kArray: return 0;
  }
  return 0;
}

bool IsValidValueType(uint32_t raw) { return raw <= static_cast<uint32_t>(ValueType::kFloat64); }

std::optional<TensorTypeTraits> FindTensorType(uint32_t raw) {
  for (const auto& t : kTensorTypes) {
    if (static_cast<uint32_t>(t.type) == raw) return t;
  }
  return std::nullopt;
}

const TensorTypeTraits& Traits(TensorType type) {
  for (const auto& t : kTensorTypes) {
    if (t.type == type) return t;
  }
  DAISY_CHECK(false && "TensorType missing from kTensorTypes");
  return kTensorTypes[0];
}

std::optional<TensorType> ParseTensorType(std::string_view name) {
  for (const auto& t : kTensorTypes) {
    std::string_view candidate = t.name;
    if (candidate.size() != name.size()) continue;
    bool equal = true;
    for (size_t i = 0; i < name.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(name[i])) !=
          std::tolower(static_cast<unsigned char>(candidate[i]))) {
        equal = false;
        break;
      }
    }
    if (equal) return t.type;
  }
  return std::nullopt;
}

}  // namespace daisy::gguf
