// The pipeline's messages (docs/protocol.md), carried in transport frames. A Forward carries
// rows of one or more sequences — per sequence (seq_id, start_pos, n_rows) and what the last
// stage must return — then the activations in the link's wire type. A stage sets each
// sequence's KV length to start_pos before appending (rollback is free). The last stage answers
// the coordinator with a Result: argmax ids by default, top-k log-probabilities, a sampled token
// or full logits on request.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/sampler.h"
#include "transport/frame.h"

namespace daisy::pipeline {

enum MessageType : uint16_t {
  kDescribe = 16,    // coordinator -> worker: empty
  kShardInfo = 17,   // worker -> coordinator: the shard's identity
  kConfigure = 18,   // coordinator -> worker: session, next hop, limits
  kConfigured = 19,  // worker -> coordinator: empty (ready)
  kJoin = 20,        // worker i -> worker i+1: u64 session (this link feeds you forwards)
  kForward = 21,
  kResult = 22,
  kRelease = 23,     // coordinator -> every worker: u32 count, i32 seq ids
  kError = 24,       // worker -> coordinator: u64 forward id (0: none), message
  kPing = 25,        // coordinator -> worker: u64 nonce
  kPong = 26,        // worker -> coordinator: u64 nonce, u64 last forward finished, u64 forward in progress,
                     // u32 sequences holding KV
};

enum class WireType : uint8_t { kF32 = 0, kBF16 = 1, kF16 = 2, kQ8_0 = 3 };
const char* WireTypeName(WireType t);
Result<WireType> ParseWireType(const std::string& name);
size_t WireRowBytes(WireType t, int dim);
// Rows of floats <-> wire bytes. f32 is exact; bf16/f16 round to nearest even; q8_0 is
// GGUF's block format (per 32 values one f16 scale and 32 int8).
void EncodeRows(WireType t, const float* rows, int n, int dim, uint8_t* out);
void DecodeRows(WireType t, const uint8_t* in, int n, int dim, float* rows);

enum class OutputKind : uint8_t { kNone = 0, kArgmax = 1, kTopK = 2, kSample = 3, kLogits = 4, kVerify = 5 };

// kVerify: at most this many (token, probability) pairs describe one draft distribution.
inline constexpr int kMaxDraftSupport = 64;

struct OutputSpec {
  OutputKind kind = OutputKind::kArgmax;
  bool all_rows = false;  // an output for every row (scoring, verification), else the last row
  uint16_t top_k = 0;     // kTopK
  runtime::SamplingParams sampling;  // kSample
  uint64_t position = 0;  // kSample: the sampled token's position (the draw's seed)
  std::vector<int32_t> history;  // kSample with a repetition penalty: the recent tokens
  // kVerify (speculative decoding): the rows are the last accepted token then the drafted
  // tokens, so draft.size() == n_rows - 1. Greedy (temperature 0, no penalty) accepts drafts
  // while they equal the argmax; else the accept/reject rule with the draft's distribution
  // draft_q[i] (its support, probabilities summing to 1; empty: all mass on draft[i]). The
  // result holds the accepted drafts then one more token (the correction, or a bonus when
  // every draft is accepted). `position` is that of the first drafted token.
  std::vector<int32_t> draft;
  std::vector<std::vector<std::pair<int32_t, float>>> draft_q;
  // Constrained decoding: the tokens each output row may produce, as bitsets over the
  // vocabulary (word w bit b: token 32w + b); empty: no constraint. One per output row: one for
  // the last row, or n_rows for a verify (row i's mask is the grammar after the drafts before it).
  std::vector<std::vector<uint32_t>> masks;
};

struct SeqRows {
  int32_t seq = 0;
  int32_t start_pos = 0;
  int32_t n_rows = 0;
  OutputSpec out;
};

struct ForwardHeader {
  uint64_t id = 0;
  WireType wire = WireType::kF32;
  int32_t dim = 0;
  // The last stage to run these rows (-1: every stage). A forward that ends early returns a
  // Result with no sequences from that stage: it only fills the KV of the stages up to it (a
  // resume re-reading history on the stages that lost it).
  int32_t last_stage = -1;
  std::vector<SeqRows> seqs;
  int32_t total_rows() const;
};

struct RowOutput {
  int32_t token = -1;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // kTopK
  std::vector<float> logits;                   // kLogits
};

struct SeqResult {
  int32_t seq = 0;
  std::vector<RowOutput> rows;
};

struct ResultMsg {
  uint64_t id = 0;
  std::vector<SeqResult> seqs;
};

// Limits a receiver enforces before allocating.
struct Limits {
  int max_rows = 256;
  int max_seqs = 64;
  int max_history = 4096;
  int max_top_k = 1000;
  int d_model = 0;
  int n_vocab = 0;
  // The largest Forward / Result frame these limits allow, and the largest section of output
  // requests a Forward may carry.
  size_t MaxForwardBytes() const;
  size_t MaxOutputBytes() const;
  size_t MaxResultBytes() const;
};

// Encodes the header (the activations follow as a second piece of the same frame): the routing
// every stage reads (sequence, start position and rows of each sequence), then the output
// requests only the last stage reads, as one length-prefixed section.
std::vector<uint8_t> EncodeForwardHeader(const ForwardHeader& h);
// Decodes and checks a Forward against `limits`: sequence entries, row counts and activation
// bytes; `activations` points into `payload`, and the header bytes before them can be passed on
// to the next stage unchanged. The output requests are decoded and checked only when `outputs`
// (the last stage); elsewhere the section is bounded and skipped, and h.seqs[i].out stays default.
Status DecodeForward(std::span<const uint8_t> payload, const Limits& limits, bool outputs,
                     ForwardHeader& h, std::span<const uint8_t>& activations);

std::vector<uint8_t> EncodeResult(const ResultMsg& r);
Status DecodeResult(std::span<const uint8_t> payload, const Limits& limits, ResultMsg& r);

}  // namespace daisy::pipeline
