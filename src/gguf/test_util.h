// Test helper: builds a small but complete GGUF file (every metadata type, string arrays, three
// tensors of different types) and returns its bytes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/writer.h"

namespace daisy::gguf::testing {

inline std::vector<uint8_t> ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline std::filesystem::path TempPath(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         (name + "-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".gguf");
}

inline std::vector<uint8_t> MakeSampleGguf(uint32_t alignment = kDefaultAlignment) {
  const auto path = TempPath("sample");
  auto w = Writer::Create(path, alignment);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  w->AddString("general.architecture", "llama");
  w->AddUint32("llama.block_count", 2);
  w->AddInt32("test.int32", -7);
  w->AddUint64("test.uint64", 1ull << 40);
  w->AddFloat32("test.float32", 0.5f);
  w->AddBool("test.bool", true);
  const std::vector<std::string> tokens = {"a", "", "\xe4\xb8\x96", "<|eot_id|>"};
  w->AddStringArray("tokenizer.ggml.tokens", tokens);
  const std::vector<int32_t> types = {1, 1, 1, 3};
  w->AddInt32Array("tokenizer.ggml.token_type", types);
  const std::vector<float> scores = {0.f, -1.f, -2.f, -3.f};
  w->AddFloat32Array("tokenizer.ggml.scores", scores);
  const int64_t ne_a[] = {8, 3};
  const int64_t ne_b[] = {64};
  const int64_t ne_c[] = {32, 2};
  EXPECT_TRUE(w->AddTensor("a.weight", TensorType::kF32, ne_a).ok());
  EXPECT_TRUE(w->AddTensor("b.weight", TensorType::kF16, ne_b).ok());
  EXPECT_TRUE(w->AddTensor("c.weight", TensorType::kQ8_0, ne_c).ok());
  std::vector<uint8_t> a(8 * 3 * 4), b(64 * 2), c(2 * 34);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(3 * i);
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<uint8_t>(7 * i);
  EXPECT_TRUE(w->WriteTensorData(a).ok());
  // b in two pieces, c and the tail of b in one call: pieces need not match tensor bounds.
  EXPECT_TRUE(w->WriteTensorData(std::span(b).first(10)).ok());
  std::vector<uint8_t> rest(b.begin() + 10, b.end());
  rest.insert(rest.end(), c.begin(), c.end());
  EXPECT_TRUE(w->WriteTensorData(rest).ok());
  auto size = w->Finish();
  EXPECT_TRUE(size.ok()) << size.status().ToString();
  std::vector<uint8_t> bytes = ReadAll(path);
  std::filesystem::remove(path);
  return bytes;
}

}  // namespace daisy::gguf::testing
