// The distributed pipeline over real TCP on loopback, with workers in this process: identical
// greedy tokens to the monolithic model, several forwards in flight, authentication, malformed
// frames, and a worker that dies and comes back.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "model/generator.h"
#include "pipeline/pipeline.h"
#include "testing/topology.h"
#include "pipeline/worker.h"
#include "shard/compile.h"
#include "shard/load.h"
#include "tokenizer/hf_import.h"

namespace daisy::pipeline {
namespace {

namespace fs = std::filesystem;

struct Env {
  daisy::testing::TempDir tmp{"pipeline-test"};
  fs::path dir = tmp.path;
  fs::path model = daisy::testing::MakeModel({.layers = 6, .seed = 5}, dir / "model.gguf");
  Env() { daisy::testing::CompileShards(model, dir / "3", 3); }
};

Env& TheEnv() {
  static Env* env = new Env();
  return *env;
}

// Greedy decoding through `p` with Submit/Wait alone (the coordinator's loops live in coord/;
// this is the pipeline on its own): the prompt's chunks all submitted before any is awaited,
// then one row per token; `on_token` sees each token. Frees the sequence at the end.
Result<std::vector<int32_t>> Greedy(Pipeline& p, int32_t seq, const std::vector<int32_t>& prompt, int n,
                                    size_t chunk = 7, const std::function<void()>& on_token = {}) {
  std::vector<uint64_t> ids;
  Status failed = Status::Ok();
  for (size_t begin = 0; begin < prompt.size() && failed.ok(); begin += chunk) {
    const size_t end = std::min(prompt.size(), begin + chunk);
    ForwardHeader h;
    h.id = p.NextId();
    h.dim = p.config().d_model;
    h.seqs.push_back({seq, static_cast<int32_t>(begin), static_cast<int32_t>(end - begin), {}});
    if (end < prompt.size()) h.seqs.back().out.kind = OutputKind::kNone;
    failed = p.Submit(h, std::span(prompt).subspan(begin, end - begin));
    if (failed.ok()) ids.push_back(h.id);
  }
  std::vector<int32_t> out;
  for (uint64_t id : ids) {
    auto r = p.Wait(id);
    if (!r.ok() && failed.ok()) failed = r.status();
    if (r.ok() && id == ids.back() && failed.ok()) out.push_back(r->seqs.at(0).rows.at(0).token);
  }
  while (failed.ok() && static_cast<int>(out.size()) < n) {
    if (on_token) on_token();
    ForwardHeader h;
    h.id = p.NextId();
    h.dim = p.config().d_model;
    h.seqs.push_back({seq, static_cast<int32_t>(prompt.size() + out.size() - 1), 1, {}});
    const int32_t last[1] = {out.back()};
    auto r = p.Forward(h, last);
    if (!r.ok()) {
      failed = r.status();
      break;
    }
    out.push_back(r->seqs.at(0).rows.at(0).token);
  }
  const int32_t s[1] = {seq};
  (void)p.Release(s);
  if (!failed.ok()) return failed;
  return out;
}

runtime::StageOptions Opts(const shard::ShardInfo& i) {
  return StageOptionsFor(i, {.max_batch_rows = 64, .seq_capacity = 256, .max_seqs = 8});
}

std::unique_ptr<Worker> StartWorker(int stage, uint16_t port = 0,
                                    std::optional<transport::ClusterKey> key = std::nullopt,
                                    std::chrono::milliseconds keep_ended_session = std::chrono::minutes(10)) {
  auto shard = shard::LoadShard(shard::ShardPath(TheEnv().dir / "3", stage));
  EXPECT_TRUE(shard.ok());
  WorkerOptions o;
  o.listen = {"127.0.0.1", port};
  o.threads = 1;
  o.key = std::move(key);
  o.keep_ended_session = keep_ended_session;
  auto w = Worker::Start(std::move(*shard), std::move(o));
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return std::move(*w);
}

struct Coordinator {
  runtime::ThreadPool pool{1};
  shard::Shard s0;
  std::unique_ptr<Pipeline> p;
};

Result<std::unique_ptr<Coordinator>> Connect(const std::vector<uint16_t>& ports,
                                             std::optional<transport::ClusterKey> key = std::nullopt,
                                             WireType wire = WireType::kF32) {
  auto c = std::make_unique<Coordinator>();
  DAISY_ASSIGN_OR_RETURN(c->s0, shard::LoadShard(shard::ShardPath(TheEnv().dir / "3", 0)));
  RemoteOptions ro;
  for (uint16_t p : ports) ro.workers.push_back({"127.0.0.1", p});
  ro.key = std::move(key);
  ro.wire = wire;
  ro.max_rows = 64;
  ro.max_seqs = 8;
  ro.seq_capacity = 256;
  ro.connect_deadline = transport::Millis(2000);
  DAISY_ASSIGN_OR_RETURN(auto remote, RemoteChain::Connect(ro, {c->s0.info}));
  c->p = std::make_unique<Pipeline>(std::vector<const model::Model*>{c->s0.model.get()},
                                    std::vector<runtime::StageOptions>{Opts(c->s0.info)},
                                    kernels::BestKernels(), c->pool, std::move(remote));
  return c;
}

using daisy::testing::Prompt;

std::vector<int32_t> Monolithic(const std::vector<int32_t>& prompt, int n) {
  auto m = model::Model::Load(TheEnv().model);
  runtime::ThreadPool pool(1);
  runtime::StageOptions o;
  o.max_batch_rows = 64;
  o.seq_capacity = 256;
  o.max_seqs = 8;
  Pipeline p({m->get()}, {o}, kernels::BestKernels(), pool, nullptr);
  auto ids = Greedy(p, 0, prompt, n);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

TEST(Pipeline, ThreeStagesOverTcpMatchTheMonolithicModel) {
  auto w1 = StartWorker(1), w2 = StartWorker(2);
  auto c = Connect({w1->port(), w2->port()});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (int salt : {1, 2, 3}) {
    const auto prompt = Prompt(9 + salt * 5, salt);
    auto ids = Greedy(*(*c)->p, salt, prompt, 24, 7);  // several prefill chunks in flight at once
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    EXPECT_EQ(*ids, Monolithic(prompt, 24)) << "prompt " << salt;
  }
}

TEST(Pipeline, SeveralForwardsInFlightGiveTheSameResults) {
  auto w1 = StartWorker(1), w2 = StartWorker(2);
  auto c = Connect({w1->port(), w2->port()});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Pipeline& p = *(*c)->p;
  std::vector<uint64_t> ids;
  for (int s = 0; s < 5; ++s) {
    const auto prompt = Prompt(6 + s, s);
    ForwardHeader h;
    h.id = p.NextId();
    h.dim = p.config().d_model;
    OutputSpec top;
    top.kind = OutputKind::kTopK;
    top.top_k = 3;
    h.seqs.push_back({s, 0, static_cast<int32_t>(prompt.size()), top});
    ASSERT_TRUE(p.Submit(h, prompt).ok());
    ids.push_back(h.id);
  }
  for (int s = 0; s < 5; ++s) {
    auto r = p.Wait(ids[s]);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->seqs.size(), 1u);
    ASSERT_EQ(r->seqs[0].rows.size(), 1u);
    EXPECT_EQ(r->seqs[0].rows[0].top.size(), 3u);
    EXPECT_EQ(r->seqs[0].rows[0].token, Monolithic(Prompt(6 + s, s), 1)[0]);
  }
}

TEST(Pipeline, ClusterKeyIsRequiredAndChecked) {
  const auto key = transport::ClusterKey::FromBytes("0123456789abcdef-secret");
  const auto other = transport::ClusterKey::FromBytes("0123456789abcdef-other!");
  auto w1 = StartWorker(1, 0, key), w2 = StartWorker(2, 0, key);
  auto none = Connect({w1->port(), w2->port()});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("requires a cluster key"), std::string::npos)
      << none.status().message();
  auto wrong = Connect({w1->port(), w2->port()}, other);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("wrong cluster key"), std::string::npos)
      << wrong.status().message();
  auto right = Connect({w1->port(), w2->port()}, key);
  ASSERT_TRUE(right.ok()) << right.status().ToString();
  auto ids = Greedy(*(*right)->p, 0, Prompt(5, 9), 8);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(*ids, Monolithic(Prompt(5, 9), 8));
  // An open worker is refused by a keyed coordinator.
  auto open1 = StartWorker(1), open2 = StartWorker(2);
  auto refused = Connect({open1->port(), open2->port()}, key);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("runs without a cluster key"), std::string::npos)
      << refused.status().message();
}

TEST(Pipeline, WrongOrderIsRefused) {
  auto w1 = StartWorker(1), w2 = StartWorker(2);
  auto c = Connect({w2->port(), w1->port()});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("give the shards in stage order"), std::string::npos)
      << c.status().message();
}

TEST(Pipeline, MalformedFramesCloseOnlyThatConnection) {
  auto w1 = StartWorker(1), w2 = StartWorker(2);
  auto c = Connect({w1->port(), w2->port()});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::vector<std::vector<uint8_t>> attacks = {
      std::vector<uint8_t>(64, 0xAB),                                    // garbage
      {0x44, 0x53, 0x59, 0x31, 1, 0, 2, 0, 0xff, 0xff, 0xff, 0x7f},      // 2 GB auth frame
      {0x44, 0x53, 0x59, 0x31, 9, 0, 2, 0, 4, 0, 0, 0, 1, 2, 3, 4},      // wrong version
  };
  for (const auto& bytes : attacks) {
    auto s = transport::Connect({"127.0.0.1", w1->port()}, transport::Millis(1000));
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(s->SendAll(std::vector<std::span<const uint8_t>>{bytes}).ok());
    // The worker closes the connection: reading reaches the end of the stream.
    uint8_t buf[4096];
    ssize_t n;
    size_t total = 0;
    while ((n = ::recv(s->fd(), buf, sizeof(buf), 0)) > 0) total += n;
    EXPECT_EQ(n, 0) << "connection not closed";
    EXPECT_LT(total, 200u);  // the hello, perhaps a refusal, nothing else
  }
  auto ids = Greedy(*(*c)->p, 0, Prompt(5, 4), 6);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(*ids, Monolithic(Prompt(5, 4), 6));
}

// A worker lives long and sees many connections (every run, every resume, port scanners): the
// threads of finished ones must not pile up.
TEST(Pipeline, FinishedConnectionsLeaveNoThreadBehind) {
  auto w = StartWorker(2);
  for (int i = 0; i < 200; ++i) {
    auto s = transport::Connect({"127.0.0.1", w->port()}, transport::Millis(1000));
    ASSERT_TRUE(s.ok());
    const std::vector<uint8_t> garbage(16, 0xAB);
    ASSERT_TRUE(s->SendAll(std::vector<std::span<const uint8_t>>{garbage}).ok());
    uint8_t buf[256];
    while (::recv(s->fd(), buf, sizeof(buf), 0) > 0) {
    }
  }
  auto last = transport::Connect({"127.0.0.1", w->port()}, transport::Millis(1000));  // reaps the rest
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_LE(w->connection_threads(), 3u);
}

TEST(Pipeline, AWorkerThatDiesFailsTheRequestAndIsPickedUpAgain) {
  auto w1 = StartWorker(1), w2 = StartWorker(2);
  const uint16_t port2 = w2->port();
  auto c = Connect({w1->port(), port2});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  int seen = 0;
  std::thread killer;
  const auto t0 = std::chrono::steady_clock::now();
  auto ids = Greedy(*(*c)->p, 0, Prompt(5, 6), 200, 7, [&] {
    if (++seen == 5) killer = std::thread([&] { w2->Stop(); });
  });
  killer.join();
  ASSERT_FALSE(ids.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_NE(ids.status().message().find("the pipeline is down"), std::string::npos)
      << ids.status().message();
  EXPECT_NE(ids.status().message().find("127.0.0.1:" + std::to_string(port2)), std::string::npos)
      << ids.status().message();
  w2.reset();
  // The worker comes back on the same port; the coordinator rebuilds the ring.
  auto again = StartWorker(2, port2);
  ASSERT_TRUE((*c)->p->Recover({}).ok());
  auto ok = Greedy(*(*c)->p, 0, Prompt(5, 6), 10);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, Monolithic(Prompt(5, 6), 10));
}

// A resume keeps the KV wherever it survived: the coordinator's own stage and a worker that is
// still the one configured last keep theirs; a restarted worker starts empty. Only the lost
// stage reads the history again, in a forward that ends there; the next token is then exactly
// the uninterrupted one.
TEST(Pipeline, AResumedRingKeepsTheKvThatSurvived) {
  auto w1 = StartWorker(1), w2 = StartWorker(2);
  const uint16_t port1 = w1->port();
  auto c = Connect({port1, w2->port()});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Pipeline& p = *(*c)->p;
  const std::vector<int32_t> prompt = Prompt(12, 3);
  const std::vector<int32_t> want = Monolithic(prompt, 2);
  ForwardHeader h;
  h.id = p.NextId();
  h.dim = p.config().d_model;
  h.seqs.push_back({4, 0, 12, {}});
  auto r = p.Forward(h, prompt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->seqs.at(0).rows.at(0).token, want[0]);
  // A second sequence the coordinator will not keep.
  h.id = p.NextId();
  h.seqs = {{5, 0, 3, {}}};
  ASSERT_TRUE(p.Forward(h, std::span(prompt).first(3)).ok());

  // Stage 1's worker is replaced by a fresh one on its port.
  w1.reset();
  w1 = StartWorker(1, port1);
  const int32_t keep[1] = {4};
  ASSERT_TRUE(p.Recover(keep).ok());
  EXPECT_EQ(p.HeldLengths(4), (std::vector<int32_t>{12, 0, 12}));
  EXPECT_EQ(p.HeldLengths(5), (std::vector<int32_t>{0, 0, 0}));  // freed everywhere
  const auto settles = [&] {
    for (int i = 0; i < 100 && w2->held_sequences() != 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return w2->held_sequences();
  };
  EXPECT_EQ(settles(), 1u);

  // The history stage 1 lost, in a forward that ends there: stage 2 reads none of it.
  h.id = p.NextId();
  h.last_stage = 1;
  h.seqs = {{4, 0, 12, {}}};
  h.seqs[0].out.kind = OutputKind::kNone;
  r = p.Forward(h, prompt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->seqs.empty());
  // Then the token the interrupted step would have sent, through every stage.
  h.id = p.NextId();
  h.last_stage = -1;
  h.seqs = {{4, 12, 1, {}}};
  const int32_t next[1] = {want[0]};
  r = p.Forward(h, next);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->seqs.at(0).rows.at(0).token, want[1]);

  // Without resume (a coordinator that forgets), nothing is kept anywhere.
  ASSERT_TRUE(p.Recover({}).ok());
  EXPECT_EQ(p.HeldLengths(4), (std::vector<int32_t>{0, 0, 0}));
}

// A worker keeps an ended session's KV for a resume only so long, then frees it.
TEST(Pipeline, AWorkerFreesTheKvOfASessionNotResumed) {
  auto w1 = StartWorker(1), w2 = StartWorker(2, 0, std::nullopt, std::chrono::milliseconds(300));
  {
    auto c = Connect({w1->port(), w2->port()});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ForwardHeader h;
    h.id = (*c)->p->NextId();
    h.dim = (*c)->p->config().d_model;
    h.seqs.push_back({1, 0, 5, {}});
    ASSERT_TRUE((*c)->p->Forward(h, Prompt(5, 1)).ok());
  }  // the coordinator goes away
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(w2->held_sequences(), 1u);  // kept for a while
  for (int i = 0; i < 200 && w2->held_sequences() != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(w2->held_sequences(), 0u);
}

}  // namespace
}  // namespace daisy::pipeline
