// Corrupt GGUF files must produce a clear Status, never a crash, hang or huge allocation.
// CI runs this under AddressSanitizer.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "gguf/reader.h"
#include "gguf/test_util.h"

namespace daisy::gguf {
namespace {

using testing::MakeSampleGguf;

// Touches every view the reader hands out, so ASan sees any out-of-bounds one.
void TouchEverything(const Reader& r) {
  uint64_t sum = 0;
  for (const MetadataEntry& e : r.metadata()) {
    for (char ch : e.key) sum += static_cast<uint8_t>(ch);
    for (char ch : e.value.str) sum += static_cast<uint8_t>(ch);
    for (std::string_view s : e.value.strings) {
      for (char ch : s) sum += static_cast<uint8_t>(ch);
    }
    for (uint8_t b : e.value.raw) sum += b;
  }
  for (const TensorInfo& t : r.tensors()) {
    for (uint8_t b : r.TensorData(t)) sum += b;
  }
  ::testing::Test::RecordProperty("checksum", static_cast<int>(sum & 0xff));
}

TEST(GgufCorruption, EveryTruncationIsRejectedWithTheOffset) {
  const std::vector<uint8_t> bytes = MakeSampleGguf();
  auto whole = Reader::FromBytes(bytes, "whole.gguf");
  ASSERT_TRUE(whole.ok());
  // Everything up to the end of the last tensor's data is needed; the alignment padding after
  // it is not.
  uint64_t needed = 0;
  for (const TensorInfo& t : whole->tensors()) {
    needed = std::max(needed, whole->data_offset() + t.offset + t.n_bytes);
  }
  ASSERT_LT(needed, bytes.size());
  for (size_t len = needed; len <= bytes.size(); ++len) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + len);
    EXPECT_TRUE(Reader::FromBytes(cut, "padding.gguf").ok()) << len;
  }
  for (size_t len = 0; len < needed; ++len) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + len);
    auto r = Reader::FromBytes(cut, "cut.gguf");
    ASSERT_FALSE(r.ok()) << "accepted a file truncated to " << len << " of " << bytes.size();
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
    EXPECT_NE(r.status().message().find("cut.gguf"), std::string::npos);
    EXPECT_NE(r.status().message().find("truncated"), std::string::npos)
        << "at length " << len << ": " << r.status().ToString();
  }
}

TEST(GgufCorruption, FlippedBytesNeverCrash) {
  const std::vector<uint8_t> bytes = MakeSampleGguf();
  std::mt19937 rng(1234);
  int rejected = 0;
  for (size_t pos = 0; pos < bytes.size(); ++pos) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> bad = bytes;
      bad[pos] ^= mask;
      auto r = Reader::FromBytes(bad, "flip.gguf");
      if (r.ok()) {
        TouchEverything(*r);
      } else {
        ++rejected;
        EXPECT_NE(r.status().message().find("flip.gguf"), std::string::npos);
      }
    }
  }
  // Flipping the header, lengths and types must be caught; data bytes need not be.
  EXPECT_GT(rejected, 100);
  // Random multi-byte damage as well.
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> bad = bytes;
    const int n = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < n; ++k) bad[rng() % bad.size()] = static_cast<uint8_t>(rng());
    auto r = Reader::FromBytes(bad, "random.gguf");
    if (r.ok()) TouchEverything(*r);
  }
}

// Overwrites the uint64 at `offset`.
void Poke64(std::vector<uint8_t>& bytes, size_t offset, uint64_t value) {
  std::memcpy(bytes.data() + offset, &value, 8);
}

TEST(GgufCorruption, AbsurdCountsAreBoundedBeforeAllocation) {
  const std::vector<uint8_t> bytes = MakeSampleGguf();
  {
    std::vector<uint8_t> bad = bytes;
    Poke64(bad, 8, ~0ull);  // tensor count
    auto r = Reader::FromBytes(bad, "bad.gguf");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("tensor count 18446744073709551615 cannot fit"),
              std::string::npos) << r.status().ToString();
  }
  {
    std::vector<uint8_t> bad = bytes;
    Poke64(bad, 16, 1ull << 40);  // metadata count
    auto r = Reader::FromBytes(bad, "bad.gguf");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("metadata count 1099511627776 cannot fit"),
              std::string::npos) << r.status().ToString();
  }
  {
    // The first key's length: a string longer than the file.
    std::vector<uint8_t> bad = bytes;
    Poke64(bad, 24, 1ull << 62);
    auto r = Reader::FromBytes(bad, "bad.gguf");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("has length 4611686018427387904"), std::string::npos)
        << r.status().ToString();
  }
}

TEST(GgufCorruption, HugeArrayCountIsRejected) {
  std::vector<uint8_t> bytes = MakeSampleGguf();
  // Find the tokens array: key text, then type 9, element type 8, then the count.
  const std::string key = "tokenizer.ggml.tokens";
  auto it = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
  ASSERT_NE(it, bytes.end());
  const size_t count_at = static_cast<size_t>(it - bytes.begin()) + key.size() + 4 + 4;
  Poke64(bytes, count_at, 1ull << 61);
  auto r = Reader::FromBytes(bytes, "bad.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("array of 2305843009213693952 strings cannot fit"),
            std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("metadata key 'tokenizer.ggml.tokens'"), std::string::npos);
}

TEST(GgufCorruption, BadMagicVersionAndAlignment) {
  std::vector<uint8_t> bytes = MakeSampleGguf();
  {
    std::vector<uint8_t> bad = bytes;
    bad[0] = 'X';
    auto r = Reader::FromBytes(bad, "bad.gguf");
    EXPECT_NE(r.status().message().find("not a GGUF file"), std::string::npos);
  }
  {
    std::vector<uint8_t> bad = bytes;
    bad[4] = 0;
    bad[7] = 3;  // big-endian version 3
    auto r = Reader::FromBytes(bad, "bad.gguf");
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(r.status().message().find("big-endian"), std::string::npos);
  }
  {
    std::vector<uint8_t> bad = bytes;
    bad[4] = 1;
    auto r = Reader::FromBytes(bad, "bad.gguf");
    EXPECT_NE(r.status().message().find("version 1 is obsolete"), std::string::npos);
  }
  {
    std::vector<uint8_t> bad = MakeSampleGguf(64);
    const std::string key = "general.alignment";
    auto it = std::search(bad.begin(), bad.end(), key.begin(), key.end());
    ASSERT_NE(it, bad.end());
    const size_t value_at = static_cast<size_t>(it - bad.begin()) + key.size() + 4;
    bad[value_at] = 48;  // not a power of two
    auto r = Reader::FromBytes(bad, "bad.gguf");
    EXPECT_NE(r.status().message().find("power of two"), std::string::npos)
        << r.status().ToString();
  }
}

TEST(GgufCorruption, TensorOutsideTheFileIsRejected) {
  std::vector<uint8_t> bytes = MakeSampleGguf();
  const std::string name = "c.weight";
  auto it = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  ASSERT_NE(it, bytes.end());
  // name, n_dims (4), two dims (16), type (4), then the offset.
  const size_t offset_at = static_cast<size_t>(it - bytes.begin()) + name.size() + 4 + 16 + 4;
  Poke64(bytes, offset_at, 1ull << 20);
  auto r = Reader::FromBytes(bytes, "bad.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor 'c.weight' needs bytes"), std::string::npos)
      << r.status().ToString();
  // And overlapping tensors: c placed on top of a.
  Poke64(bytes, offset_at, 0);
  auto o = Reader::FromBytes(bytes, "bad.gguf");
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("overlap"), std::string::npos) << o.status().ToString();
}

}  // namespace
}  // namespace daisy::gguf
