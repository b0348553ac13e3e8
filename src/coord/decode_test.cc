// SeqDecoder::Restart's plan for a resume: from what each stage kept of a sequence, which rows
// go again, in which forwards, ending at which stage; and what each stage reads again.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "coord/decode.h"

namespace daisy::coord {
namespace {

using pipeline::ForwardHeader;
using pipeline::OutputKind;

std::vector<int32_t> Prompt(int n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 100);
  return p;
}

// A decoder that read a 10-token prompt and settled its first token: 11 tokens of history, the
// last not yet sent.
void ReadPromptAndSettle(SeqDecoder& s) {
  while (!s.prompt_done()) {
    ForwardHeader h;
    std::vector<int32_t> tokens;
    s.AddPromptRows(h, tokens, 4);
  }
  pipeline::ResultMsg r;
  r.seqs.push_back({s.seq(), {pipeline::RowOutput{.token = 7, .logprob = 0, .top = {}, .logits = {}}}});
  ASSERT_TRUE(s.Settle(r, 1000, -1, 1, nullptr).ok());
  ASSERT_EQ(s.history().size(), 11u);
}

struct Sent {
  int32_t start, rows, last_stage;
  OutputKind out;
  bool operator==(const Sent&) const = default;
};

std::vector<Sent> Drain(SeqDecoder& s, size_t max_rows) {
  std::vector<Sent> sent;
  while (!s.prompt_done()) {
    ForwardHeader h;
    std::vector<int32_t> tokens;
    const int32_t stage = s.refill_stage();
    s.AddPromptRows(h, tokens, max_rows);
    EXPECT_EQ(h.last_stage, stage);
    EXPECT_EQ(tokens.size(), static_cast<size_t>(h.seqs.at(0).n_rows));
    EXPECT_EQ(tokens.front(), s.history()[static_cast<size_t>(h.seqs[0].start_pos)]);
    sent.push_back({h.seqs[0].start_pos, h.seqs[0].n_rows, h.last_stage, h.seqs[0].out.kind});
  }
  return sent;
}

TEST(Restart, OnlyTheStagesUpToTheLastThatLostRowsReadThem) {
  SeqDecoder s(3, Prompt(10), {}, 100, nullptr);
  ReadPromptAndSettle(s);
  // Stage 1 lost everything; stage 3 holds 4 positions (a restarted worker that caught up a
  // little, or a lagging one); stages 0 and 2 hold it all (11: more than the 10 sent and settled).
  const std::vector<int32_t> held = {11, 0, 10, 4};
  EXPECT_EQ(s.Restart(held, 100), (std::vector<size_t>{11, 11, 7, 7}));
  EXPECT_EQ(s.refill_stage(), 1);
  EXPECT_EQ(Drain(s, 3), (std::vector<Sent>{{0, 3, 1, OutputKind::kNone},
                                            {3, 1, 1, OutputKind::kNone},
                                            {4, 3, -1, OutputKind::kNone},
                                            {7, 3, -1, OutputKind::kNone},
                                            {10, 1, -1, OutputKind::kArgmax}}));
}

TEST(Restart, StagesThatKeptEverythingReadTheLastTokenOnly) {
  SeqDecoder s(3, Prompt(10), {}, 100, nullptr);
  ReadPromptAndSettle(s);
  const std::vector<int32_t> held = {11, 10, 14};  // more than settled: drafts, rows in flight
  EXPECT_EQ(s.Restart(held, 100), (std::vector<size_t>{1, 1, 1}));
  EXPECT_EQ(s.refill_stage(), -1);
  EXPECT_EQ(Drain(s, 16), (std::vector<Sent>{{10, 1, -1, OutputKind::kArgmax}}));
}

TEST(Restart, AFirstStageThatLostItsKvMakesNoLaterStageReadIt) {
  SeqDecoder s(3, Prompt(10), {}, 100, nullptr);
  ReadPromptAndSettle(s);
  const std::vector<int32_t> held = {0, 10, 10};
  EXPECT_EQ(s.Restart(held, 100), (std::vector<size_t>{11, 1, 1}));
  EXPECT_EQ(Drain(s, 16), (std::vector<Sent>{{0, 10, 0, OutputKind::kNone}, {10, 1, -1, OutputKind::kArgmax}}));
}

TEST(Restart, ARewindPastWhatASlidingWindowKeepsReadsEverythingAgain) {
  SeqDecoder a(3, Prompt(10), {}, 100, nullptr);
  ReadPromptAndSettle(a);
  // Stage 1 kept 5 positions: stage 0 (10) rewinds 5 to feed it. Allowed up to 8...
  const std::vector<int32_t> held = {10, 5, 10};
  EXPECT_EQ(a.Restart(held, 8), (std::vector<size_t>{6, 6, 1}));
  EXPECT_EQ(Drain(a, 16), (std::vector<Sent>{{5, 5, 1, OutputKind::kNone}, {10, 1, -1, OutputKind::kArgmax}}));
  // ...but not up to 2: every stage reads the history from its start.
  SeqDecoder b(3, Prompt(10), {}, 100, nullptr);
  ReadPromptAndSettle(b);
  EXPECT_EQ(b.Restart(held, 2), (std::vector<size_t>{11, 11, 11}));
  EXPECT_EQ(Drain(b, 16), (std::vector<Sent>{{0, 11, -1, OutputKind::kArgmax}}));
}

TEST(Restart, MidPromptOnlyWhatWasSentCounts) {
  SeqDecoder s(3, Prompt(20), {}, 100, nullptr);
  ForwardHeader h;
  std::vector<int32_t> tokens;
  s.AddPromptRows(h, tokens, 8);
  // The last stage says it holds 30 positions: more than was ever sent of this sequence, so
  // only 8 of them can be this prompt's.
  const std::vector<int32_t> held = {8, 8, 30};
  EXPECT_EQ(s.Restart(held, 100), (std::vector<size_t>{0, 0, 0}));  // the rest was never sent: no re-read
  EXPECT_EQ(Drain(s, 16), (std::vector<Sent>{{8, 12, -1, OutputKind::kArgmax}}));
  // A stage that lost the 8 rows sent reads them again, and only it (and those before it).
  SeqDecoder t(3, Prompt(20), {}, 100, nullptr);
  t.AddPromptRows(h, tokens, 8);
  const std::vector<int32_t> lost = {8, 0, 8};
  EXPECT_EQ(t.Restart(lost, 100), (std::vector<size_t>{8, 8, 0}));
  EXPECT_EQ(Drain(t, 16), (std::vector<Sent>{{0, 8, 1, OutputKind::kNone}, {8, 12, -1, OutputKind::kArgmax}}));
}

}  // namespace
}  // namespace daisy::coord
