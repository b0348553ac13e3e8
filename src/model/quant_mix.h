// Quantisation mixes: the file types of llama-quantize (Q4_K_M, Q6_K, IQ4_XS, ...) and the
// type each tensor of a Llama-family model gets under them. A mix has a base type and rules
// that give some tensors more bits (the output head, some attn_v and ffn_down layers), made
// the way llama.cpp's quantiser makes them (llama_tensor_get_type, without an importance
// matrix), so the files gen-model and `daisy quantize` write look like the ones users download.
// Used by gen-model and quantize; knows tensor names, not file formats.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/quant/formats.h"

namespace daisy::model {

struct QuantMix {
  const char* name;    // "q4_k_m": as llama-quantize spells it, lower case
  uint32_t file_type;  // general.file_type (llama_ftype)
  kernels::WeightType base;
  bool pure;  // every weight matrix the base type (gen-model's f32/f16/bf16/q8_0/q4_0)
};

// By name, case-insensitive: a file type ("Q4_K_M", "q6_k") or, as a pure mix, a weight type
// daisy computes ("q4_K"); nullopt for anything else.
std::optional<QuantMix> FindQuantMix(std::string_view name);
// "f32, f16, bf16, q8_0, q4_0, q4_1, ..., iq4_xs": the file types, for messages.
std::string QuantMixNames();
// The same mix with every weight matrix in the base type (llama-quantize --pure).
QuantMix Pure(const QuantMix& mix);
// Every weight matrix `type`, with the file type llama.cpp gives such a file.
QuantMix PureMix(kernels::WeightType type);

// What the rules need to know about the model.
struct MixModel {
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  bool tied_embeddings = false;  // no output.weight: token_embd is the head
};

// The type of the 2-D weight `tensor` ("blk.3.attn_v.weight") with rows of `cols` elements.
// Types whose block does not divide `cols` fall back as llama.cpp's do (q4_K -> q5_0, q6_K ->
// q8_0, ..., and f16 when even 32 does not divide).
kernels::WeightType MixTensorType(const QuantMix& mix, const MixModel& model, std::string_view tensor, int64_t cols);

}  // namespace daisy::model
