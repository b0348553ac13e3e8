#include "pipeline/messages.h"

#include <algorithm>

namespace daisy::pipeline {

using transport::Decoder;
using transport::Encoder;

std::vector<uint8_t> EncodeShardInfo(const shard::ShardInfo& s) {
  Encoder e;
  e.Put<uint32_t>(s.format_version);
  e.PutString(s.fingerprint);
  for (int v : {s.stage, s.n_stages, s.first_layer, s.last_layer, s.n_layers, s.d_model, s.n_vocab}) {
    e.Put<int32_t>(v);
  }
  e.PutString(s.file);
  e.PutString(s.model_name);
  return std::move(e.bytes());
}

Status DecodeShardInfo(std::span<const uint8_t> payload, shard::ShardInfo& s) {
  Decoder d(payload, "shard info");
  DAISY_RETURN_IF_ERROR(d.Get(s.format_version));
  DAISY_RETURN_IF_ERROR(d.GetString(s.fingerprint, 64));
  for (int* v : {&s.stage, &s.n_stages, &s.first_layer, &s.last_layer, &s.n_layers, &s.d_model,
                 &s.n_vocab}) {
    DAISY_RETURN_IF_ERROR(d.Get(*v));
  }
  DAISY_RETURN_IF_ERROR(d.GetString(s.file, 4096));
  DAISY_RETURN_IF_ERROR(d.GetString(s.model_name, 4096));
  return d.ExpectEnd();
}

std::vector<uint8_t> EncodeConfigure(const Configure& c) {
  Encoder e;
  e.Put<uint64_t>(c.session);
  e.PutString(c.next_hop);
  e.Put<uint8_t>(static_cast<uint8_t>(c.wire));
  e.Put<int32_t>(c.max_rows);
  e.Put<int32_t>(c.max_seqs);
  e.Put<int32_t>(c.seq_capacity);
  e.Put<int32_t>(c.rope_context);
  e.Put<uint64_t>(c.resume);
  e.Put<uint32_t>(static_cast<uint32_t>(c.keep.size()));
  for (int32_t seq : c.keep) e.Put<int32_t>(seq);
  return std::move(e.bytes());
}

std::vector<uint8_t> EncodeConfigured(const Configured& c) {
  Encoder e;
  e.Put<uint32_t>(static_cast<uint32_t>(c.kept.size()));
  for (const auto& [seq, length] : c.kept) {
    e.Put<int32_t>(seq);
    e.Put<int32_t>(length);
  }
  return std::move(e.bytes());
}

Status DecodeConfigured(std::span<const uint8_t> payload, int max_seqs, Configured& c) {
  Decoder d(payload, "configured");
  uint32_t n = 0;
  DAISY_RETURN_IF_ERROR(d.Get(n));
  if (n > static_cast<uint32_t>(max_seqs)) return DataLoss("configured: %u sequences kept (at most %d)", n, max_seqs);
  c.kept.assign(n, {});
  for (auto& [seq, length] : c.kept) {
    DAISY_RETURN_IF_ERROR(d.Get(seq));
    DAISY_RETURN_IF_ERROR(d.Get(length));
    if (seq < 0 || length < 0) return DataLoss("configured: sequence %d with %d positions", seq, length);
  }
  return d.ExpectEnd();
}

Status DecodeConfigure(std::span<const uint8_t> payload, Configure& c) {
  Decoder d(payload, "configure");
  uint8_t wire = 0;
  DAISY_RETURN_IF_ERROR(d.Get(c.session));
  DAISY_RETURN_IF_ERROR(d.GetString(c.next_hop, 1024));
  DAISY_RETURN_IF_ERROR(d.Get(wire));
  DAISY_RETURN_IF_ERROR(d.Get(c.max_rows));
  DAISY_RETURN_IF_ERROR(d.Get(c.max_seqs));
  DAISY_RETURN_IF_ERROR(d.Get(c.seq_capacity));
  DAISY_RETURN_IF_ERROR(d.Get(c.rope_context));
  DAISY_RETURN_IF_ERROR(d.Get(c.resume));
  uint32_t n_keep = 0;
  DAISY_RETURN_IF_ERROR(d.Get(n_keep));
  if (n_keep > 4096 || n_keep > static_cast<uint32_t>(std::max(c.max_seqs, 0))) {
    return DataLoss("configure: %u sequences to keep (at most the %d sequences allowed)", n_keep, c.max_seqs);
  }
  c.keep.assign(n_keep, 0);
  for (int32_t& seq : c.keep) DAISY_RETURN_IF_ERROR(d.Get(seq));
  DAISY_RETURN_IF_ERROR(d.ExpectEnd());
  if (wire > static_cast<uint8_t>(WireType::kQ8_0)) return DataLoss("configure: unknown wire type %u", wire);
  c.wire = static_cast<WireType>(wire);
  if (c.max_rows < 1 || c.max_rows > 8192 || c.max_seqs < 1 || c.max_seqs > 4096 ||
      c.seq_capacity < 1 || c.seq_capacity > (1 << 20) || c.rope_context < 0 || c.rope_context > c.seq_capacity) {
    return DataLoss("configure: limits out of range (rows %d, sequences %d, capacity %d, rope context %d)",
                    c.max_rows, c.max_seqs, c.seq_capacity, c.rope_context);
  }
  return Status::Ok();
}

std::vector<uint8_t> EncodePing(uint64_t nonce) {
  Encoder e;
  e.Put<uint64_t>(nonce);
  return std::move(e.bytes());
}

Status DecodePing(std::span<const uint8_t> payload, uint64_t& nonce) {
  Decoder d(payload, "ping");
  DAISY_RETURN_IF_ERROR(d.Get(nonce));
  return d.ExpectEnd();
}

std::vector<uint8_t> EncodePong(const Pong& p) {
  Encoder e;
  e.Put<uint64_t>(p.nonce);
  e.Put<uint64_t>(p.done);
  e.Put<uint64_t>(p.busy);
  e.Put<uint32_t>(p.held);
  return std::move(e.bytes());
}

Status DecodePong(std::span<const uint8_t> payload, Pong& p) {
  Decoder d(payload, "pong");
  DAISY_RETURN_IF_ERROR(d.Get(p.nonce));
  DAISY_RETURN_IF_ERROR(d.Get(p.done));
  DAISY_RETURN_IF_ERROR(d.Get(p.busy));
  DAISY_RETURN_IF_ERROR(d.Get(p.held));
  return d.ExpectEnd();
}

std::vector<uint8_t> EncodeError(uint64_t forward_id, const std::string& message) {
  Encoder e;
  e.Put<uint64_t>(forward_id);
  e.PutString(message.substr(0, 4096));
  return std::move(e.bytes());
}

Status DecodeError(std::span<const uint8_t> payload, uint64_t& forward_id, std::string& message) {
  Decoder d(payload, "error");
  DAISY_RETURN_IF_ERROR(d.Get(forward_id));
  DAISY_RETURN_IF_ERROR(d.GetString(message, 4096));
  return d.ExpectEnd();
}

}  // namespace daisy::pipeline
