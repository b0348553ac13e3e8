// Control messages between the coordinator and workers (docs/protocol.md).
#pragma once

#include <string>

#include "base/status.h"
#include "pipeline/protocol.h"
#include "shard/format.h"

namespace daisy::pipeline {

// Bounds shared by both ends of a link.
inline constexpr transport::Millis kAuthTimeout(5000);  // handshake and Describe replies
inline constexpr size_t kMaxControlFrame = 64 << 10;    // every frame that is not a Forward/Result

std::vector<uint8_t> EncodeShardInfo(const shard::ShardInfo& s);
Status DecodeShardInfo(std::span<const uint8_t> payload, shard::ShardInfo& s);

struct Configure {
  uint64_t session = 0;
  std::string next_hop;  // HOST:PORT of the next stage; empty on the last stage
  WireType wire = WireType::kF32;
  int32_t max_rows = 256;
  int32_t max_seqs = 64;
  int32_t seq_capacity = 4096;
  int32_t rope_context = 0;  // StageOptions::rope_context
  // The session this one continues after a failure (protocol 5; 0: none). A worker whose last
  // session it is, configured with the same limits, keeps the KV cache it holds and says what
  // it kept in its Configured; any other worker starts empty.
  uint64_t resume = 0;
  // With `resume`: the sequences the coordinator still holds; the worker frees every other one it
  // kept before it answers (at most max_seqs; protocol 5).
  std::vector<int32_t> keep;
};
std::vector<uint8_t> EncodeConfigure(const Configure& c);
Status DecodeConfigure(std::span<const uint8_t> payload, Configure& c);

// A worker's answer to Configure: the sequences whose KV it kept, with the positions held of
// each (empty unless it resumed a session). At most `max_seqs` entries.
struct Configured {
  std::vector<std::pair<int32_t, int32_t>> kept;  // (sequence, length)
};
std::vector<uint8_t> EncodeConfigured(const Configured& c);
Status DecodeConfigured(std::span<const uint8_t> payload, int max_seqs, Configured& c);

// A worker's answer to a Ping, from its reader thread (so a busy compute thread still answers):
// the id of the last forward it finished and of the one it is computing (0: idle). A worker
// that answers nothing is stopped, hung or cut off; one that answers but does not progress is
// stuck in a forward.
struct Pong {
  uint64_t nonce = 0;
  uint64_t done = 0;
  uint64_t busy = 0;
  uint32_t held = 0;  // sequences holding KV on this worker (protocol 4)
};
std::vector<uint8_t> EncodePing(uint64_t nonce);
Status DecodePing(std::span<const uint8_t> payload, uint64_t& nonce);
std::vector<uint8_t> EncodePong(const Pong& p);
Status DecodePong(std::span<const uint8_t> payload, Pong& p);

std::vector<uint8_t> EncodeError(uint64_t forward_id, const std::string& message);
// How a worker's session-ending error (forward id 0) begins when a neighbour's link went away:
// the coordinator puts the failure down to that neighbour's stage, not to the messenger.
inline constexpr const char kNextStageLost[] = "the next stage ";
inline constexpr const char kPreviousStageLost[] = "the previous stage ";
Status DecodeError(std::span<const uint8_t> payload, uint64_t& forward_id, std::string& message);

}  // namespace daisy::pipeline
