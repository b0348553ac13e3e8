// The scheduler: concurrent requests get exactly the tokens each would get alone (greedy and
// sampled; one stage, an in-process split and workers over loopback), admission limits,
// cancellation, and a lost worker.
#include "coord/scheduler.h"

#include "coord/generate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

#include "model/generator.h"
#include "testing/topology.h"
#include "pipeline/worker.h"
#include "shard/compile.h"
#include "shard/load.h"
#include "tokenizer/hf_import.h"

namespace daisy::coord {
namespace {

namespace fs = std::filesystem;
using pipeline::Pipeline;

struct Env {
  daisy::testing::TempDir tmp{"scheduler-test"};
  fs::path dir = tmp.path;
  fs::path model = daisy::testing::MakeModel({.layers = 4, .seed = 11}, dir / "model.gguf");
  Env() {
    // A draft: the model's first two layers, embeddings and head.
    daisy::testing::MakeModel({.layers = 2, .seed = 11, .branch_layers = 4}, dir / "draft.gguf");
    daisy::testing::CompileShards(model, dir / "2", 2);
  }
};

Env& TheEnv() {
  static Env* env = new Env();
  return *env;
}

constexpr int kCapacity = 128;

// The model whole, split in this process, or with stage 1 in a worker over loopback.
struct Topology : daisy::testing::Topology {
  explicit Topology(const std::string& kind)
      : daisy::testing::Topology(
            {.kind = kind, .model = TheEnv().model, .shards = TheEnv().dir / "2", .capacity = kCapacity, .max_seqs = 16}) {}
};

using daisy::testing::Prompt;

runtime::SamplingParams Sampled(uint64_t seed) {
  runtime::SamplingParams s;
  s.temperature = 0.9f;
  s.seed = seed;
  return s;
}

// The tokens one request gets alone, through pipeline::Generate on a fresh whole model.
std::vector<int32_t> Alone(const RequestParams& r) {
  Topology s("whole");
  GenerateOptions g;
  g.max_tokens = r.max_tokens;
  g.prefill_chunk = 5;
  g.sampling = r.sampling;
  auto ids = Generate(*s.p, 0, r.prompt, g, nullptr, nullptr);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  return *ids;
}

std::vector<int32_t> Collect(Request& r, Finish* finish = nullptr) {
  std::vector<int32_t> out;
  while (true) {
    auto u = r.Wait(out.size(), std::chrono::milliseconds(20000));
    out.insert(out.end(), u.tokens.begin(), u.tokens.end());
    if (u.done) {
      EXPECT_TRUE(u.finish != Finish::kError) << u.error.ToString();
      if (finish != nullptr) *finish = u.finish;
      return out;
    }
  }
}

std::vector<RequestParams> Mixed(int n) {
  std::vector<RequestParams> rs;
  for (int i = 0; i < n; ++i) {
    RequestParams r;
    r.prompt = Prompt(3 + (i * 7) % 40, i);  // some prompts span several prefill chunks
    r.max_tokens = 6 + (i * 5) % 17;
    if (i % 3 == 2) r.sampling = Sampled(100 + i);
    r.stop_at_eog = false;
    rs.push_back(std::move(r));
  }
  return rs;
}

void ExpectSameAsAlone(const std::string& kind, int micro_batches) {
  const auto requests = Mixed(7);
  std::vector<std::vector<int32_t>> want;
  for (const auto& r : requests) want.push_back(Alone(r));
  Topology s(kind);
  SchedulerOptions o;
  o.micro_batches = micro_batches;
  o.max_seqs = 4;  // fewer slots than requests: some wait in the queue and join later
  o.seq_capacity = kCapacity;
  o.prefill_chunk = 8;
  Scheduler sched(*s.p, o);
  std::vector<std::shared_ptr<Request>> live;
  for (const auto& r : requests) {
    auto q = sched.Submit(r);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    live.push_back(*q);
  }
  for (size_t i = 0; i < live.size(); ++i) {
    Finish f;
    EXPECT_EQ(Collect(*live[i], &f), want[i]) << kind << " request " << i;
    EXPECT_EQ(f, Finish::kLength);
  }
  const SchedulerMetrics m = sched.metrics();
  EXPECT_EQ(m.requests_by_finish[static_cast<int>(Finish::kLength)], requests.size());
  // Batching happened: several requests decoded in one forward (prompt chunks alone would give
  // more rows than forwards without any two users sharing a pass over the weights).
  EXPECT_GT(m.batched_decode_forwards, 0u);
}

TEST(Scheduler, ConcurrentRequestsMatchAloneOnTheWholeModel) { ExpectSameAsAlone("whole", 1); }
TEST(Scheduler, ConcurrentRequestsMatchAloneOnAnInProcessSplit) { ExpectSameAsAlone("split", 2); }
TEST(Scheduler, ConcurrentRequestsMatchAloneOverLoopback) { ExpectSameAsAlone("remote", 2); }

// Speculative and plain sequences share micro-batches; greedy speculative requests get
// exactly their tokens alone (sampled ones run plainly here, so they can be compared too).
void ExpectSpeculativeSameAsAlone(const std::string& kind, int micro_batches, bool lookup) {
  auto requests = Mixed(8);
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].max_tokens += 20;
    requests[i].speculate = requests[i].sampling.temperature == 0 && i != 4;
    if (lookup) {  // repetitive prompts give prompt lookup something to find
      requests[i].prompt.clear();
      for (int r = 0; r < 3; ++r) {
        for (int j = 0; j < 4 + static_cast<int>(i); ++j) requests[i].prompt.push_back((j * 13 + static_cast<int>(i)) % 250 + 1);
      }
    }
  }
  std::vector<std::vector<int32_t>> want;
  for (const auto& r : requests) want.push_back(Alone(r));
  Topology s(kind);
  runtime::ThreadPool draft_pool(1);
  auto draft_model = model::Model::Load(TheEnv().dir / "draft.gguf").value();
  Pipeline draft({draft_model.get()}, {{.max_batch_rows = 64, .seq_capacity = kCapacity, .max_seqs = 16}},
                 kernels::BestKernels(), draft_pool, nullptr);
  ModelDrafter model_drafter(draft);
  LookupDrafter lookup_drafter;
  SchedulerOptions o;
  o.micro_batches = micro_batches;
  o.max_seqs = 4;
  o.seq_capacity = kCapacity;
  o.prefill_chunk = 8;
  o.drafter = lookup ? static_cast<Drafter*>(&lookup_drafter) : &model_drafter;
  o.spec_k_max = 6;
  Scheduler sched(*s.p, o);
  std::vector<std::shared_ptr<Request>> live;
  for (const auto& r : requests) live.push_back(sched.Submit(r).value());
  for (size_t i = 0; i < live.size(); ++i) {
    EXPECT_EQ(Collect(*live[i]), want[i]) << kind << (lookup ? " lookup" : " draft") << " request " << i;
    if (!requests[i].speculate) {
      EXPECT_EQ(live[i]->drafted(), 0);
    }
  }
  const SchedulerMetrics m = sched.metrics();
  EXPECT_GT(m.verifies, 0u);
  EXPECT_GT(m.accepted_tokens, 0u);
  if (!lookup) {
    EXPECT_LT(m.accepted_tokens, m.drafted_tokens);
  }
  // Verifies yield more than one token each: fewer decode rows than tokens would otherwise need.
  EXPECT_EQ(m.requests_by_finish[static_cast<int>(Finish::kLength)], requests.size());
}

TEST(Scheduler, SpeculativeRequestsMatchAloneOnTheWholeModel) { ExpectSpeculativeSameAsAlone("whole", 1, false); }
TEST(Scheduler, SpeculativeRequestsMatchAloneOverLoopback) { ExpectSpeculativeSameAsAlone("remote", 2, false); }
TEST(Scheduler, PromptLookupRequestsMatchAloneOnAnInProcessSplit) { ExpectSpeculativeSameAsAlone("split", 2, true); }

// With a fixed K a sequence's drafts depend on its own tokens only, so each concurrent request
// drafts and accepts exactly as many tokens as it does alone: a draft cache mixed up between
// sequences would lower acceptance without changing a single token. `ks`: each request's own
// K (RequestParams::spec_k; -1: the server's `server_k`).
// The scheduler drafts for a micro-batch's sequences together: the most jobs in one call.
class JointDrafter : public ModelDrafter {
 public:
  using ModelDrafter::ModelDrafter;
  void ProposeAll(std::span<DraftJob> jobs) override {
    most_jobs = std::max(most_jobs, jobs.size());
    ModelDrafter::ProposeAll(jobs);
  }
  size_t most_jobs = 0;
};

void ExpectEachDraftsAsAlone(int server_k, const std::vector<int>& ks) {
  Topology s("whole");
  runtime::ThreadPool draft_pool(1);
  auto draft_model = model::Model::Load(TheEnv().dir / "draft.gguf").value();
  Pipeline draft({draft_model.get()}, {{.max_batch_rows = 64, .seq_capacity = kCapacity, .max_seqs = 16}},
                 kernels::BestKernels(), draft_pool, nullptr);
  JointDrafter drafter(draft);
  std::vector<RequestParams> requests;
  for (size_t i = 0; i < ks.size(); ++i) {
    RequestParams r;
    r.prompt = Prompt(5 + 3 * static_cast<int>(i), 40 + static_cast<int>(i));
    r.max_tokens = 30;
    r.stop_at_eog = false;
    r.speculate = true;
    r.spec_k = ks[i];
    requests.push_back(std::move(r));
  }
  std::vector<GenerateStats> alone(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    GenerateOptions g;
    g.max_tokens = requests[i].max_tokens;
    g.prefill_chunk = 8;
    g.drafter = &drafter;
    g.spec_k = ks[i] >= 0 ? ks[i] : server_k;
    ASSERT_TRUE(Generate(*s.p, 0, requests[i].prompt, g, nullptr, &alone[i]).ok());
  }
  SchedulerOptions o;
  o.max_seqs = 4;
  o.seq_capacity = kCapacity;
  o.prefill_chunk = 8;
  o.drafter = &drafter;
  o.spec_k = server_k;
  Scheduler sched(*s.p, o);
  const int k_start = sched.metrics().spec_k_start;
  std::vector<std::shared_ptr<Request>> live;
  for (const auto& r : requests) live.push_back(sched.Submit(r).value());
  int accepted = 0, drafted = 0;
  for (size_t i = 0; i < live.size(); ++i) {
    Collect(*live[i]);
    EXPECT_EQ(live[i]->drafted(), alone[i].drafted) << "request " << i;
    EXPECT_EQ(live[i]->accepted(), alone[i].accepted) << "request " << i;
    EXPECT_EQ(live[i]->verifies(), alone[i].verifies) << "request " << i;
    EXPECT_EQ(live[i]->last_k(), alone[i].k_chosen.back()) << "request " << i;
    accepted += live[i]->accepted();
    drafted += live[i]->drafted();
  }
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafted);
  // The requests decode in one micro-batch, so their drafts ran as rows of the same forwards.
  EXPECT_GE(drafter.most_jobs, 2u);
  // Requests that chose their own K leave what the server's own kind starts from alone.
  if (std::all_of(ks.begin(), ks.end(), [&](int k) { return k >= 0 && k != server_k; })) {
    EXPECT_EQ(sched.metrics().spec_k_start, k_start);
  }
}

TEST(Scheduler, EachSpeculativeRequestDraftsAsItWouldAlone) { ExpectEachDraftsAsAlone(3, {-1, -1, -1, -1}); }

// Drafts a token the model never generates here, and takes a while per draft: speculation
// can only lose, so an adaptive K falls to 0 (plain decoding, a 1-token probe every 8 steps).
class UselessDrafter : public Drafter {
 public:
  explicit UselessDrafter(int32_t token) : token_(token) {}
  Status Propose(int32_t, std::span<const int32_t>, int k, const runtime::SamplingParams&, std::vector<int32_t>& draft,
                 std::vector<DraftDistribution>& q) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(3 * k));
    draft.assign(k, token_);
    q.assign(k, {});
    return Status::Ok();
  }

 private:
  int32_t token_;
};

// A speculative request of 40 tokens, its text alone, and a token that text never holds (for
// UselessDrafter: every draft rejected).
struct UselessDrafts {
  RequestParams r;
  std::vector<int32_t> want;
  int32_t never = 1;
  UselessDrafts() {
    r.prompt = Prompt(6, 77);
    r.max_tokens = 40;
    r.stop_at_eog = false;
    r.speculate = true;
    want = Alone(r);
    while (std::find(want.begin(), want.end(), never) != want.end()) ++never;
  }
};

// A new request's K controller starts from what the last verified request's learned (the
// per-K times, the drafter's time, K, acceptance): after one request learned that drafts are
// useless, the next one drafts only the probes instead of exploring K = 3, 4 first.
TEST(Scheduler, ANewRequestStartsFromTheKTheLastOneLearned) {
  Topology s("whole");
  const UselessDrafts u;
  const RequestParams& r = u.r;
  const std::vector<int32_t>& want = u.want;
  UselessDrafter drafter(u.never);
  SchedulerOptions o;
  o.seq_capacity = kCapacity;
  o.drafter = &drafter;
  o.spec_k_max = 6;
  Scheduler sched(*s.p, o);
  EXPECT_EQ(sched.metrics().spec_k_start, KController::kStartK);
  auto first = sched.Submit(r).value();
  EXPECT_EQ(Collect(*first), want);
  EXPECT_EQ(first->accepted(), 0);
  EXPECT_EQ(sched.metrics().spec_k_start, 0);
  auto second = sched.Submit(r).value();
  EXPECT_EQ(Collect(*second), want);
  // The first drafted 3, then 4 (exploring), then fell to 0 with probes; the second only probes.
  EXPECT_GE(first->drafted(), 3 + 4 + 1);
  EXPECT_LE(second->drafted(), r.max_tokens / 8 + 1);
  EXPECT_LT(second->drafted(), first->drafted());
}

// What a server's adaptive sequences learned goes to on_learned when it goes idle (daisy serve
// --spec-profile saves it); a server started from it (spec_start, a restored profile) starts
// there: after one server learned that drafts are useless, the next one's first request drafts
// only the probes.
TEST(Scheduler, AServerHandsOverWhatItLearnedAndTheNextStartsFromIt) {
  Topology s("whole");
  const UselessDrafts u;
  const RequestParams& r = u.r;
  const std::vector<int32_t>& want = u.want;
  UselessDrafter drafter(u.never);
  std::mutex mu;
  std::vector<KController::Learned> handed;
  SchedulerOptions o;
  o.seq_capacity = kCapacity;
  o.drafter = &drafter;
  o.spec_k_max = 6;
  o.on_learned = [&](const KController& k) {
    std::lock_guard lock(mu);
    handed.push_back(k.Export());
  };
  int first_drafted = 0;
  {
    Scheduler sched(*s.p, o);
    auto first = sched.Submit(r).value();
    EXPECT_EQ(Collect(*first), want);
    first_drafted = first->drafted();
    for (int i = 0; i < 200; ++i) {  // handed over when the loop finds itself idle
      {
        std::lock_guard lock(mu);
        if (!handed.empty()) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  std::lock_guard lock(mu);
  ASSERT_EQ(handed.size(), 1u);  // once when idle; nothing new to hand over at the stop
  EXPECT_EQ(handed[0].k, 0);
  EXPECT_EQ(handed[0].k_max, 6);
  EXPECT_GT(handed[0].state_trials[0], 0);
  KController start(0, 6, o.max_batch_rows);
  ASSERT_TRUE(start.Restore(handed[0]));
  o.spec_start = &start;
  o.on_learned = nullptr;
  Scheduler next(*s.p, o);
  EXPECT_EQ(next.metrics().spec_k_start, 0);
  auto second = next.Submit(r).value();
  EXPECT_EQ(Collect(*second), want);
  EXPECT_GE(first_drafted, 3 + 4 + 1);
  EXPECT_LE(second->drafted(), r.max_tokens / 8 + 1);
}

// A request's own fixed K (`"speculative_k"` over HTTP) on an adaptive server.
TEST(Scheduler, ARequestCanFixItsOwnK) {
  ExpectEachDraftsAsAlone(0, {1, 2, 4, 6});
  Topology s("whole");
  UselessDrafter drafter(1);
  SchedulerOptions o;
  o.seq_capacity = kCapacity;
  o.drafter = &drafter;
  o.spec_k_max = 6;
  Scheduler sched(*s.p, o);
  RequestParams r;
  r.prompt = Prompt(6, 77);
  r.spec_k = 7;
  const auto refused = sched.Submit(r);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "the request's K must be 0 (adaptive) to 6 (this server's --spec-k-max), is 7");
}

TEST(Scheduler, RefusesWhatCannotFitAndBoundsTheQueue) {
  Topology s("whole");
  SchedulerOptions o;
  o.max_seqs = 1;
  o.max_queue = 2;
  o.seq_capacity = kCapacity;
  Scheduler sched(*s.p, o);
  RequestParams big;
  big.prompt = Prompt(100, 1);
  big.max_tokens = 29;
  auto r = sched.Submit(big);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(r.status().message(), "the prompt (100 tokens) plus max_tokens (29) is longer than the "
                                  "context of 128 tokens");
  RequestParams empty;
  EXPECT_EQ(sched.Submit(empty).status().code(), StatusCode::kInvalidArgument);
  // One runs, two wait, the fourth is refused while the queue is full.
  RequestParams slow;
  slow.prompt = Prompt(4, 2);
  slow.max_tokens = 120;
  slow.stop_at_eog = false;
  std::vector<std::shared_ptr<Request>> held;
  int refused = 0;
  for (int i = 0; i < 6; ++i) {
    auto q = sched.Submit(slow);
    if (q.ok()) {
      held.push_back(*q);
    } else {
      EXPECT_EQ(q.status().code(), StatusCode::kResourceExhausted);
      ++refused;
    }
  }
  EXPECT_GE(refused, 2);
  EXPECT_LE(held.size(), 4u);
  for (auto& q : held) q->Cancel();
  for (auto& q : held) {
    Finish f;
    Collect(*q, &f);
    EXPECT_TRUE(f == Finish::kCancelled || f == Finish::kLength);
  }
  EXPECT_GE(sched.metrics().rejected_queue_full, 2u);
}

TEST(Scheduler, CancelFreesTheSequenceOnEveryStage) {
  Topology s("remote");
  ASSERT_NE(s.worker, nullptr);
  SchedulerOptions o;
  o.micro_batches = 2;
  o.max_seqs = 2;
  o.seq_capacity = kCapacity;
  Scheduler sched(*s.p, o);
  RequestParams r;
  r.prompt = Prompt(10, 3);
  r.max_tokens = kCapacity - 10;
  r.stop_at_eog = false;
  // A few tokens in. Should the request still reach its length before the cancel is seen (a
  // loaded host can stop this thread that long), another one is tried.
  Finish f = Finish::kLength;
  for (int attempt = 0; attempt < 20 && f != Finish::kCancelled; ++attempt) {
    auto a = sched.Submit(r);
    ASSERT_TRUE(a.ok());
    (*a)->Wait(2, std::chrono::milliseconds(20000));
    (*a)->Cancel();
    Collect(**a, &f);
  }
  EXPECT_EQ(f, Finish::kCancelled);
  // The slot is free again on both stages: a new request runs to the end and matches alone.
  RequestParams next;
  next.prompt = Prompt(12, 4);
  next.max_tokens = 10;
  next.stop_at_eog = false;
  auto b = sched.Submit(next);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Collect(**b), Alone(next));
  // Both finished: no stage holds KV for them any more, here or in the worker (its own
  // accounting, which the release reaches over the link).
  const auto freed = [&] {
    return sched.metrics().active == 0 && s.p->local_sequences() == 0 && s.worker->held_sequences() == 0;
  };
  for (int i = 0; i < 500 && !freed(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(sched.metrics().active, 0);
  EXPECT_EQ(s.p->local_sequences(), 0u);
  EXPECT_EQ(s.worker->held_sequences(), 0u);
}

// A stop string in a request's last tokens: the reader may see them only after the scheduler
// ended the request at max_tokens. The client is told "stop"; so are /metrics (it was counted
// as "length" before), and the request itself. A stop string seen before the end makes the
// later end at max_tokens a stop too. A request cancelled by its client stays cancelled.
TEST(Scheduler, AStopStringInTheLastTokensCountsAsAStopNotTheLength) {
  Topology s("whole");
  SchedulerOptions o;
  o.seq_capacity = kCapacity;
  Scheduler sched(*s.p, o);
  RequestParams r;
  r.prompt = Prompt(10, 3);
  r.max_tokens = 4;
  r.stop_at_eog = false;
  const auto count = [&](Finish f) { return sched.metrics().requests_by_finish[static_cast<int>(f)]; };
  auto a = sched.Submit(r);
  ASSERT_TRUE(a.ok());
  Finish f;
  Collect(**a, &f);
  EXPECT_EQ(f, Finish::kLength);
  EXPECT_EQ(count(Finish::kLength), 1u);
  (*a)->StopAtString();  // the reader found the stop string in what it had collected
  EXPECT_EQ((*a)->Wait(0, std::chrono::milliseconds(0)).finish, Finish::kStop);
  EXPECT_EQ(count(Finish::kLength), 0u);
  EXPECT_EQ(count(Finish::kStop), 1u);
  (*a)->StopAtString();  // once only
  EXPECT_EQ(count(Finish::kStop), 1u);
  // Seen before the scheduler gets to end it: the end at max_tokens is a stop.
  r.max_tokens = 40;
  auto b = sched.Submit(r);
  ASSERT_TRUE(b.ok());
  (*b)->Wait(1, std::chrono::milliseconds(20000));
  (*b)->StopAtString();
  Collect(**b, &f);
  EXPECT_EQ(f, Finish::kStop);
  EXPECT_EQ(count(Finish::kStop), 2u);
  EXPECT_EQ(count(Finish::kLength), 0u);
  // Not restated: a cancelled one. Cancelled as soon as it is submitted, with room for as many
  // tokens as the sequence holds; should the scheduler still end it first (a loaded host can
  // stop this thread for that long), another one is tried: those end at their length.
  r.max_tokens = kCapacity - static_cast<int>(r.prompt.size());
  f = Finish::kLength;
  for (int attempt = 0; attempt < 20 && f != Finish::kCancelled; ++attempt) {
    auto c = sched.Submit(r);
    ASSERT_TRUE(c.ok());
    (*c)->Cancel();
    Collect(**c, &f);
    if (f == Finish::kCancelled) (*c)->StopAtString();
  }
  EXPECT_EQ(f, Finish::kCancelled);
  EXPECT_EQ(count(Finish::kCancelled), 1u);
  EXPECT_EQ(count(Finish::kStop), 2u);
}

TEST(Scheduler, ALostWorkerFailsItsRequestsAndTheNextOneRecovers) {
  Topology s("remote");
  const uint16_t port = s.worker->port();
  SchedulerOptions o;
  o.micro_batches = 2;
  o.seq_capacity = kCapacity;
  Scheduler sched(*s.p, o);
  RequestParams r;
  r.prompt = Prompt(6, 5);
  r.max_tokens = 120;
  r.stop_at_eog = false;
  auto a = sched.Submit(r);
  ASSERT_TRUE(a.ok());
  (*a)->Wait(1, std::chrono::milliseconds(20000));
  s.worker->Stop();
  s.worker.reset();
  std::vector<int32_t> got;
  Request::Update u;
  do {
    u = (*a)->Wait(got.size(), std::chrono::milliseconds(20000));
    got.insert(got.end(), u.tokens.begin(), u.tokens.end());
  } while (!u.done);
  EXPECT_EQ(u.finish, Finish::kError);
  EXPECT_NE(u.error.message().find("the pipeline is down"), std::string::npos) << u.error.message();
  // The worker comes back on the same port; the next request reconnects and succeeds.
  auto s1 = shard::LoadShard(shard::ShardPath(TheEnv().dir / "2", 1));
  pipeline::WorkerOptions wo;
  wo.listen = {"127.0.0.1", port};
  wo.threads = 1;
  auto w = pipeline::Worker::Start(std::move(*s1), std::move(wo));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  RequestParams next;
  next.prompt = Prompt(7, 6);
  next.max_tokens = 9;
  next.stop_at_eog = false;
  auto b = sched.Submit(next);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Collect(**b), Alone(next));
}

}  // namespace
}  // namespace daisy::coord
