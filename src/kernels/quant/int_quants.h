// Reference quantisers and dequantisers of the integer formats beyond q8_0/q4_0 (blocks.h):
// q4_1, q5_0, q5_1, iq4_nl (32-element blocks) and q2_K, q3_K, q4_K, q5_K, q6_K, iq4_xs
// (256-element super-blocks). Dequantisation gives ggml's values bit for bit (same float
// operations in the same order); quantisation makes ggml's choices without an importance
// matrix (its scale searches, search.h). n is the element count, a multiple of the block.
#pragma once

#include <cstdint>

namespace daisy::kernels {

void QuantizeQ4_1(const float* x, void* blocks, int64_t n);
void DequantizeQ4_1(const void* blocks, float* y, int64_t n);
void QuantizeQ5_0(const float* x, void* blocks, int64_t n);
void DequantizeQ5_0(const void* blocks, float* y, int64_t n);
void QuantizeQ5_1(const float* x, void* blocks, int64_t n);
void DequantizeQ5_1(const void* blocks, float* y, int64_t n);
void QuantizeIq4Nl(const float* x, void* blocks, int64_t n);
void DequantizeIq4Nl(const void* blocks, float* y, int64_t n);

void QuantizeQ2K(const float* x, void* blocks, int64_t n);
void DequantizeQ2K(const void* blocks, float* y, int64_t n);
void QuantizeQ3K(const float* x, void* blocks, int64_t n);
void DequantizeQ3K(const void* blocks, float* y, int64_t n);
void QuantizeQ4K(const float* x, void* blocks, int64_t n);
void DequantizeQ4K(const void* blocks, float* y, int64_t n);
void QuantizeQ5K(const float* x, void* blocks, int64_t n);
void DequantizeQ5K(const void* blocks, float* y, int64_t n);
void QuantizeQ6K(const float* x, void* blocks, int64_t n);
void DequantizeQ6K(const void* blocks, float* y, int64_t n);
void QuantizeIq4Xs(const float* x, void* blocks, int64_t n);
void DequantizeIq4Xs(const void* blocks, float* y, int64_t n);

}  // namespace daisy::kernels
