// The table of weight formats: one row per weight type daisy computes with, saying everything
// the rest of daisy needs to know about it — its GGUF block (elements, bytes, the ggml type id),
// whether and how it is repacked (the packed layout every kernel reads, weights.h), the
// activation format its dot product consumes (activations.h), and its scalar quantise,
// dequantise, pack and unpack functions. The loader, the shard compiler and the kernel tables
// all read it; adding a weight type is one row here plus its kernels (kernel_table.h checks
// every ISA has one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace daisy::kernels {

enum class WeightType : uint8_t {
  kF32 = 0,
  kF16 = 1,
  kBF16 = 2,
  kQ8_0 = 3,
  kQ4_0 = 4,
  kQ4_1 = 5,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kIq4Nl = 8,
  kQ2K = 9,
  kQ3K = 10,
  kQ4K = 11,
  kQ5K = 12,
  kQ6K = 13,
  kIq4Xs = 14,
};
inline constexpr int kNumWeightTypes = 15;

// What a matrix kernel reads for the activation rows, converted once per row before a product
// (llama.cpp's vec_dot_type of the weight type).
enum class ActType : uint8_t {
  kF32 = 0,          // float values as they are
  kF16Rounded = 1,   // floats rounded to f16 and back (f16 weights)
  kBF16Rounded = 2,  // floats rounded to bf16 and back (bf16 weights)
  kQ8 = 3,           // 32-element q8_0 blocks with their integer sums (q8_0, q4_0, q5_0, iq4_nl)
  kQ8_1 = 4,         // kQ8 plus each block's rounded sum d * sum(q) (q4_1, q5_1: llama.cpp's q8_1)
  kQ8K = 5,          // 256-element q8_K blocks with sums per 16 (the K-quants, iq4_xs)
};
inline constexpr int kNumActTypes = 6;

// Quantised matrices are stored in groups of 16 rows, each block as steps of 4 elements of the
// 16 rows (weights.h); blocks of the packed types hold kQBlock elements.
inline constexpr int kRowGroup = 16;
inline constexpr int kGroupStep = 4;
inline constexpr int kQBlock = 32;

struct IntLayout;

struct WeightFormat {
  WeightType type;
  const char* name;     // "q4_0": in messages, and the suffix of a shard's packed tensors
  uint32_t ggml_type;   // the ggml_type id of GGUF tensors in this format
  int block_elems;      // elements per GGUF block (1 for plain floats)
  int block_bytes;      // bytes per GGUF block
  ActType act;          // the activation rows its matrix kernels consume
  bool packed;          // repacked into row groups (else read straight from the file)
  int group_block_bytes;  // packed: bytes of one (row group, block) of data
  int group_scales;       // packed: f16 values in `scales` per (row group, block)
  const IntLayout* layout;  // the integer family's description (int_layout.h), or null

  // GGUF rows <-> floats: n elements, a multiple of block_elems.
  void (*quantize_row)(const float* x, void* blocks, int64_t n);
  void (*dequantize_row)(const void* blocks, float* y, int64_t n);
  // Packed formats: one (row group, block). pack_block reads the GGUF block of each of the 16
  // rows (nullptr: a padding row past the matrix's end) and writes group_block_bytes of data
  // and the group_scales f16 values; for q8_0 and q4_0, unpack_block gives back the integer
  // values q[row][element] (value = scale * q); the formats with a `layout` unpack through it
  // (int_layout.h). Null for float formats.
  void (*pack_block)(const uint8_t* const blocks[kRowGroup], uint8_t* data, uint16_t* scales);
  void (*unpack_block)(const uint8_t* data, int8_t q[kRowGroup][kQBlock]);
};

// Every format, in WeightType order.
std::span<const WeightFormat> WeightFormats();
const WeightFormat& FormatOf(WeightType type);
// The format of a GGUF tensor type, or nullptr when daisy does not compute with it.
const WeightFormat* FindFormat(uint32_t ggml_type);
// By name ("q8_0"), or nullptr.
const WeightFormat* FindFormat(std::string_view name);
// "f32, f16, bf16, q8_0, q4_0, ...": for messages.
std::string WeightFormatNames();

const char* WeightTypeName(WeightType type);

// The row length every matrix kernel needs a multiple of for this type.
int64_t ColsMultiple(WeightType type);

}  // namespace daisy::kernels
