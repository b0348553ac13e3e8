#include "pipeline/protocol.h"

#include <bit>

#include <algorithm>
#include <cmath>

#include "kernels/quant/q8_0.h"
#include "kernels/quant/float_formats.h"

namespace daisy::pipeline {

using transport::Decoder;
using transport::Encoder;

const char* WireTypeName(WireType t) {
  switch (t) {
    case WireType::kF32: return "f32";
    case WireType::kBF16: return "bf16";
    case WireType::kF16: return "f16";
    case WireType::kQ8_0: return "q8_0";
  }
  return "?";
}

Result<WireType> ParseWireType(const std::string& name) {
  for (WireType t : {WireType::kF32, WireType::kBF16, WireType::kF16, WireType::kQ8_0}) {
    if (name == WireTypeName(t)) return t;
  }
  return InvalidArgument("wire type '%s' is not one of f32, bf16, f16, q8_0", name.c_str());
}

size_t WireRowBytes(WireType t, int dim) {
  switch (t) {
    case WireType::kF32: return 4ull * dim;
    case WireType::kBF16:
    case WireType::kF16: return 2ull * dim;
    case WireType::kQ8_0: return dim / kernels::kQ8BlockSize * sizeof(kernels::BlockQ8_0);
  }
  return 0;
}

void EncodeRows(WireType t, const float* rows, int n, int dim, uint8_t* out) {
  const size_t row_bytes = WireRowBytes(t, dim);
  for (int r = 0; r < n; ++r) {
    const float* x = rows + static_cast<size_t>(r) * dim;
    uint8_t* y = out + r * row_bytes;
    switch (t) {
      case WireType::kF32: std::memcpy(y, x, row_bytes); break;
      case WireType::kBF16: kernels::Fp32ToBf16Row(x, reinterpret_cast<uint16_t*>(y), dim); break;
      case WireType::kF16: kernels::Fp32ToFp16Row(x, reinterpret_cast<uint16_t*>(y), dim); break;
      case WireType::kQ8_0:
        kernels::QuantizeRowQ8_0(x, reinterpret_cast<kernels::BlockQ8_0*>(y), dim);
        break;
    }
  }
}

void DecodeRows(WireType t, const uint8_t* in, int n, int dim, float* rows) {
  const size_t row_bytes = WireRowBytes(t, dim);
  for (int r = 0; r < n; ++r) {
    const uint8_t* x = in + r * row_bytes;
    float* y = rows + static_cast<size_t>(r) * dim;
    switch (t) {
      case WireType::kF32: std::memcpy(y, x, row_bytes); break;
      case WireType::kBF16: kernels::Bf16ToFp32Row(reinterpret_cast<const uint16_t*>(x), y, dim); break;
      case WireType::kF16: kernels::Fp16ToFp32Row(reinterpret_cast<const uint16_t*>(x), y, dim); break;
      case WireType::kQ8_0:
        kernels::DequantizeRowQ8_0(reinterpret_cast<const kernels::BlockQ8_0*>(x), y, dim);
        break;
    }
  }
}

int32_t ForwardHeader::total_rows() const {
  int32_t n = 0;
  for (const SeqRows& s : seqs) n += s.n_rows;
  return n;
}


namespace {
constexpr size_t kForwardFixed = 8 + 4 + 4 + 4 + 4;  // id, wire+pad, dim, n_seqs, outputs bytes
constexpr size_t kRouting = 4 * 3;                   // seq, start_pos, n_rows
constexpr size_t kOutputFixed = 4 + 4 * 6 + 8 + 8 + 4;  // see EncodeOutputs

void EncodeOutputs(const ForwardHeader& h, Encoder& e) {
  for (const SeqRows& s : h.seqs) {
    e.Put<uint8_t>(static_cast<uint8_t>(s.out.kind));
    e.Put<uint8_t>(s.out.all_rows ? 1 : 0);
    e.Put<uint16_t>(s.out.top_k);
    const runtime::SamplingParams& p = s.out.sampling;
    e.Put<float>(p.temperature);
    e.Put<int32_t>(p.top_k);
    e.Put<float>(p.top_p);
    e.Put<float>(p.min_p);
    e.Put<float>(p.repeat_penalty);
    e.Put<int32_t>(p.repeat_last_n);
    e.Put<uint64_t>(p.seed);
    e.Put<uint64_t>(s.out.position);
    e.Put<uint32_t>(static_cast<uint32_t>(s.out.history.size()));
    for (int32_t t : s.out.history) e.Put<int32_t>(t);
    // Masks: each as the list of allowed ids (mode 0) or the bitset (mode 1), whichever is smaller.
    e.Put<uint32_t>(static_cast<uint32_t>(s.out.masks.size()));
    for (const std::vector<uint32_t>& m : s.out.masks) {
      uint32_t count = 0;
      for (uint32_t w : m) count += static_cast<uint32_t>(std::popcount(w));
      if (count < m.size()) {
        e.Put<uint8_t>(0);
        e.Put<uint32_t>(count);
        for (size_t w = 0; w < m.size(); ++w) {
          for (uint32_t bits = m[w]; bits != 0; bits &= bits - 1) e.Put<int32_t>(static_cast<int32_t>(w * 32 + std::countr_zero(bits)));
        }
      } else {
        e.Put<uint8_t>(1);
        e.Put<uint32_t>(static_cast<uint32_t>(m.size()));
        for (uint32_t w : m) e.Put<uint32_t>(w);
      }
    }
    if (s.out.kind != OutputKind::kVerify) continue;
    e.Put<uint32_t>(static_cast<uint32_t>(s.out.draft.size()));
    for (size_t i = 0; i < s.out.draft.size(); ++i) {
      e.Put<int32_t>(s.out.draft[i]);
      const auto* q = i < s.out.draft_q.size() ? &s.out.draft_q[i] : nullptr;
      e.Put<uint16_t>(q != nullptr ? static_cast<uint16_t>(q->size()) : 0);
      if (q == nullptr) continue;
      for (auto [id, prob] : *q) {
        e.Put<int32_t>(id);
        e.Put<float>(prob);
      }
    }
  }
}

Status DecodeDrafts(Decoder& d, const Limits& limits, SeqRows& s) {
  uint32_t n_draft = 0;
  DAISY_RETURN_IF_ERROR(d.Get(n_draft));
  if (n_draft + 1 != static_cast<uint32_t>(s.n_rows)) {
    return DataLoss("forward: %u drafted tokens for %d rows (want rows - 1)", n_draft, s.n_rows);
  }
  s.out.draft.resize(n_draft);
  s.out.draft_q.resize(n_draft);
  for (uint32_t i = 0; i < n_draft; ++i) {
    uint16_t n_q = 0;
    DAISY_RETURN_IF_ERROR(d.Get(s.out.draft[i]));
    DAISY_RETURN_IF_ERROR(d.Get(n_q));
    if (s.out.draft[i] < 0 || s.out.draft[i] >= limits.n_vocab || n_q > kMaxDraftSupport) {
      return DataLoss("forward: drafted token %d with %u probabilities (vocabulary %d, at most %d)",
                      s.out.draft[i], n_q, limits.n_vocab, kMaxDraftSupport);
    }
    s.out.draft_q[i].resize(n_q);
    for (auto& [id, prob] : s.out.draft_q[i]) {
      DAISY_RETURN_IF_ERROR(d.Get(id));
      DAISY_RETURN_IF_ERROR(d.Get(prob));
      if (id < 0 || id >= limits.n_vocab || !(prob >= 0 && prob <= 1)) {
        return DataLoss("forward: draft probability %g for token %d", prob, id);
      }
    }
  }
  return Status::Ok();
}

Status DecodeMasks(Decoder& d, const Limits& limits, SeqRows& s) {
  uint32_t n_masks = 0;
  DAISY_RETURN_IF_ERROR(d.Get(n_masks));
  if (n_masks == 0) return Status::Ok();
  const bool verify = s.out.kind == OutputKind::kVerify;
  if (s.out.kind == OutputKind::kNone || s.out.all_rows || n_masks != (verify ? static_cast<uint32_t>(s.n_rows) : 1u)) {
    return DataLoss("forward: %u token masks for sequence %d (one per output row)", n_masks, s.seq);
  }
  const uint32_t words = static_cast<uint32_t>((limits.n_vocab + 31) / 32);
  s.out.masks.assign(n_masks, std::vector<uint32_t>(words, 0));
  for (std::vector<uint32_t>& m : s.out.masks) {
    uint8_t mode = 0;
    uint32_t n = 0;
    DAISY_RETURN_IF_ERROR(d.Get(mode));
    DAISY_RETURN_IF_ERROR(d.Get(n));
    if (mode == 0) {
      if (n > static_cast<uint32_t>(limits.n_vocab)) return DataLoss("forward: a token mask of %u ids", n);
      for (uint32_t i = 0; i < n; ++i) {
        int32_t id = 0;
        DAISY_RETURN_IF_ERROR(d.Get(id));
        if (id < 0 || id >= limits.n_vocab) return DataLoss("forward: token %d in a mask (vocabulary %d)", id, limits.n_vocab);
        m[id >> 5] |= uint32_t{1} << (id & 31);
      }
    } else if (mode == 1) {
      if (n != words) return DataLoss("forward: a token bitset of %u words (vocabulary %d)", n, limits.n_vocab);
      for (uint32_t& w : m) DAISY_RETURN_IF_ERROR(d.Get(w));
    } else {
      return DataLoss("forward: unknown token mask mode %u", mode);
    }
  }
  return Status::Ok();
}

// The last stage's section: every sequence's output spec, checked.
Status DecodeOutputs(std::span<const uint8_t> section, const Limits& limits, ForwardHeader& h) {
  Decoder d(section, "forward outputs");
  for (SeqRows& s : h.seqs) {
    uint8_t kind = 0, all = 0;
    uint32_t n_history = 0;
    runtime::SamplingParams& p = s.out.sampling;
    DAISY_RETURN_IF_ERROR(d.Get(kind));
    DAISY_RETURN_IF_ERROR(d.Get(all));
    DAISY_RETURN_IF_ERROR(d.Get(s.out.top_k));
    DAISY_RETURN_IF_ERROR(d.Get(p.temperature));
    DAISY_RETURN_IF_ERROR(d.Get(p.top_k));
    DAISY_RETURN_IF_ERROR(d.Get(p.top_p));
    DAISY_RETURN_IF_ERROR(d.Get(p.min_p));
    DAISY_RETURN_IF_ERROR(d.Get(p.repeat_penalty));
    DAISY_RETURN_IF_ERROR(d.Get(p.repeat_last_n));
    DAISY_RETURN_IF_ERROR(d.Get(p.seed));
    DAISY_RETURN_IF_ERROR(d.Get(s.out.position));
    DAISY_RETURN_IF_ERROR(d.Get(n_history));
    if (kind > static_cast<uint8_t>(OutputKind::kVerify) || all > 1) {
      return DataLoss("forward: sequence %d asks for unknown output kind %u", s.seq, kind);
    }
    s.out.kind = static_cast<OutputKind>(kind);
    s.out.all_rows = all != 0;
    if ((s.out.kind == OutputKind::kTopK && s.out.top_k < 1) || s.out.top_k > limits.max_top_k ||
        s.out.top_k > limits.n_vocab) {
      return DataLoss("forward: top-k of %u (1 to %d allowed)", s.out.top_k,
                      std::min(limits.max_top_k, limits.n_vocab));
    }
    if (!std::isfinite(p.temperature) || !std::isfinite(p.top_p) || !std::isfinite(p.min_p) ||
        !std::isfinite(p.repeat_penalty) || p.repeat_penalty <= 0) {
      return DataLoss("forward: sampling parameters are not finite");
    }
    if (n_history > static_cast<uint32_t>(limits.max_history)) {
      return DataLoss("forward: a history of %u tokens (at most %d)", n_history, limits.max_history);
    }
    s.out.history.resize(n_history);
    for (int32_t& t : s.out.history) DAISY_RETURN_IF_ERROR(d.Get(t));
    DAISY_RETURN_IF_ERROR(DecodeMasks(d, limits, s));
    if (s.out.kind == OutputKind::kVerify) DAISY_RETURN_IF_ERROR(DecodeDrafts(d, limits, s));
  }
  return d.ExpectEnd();
}

}  // namespace

size_t Limits::MaxOutputBytes() const {
  return static_cast<size_t>(max_seqs) * (kOutputFixed + 4ull * max_history + 4 + 4) +
         static_cast<size_t>(max_rows) * (6 + 8 * kMaxDraftSupport + 5 + 4ull * ((n_vocab + 31) / 32));
}

size_t Limits::MaxForwardBytes() const {
  return kForwardFixed + static_cast<size_t>(max_seqs) * kRouting + MaxOutputBytes() +
         static_cast<size_t>(max_rows) * WireRowBytes(WireType::kF32, d_model);
}

size_t Limits::MaxResultBytes() const {
  const size_t per_row = 8 + 8ull * max_top_k + 4ull * n_vocab;
  return 12 + static_cast<size_t>(max_seqs) * 12 + static_cast<size_t>(max_rows) * per_row;
}

std::vector<uint8_t> EncodeForwardHeader(const ForwardHeader& h) {
  Encoder outputs;
  EncodeOutputs(h, outputs);
  Encoder e;
  e.Put<uint64_t>(h.id);
  e.Put<uint8_t>(static_cast<uint8_t>(h.wire));
  e.Put<uint8_t>(0);
  e.Put<uint16_t>(static_cast<uint16_t>(h.last_stage + 1));  // 0: every stage
  e.Put<int32_t>(h.dim);
  e.Put<uint32_t>(static_cast<uint32_t>(h.seqs.size()));
  for (const SeqRows& s : h.seqs) {
    e.Put<int32_t>(s.seq);
    e.Put<int32_t>(s.start_pos);
    e.Put<int32_t>(s.n_rows);
  }
  e.Put<uint32_t>(static_cast<uint32_t>(outputs.bytes().size()));
  e.PutBytes(outputs.bytes());
  return std::move(e.bytes());
}

Status DecodeForward(std::span<const uint8_t> payload, const Limits& limits, bool outputs,
                     ForwardHeader& h, std::span<const uint8_t>& activations) {
  Decoder d(payload, "forward");
  uint8_t wire = 0, pad8 = 0;
  uint16_t end_stage = 0;
  uint32_t n_seqs = 0, output_bytes = 0;
  DAISY_RETURN_IF_ERROR(d.Get(h.id));
  DAISY_RETURN_IF_ERROR(d.Get(wire));
  DAISY_RETURN_IF_ERROR(d.Get(pad8));
  DAISY_RETURN_IF_ERROR(d.Get(end_stage));
  h.last_stage = static_cast<int32_t>(end_stage) - 1;
  DAISY_RETURN_IF_ERROR(d.Get(h.dim));
  DAISY_RETURN_IF_ERROR(d.Get(n_seqs));
  if (wire > static_cast<uint8_t>(WireType::kQ8_0)) return DataLoss("forward: unknown wire type %u", wire);
  h.wire = static_cast<WireType>(wire);
  if (h.dim != limits.d_model) {
    return DataLoss("forward: rows of %d values, this stage takes %d", h.dim, limits.d_model);
  }
  if (n_seqs == 0 || n_seqs > static_cast<uint32_t>(limits.max_seqs)) {
    return DataLoss("forward: %u sequences (1 to %d allowed)", n_seqs, limits.max_seqs);
  }
  h.seqs.assign(n_seqs, SeqRows{});
  int64_t rows = 0;
  for (SeqRows& s : h.seqs) {
    DAISY_RETURN_IF_ERROR(d.Get(s.seq));
    DAISY_RETURN_IF_ERROR(d.Get(s.start_pos));
    DAISY_RETURN_IF_ERROR(d.Get(s.n_rows));
    if (s.seq < 0 || s.start_pos < 0 || s.n_rows < 1 || s.n_rows > limits.max_rows) {
      return DataLoss("forward: bad sequence entry (seq %d, start %d, %d rows)", s.seq,
                      s.start_pos, s.n_rows);
    }
    rows += s.n_rows;
    if (rows > limits.max_rows) return DataLoss("forward: more than %d rows", limits.max_rows);
  }
  // The last stage's section: read there, passed over (and on, unchanged) everywhere else.
  DAISY_RETURN_IF_ERROR(d.Get(output_bytes));
  if (output_bytes > limits.MaxOutputBytes()) {
    return DataLoss("forward: %u bytes of output requests (at most %zu)", output_bytes, limits.MaxOutputBytes());
  }
  std::span<const uint8_t> section;
  DAISY_RETURN_IF_ERROR(d.GetBytes(output_bytes, section));
  if (outputs) DAISY_RETURN_IF_ERROR(DecodeOutputs(section, limits, h));
  if (h.wire == WireType::kQ8_0 && h.dim % kernels::kQ8BlockSize != 0) {
    return DataLoss("forward: q8_0 rows need a multiple of 32 values");
  }
  const size_t want = static_cast<size_t>(rows) * WireRowBytes(h.wire, h.dim);
  if (d.left() != want) {
    return DataLoss("forward: %zu activation bytes for %lld rows of %s[%d], expected %zu", d.left(),
                    static_cast<long long>(rows), WireTypeName(h.wire), h.dim, want);
  }
  return d.GetBytes(want, activations);
}

std::vector<uint8_t> EncodeResult(const ResultMsg& r) {
  Encoder e;
  e.Put<uint64_t>(r.id);
  e.Put<uint32_t>(static_cast<uint32_t>(r.seqs.size()));
  for (const SeqResult& s : r.seqs) {
    const uint16_t top_k = s.rows.empty() ? 0 : static_cast<uint16_t>(s.rows[0].top.size());
    const uint32_t n_logits = s.rows.empty() ? 0 : static_cast<uint32_t>(s.rows[0].logits.size());
    e.Put<int32_t>(s.seq);
    e.Put<uint32_t>(static_cast<uint32_t>(s.rows.size()));
    e.Put<uint16_t>(top_k);
    e.Put<uint16_t>(0);
    e.Put<uint32_t>(n_logits);
    for (const RowOutput& row : s.rows) {
      e.Put<int32_t>(row.token);
      e.Put<float>(row.logprob);
      for (auto [id, lp] : row.top) {
        e.Put<int32_t>(id);
        e.Put<float>(lp);
      }
      e.PutBytes({reinterpret_cast<const uint8_t*>(row.logits.data()), row.logits.size() * 4});
    }
  }
  return std::move(e.bytes());
}

Status DecodeResult(std::span<const uint8_t> payload, const Limits& limits, ResultMsg& r) {
  Decoder d(payload, "result");
  uint32_t n_seqs = 0;
  DAISY_RETURN_IF_ERROR(d.Get(r.id));
  DAISY_RETURN_IF_ERROR(d.Get(n_seqs));
  if (n_seqs > static_cast<uint32_t>(limits.max_seqs)) return DataLoss("result: %u sequences", n_seqs);
  r.seqs.resize(n_seqs);
  int64_t rows = 0;
  for (SeqResult& s : r.seqs) {
    uint32_t n_rows = 0, n_logits = 0;
    uint16_t top_k = 0, pad = 0;
    DAISY_RETURN_IF_ERROR(d.Get(s.seq));
    DAISY_RETURN_IF_ERROR(d.Get(n_rows));
    DAISY_RETURN_IF_ERROR(d.Get(top_k));
    DAISY_RETURN_IF_ERROR(d.Get(pad));
    DAISY_RETURN_IF_ERROR(d.Get(n_logits));
    rows += n_rows;
    if (rows > limits.max_rows || top_k > limits.max_top_k ||
        (n_logits != 0 && n_logits != static_cast<uint32_t>(limits.n_vocab))) {
      return DataLoss("result: %u rows, top-%u, %u logits exceed the limits", n_rows, top_k, n_logits);
    }
    s.rows.resize(n_rows);
    for (RowOutput& row : s.rows) {
      DAISY_RETURN_IF_ERROR(d.Get(row.token));
      DAISY_RETURN_IF_ERROR(d.Get(row.logprob));
      row.top.resize(top_k);
      for (auto& [id, lp] : row.top) {
        DAISY_RETURN_IF_ERROR(d.Get(id));
        DAISY_RETURN_IF_ERROR(d.Get(lp));
      }
      std::span<const uint8_t> l;
      DAISY_RETURN_IF_ERROR(d.GetBytes(4ull * n_logits, l));
      row.logits.resize(n_logits);
      if (n_logits != 0) std::memcpy(row.logits.data(), l.data(), l.size());
    }
  }
  return d.ExpectEnd();
}

}  // namespace daisy::pipeline
