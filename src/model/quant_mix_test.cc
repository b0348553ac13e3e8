// The mixes make llama.cpp's per-tensor choices (llama_tensor_get_type, no imatrix), checked on
// the shapes of the files users download.
#include "model/quant_mix.h"

#include <gtest/gtest.h>

#include <string>

namespace daisy::model {
namespace {

using kernels::WeightType;

std::string V(int l) { return "blk." + std::to_string(l) + ".attn_v.weight"; }
std::string Down(int l) { return "blk." + std::to_string(l) + ".ffn_down.weight"; }

TEST(QuantMix, NamesAreLlamaQuantizes) {
  EXPECT_EQ(FindQuantMix("Q4_K_M")->file_type, 15u);
  EXPECT_EQ(FindQuantMix("q6_k")->file_type, 18u);
  EXPECT_EQ(FindQuantMix("iq4_xs")->file_type, 30u);
  EXPECT_EQ(FindQuantMix("q3_k_l")->base, WeightType::kQ3K);
  EXPECT_FALSE(FindQuantMix("q4_k_x"));
  EXPECT_FALSE(FindQuantMix("iq2_xxs"));  // daisy cannot compute it
  // A weight type alone is a pure mix.
  const auto q5k = FindQuantMix("q5_K");
  ASSERT_TRUE(q5k);
  EXPECT_TRUE(q5k->pure);
  EXPECT_EQ(q5k->base, WeightType::kQ5K);
  EXPECT_EQ(q5k->file_type, 16u);  // MOSTLY_Q5_K_S
}

// Llama 3.2 1B: 16 layers, 32 heads over 8 KV heads, tied embeddings.
TEST(QuantMix, Q4KMOnLlama32_1B) {
  const QuantMix mix = *FindQuantMix("q4_k_m");
  const MixModel m{16, 32, 8, true};
  EXPECT_EQ(MixTensorType(mix, m, "token_embd.weight", 2048), WeightType::kQ6K);  // tied: the head
  // use_more_bits: layers < 2, >= 14, and (l - 2) % 3 == 2.
  for (int l = 0; l < 16; ++l) {
    const bool more = l < 2 || l >= 14 || (l - 2) % 3 == 2;
    EXPECT_EQ(MixTensorType(mix, m, V(l), 2048), more ? WeightType::kQ6K : WeightType::kQ4K) << l;
    EXPECT_EQ(MixTensorType(mix, m, Down(l), 8192), more ? WeightType::kQ6K : WeightType::kQ4K) << l;
  }
  EXPECT_EQ(MixTensorType(mix, m, "blk.3.attn_q.weight", 2048), WeightType::kQ4K);
  EXPECT_EQ(MixTensorType(mix, m, "blk.3.ffn_up.weight", 2048), WeightType::kQ4K);
}

// Llama 3.1 8B: untied, so token_embd keeps the base type and output.weight gets q6_K.
TEST(QuantMix, HeadAndEmbeddingsOnLlama31_8B) {
  const MixModel m{32, 32, 8, false};
  for (const char* name : {"q2_k", "q3_k_m", "q4_k_s", "q4_k_m", "q5_k_m", "q6_k", "iq4_xs", "q4_0"}) {
    const QuantMix mix = *FindQuantMix(name);
    EXPECT_EQ(MixTensorType(mix, m, "output.weight", 4096), WeightType::kQ6K) << name;
    EXPECT_EQ(MixTensorType(mix, m, "token_embd.weight", 4096), mix.base) << name;
  }
  EXPECT_EQ(MixTensorType(*FindQuantMix("q8_0"), m, "output.weight", 4096), WeightType::kQ8_0);
  EXPECT_EQ(MixTensorType(*FindQuantMix("f16"), m, "output.weight", 4096), WeightType::kF16);
}

TEST(QuantMix, LowBitMixesGiveAttentionAndFfnDownMore) {
  const MixModel gqa4{32, 32, 8, false}, mha{32, 32, 32, false};
  const QuantMix q2 = *FindQuantMix("q2_k");
  EXPECT_EQ(MixTensorType(q2, gqa4, V(5), 4096), WeightType::kQ4K);
  EXPECT_EQ(MixTensorType(q2, mha, V(5), 4096), WeightType::kQ3K);
  EXPECT_EQ(MixTensorType(q2, gqa4, Down(5), 14336), WeightType::kQ3K);
  EXPECT_EQ(MixTensorType(q2, gqa4, "blk.5.attn_output.weight", 4096), WeightType::kQ3K);
  EXPECT_EQ(MixTensorType(q2, gqa4, "blk.5.ffn_gate.weight", 4096), WeightType::kQ2K);
  const QuantMix q3m = *FindQuantMix("q3_k_m");
  EXPECT_EQ(MixTensorType(q3m, gqa4, V(1), 4096), WeightType::kQ5K);
  EXPECT_EQ(MixTensorType(q3m, gqa4, V(2), 4096), WeightType::kQ4K);
  EXPECT_EQ(MixTensorType(q3m, gqa4, Down(1), 14336), WeightType::kQ5K);  // < 32 / 16
  EXPECT_EQ(MixTensorType(q3m, gqa4, Down(2), 14336), WeightType::kQ4K);
  EXPECT_EQ(MixTensorType(q3m, gqa4, "blk.9.attn_output.weight", 4096), WeightType::kQ4K);
  EXPECT_EQ(MixTensorType(q3m, gqa4, "blk.9.attn_k.weight", 4096), WeightType::kQ3K);
  const QuantMix q3s = *FindQuantMix("q3_k_s");
  EXPECT_EQ(MixTensorType(q3s, gqa4, V(0), 4096), WeightType::kQ3K);
  const QuantMix q4s = *FindQuantMix("q4_k_s");
  EXPECT_EQ(MixTensorType(q4s, gqa4, V(3), 4096), WeightType::kQ5K);
  EXPECT_EQ(MixTensorType(q4s, gqa4, V(4), 4096), WeightType::kQ4K);
  EXPECT_EQ(MixTensorType(q4s, gqa4, Down(3), 14336), WeightType::kQ5K);
  EXPECT_EQ(MixTensorType(q4s, gqa4, Down(4), 14336), WeightType::kQ4K);
  const QuantMix xs = *FindQuantMix("iq4_xs");
  EXPECT_EQ(MixTensorType(xs, gqa4, V(20), 4096), WeightType::kQ5K);
  EXPECT_EQ(MixTensorType(xs, mha, V(20), 4096), WeightType::kIq4Xs);
  EXPECT_EQ(MixTensorType(xs, gqa4, Down(3), 14336), WeightType::kQ5K);
  EXPECT_EQ(MixTensorType(xs, gqa4, Down(4), 14336), WeightType::kIq4Xs);
  // The 70B's attn_v: q3_K/q4_K become q5_K.
  const MixModel l70{80, 64, 8, false};
  EXPECT_EQ(MixTensorType(*FindQuantMix("q4_k_m"), l70, V(11), 8192), WeightType::kQ5K);
  EXPECT_EQ(MixTensorType(*FindQuantMix("q4_k_m"), l70, V(12), 8192), WeightType::kQ6K);
}

TEST(QuantMix, PureAndFallbacks) {
  const MixModel m{16, 32, 8, true};
  const QuantMix pure = Pure(*FindQuantMix("q4_k_m"));
  EXPECT_EQ(MixTensorType(pure, m, "token_embd.weight", 2048), WeightType::kQ4K);
  EXPECT_EQ(MixTensorType(pure, m, V(0), 2048), WeightType::kQ4K);
  // Rows the block does not divide.
  const QuantMix mix = *FindQuantMix("q4_k_m");
  EXPECT_EQ(MixTensorType(mix, m, "blk.3.ffn_up.weight", 896), WeightType::kQ5_0);
  EXPECT_EQ(MixTensorType(mix, m, Down(0), 4864 + 32), WeightType::kQ8_0);  // q6_K -> q8_0
  EXPECT_EQ(MixTensorType(*FindQuantMix("q5_k_s"), m, V(3), 896), WeightType::kQ5_1);
  EXPECT_EQ(MixTensorType(*FindQuantMix("iq4_xs"), MixModel{16, 32, 32, true}, V(3), 896), WeightType::kIq4Nl);
  EXPECT_EQ(MixTensorType(*FindQuantMix("q2_k"), m, "blk.3.ffn_up.weight", 896), WeightType::kQ4_0);
  EXPECT_EQ(MixTensorType(mix, m, "blk.3.ffn_up.weight", 48), WeightType::kF16);
  // The head with rows the base does not divide: q8_0.
  EXPECT_EQ(MixTensorType(mix, m, "token_embd.weight", 896), WeightType::kQ8_0);
}

}  // namespace
}  // namespace daisy::model
