// The element-wise ops (ops.h): the scalar reference against formulas computed in double, and
// every kernel table against the reference — bit for bit for rms_norm, rope, silu_mul and add,
// within rounding for attention (dot and axpy sum in SIMD lanes). Tests of a table this host
// cannot run are skipped, naming it.
#include <gtest/gtest.h>

#include <bit>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/ops.h"

namespace daisy::kernels {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void ExpectBits(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::memcmp(&a[i], &b[i], 4), 0) << what << " at " << i << ": " << a[i] << " vs " << b[i];
  }
}

const OpKernels& Ref() { return ScalarKernels().ops; }

TEST(Ops, RmsNormReference) {
  for (int64_t d : {1, 7, 64, 100}) {
    const auto x = Random(d, 1), w = Random(d, 2);
    std::vector<float> y(d);
    Ref().rms_norm(x.data(), w.data(), d, 1e-5f, y.data());
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double scale = 1 / std::sqrt(ss / d + 1e-5);
    for (int64_t i = 0; i < d; ++i) EXPECT_NEAR(y[i], x[i] * scale * w[i], 1e-5 * (1 + std::fabs(y[i])));
  }
}

TEST(Ops, RopeAnglesAndRotation) {
  const int hd = 16;
  std::vector<float> cs(hd), factors(hd / 2);
  for (int i = 0; i < hd / 2; ++i) factors[i] = 1.0f + i;
  RopeAngles(37, hd, 10000.f, factors.data(), 1.0f, 1.0f, cs.data());
  for (int i = 0; i < hd / 2; ++i) {
    const double a = 37.0 * std::pow(10000.0, -2.0 * i / hd) / factors[i];
    EXPECT_NEAR(cs[2 * i], std::cos(a), 1e-5) << i;
    EXPECT_NEAR(cs[2 * i + 1], std::sin(a), 1e-5) << i;
  }
  // mscale (LongRoPE's attn_factor) multiplies cos and sin after they are taken, as ggml does.
  std::vector<float> scaled(hd);
  RopeAngles(37, hd, 10000.f, factors.data(), 1.0f, 1.1902f, scaled.data());
  for (int i = 0; i < hd; ++i) EXPECT_EQ(scaled[i], cs[i] * 1.1902f) << i;
  // kNorm turns (2i, 2i+1), kNeox (i, i + hd/2): both are the rotation by angle i.
  for (RopeMode mode : {RopeMode::kNorm, RopeMode::kNeox}) {
    const auto x = Random(2 * hd, 3);
    std::vector<float> y = x;
    Ref().rope(y.data(), 2, hd, cs.data(), mode);
    for (int h = 0; h < 2; ++h) {
      for (int i = 0; i < hd / 2; ++i) {
        const int a = h * hd + (mode == RopeMode::kNorm ? 2 * i : i);
        const int b = h * hd + (mode == RopeMode::kNorm ? 2 * i + 1 : i + hd / 2);
        const double c = cs[2 * i], s = cs[2 * i + 1];
        EXPECT_NEAR(y[a], x[a] * c - x[b] * s, 1e-5);
        EXPECT_NEAR(y[b], x[a] * s + x[b] * c, 1e-5);
      }
    }
  }
}

TEST(Ops, SiluMulReference) {
  auto g = Random(50, 4, 4.f);
  const auto u = Random(50, 5);
  const auto g0 = g;
  Ref().silu_mul(g.data(), u.data(), 50);
  for (int i = 0; i < 50; ++i) EXPECT_NEAR(g[i], g0[i] / (1 + std::exp(-double(g0[i]))) * u[i], 1e-5 * (1 + std::fabs(g[i])));
}

// Attention in double, head by head: the oracle for the reference.
std::vector<double> NaiveAttention(const AttentionArgs& a) {
  std::vector<double> out(a.group * a.head_dim, 0.0);
  for (int g = 0; g < a.group; ++g) {
    std::vector<double> s;
    double max = -1e300;
    for (int t = a.begin; t < a.end; ++t) {
      double d = 0;
      for (int i = 0; i < a.head_dim; ++i) d += double(a.q[g * a.head_dim + i]) * a.keys[t * a.kv_stride + i];
      s.push_back(d * a.scale);
      max = std::max(max, s.back());
    }
    double z = 0;
    for (double& v : s) z += (v = std::exp(v - max));
    for (int t = a.begin; t < a.end; ++t) {
      for (int i = 0; i < a.head_dim; ++i) out[g * a.head_dim + i] += s[t - a.begin] / z * a.values[t * a.kv_stride + i];
    }
  }
  return out;
}

struct AttentionCase {
  int group, head_dim, begin, end;
};

// Runs `ops.attention` on a fixed random sequence: keys and values of 2 KV heads per position,
// the case's head at the second.
std::vector<float> RunAttention(const OpKernels& ops, const AttentionCase& c, std::vector<double>* naive = nullptr) {
  const int64_t stride = 2 * c.head_dim;
  const auto keys = Random(c.end * stride, 6), values = Random(c.end * stride, 7), q = Random(c.group * c.head_dim, 8);
  std::vector<float> out(c.group * c.head_dim, -1.f), scores(c.group * (c.end - c.begin));
  AttentionArgs a;
  a.q = q.data();
  a.out = out.data();
  a.group = c.group;
  a.head_dim = c.head_dim;
  a.keys = keys.data() + c.head_dim;
  a.values = values.data() + c.head_dim;
  a.kv_stride = stride;
  a.begin = c.begin;
  a.end = c.end;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  a.scores = scores.data();
  ops.attention(a);
  if (naive != nullptr) *naive = NaiveAttention(a);
  return out;
}

const AttentionCase kAttentionCases[] = {{1, 16, 0, 1}, {1, 64, 0, 37}, {4, 32, 0, 20}, {8, 128, 5, 70}, {3, 24, 2, 9}};

TEST(Ops, AttentionReference) {
  for (const AttentionCase& c : kAttentionCases) {
    std::vector<double> want;
    const std::vector<float> got = RunAttention(Ref(), c, &want);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5) << c.group << "x" << c.head_dim << " at " << i;
  }
}

// A group's heads read each KV position once; the bits are those of each head on its own.
TEST(Ops, AttentionGroupsGiveEachHeadsOwnBits) {
  for (const KernelTable* t : AllSupportedKernels()) {
    const AttentionCase c{4, 32, 3, 40};
    const std::vector<float> grouped = RunAttention(t->ops, c);
    const int64_t stride = 2 * c.head_dim;
    const auto keys = Random(c.end * stride, 6), values = Random(c.end * stride, 7), q = Random(c.group * c.head_dim, 8);
    for (int g = 0; g < c.group; ++g) {
      std::vector<float> out(c.head_dim), scores(c.end - c.begin);
      AttentionArgs a;
      a.q = q.data() + g * c.head_dim;
      a.out = out.data();
      a.head_dim = c.head_dim;
      a.keys = keys.data() + c.head_dim;
      a.values = values.data() + c.head_dim;
      a.kv_stride = stride;
      a.begin = c.begin;
      a.end = c.end;
      a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      a.scores = scores.data();
      t->ops.attention(a);
      ExpectBits(std::vector<float>(grouped.begin() + g * c.head_dim, grouped.begin() + (g + 1) * c.head_dim), out,
                 std::string(t->name) + " head " + std::to_string(g));
    }
  }
}

// Several consecutive rows of a sequence in one call (a prompt's rows): each row's bits are those
// it gets alone, with and without a sliding window, in a ring, for 1 to kMaxAttentionRows rows
// and start positions that put the rows anywhere in a block of keys.
TEST(Ops, AttentionRowsGiveEachRowItsOwnBits) {
  struct Case {
    int group, head_dim, first_end, rows;
    int32_t window, ring;
  };
  const Case cases[] = {{4, 64, 1, 16, 0, 0},  {2, 32, 5, 7, 0, 0},    {1, 16, 30, 16, 0, 0}, {3, 24, 17, 3, 0, 0},
                        {4, 64, 40, 16, 9, 0}, {2, 80, 3, 12, 5, 0},   {4, 32, 50, 10, 8, 24}, {1, 64, 33, 16, 16, 48}};
  for (const KernelTable* t : AllSupportedKernels()) {
    for (const Case& c : cases) {
      const std::string what = std::string(t->name) + " group " + std::to_string(c.group) + " hd " +
                               std::to_string(c.head_dim) + " end " + std::to_string(c.first_end) + " rows " +
                               std::to_string(c.rows) + " window " + std::to_string(c.window) + " ring " +
                               std::to_string(c.ring);
      const int32_t last_end = c.first_end + c.rows - 1;
      const int64_t stride = 2 * c.head_dim;  // two KV heads a position; the case's is the second
      const int64_t slots = c.ring > 0 ? c.ring : last_end;
      const auto keys = Random(slots * stride, 16), values = Random(slots * stride, 17);
      const int64_t row_stride = 2 * c.group * c.head_dim;  // rows' query heads of two KV heads
      const auto q = Random(c.rows * row_stride, 18);
      AttentionArgs a;
      a.group = c.group;
      a.head_dim = c.head_dim;
      a.keys = keys.data() + c.head_dim;
      a.values = values.data() + c.head_dim;
      a.kv_stride = stride;
      a.ring = c.ring;
      a.scale = 0.3f;
      const auto begin_of = [&](int32_t end) { return c.window > 0 ? std::max(0, end - c.window) : 0; };
      std::vector<float> together(c.rows * row_stride, -7.f);
      std::vector<float> scores(AttentionScores(c.rows, c.group, last_end));
      AttentionArgs all = a;
      all.q = q.data() + c.group * c.head_dim;
      all.out = together.data() + c.group * c.head_dim;
      all.end = c.first_end;
      all.begin = begin_of(c.first_end);
      all.window = c.window;
      all.rows = c.rows;
      all.row_stride = row_stride;
      all.scores = scores.data();
      t->ops.attention(all);
      for (int i = 0; i < c.rows; ++i) {
        std::vector<float> alone(c.group * c.head_dim, -9.f), own_scores(AttentionScores(1, c.group, last_end));
        AttentionArgs one = a;
        one.q = q.data() + i * row_stride + c.group * c.head_dim;
        one.out = alone.data();
        one.end = c.first_end + i;
        one.begin = begin_of(one.end);
        one.scores = own_scores.data();
        t->ops.attention(one);
        const auto got = together.begin() + i * row_stride + c.group * c.head_dim;
        ExpectBits(alone, std::vector<float>(got, got + c.group * c.head_dim), what + " row " + std::to_string(i));
        // The other KV head's outputs are not touched.
        EXPECT_EQ(together[i * row_stride], -7.f) << what;
      }
    }
  }
}

// Attention's key_dots: a score's bits are the same in every block position and block size (the
// keys of a query come in blocks of 16 from its first position: a longer or shorter context, or
// another start, puts a key elsewhere in its block). Each equals the table's dot up to rounding;
// AVX-512's sums its lanes in _mm512_reduce_add_ps's pairs, checked here against that tree
// written out in scalar code (fused multiply-adds per lane, then lanes i + 8, + 4, + 2, + 1).
float TreeDot16(const float* q, const float* k, int64_t hd) {
  float lane[16] = {};
  for (int64_t i = 0; i < hd; ++i) lane[i % 16] = std::fma(q[i], k[i], lane[i % 16]);
  for (int half = 8; half >= 1; half /= 2) {
    for (int i = 0; i < half; ++i) lane[i] = lane[i] + lane[i + half];
  }
  return lane[0];
}

TEST(Ops, KeyDotsGiveEachKeyItsOwnBitsWhereverItIs) {
  for (const KernelTable* t : AllSupportedKernels()) {
    for (const int64_t hd : {16, 32, 64, 80, 128, 24, 7}) {
      const auto keys = Random(40 * hd, 11), q = Random(hd, 12);
      std::vector<const float*> at(40);
      for (int j = 0; j < 40; ++j) at[j] = keys.data() + j * hd;
      float alone[40];
      for (int j = 0; j < 40; ++j) t->ops.key_dots(q.data(), &at[j], 1, hd, &alone[j]);
      for (int start = 0; start < 24; start += 5) {
        for (int n = 1; n <= kKeyBlock; n += 3) {
          float got[kKeyBlock];
          t->ops.key_dots(q.data(), &at[start], n, hd, got);
          for (int j = 0; j < n; ++j) {
            ASSERT_EQ(std::bit_cast<uint32_t>(got[j]), std::bit_cast<uint32_t>(alone[start + j]))
                << t->name << " hd " << hd << " key " << start + j << " in a block of " << n;
          }
        }
      }
      for (int j = 0; j < 40; ++j) {
        ASSERT_NEAR(alone[j], t->ops.dot(q.data(), at[j], hd), 1e-5f * hd) << t->name << " hd " << hd;
        if (std::string(t->name) == "avx512") {
          ASSERT_EQ(std::bit_cast<uint32_t>(alone[j]), std::bit_cast<uint32_t>(TreeDot16(q.data(), at[j], hd)))
              << "hd " << hd << " key " << j;
        }
      }
    }
  }
}

// Attention's weighted_rows: the bits of n axpy calls in turn, for every block size and head size.
TEST(Ops, WeightedRowsAreAxpyCallsInTurn) {
  for (const KernelTable* t : AllSupportedKernels()) {
    for (const int64_t hd : {16, 32, 64, 80, 128, 24, 7}) {
      const auto rows = Random(kKeyBlock * hd, 13), p = Random(kKeyBlock, 14), start = Random(hd, 15);
      std::vector<const float*> at(kKeyBlock);
      for (int j = 0; j < kKeyBlock; ++j) at[j] = rows.data() + j * hd;
      for (int n = 1; n <= kKeyBlock; ++n) {
        std::vector<float> got(start), want(start);
        t->ops.weighted_rows(p.data(), at.data(), n, hd, got.data());
        for (int j = 0; j < n; ++j) t->ops.axpy(p[j], at[j], want.data(), hd);
        ExpectBits(want, got, std::string(t->name) + " hd " + std::to_string(hd) + " n " + std::to_string(n));
      }
    }
  }
}

// Softmax's numerators: exp(s - max) within 2 ulp of the exact value (subnormals within one
// subnormal step), the maximum's exactly 1, their sum within rounding of the exact sum, a NaN kept,
// -infinity giving 0; every length, tails included.
TEST(Ops, ExpSumIsSoftmaxsNumerators) {
  for (const KernelTable* t : AllSupportedKernels()) {
    std::mt19937 rng(21);
    for (const int64_t n : {1, 7, 16, 17, 64, 100, 513}) {
      std::uniform_real_distribution<float> u(-110.f, 20.f);
      std::vector<float> s(n);
      for (float& x : s) x = u(rng);
      s[n / 2] = 25.f;  // the maximum
      std::vector<float> e(s);
      const double sum = t->ops.exp_sum(e.data(), n);
      double want_sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double want = std::exp(static_cast<double>(s[i] - 25.f));  // the difference as computed: in float
        want_sum += want;
        const double tol = std::max(2.4e-7 * want, 1.5e-45);
        ASSERT_NEAR(e[i], want, tol) << t->name << " n " << n << " x " << s[i] - 25.f;
      }
      EXPECT_EQ(e[n / 2], 1.0f) << t->name;
      EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum) << t->name;
    }
    std::vector<float> odd = {0.f, -INFINITY, std::nanf(""), -1.f, -87.5f, -103.f, -200.f};
    t->ops.exp_sum(odd.data(), static_cast<int64_t>(odd.size()));
    EXPECT_EQ(odd[0], 1.0f) << t->name;
    EXPECT_EQ(odd[1], 0.0f) << t->name;
    EXPECT_TRUE(std::isnan(odd[2])) << t->name;
    EXPECT_NEAR(odd[3], std::exp(-1.0), 2.4e-7 * std::exp(-1.0)) << t->name;
    EXPECT_NEAR(odd[4], std::exp(-87.5), 2.4e-7 * std::exp(-87.5)) << t->name;  // just below the normals
    EXPECT_NEAR(odd[5], std::exp(-103.0), 1.5e-45) << t->name;                  // a few subnormal steps
    EXPECT_EQ(odd[6], 0.0f) << t->name;
  }
}

// The log-probabilities' normaliser: within a few 1e-7 of log(sum(exp)) in long double, over
// vocabulary-sized rows and short ones (tails), a row's result independent of any other; -inf
// entries (a grammar's mask) count nothing; a NaN gives NaN.
TEST(Ops, LogSumExpIsTheNormaliser) {
  for (const KernelTable* t : AllSupportedKernels()) {
    std::mt19937 rng(5);
    for (const int64_t n : {1, 15, 16, 33, 4096, 151936}) {
      std::normal_distribution<float> d(0.f, 4.f);
      std::vector<float> x(n);
      for (float& v : x) v = d(rng);
      const long double max = *std::max_element(x.begin(), x.end());
      long double sum = 0;
      for (const float v : x) sum += std::exp(static_cast<long double>(v) - max);
      const double want = static_cast<double>(max + std::log(sum));
      const double got = t->ops.log_sum_exp(x.data(), n);
      EXPECT_NEAR(got, want, 5e-7 * std::max(1.0, std::fabs(want))) << t->name << " n " << n;
      std::vector<float> twice(x);
      twice.insert(twice.end(), x.begin(), x.end());
      EXPECT_EQ(t->ops.log_sum_exp(twice.data() + n, n), got) << t->name << " n " << n;  // the same row elsewhere
    }
    const std::vector<float> masked = {-INFINITY, 2.f, -INFINITY, 2.f};
    EXPECT_NEAR(t->ops.log_sum_exp(masked.data(), 4), 2.0 + std::log(2.0), 1e-7) << t->name;
    const std::vector<float> one = {-3.5f};
    EXPECT_EQ(t->ops.log_sum_exp(one.data(), 1), -3.5) << t->name;
    const std::vector<float> nan = {0.f, std::nanf(""), 1.f};
    EXPECT_TRUE(std::isnan(t->ops.log_sum_exp(nan.data(), 3))) << t->name;
  }
}

class OpsTable : public ::testing::TestWithParam<std::string> {
 protected:
  const KernelTable* table = nullptr;
  void SetUp() override {
    table = FindKernels(GetParam().c_str());
    if (table == nullptr) GTEST_SKIP() << "this host lacks " << GetParam() << ": its ops were not run";
  }
};

TEST_P(OpsTable, RmsNormRopeSiluAddGiveTheReferenceBits) {
  for (int64_t d : {1, 5, 16, 17, 64, 100, 4099}) {
    const auto x = Random(d, 10 + d, 3.f), w = Random(d, 20 + d);
    std::vector<float> a(d), b(d);
    Ref().rms_norm(x.data(), w.data(), d, 1e-6f, a.data());
    table->ops.rms_norm(x.data(), w.data(), d, 1e-6f, b.data());
    ExpectBits(a, b, "rms_norm " + std::to_string(d));
    std::vector<float> g1 = x, g2 = x;
    Ref().silu_mul(g1.data(), w.data(), d);
    table->ops.silu_mul(g2.data(), w.data(), d);
    ExpectBits(g1, g2, "silu_mul " + std::to_string(d));
    std::vector<float> y1 = w, y2 = w;
    Ref().add(y1.data(), x.data(), d);
    table->ops.add(y2.data(), x.data(), d);
    ExpectBits(y1, y2, "add " + std::to_string(d));
  }
  for (int hd : {2, 6, 16, 24, 32, 64, 80, 128, 256}) {
    std::vector<float> cs(hd);
    RopeAngles(1234, hd, 500000.f, nullptr, 1.0f, 1.0f, cs.data());
    for (RopeMode mode : {RopeMode::kNorm, RopeMode::kNeox}) {
      std::vector<float> v1 = Random(3 * hd, hd, 2.f), v2 = v1;
      Ref().rope(v1.data(), 3, hd, cs.data(), mode);
      table->ops.rope(v2.data(), 3, hd, cs.data(), mode);
      ExpectBits(v1, v2, "rope hd " + std::to_string(hd) + (mode == RopeMode::kNorm ? " norm" : " neox"));
    }
  }
}

TEST_P(OpsTable, AttentionMatchesTheReference) {
  for (const AttentionCase& c : kAttentionCases) {
    const std::vector<float> want = RunAttention(Ref(), c), got = RunAttention(table->ops, c);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-6 * std::sqrt(c.end)) << table->name << " at " << i;
  }
}

std::vector<std::string> TableNames() {
  std::vector<std::string> names;
  for (const KernelSet& s : AllKernelSets()) names.push_back(s.isa);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Kernels, OpsTable, ::testing::ValuesIn(TableNames()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace daisy::kernels
