#include "pipeline/cluster.h"

#include <gtest/gtest.h>

namespace daisy::pipeline {
namespace {

Result<ClusterFile> Parse(const std::string& text) { return ParseClusterFile(text, "/etc/daisy/c.toml"); }

std::string Error(const std::string& text) {
  auto c = Parse(text);
  EXPECT_FALSE(c.ok());
  return c.ok() ? "" : c.status().message();
}

TEST(ClusterFile, ParsesStagesResolvingPathsAgainstTheFile) {
  auto c = Parse(R"(
key_file = "cluster.key"
tls = true
wire = "q8_0"
connect_timeout = 5
[[stage]]
shard = "shards/stage-0.daisy"
[[stage]]
shard = "/srv/stage-1.daisy"
address = "10.0.0.2:7000"
listen = "0.0.0.0:7000"
[[stage]]
address = "10.0.0.3:7001"
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->key_file, "/etc/daisy/cluster.key");
  EXPECT_TRUE(c->tls);
  EXPECT_EQ(c->wire, "q8_0");
  EXPECT_EQ(c->connect_timeout, 5.0);
  ASSERT_EQ(c->stages.size(), 3u);
  EXPECT_EQ(c->stages[0].shard, "/etc/daisy/shards/stage-0.daisy");
  EXPECT_EQ(c->stages[1].shard, "/srv/stage-1.daisy");
  EXPECT_EQ(c->stages[1].listen, "0.0.0.0:7000");
  EXPECT_EQ(c->stages[2].listen, "10.0.0.3:7001");  // defaults to the address
  EXPECT_EQ(c->LocalShards(), std::vector<std::string>{"/etc/daisy/shards/stage-0.daisy"});
  EXPECT_EQ(c->Workers(), "10.0.0.2:7000,10.0.0.3:7001");
}

TEST(ClusterFile, StandbyWorkers) {
  auto c = Parse("[[stage]]\nshard='a'\n[[stage]]\naddress='h:1'\nstandby=['h2:1', 'h3:1']\n[[stage]]\naddress='h:2'\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->stages[1].standby, (std::vector<std::string>{"h2:1", "h3:1"}));
  EXPECT_EQ(c->Workers(), "h:1|h2:1|h3:1,h:2");  // the --workers form
  auto bad = Parse("[[stage]]\nshard='a'\n[[stage]]\naddress='h:1'\nstandby=['nope']\n");
  ASSERT_FALSE(bad.ok());
  auto none = Parse("[[stage]]\nshard='a'\nstandby=['h:1']\n");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("standby without address"), std::string::npos) << none.status().message();
}

TEST(ClusterFile, SeveralStagesInTheCoordinator) {
  auto c = Parse("[[stage]]\nshard='a'\n[[stage]]\nshard='b'\n[[stage]]\naddress='h:1'\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->LocalShards().size(), 2u);
  EXPECT_FALSE(c->wire.has_value());
  EXPECT_TRUE(c->key_file.empty());
}

TEST(ClusterFile, RefusesWhatItCannotUse) {
  EXPECT_EQ(Error("[[stage]]\nshard = 'a'\nshrad = 'b'\n"),
            "/etc/daisy/c.toml:3: unknown key 'shrad' in stage 0 (known: address, listen, shard, standby)");
  EXPECT_EQ(Error("wires = 'f32'\n[[stage]]\nshard='a'\n"),
            "/etc/daisy/c.toml:1: unknown key 'wires' in the cluster file (known: connect_timeout, "
            "forward_timeout, key_file, peer_timeout, stage, tls, wire)");
  EXPECT_EQ(Error("tls = 'yes'\n[[stage]]\nshard='a'\n"), "/etc/daisy/c.toml:1: tls must be true or false");
  EXPECT_EQ(Error("tls = true\n[[stage]]\nshard='a'\n"),
            "/etc/daisy/c.toml:1: tls = true needs key_file (TLS is keyed by the cluster key)");
  EXPECT_EQ(Error("peer_timeout = -1\n[[stage]]\nshard='a'\n"),
            "/etc/daisy/c.toml:1: peer_timeout -1 is outside 0..86400 seconds");
  EXPECT_EQ(Error("key_file = 'k'\n"),
            "/etc/daisy/c.toml: no [[stage]] tables: list the pipeline's stages in order, stage 0 first");
  EXPECT_EQ(Error("[[stage]]\nshard = 'a'\naddress = 'h:1'\n"),
            "/etc/daisy/c.toml:1: stage 0: stage 0 has an address, but the coordinator runs stage 0 "
            "(the tokenizer and embeddings): drop its address");
  EXPECT_EQ(Error("[[stage]]\nshard='a'\n[[stage]]\naddress='h:1'\n[[stage]]\nshard='c'\n"),
            "/etc/daisy/c.toml:5: stage 2: has no address, but stage 1 before it is a worker; the "
            "coordinator's stages come first");
  EXPECT_EQ(Error("[[stage]]\naddress='h:1'\nshard=3\n"), "/etc/daisy/c.toml:3: shard must be a string");
  EXPECT_EQ(Error("connect_timeout = -1\n[[stage]]\nshard='a'\n"),
            "/etc/daisy/c.toml:1: connect_timeout -1 is outside 0..86400 seconds");
  EXPECT_NE(Error("wire = 'f8'\n[[stage]]\nshard='a'\n").find("/etc/daisy/c.toml:1: wire: "), std::string::npos);
  EXPECT_NE(Error("[[stage]]\nshard='a'\n[[stage]]\naddress='nohost'\n").find("stage 1: address: "),
            std::string::npos);
  EXPECT_NE(Error("[[stage]\nshard='a'\n").find("/etc/daisy/c.toml:1: not valid TOML: "), std::string::npos);
  EXPECT_EQ(Error("[[stage]]\n"), "/etc/daisy/c.toml:1: stage 0: needs a shard (it runs in the coordinator)");
}

TEST(ClusterFile, MissingFileIsNamed) {
  auto c = LoadClusterFile("/nonexistent/cluster.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "cannot open cluster file /nonexistent/cluster.toml");
}

}  // namespace
}  // namespace daisy::pipeline
