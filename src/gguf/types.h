// GGUF on-disk enums: metadata value types and ggml tensor types, with the block geometry of
// every tensor type so that sizes can be validated even for types daisy does not compute with.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace daisy::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian uint32
inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr int kMaxDims = 4;          // GGML_MAX_DIMS
inline constexpr size_t kMaxNameLength = 63;  // GGML_MAX_NAME - 1 (llama.cpp rejects longer)

enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// Name as GGUF documentation spells it ("uint32", "string", ...); "?" for unknown values.
const char* ValueTypeName(ValueType type);
// Byte size of a fixed-size scalar type; 0 for string and array.
size_t ValueTypeSize(ValueType type);
bool IsValidValueType(uint32_t raw);

// ggml_type numbering (stable across llama.cpp versions; removed ids are never reused).
enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct TensorTypeTraits {
  TensorType type;
  const char* name;     // "f32", "q4_0", ... as llama.cpp prints them
  uint32_t block_size;  // elements per block
  uint32_t block_bytes; // bytes per block
};

// Traits of a raw ggml_type id, or nullopt when the id is unknown.
std::optional<TensorTypeTraits> FindTensorType(uint32_t raw);
const TensorTypeTraits& Traits(TensorType type);
// Parses "f32", "q8_0", ... (case-insensitive).
std::optional<TensorType> ParseTensorType(std::string_view name);

}  // namespace daisy::gguf
