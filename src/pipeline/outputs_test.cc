// The last stage's decisions (pipeline/outputs.h): the speculative accept/reject rule keeps the
// target's output distribution (a chi-square test on known distributions), greedy verifies
// return the accepted drafts and the correction, and malformed verify requests are refused (the
// forward codec, pipeline/protocol.h).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "pipeline/messages.h"
#include "pipeline/outputs.h"
#include "pipeline/protocol.h"
#include "kernels/kernel_table.h"
#include "runtime/sampler.h"

namespace daisy::pipeline {
namespace {

const kernels::OpKernels& Ops() { return kernels::BestKernels().ops; }

// ---- the accept/reject rule on known distributions ----------------------------------------

using DraftDistribution = std::vector<std::pair<int32_t, float>>;
constexpr int kVocab = 6;

// Chi-square statistic of `counts` against probabilities `p` (n draws).
double ChiSquare(const std::vector<int>& counts, const std::vector<double>& p, int n) {
  double chi = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = p[i] * n;
    if (e > 0) chi += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi;
}

std::vector<double> Softmax(const std::vector<float>& l, float temperature) {
  std::vector<double> p(l.size());
  double z = 0;
  for (size_t i = 0; i < l.size(); ++i) z += p[i] = std::exp(l[i] / temperature);
  for (double& v : p) v /= z;
  return p;
}

int32_t Draw(const DraftDistribution& q, std::mt19937_64& rng) {
  double u = std::uniform_real_distribution<double>(0, 1)(rng);
  for (auto [id, prob] : q) {
    u -= prob;
    if (u < 0) return id;
  }
  return q.back().first;
}

// Draws `n` verifications of two drafts [d0, d1], each drawn from its distribution q0, q1
// (empty: always the given token), over fixed row logits; checks that the first output is
// distributed as p0 and, where d0 was accepted, the second as p1 (chi-square, 5 degrees of
// freedom; 25 is beyond the 99.99th percentile). With `gated`, d1 is drafted only when q0 gave
// d0 at least 0.4 (adaptive K stops on the draft's own confidence): the second token, after an
// accepted d0, is then d1's verdict or the bonus, and either way distributed as p1.
void ExpectTargetDistribution(const DraftDistribution& q0, const DraftDistribution& q1, int32_t d0, int32_t d1,
                              bool gated = false) {
  const std::vector<float> l0 = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, -1.0f};
  const std::vector<float> l1 = {0.3f, 1.5f, 0.1f, -0.2f, 0.9f, 0.4f};
  std::vector<float> logits(l0);
  logits.insert(logits.end(), l1.begin(), l1.end());
  logits.insert(logits.end(), l0.begin(), l0.end());  // row 2 (the bonus): any logits
  OutputSpec out;
  out.kind = OutputKind::kVerify;
  out.sampling.temperature = 0.7f;
  out.sampling.top_k = 0;
  out.sampling.top_p = 1.0f;
  out.sampling.min_p = 0.0f;
  out.draft = {d0, d1};
  out.draft_q = {q0, q1};
  out.position = 10;
  const int n = 40000;
  std::vector<int> first(kVocab), second(kVocab);
  int second_n = 0;
  std::mt19937_64 rng(42);
  for (int t = 0; t < n; ++t) {
    out.sampling.seed = 1000 + t;
    if (!q0.empty()) d0 = Draw(q0, rng);
    if (!q1.empty()) d1 = Draw(q1, rng);
    float confidence = 1;
    for (auto [id, prob] : q0) {
      if (id == d0) confidence = prob;
    }
    if (!gated || confidence >= 0.4f) {
      out.draft = {d0, d1};
      out.draft_q = {q0, q1};
    } else {
      out.draft = {d0};
      out.draft_q = {q0};
    }
    std::vector<RowOutput> rows;
    Verify(out, logits, kVocab, Ops(), rows);
    ASSERT_GE(rows.size(), 1u);
    ASSERT_LE(rows.size(), 3u);
    ++first[rows[0].token];
    if (rows[0].token == d0) {
      ASSERT_GE(rows.size(), 2u);  // an accepted draft is followed by at least one more token
      ++second[rows[1].token];
      ++second_n;
    } else {
      EXPECT_EQ(rows.size(), 1u);  // a rejection ends the verify
    }
  }
  EXPECT_LT(ChiSquare(first, Softmax(l0, 0.7f), n), 25.0) << "first token";
  EXPECT_LT(ChiSquare(second, Softmax(l1, 0.7f), second_n), 25.0) << "second token";
}

TEST(Speculative, AcceptRejectKeepsTheTargetDistributionWithADraftDistribution) {
  // A draft that is wrong about the ranking, with support missing some of the target's tokens.
  ExpectTargetDistribution({{0, 0.5f}, {1, 0.3f}, {2, 0.2f}}, {{4, 0.6f}, {5, 0.4f}}, 0, 0);
}

TEST(Speculative, AcceptRejectKeepsTheTargetDistributionWhenTheDraftsConfidenceSetsK) {
  ExpectTargetDistribution({{0, 0.5f}, {1, 0.3f}, {2, 0.2f}}, {{4, 0.6f}, {5, 0.4f}}, 0, 0, true);
}

TEST(Speculative, AcceptRejectKeepsTheTargetDistributionWithCertainDrafts) {
  ExpectTargetDistribution({}, {}, 3, 1);  // prompt lookup: point masses
}

TEST(Speculative, GreedyVerifyReturnsTheAcceptedDraftsAndTheCorrection) {
  // Argmaxes per row: 3, 1, 0.
  std::vector<float> logits = {1, 0, 0, 5, 0, 0, 0, 4, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0};
  OutputSpec out;
  out.kind = OutputKind::kVerify;
  out.draft = {3, 2};
  std::vector<RowOutput> rows;
  Verify(out, logits, kVocab, Ops(), rows);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].token, 3);
  EXPECT_EQ(rows[1].token, 1);  // the correction for the rejected 2
  out.draft = {3, 1};
  rows.clear();
  Verify(out, logits, kVocab, Ops(), rows);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].token, 0);  // every draft accepted: the bonus token
}

TEST(Speculative, MalformedVerifyRequestsAreRefused) {
  Limits limits;
  limits.d_model = 4;
  limits.n_vocab = 100;
  ForwardHeader h;
  h.id = 1;
  h.dim = 4;
  SeqRows s{0, 0, 3, {}};
  s.out.kind = OutputKind::kVerify;
  s.out.draft = {5, 6};
  s.out.draft_q = {{{5, 0.5f}, {7, 0.5f}}, {}};
  h.seqs.push_back(s);
  const std::vector<float> act(12, 0.0f);
  auto decode = [&](const ForwardHeader& fh) {
    std::vector<uint8_t> bytes = EncodeForwardHeader(fh);
    std::vector<uint8_t> rows(12 * 4);
    EncodeRows(WireType::kF32, act.data(), 3, 4, rows.data());
    bytes.insert(bytes.end(), rows.begin(), rows.end());
    ForwardHeader out;
    std::span<const uint8_t> a;
    return DecodeForward(bytes, limits, /*outputs=*/true, out, a);
  };
  EXPECT_TRUE(decode(h).ok());
  ForwardHeader bad = h;
  bad.seqs[0].out.draft = {5};  // 3 rows need 2 drafts
  bad.seqs[0].out.draft_q = {{}};
  EXPECT_NE(decode(bad).message().find("1 drafted tokens for 3 rows"), std::string::npos);
  bad = h;
  bad.seqs[0].out.draft[1] = 100;  // outside the vocabulary
  EXPECT_NE(decode(bad).message().find("drafted token 100"), std::string::npos);
  bad = h;
  bad.seqs[0].out.draft_q[0][1].second = 1.5f;
  EXPECT_NE(decode(bad).message().find("draft probability 1.5"), std::string::npos);
  // A middle stage passes the requests on unread: a bad one is the last stage's to refuse, and
  // the header bytes before the activations are forwarded as they are.
  std::vector<uint8_t> bytes = EncodeForwardHeader(bad);
  const size_t header_bytes = bytes.size();
  std::vector<uint8_t> rows(12 * 4);
  EncodeRows(WireType::kF32, act.data(), 3, 4, rows.data());
  bytes.insert(bytes.end(), rows.begin(), rows.end());
  ForwardHeader middle;
  std::span<const uint8_t> a;
  ASSERT_TRUE(DecodeForward(bytes, limits, /*outputs=*/false, middle, a).ok());
  EXPECT_EQ(static_cast<size_t>(a.data() - bytes.data()), header_bytes);
  EXPECT_EQ(middle.seqs[0].n_rows, 3);
  EXPECT_EQ(middle.seqs[0].out.kind, OutputKind::kArgmax);  // default: not decoded
  EXPECT_TRUE(middle.seqs[0].out.draft.empty());
  // An oversized request section is refused even where it is not read.
  Limits tight = limits;
  tight.max_history = 0;
  tight.max_rows = 3;
  tight.max_seqs = 1;
  ForwardHeader big = h;
  big.seqs[0].out.history.assign(2000, 1);
  std::vector<uint8_t> big_bytes = EncodeForwardHeader(big);
  big_bytes.insert(big_bytes.end(), rows.begin(), rows.end());
  const Status s2 = DecodeForward(big_bytes, tight, /*outputs=*/false, middle, a);
  EXPECT_NE(s2.message().find("bytes of output requests"), std::string::npos) << s2.message();
}

// ---- token masks (constrained decoding) ---------------------------------------------------

std::vector<uint32_t> MaskOf(int n_vocab, std::initializer_list<int32_t> ids) {
  std::vector<uint32_t> m((n_vocab + 31) / 32, 0);
  for (int32_t id : ids) m[id >> 5] |= uint32_t{1} << (id & 31);
  return m;
}

TEST(TokenMasks, TravelBothWaysAndRestrictTheOutput) {
  Limits limits;
  limits.d_model = 4;
  limits.n_vocab = 100;
  ForwardHeader h;
  h.id = 2;
  h.dim = 4;
  SeqRows s{0, 0, 3, {}};
  s.out.kind = OutputKind::kVerify;
  s.out.draft = {5, 6};
  s.out.draft_q = {{}, {}};
  std::vector<uint32_t> dense(4, 0xFFFFFFFFu);  // every token: sent as a bitset
  s.out.masks = {MaskOf(100, {5, 9}), MaskOf(100, {6}), dense};
  h.seqs.push_back(s);
  std::vector<uint8_t> bytes = EncodeForwardHeader(h);
  std::vector<uint8_t> rows(12 * 4, 0);
  bytes.insert(bytes.end(), rows.begin(), rows.end());
  ForwardHeader got;
  std::span<const uint8_t> a;
  ASSERT_TRUE(DecodeForward(bytes, limits, /*outputs=*/true, got, a).ok());
  ASSERT_EQ(got.seqs[0].out.masks.size(), 3u);
  EXPECT_EQ(got.seqs[0].out.masks[0], MaskOf(100, {5, 9}));
  EXPECT_EQ(got.seqs[0].out.masks[1], MaskOf(100, {6}));
  EXPECT_EQ(got.seqs[0].out.masks[2], dense);
  // A mask count other than one per output row is refused.
  ForwardHeader bad = h;
  bad.seqs[0].out.masks.pop_back();
  bytes = EncodeForwardHeader(bad);
  bytes.insert(bytes.end(), rows.begin(), rows.end());
  EXPECT_NE(DecodeForward(bytes, limits, true, got, a).message().find("2 token masks for sequence 0"), std::string::npos);

  // At the last stage: the argmax of the allowed tokens, even where another token scores higher.
  std::vector<float> logits(100, 0.0f);
  logits[3] = 9.0f;  // the best, but not allowed
  logits[42] = 5.0f;
  logits[77] = 4.0f;
  SeqRows one{0, 0, 1, {}};
  one.out.masks = {MaskOf(100, {42, 77})};
  const ResultMsg r = ComputeOutputs(1, std::span<const SeqRows>(&one, 1), logits, 100, Ops());
  ASSERT_EQ(r.seqs[0].rows.size(), 1u);
  EXPECT_EQ(r.seqs[0].rows[0].token, 42);
  // Unconstrained, the same row gives its own argmax.
  one.out.masks.clear();
  EXPECT_EQ(ComputeOutputs(1, std::span<const SeqRows>(&one, 1), logits, 100, Ops()).seqs[0].rows[0].token, 3);
  // Sampled at a high temperature, only allowed tokens ever come out.
  one.out.kind = OutputKind::kSample;
  one.out.sampling.temperature = 5.0f;
  one.out.masks = {MaskOf(100, {11, 12, 13})};
  for (uint64_t pos = 0; pos < 200; ++pos) {
    one.out.position = pos;
    const int32_t t = ComputeOutputs(1, std::span<const SeqRows>(&one, 1), logits, 100, Ops()).seqs[0].rows[0].token;
    EXPECT_TRUE(t == 11 || t == 12 || t == 13) << t;
  }
}

// ---- the configure message -------------------------------------------------------------

TEST(ConfigureMessage, RoundTripsAndBoundsItsLimits) {
  Configure c{.session = 77, .next_hop = "127.0.0.1:9001", .wire = WireType::kBF16, .max_rows = 32,
              .max_seqs = 4, .seq_capacity = 300, .rope_context = 287, .resume = 76, .keep = {3, 9}};
  Configure got;
  ASSERT_TRUE(DecodeConfigure(EncodeConfigure(c), got).ok());
  EXPECT_EQ(got.session, 77u);
  EXPECT_EQ(got.resume, 76u);
  EXPECT_EQ(got.keep, (std::vector<int32_t>{3, 9}));
  // More sequences to keep than the session allows are refused before they are read.
  c.keep = {1, 2, 3, 4, 5};
  EXPECT_EQ(DecodeConfigure(EncodeConfigure(c), got).code(), StatusCode::kDataLoss);
  c.keep = {};
  EXPECT_EQ(got.next_hop, "127.0.0.1:9001");
  EXPECT_EQ(got.wire, WireType::kBF16);
  EXPECT_EQ(got.seq_capacity, 300);
  EXPECT_EQ(got.rope_context, 287);  // LongRoPE's factor choice travels to every worker
  // A RoPE context beyond the capacity, and a truncated message, are refused.
  c.rope_context = 301;
  const Status s = DecodeConfigure(EncodeConfigure(c), got);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("rope context 301"), std::string::npos) << s.message();
  c.rope_context = 0;
  std::vector<uint8_t> bytes = EncodeConfigure(c);
  bytes.resize(bytes.size() - 2);
  EXPECT_FALSE(DecodeConfigure(bytes, got).ok());
}

}  // namespace
}  // namespace daisy::pipeline
