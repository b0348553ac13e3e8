// Every SIMD kernel table against the scalar reference on awkward sizes, and the batch
// invariance contract: a dot's bits never depend on the batch or the output range.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/activations.h"
#include "kernels/kernel_table.h"
#include "kernels/quant/blocks.h"
#include "kernels/quant/float_formats.h"
#include "kernels/weights.h"

namespace daisy::kernels {
namespace {

constexpr WeightType kTypes[] = {WeightType::kF32, WeightType::kF16, WeightType::kBF16,
                                 WeightType::kQ8_0, WeightType::kQ4_0};

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
  std::vector<uint8_t> gguf;
  switch (type) {
    case WeightType::kF32:
      gguf.resize(values.size() * 4);
      std::memcpy(gguf.data(), values.data(), gguf.size());
      break;
    case WeightType::kF16:
    case WeightType::kBF16:
      gguf.resize(values.size() * 2);
      if (type == WeightType::kF16) {
        Fp32ToFp16Row(values.data(), reinterpret_cast<uint16_t*>(gguf.data()), values.size());
      } else {
        Fp32ToBf16Row(values.data(), reinterpret_cast<uint16_t*>(gguf.data()), values.size());
      }
      break;
    case WeightType::kQ8_0:
      gguf.resize(values.size() / 32 * sizeof(BlockQ8_0));
      QuantizeRowQ8_0(values.data(), reinterpret_cast<BlockQ8_0*>(gguf.data()), values.size());
      break;
    case WeightType::kQ4_0:
      gguf.resize(values.size() / 32 * sizeof(BlockQ4_0));
      QuantizeRowQ4_0(values.data(), reinterpret_cast<BlockQ4_0*>(gguf.data()), values.size());
      break;
  }
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
  for (WeightType type : kTypes) {
    const TestMatrix m = MakeMatrix(type, 5, 96, 1);
    const TestActs a = MakeActs(type, 1, 96, 2);
    const std::vector<float> y = RunMatmul(ScalarKernels(), m, a, 1, 0, 5);
    // Dequantise both sides and dot in double: the reference must agree closely.
    std::vector<float> w(96), x(96);
    if (type == WeightType::kQ8_0 || type == WeightType::kQ4_0) {
      const ActQ8View v = ViewActQ8(a.bytes.data(), 96);
      for (int i = 0; i < 96; ++i) x[i] = v.d[i / 32] * v.qs[i];
    } else {
      std::memcpy(x.data(), a.bytes.data(), 96 * sizeof(float));
    }
    for (int o = 0; o < 5; ++o) {
      DequantizeRow(m.view, o, w.data());
      double want = 0;
      for (int i = 0; i < 96; ++i) want += double(w[i]) * x[i];
      EXPECT_NEAR(y[o], want, 1e-4 * (1 + std::fabs(want))) << WeightTypeName(type) << " row " << o;
    }
  }
}

TEST(Kernels, EveryTableMatchesScalarOnAwkwardSizes) {
  const int64_t shapes[][2] = {{1, 32}, {3, 64}, {5, 96}, {17, 160}, {67, 256}, {9, 4128}};
  for (const KernelTable* table : AllSupportedKernels()) {
    for (WeightType type : kTypes) {
      for (const auto& shape : shapes) {
        const int64_t rows = shape[0], cols = shape[1];
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

TEST(Kernels, BatchInvariantInEveryTable) {
  for (const KernelTable* table : AllSupportedKernels()) {
    for (WeightType type : kTypes) {
      const int64_t rows = 37, cols = 288;
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

TEST(Kernels, DotAndAxpyMatchScalar) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  for (const KernelTable* table : AllSupportedKernels()) {
    for (int n : {1, 7, 16, 33, 128, 131}) {
      std::vector<float> a(n), b(n), y1(n), y2(n);
      for (int i = 0; i < n; ++i) {
        a[i] = dist(rng);
        b[i] = dist(rng);
        y1[i] = y2[i] = dist(rng);
      }
      EXPECT_NEAR(table->dot_f32(a.data(), b.data(), n), ScalarKernels().dot_f32(a.data(), b.data(), n),
                  1e-4 * n) << table->name;
      table->axpy_f32(0.5f, a.data(), y1.data(), n);
      ScalarKernels().axpy_f32(0.5f, a.data(), y2.data(), n);
      for (int i = 0; i < n; ++i) EXPECT_NEAR(y1[i], y2[i], 1e-5) << table->name;
    }
  }
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
