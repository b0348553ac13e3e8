// Every SIMD kernel table against the scalar reference on awkward sizes, and the batch
// invariance contract: a dot's bits never depend on the batch or the output range.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/activations.h"
#include "kernels/kernel_table.h"
#include "kernels/quant/q4_0.h"
#include "kernels/quant/q8_0.h"
#include "kernels/quant/search.h"
#include "kernels/quant/float_formats.h"
#include "kernels/weights.h"

namespace daisy::kernels {
namespace {

// Every type of the format table.
std::vector<WeightType> AllTypes() {
  std::vector<WeightType> types;
  for (const WeightFormat& f : WeightFormats()) types.push_back(f.type);
  return types;
}

// A random packed matrix, built the way a model loader builds it: GGUF bytes, then PackFromGguf.
struct TestMatrix {
  std::vector<uint8_t> data;
  std::vector<uint16_t> scales;
  WeightMatrix view;
};

TestMatrix MakeMatrix(WeightType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> values(rows * cols);
  for (float& v : values) v = dist(rng);
  std::vector<uint8_t> gguf(GgufBytes(type, rows, cols));
  FormatOf(type).quantize_row(values.data(), gguf.data(), rows * cols);
  TestMatrix m;
  m.data.resize(PackedDataBytes(type, rows, cols));
  m.scales.resize(PackedScaleBytes(type, rows, cols) / sizeof(uint16_t));
  PackFromGguf(type, gguf.data(), rows, cols, m.data.data(), m.scales.data());
  m.view = {type, rows, cols, m.data.data(), m.scales.empty() ? nullptr : m.scales.data()};
  return m;
}

struct TestActs {
  std::vector<uint8_t> bytes;
  size_t stride;
};

TestActs MakeActs(WeightType type, int n_rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 2.f);
  TestActs a;
  a.stride = (ActRowBytes(type, cols) + 63) / 64 * 64;
  a.bytes.resize(a.stride * n_rows);
  std::vector<float> x(cols);
  for (int r = 0; r < n_rows; ++r) {
    for (float& v : x) v = dist(rng);
    ConvertActRow(type, x.data(), cols, a.bytes.data() + r * a.stride);
  }
  return a;
}

std::vector<float> RunMatmul(const KernelTable& t, const TestMatrix& m, const TestActs& a, int n_rows,
                       int64_t o_begin, int64_t o_end) {
  std::vector<float> y(n_rows * m.view.rows, -1.f);
  t.matmul[static_cast<int>(m.view.type)](m.view, a.bytes.data(), a.stride, n_rows, y.data(),
                                          m.view.rows, o_begin, o_end);
  return y;
}

TEST(Kernels, ScalarMatchesDequantisedDot) {
  for (WeightType type : AllTypes()) {
    const int64_t cols = ColsMultiple(type) * 3;
    const TestMatrix m = MakeMatrix(type, 5, cols, 1);
    const TestActs a = MakeActs(type, 1, cols, 2);
    const std::vector<float> y = RunMatmul(ScalarKernels(), m, a, 1, 0, 5);
    // Dequantise both sides and dot in double: the reference must agree closely.
    std::vector<float> w(cols), x(cols);
    const ActType act = FormatOf(type).act;
    if (act == ActType::kQ8 || act == ActType::kQ8_1) {
      const ActQ8View v = ViewActQ8(a.bytes.data(), cols);
      for (int i = 0; i < cols; ++i) x[i] = v.d[i / 32] * v.qs[i];
    } else if (act == ActType::kQ8K) {
      const ActQ8KView v = ViewActQ8K(a.bytes.data(), cols);
      for (int i = 0; i < cols; ++i) x[i] = v.d[i / 256] * v.qs[i];
    } else {
      std::memcpy(x.data(), a.bytes.data(), cols * sizeof(float));
    }
    for (int o = 0; o < 5; ++o) {
      DequantizeRow(m.view, o, w.data());
      double want = 0;
      for (int i = 0; i < cols; ++i) want += double(w[i]) * x[i];
      // q4_1/q5_1 take each block's sum of x from Q8_1's f16-rounded s (as llama.cpp does).
      const double tol = act == ActType::kQ8_1 ? 2e-3 * (1 + std::fabs(want)) : 1e-4 * (1 + std::fabs(want));
      EXPECT_NEAR(y[o], want, tol) << WeightTypeName(type) << " row " << o;
    }
  }
}

// Each test below runs once per kernel table this build has, named after it; a table this host
// cannot run is skipped, saying so (ctest lists skipped tests), so the output shows which ISAs
// were exercised here and which were not.
class Table : public ::testing::TestWithParam<std::string> {
 protected:
  const KernelTable* table = nullptr;
  void SetUp() override {
    table = FindKernels(GetParam().c_str());
    if (table == nullptr) GTEST_SKIP() << "this host lacks " << GetParam() << ": its kernels were not run";
  }
};

std::vector<std::string> TableNames() {
  std::vector<std::string> names;
  for (const KernelSet& s : AllKernelSets()) names.push_back(s.isa);
  return names;
}

TEST_P(Table, MatchesScalarOnAwkwardSizes) {
  const int64_t shapes[][2] = {{1, 32},  {3, 64},   {5, 96},  {17, 160}, {67, 256},
                               {9, 4128}, {2, 512}, {33, 768}, {19, 1280}};
  {
    for (WeightType type : AllTypes()) {
      for (const auto& shape : shapes) {
        const int64_t rows = shape[0], cols = shape[1];
        if (cols % ColsMultiple(type) != 0) continue;
        const TestMatrix m = MakeMatrix(type, rows, cols, static_cast<uint32_t>(rows * cols));
        for (int n_rows : {1, 2, 3, 4, 5, 7, 8, 9, 13}) {
          const TestActs a = MakeActs(type, n_rows, cols, static_cast<uint32_t>(n_rows + cols));
          const std::vector<float> want = RunMatmul(ScalarKernels(), m, a, n_rows, 0, rows);
          const std::vector<float> got = RunMatmul(*table, m, a, n_rows, 0, rows);
          for (size_t i = 0; i < want.size(); ++i) {
            // Summation order differs; the error is bounded by the magnitude of the terms.
            const float tol = 2e-5f * std::sqrt(static_cast<float>(cols)) * 2.f * (1.f + std::fabs(want[i]));
            ASSERT_NEAR(got[i], want[i], tol)
                << table->name << " " << WeightTypeName(type) << " " << rows << "x" << cols
                << " n_rows " << n_rows << " at " << i;
          }
        }
      }
    }
  }
}

TEST_P(Table, BatchInvariant) {
  {
    for (WeightType type : AllTypes()) {
      const int64_t rows = 37, cols = ColsMultiple(type) == 32 ? 288 : 512;
      const TestMatrix m = MakeMatrix(type, rows, cols, 11);
      const int n_rows = 17;  // several passes over the weights in every table (8 rows at most per pass)
      const TestActs all = MakeActs(type, n_rows, cols, 12);
      const std::vector<float> batched = RunMatmul(*table, m, all, n_rows, 0, rows);
      for (int r = 0; r < n_rows; ++r) {
        // Row r alone, and with the output range split at odd places.
        TestActs one{std::vector<uint8_t>(all.bytes.begin() + r * all.stride,
                                          all.bytes.begin() + (r + 1) * all.stride),
                     all.stride};
        const std::vector<float> alone = RunMatmul(*table, m, one, 1, 0, rows);
        std::vector<float> split(rows, -1.f);
        for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 5}, {5, 6}, {6, 30}, {30, 37}}) {
          const std::vector<float> part = RunMatmul(*table, m, one, 1, b, e);
          for (int64_t o = b; o < e; ++o) split[o] = part[o];
        }
        for (int64_t o = 0; o < rows; ++o) {
          const float want = batched[r * rows + o];
          ASSERT_EQ(std::memcmp(&alone[o], &want, 4), 0)
              << table->name << " " << WeightTypeName(type) << " row " << r << " out " << o;
          ASSERT_EQ(std::memcmp(&split[o], &want, 4), 0) << table->name << " split";
        }
      }
    }
  }
}

TEST_P(Table, DotAndAxpyMatchScalar) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  {
    for (int n : {1, 7, 16, 33, 128, 131}) {
      std::vector<float> a(n), b(n), y1(n), y2(n);
      for (int i = 0; i < n; ++i) {
        a[i] = dist(rng);
        b[i] = dist(rng);
        y1[i] = y2[i] = dist(rng);
      }
      EXPECT_NEAR(table->ops.dot(a.data(), b.data(), n), ScalarKernels().ops.dot(a.data(), b.data(), n),
                  1e-4 * n) << table->name;
      table->ops.axpy(0.5f, a.data(), y1.data(), n);
      ScalarKernels().ops.axpy(0.5f, a.data(), y2.data(), n);
      for (int i = 0; i < n; ++i) EXPECT_NEAR(y1[i], y2[i], 1e-5) << table->name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, Table, ::testing::ValuesIn(TableNames()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// The AMX table gives the AVX-512 table's bits for every weight type, whether an activation row
// goes through a tile of 16 or through the AVX-512 kernel (the rows that do not fill a tile):
// counts around multiples of 16, block counts odd and even, row groups cut short, and output
// ranges split at odd places, over several threads' worth of calls.
TEST(Kernels, AmxGivesTheAvx512Bits) {
  const KernelTable* amx = AmxKernels();
  if (amx == nullptr) GTEST_SKIP() << "this host has no AMX (or Linux did not grant the tile state)";
  const KernelTable* avx512 = Avx512Kernels();
  ASSERT_NE(avx512, nullptr);
  for (WeightType type : AllTypes()) {
    for (const auto& [rows, cols] :
         {std::pair<int64_t, int64_t>{37, 288}, {16, 32}, {70, 512}, {19, 2080}, {33, 768}}) {
      if (cols % ColsMultiple(type) != 0) continue;
      const TestMatrix m = MakeMatrix(type, rows, cols, static_cast<uint32_t>(rows + cols));
      for (int n_rows : {15, 16, 17, 31, 32, 33, 48, 53}) {
        const TestActs a = MakeActs(type, n_rows, cols, static_cast<uint32_t>(n_rows * 7 + cols));
        const std::vector<float> want = RunMatmul(*avx512, m, a, n_rows, 0, rows);
        const std::vector<float> got = RunMatmul(*amx, m, a, n_rows, 0, rows);
        ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
            << WeightTypeName(type) << " " << rows << "x" << cols << " n_rows " << n_rows;
        std::vector<float> split(want.size(), -1.f);
        for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 3}, {3, 17}, {17, 18}, {18, rows}}) {
          if (b >= rows) break;
          const std::vector<float> part = RunMatmul(*amx, m, a, n_rows, b, std::min(e, rows));
          for (int r = 0; r < n_rows; ++r) {
            for (int64_t o = b; o < std::min(e, rows); ++o) split[r * rows + o] = part[r * rows + o];
          }
        }
        ASSERT_EQ(std::memcmp(split.data(), want.data(), want.size() * sizeof(float)), 0)
            << WeightTypeName(type) << " split, n_rows " << n_rows;
      }
    }
  }
}

// Every table this build has lists a kernel for every weight format and op, checked on any host
// (a set is constant data: building a table runs none of its code).
TEST(Kernels, EveryKernelSetIsComplete) {
  for (const KernelSet& s : AllKernelSets()) {
    const Result<KernelTable> t = BuildKernelTable(s);
    ASSERT_TRUE(t.ok()) << t.status().message();
    for (const WeightFormat& f : WeightFormats()) EXPECT_NE(t->Matmul(f.type), nullptr) << s.isa << " " << f.name;
  }
}

// DAISY_KERNEL_ISAS decides which SIMD sets a build has: exactly those are listed, scalar first.
TEST(Kernels, TheBuildListsTheTablesItWasConfiguredWith) {
  std::string names;
  for (const KernelSet& s : AllKernelSets()) {
    if (!names.empty()) names.push_back(' ');
    names.append(s.isa);
  }
  EXPECT_EQ(names, DAISY_CONFIGURED_TABLES);
}

// The CPU's name ends in the family and model /proc/cpuinfo gives (the kernel's own decoding of
// CPUID, independent of ours).
TEST(Kernels, TheCpuIsNamedWithTheFamilyAndModelLinuxReports) {
#if defined(__x86_64__) && defined(__linux__)
  std::string family, model;
  if (FILE* f = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f) != nullptr && (family.empty() || model.empty())) {
      const char* colon = std::strchr(line, ':');
      if (colon == nullptr) continue;
      std::string value = colon + 1;
      value.erase(0, value.find_first_not_of(" \t"));
      value.erase(value.find_last_not_of(" \t\n") + 1);
      if (std::strncmp(line, "cpu family", 10) == 0) family = value;
      if (std::strncmp(line, "model", 5) == 0 && std::isspace(static_cast<unsigned char>(line[5]))) model = value;
    }
    std::fclose(f);
  }
  if (family.empty() || model.empty()) GTEST_SKIP() << "no cpu family / model in /proc/cpuinfo";
  const std::string name = CpuModel();
  const std::string tail = "family " + family + " model " + model + ")";
  ASSERT_GE(name.size(), tail.size()) << name;
  EXPECT_EQ(name.substr(name.size() - tail.size()), tail) << name;
#else
  GTEST_SKIP() << "x86 Linux only";
#endif
}

TEST(Kernels, AMissingKernelIsAnErrorNamingTheTypeAndIsa) {
  const KernelSet scalar = AllKernelSets().front();
  std::vector<MatmulKernel> without_q4;
  for (const MatmulKernel& k : scalar.matmuls) {
    if (k.type != WeightType::kQ4_0) without_q4.push_back(k);
  }
  const Result<KernelTable> missing = BuildKernelTable({"test-isa", without_q4, scalar.ops});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("test-isa"), std::string::npos) << missing.status().message();
  EXPECT_NE(missing.status().message().find("q4_0"), std::string::npos) << missing.status().message();
  std::vector<MatmulKernel> doubled(scalar.matmuls.begin(), scalar.matmuls.end());
  doubled.push_back(doubled.front());
  const Result<KernelTable> twice = BuildKernelTable({"test-isa", doubled, scalar.ops});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("two matrix kernels for f32"), std::string::npos);
  OpKernels no_rope = *scalar.ops;
  no_rope.rope = nullptr;
  const Result<KernelTable> no_op = BuildKernelTable({"test-isa", scalar.matmuls, &no_rope});
  ASSERT_FALSE(no_op.ok());
  EXPECT_NE(no_op.status().message().find("no rope kernel"), std::string::npos) << no_op.status().message();
}

TEST(Kernels, FormatTableIsConsistent) {
  for (const WeightFormat& f : WeightFormats()) {
    EXPECT_EQ(&FormatOf(f.type), &f);
    EXPECT_EQ(FindFormat(f.ggml_type), &f) << f.name;
    EXPECT_EQ(FindFormat(std::string_view(f.name)), &f) << f.name;
    EXPECT_EQ(ColsMultiple(f.type) % f.block_elems, 0) << f.name;
    // A packed format packs and unpacks (itself or through its integer layout); a plain one is
    // read as it is.
    EXPECT_EQ(f.packed, f.pack_block != nullptr) << f.name;
    EXPECT_EQ(f.packed, f.unpack_block != nullptr || f.layout != nullptr) << f.name;
    EXPECT_EQ(f.packed, f.group_block_bytes > 0) << f.name;
    EXPECT_EQ(f.packed, f.group_scales > 0) << f.name;
    EXPECT_NE(f.quantize_row, nullptr) << f.name;
    EXPECT_NE(f.dequantize_row, nullptr) << f.name;
  }
  EXPECT_EQ(FindFormat(uint32_t{16}), nullptr);  // iq2_xxs: not computed
  EXPECT_EQ(FindFormat(uint32_t{39}), nullptr);  // mxfp4
  EXPECT_EQ(FindFormat(uint32_t{12})->type, WeightType::kQ4K);
  EXPECT_EQ(WeightFormatNames(), "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_xs");
}

TEST(Kernels, DispatchPicksASupportedTable) {
  const auto all = AllSupportedKernels();
  ASSERT_FALSE(all.empty());
  EXPECT_STREQ(all.front()->name, "scalar");
  EXPECT_EQ(&BestKernels(), all.back());
  EXPECT_EQ(FindKernels("no-such-isa"), nullptr);
}

}  // namespace
}  // namespace daisy::kernels

namespace daisy::kernels {
namespace {

// Found by fuzz_worker: activations that are NaN or infinite (a model that overflowed, or a
// peer's garbage) reached float -> int8 conversions out of range, which is undefined behaviour
// (UBSan in CI's sanitizer build would report it here). Every activation format now converts
// any floats; finite blocks beside them are converted exactly as before.
TEST(Kernels, ActivationRowsWithNanOrInfinityConvertWithoutUndefinedBehaviour) {
  const int64_t cols = 512;
  std::vector<float> x(cols), clean(cols);
  for (int64_t i = 0; i < cols; ++i) x[i] = clean[i] = std::sin(static_cast<float>(i) * 0.37f) * 3.f;
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[40] = std::numeric_limits<float>::infinity();
  x[300] = -std::numeric_limits<float>::infinity();
  for (WeightType t : {WeightType::kQ8_0, WeightType::kQ4_0, WeightType::kQ4K, WeightType::kQ6K, WeightType::kF32}) {
    const size_t bytes = ActRowBytes(t, cols);
    std::vector<uint8_t> a(bytes), b(bytes);
    ConvertActRow(t, x.data(), cols, a.data());
    ConvertActRow(t, clean.data(), cols, b.data());
    if (ActTypeOf(t) == ActType::kQ8 || ActTypeOf(t) == ActType::kQ8_1) {
      // Blocks 2..8 hold no bad value (the bad ones are in blocks 0, 1 and 9): their codes are unchanged.
      EXPECT_EQ(std::memcmp(a.data() + 64, b.data() + 64, 224), 0) << FormatOf(ActTypeOf(t)).name;
    }
  }
}

// The q8 activation rows (q8_0 and q8_1 with block sums) were made with std::fmax, std::fmin
// and std::nearbyint; they are now made inline (the library calls took ~18% of a prompt's
// time). The bytes must be what they were, for ties (x / d exactly k + 0.5: to even), signed
// zeros, NaN and infinities too: this is the former code, kept here as the reference.
void FormerQ8Row(const float* x, int64_t cols, uint8_t* p, float* block_s) {
  const int64_t nb = cols / kQBlock;
  int8_t* qs = reinterpret_cast<int8_t*>(p);
  int32_t* sums = reinterpret_cast<int32_t*>(p + cols);
  float* d = reinterpret_cast<float*>(p + cols + nb * 4);
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQBlock;
    float amax = 0.f;
    for (int j = 0; j < kQBlock; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float scale = amax / 127.f;
    const float inv = amax != 0.f ? 127.f / amax : 0.f;
    d[b] = Fp16ToFp32(Fp32ToFp16(scale));
    int32_t sum = 0;
    for (int j = 0; j < kQBlock; ++j) {
      qs[b * kQBlock + j] = static_cast<int8_t>(std::nearbyint(std::fmin(std::fmax(xb[j] * inv, -127.f), 127.f)));
      sum += qs[b * kQBlock + j];
    }
    sums[b] = sum;
    if (block_s != nullptr) block_s[b] = Fp16ToFp32(Fp32ToFp16(scale * static_cast<float>(sum)));
  }
}

TEST(Kernels, Q8ActivationRowsAreTheFormerBytes) {
  const int64_t cols = 4096;
  std::mt19937 rng(24);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::uniform_int_distribution<int> pick(0, 9);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  int ties = 0;
  for (int row = 0; row < 200; ++row) {
    std::vector<float> x(cols);
    for (int64_t i = 0; i < cols; ++i) {
      switch (pick(rng)) {
        case 0: x[i] = std::round(normal(rng) * 20.f) + 0.5f; break;  // ties where the block's amax is 127
        case 1: x[i] = -0.f; break;
        case 2: x[i] = row % 7 == 0 ? nan : 0.25f; break;
        case 3: x[i] = row % 11 == 0 ? (i % 2 ? inf : -inf) : -0.5f; break;
        default: x[i] = normal(rng) * (row % 3 == 0 ? 1e-30f : row % 3 == 1 ? 1.f : 1e20f);
      }
    }
    // Half the rows have blocks whose largest magnitude is exactly 127, so x / d is x itself and
    // the k + 0.5 values are exact ties.
    if (row % 2 == 0) {
      for (int64_t b = 0; b < cols / kQBlock; ++b) {
        for (int j = 0; j < kQBlock; ++j) {
          float& v = x[b * kQBlock + j];
          if (std::isfinite(v)) v = std::clamp(v, -126.5f, 126.5f);
          ties += std::isfinite(v) && v != std::floor(v) && v - std::floor(v) == 0.5f ? 1 : 0;
        }
        x[b * kQBlock + (b % kQBlock)] = b % 2 ? 127.f : -127.f;
      }
    }
    for (WeightType t : {WeightType::kQ8_0, WeightType::kQ4_1}) {
      const ActType at = ActTypeOf(t);
      ASSERT_TRUE(at == ActType::kQ8 || at == ActType::kQ8_1);
      const size_t bytes = ActRowBytes(t, cols);
      std::vector<uint8_t> now(bytes, 0xAB), former(bytes, 0xAB);
      ConvertActRow(t, x.data(), cols, now.data());
      FormerQ8Row(x.data(), cols, former.data(),
                  at == ActType::kQ8_1 ? reinterpret_cast<float*>(former.data() + ActRowBytes(WeightType::kQ8_0, cols))
                                       : nullptr);
      ASSERT_EQ(now, former) << "row " << row << ", " << FormatOf(at).name;
    }
  }
  EXPECT_GT(ties, 1000);
}

// Every activation row is the scalar code's bytes on any CPU (AVX-512 converts the q8 rows
// where the CPU has it): random rows at several scales, ties, signed zeros, NaN and infinities.
TEST(Kernels, ActivationRowsAreTheScalarCodesBytes) {
  const int64_t cols = 1024;
  std::mt19937 rng(26);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::uniform_int_distribution<int> pick(0, 12);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // Enough rows to meet products within rounding of a half (where a fused multiply-add would
  // round differently: seen about once in 10^5 values).
  for (int row = 0; row < 3000; ++row) {
    std::vector<float> x(cols);
    for (int64_t i = 0; i < cols; ++i) {
      switch (pick(rng)) {
        case 0: x[i] = std::round(normal(rng) * 20.f) + 0.5f; break;
        case 1: x[i] = row % 2 ? -0.f : 0.f; break;
        case 2: x[i] = row % 5 == 0 ? nan : 0.25f; break;
        case 3: x[i] = row % 9 == 0 ? (i % 2 ? inf : -inf) : -0.5f; break;
        case 4: x[i] = row % 13 == 0 ? 0.f : normal(rng); break;
        default: x[i] = normal(rng) * (row % 3 == 0 ? 1e-30f : row % 3 == 1 ? 1.f : 1e20f);
      }
    }
    if (row % 4 == 1) {
      for (int64_t b = 0; b < cols / 256; ++b) x[b * 256 + 3] = -127.f, x[b * 256 + 200] = 127.f;  // a tie of magnitudes
    }
    if (row % 17 == 0) std::fill(x.begin() + 256, x.begin() + 512, 0.f);  // an all-zero block
    for (WeightType t : {WeightType::kQ8_0, WeightType::kQ4_1, WeightType::kQ4K, WeightType::kIq4Xs}) {
      std::vector<uint8_t> now(ActRowBytes(t, cols), 0xAB), scalar(ActRowBytes(t, cols), 0xAB);
      ConvertActRow(t, x.data(), cols, now.data());
      ConvertActRowScalar(t, x.data(), cols, scalar.data());
      ASSERT_EQ(now, scalar) << "row " << row << ", " << FormatOf(ActTypeOf(t)).name;
    }
  }
}

// The same for the q8_K rows of the K-quants and iq4: the codes are ggml's quantize_row_q8_K
// (the value of largest magnitude maps to -127, ties to even, clamped at 127), recomputed here
// per block. Finite rows (a NaN here is another matter: the scale search is ggml's, NaN-blind).
TEST(Kernels, Q8KActivationRowsAreTheFormerCodes) {
  const int64_t cols = 2048;
  std::mt19937 rng(25);
  std::normal_distribution<float> normal(0.f, 3.f);
  for (int row = 0; row < 100; ++row) {
    std::vector<float> x(cols);
    for (int64_t i = 0; i < cols; ++i) x[i] = row % 4 == 0 ? std::round(normal(rng) * 10.f) + 0.5f : normal(rng);
    if (row % 4 == 0) {
      for (int64_t b = 0; b < cols / 256; ++b) x[b * 256 + 7] = -127.f;  // iscale exactly 1: the .5 values tie
    }
    for (int64_t i = 0; i < cols; ++i) x[i] = std::clamp(x[i], -127.f, 126.5f);
    std::vector<uint8_t> now(ActRowBytes(WeightType::kQ4K, cols));
    ConvertActRow(WeightType::kQ4K, x.data(), cols, now.data());
    for (int64_t b = 0; b < cols / 256; ++b) {
      float max = 0, amax = 0;
      for (int j = 0; j < 256; ++j) {
        if (std::fabs(x[b * 256 + j]) > amax) amax = std::fabs(x[b * 256 + j]), max = x[b * 256 + j];
      }
      const float iscale = -127.f / max;
      for (int j = 0; j < 256; ++j) {
        const int former = std::min(127, quant::NearestInt(iscale * x[b * 256 + j]));
        ASSERT_EQ(static_cast<int8_t>(now[b * 256 + j]), former) << "row " << row << ", block " << b << ", " << j;
      }
    }
  }
}

}  // namespace
}  // namespace daisy::kernels
