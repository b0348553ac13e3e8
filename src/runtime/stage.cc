#include "runtime/stage.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "kernels/activations.h"

namespace daisy::runtime {
namespace {
constexpr size_t kActAlign = 64;
size_t ActStride(const kernels::WeightMatrix& w) {
  return (kernels::ActRowBytes(w.type, w.cols) + kActAlign - 1) / kActAlign * kActAlign;
}
}  // namespace

float* Stage::RopeTable(size_t base, int64_t row) {
  return &rope_[(base * options_.max_batch_rows + row) * config_.head_dim];
}

Stage::Stage(const model::Model& model, const StageOptions& options,
             const kernels::KernelTable& kernels, ThreadPool& pool)
    : config_(model.config()),
      weights_(model.weights()),
      options_(options),
      kernels_(kernels),
      pool_(pool),
      kv_(KvCacheOptions{}) {
  if (options_.last_layer < 0) options_.last_layer = config_.n_layers;
  q_dim_ = config_.n_heads * config_.head_dim;
  kv_dim_ = config_.n_kv_heads * config_.head_dim;
  KvCacheOptions kv{options_.last_layer - options_.first_layer, kv_dim_, options_.seq_capacity,
                    options_.max_seqs, options_.kv_budget_bytes, {}, options_.max_batch_rows};
  for (int l = options_.first_layer; l < options_.last_layer; ++l) {
    kv.layer_window.push_back(config_.layers[l].sliding_window);
  }
  kv_ = KvCache(kv);
  const size_t n = options_.max_batch_rows;
  const size_t d = config_.d_model;
  x_.resize(n * d);
  xn_.resize(n * d);
  q_.resize(n * q_dim_);
  k_.resize(n * kv_dim_);
  v_.resize(n * kv_dim_);
  att_.resize(n * q_dim_);
  tmp_.resize(n * d);
  gate_.resize(n * config_.d_ff);
  up_.resize(n * config_.d_ff);
  if (config_.arch == "phi3") {
    fused_.resize(n * std::max<int64_t>(q_dim_ + 2 * kv_dim_, 2 * config_.d_ff));
  }
  const int64_t widest = std::max<int64_t>({config_.d_model, config_.d_ff, q_dim_});
  // Room for three converted copies (q/k/v of different types share one input).
  act_.resize(3 * n * (kernels::ActRowBytes(kernels::WeightType::kF32, widest) + kActAlign) + kActAlign);
  // Attention takes up to kMaxAttentionRows consecutive rows of a sequence at a time (each key
  // and value read once for all of them), as many as ~8 MiB of scores a thread allows.
  const int group = config_.n_heads / config_.n_kv_heads;
  constexpr int64_t kScoresBudget = int64_t{2} << 20;  // floats a thread
  attention_rows_ = static_cast<int>(std::clamp<int64_t>(
      kScoresBudget / kernels::AttentionScores(1, group, std::max(1, options_.seq_capacity)), 1, kernels::kMaxAttentionRows));
  scores_.resize(static_cast<size_t>(pool_.size()) *
                 kernels::AttentionScores(attention_rows_, group, options_.seq_capacity));
  attention_chunks_.reserve(n);
  for (int l = options_.first_layer; l < options_.last_layer; ++l) {
    const RopeBase base{config_.layers[l].rope_theta, config_.layers[l].rope_freq_scale};
    const auto it = std::find(rope_bases_.begin(), rope_bases_.end(), base);
    rope_base_of_.push_back(static_cast<size_t>(it - rope_bases_.begin()));
    if (it == rope_bases_.end()) rope_bases_.push_back(base);
  }
  rope_.resize(rope_bases_.size() * n * config_.head_dim);
  // Per-pair frequency factors: Llama 3.1's, or Phi-3's long or short set by the positions a
  // sequence may hold here (every stage of a pipeline is configured with the same capacity).
  rope_factors_ = config_.longrope ? (config_.UsesLongRopeFactors(options_.rope_context > 0 ? options_.rope_context : options_.seq_capacity) ? weights_.rope_long
                                                                                           : weights_.rope_short)
                                   : weights_.rope_freqs;
}

Status Stage::Validate(std::span<const BatchRow> rows, std::span<const float> hidden_in,
                       std::span<float> out, std::vector<SeqRun>& runs) const {
  const int n = static_cast<int>(rows.size());
  if (n == 0) return InvalidArgument("empty batch");
  if (n > options_.max_batch_rows) {
    return InvalidArgument("batch of %d rows exceeds this stage's maximum of %d", n,
                           options_.max_batch_rows);
  }
  int n_logits = 0;
  for (int r = 0; r < n; ++r) {
    const BatchRow& row = rows[r];
    if (options_.embeddings && (row.token < 0 || row.token >= config_.n_vocab)) {
      return InvalidArgument("row %d: token %d is outside the vocabulary of %d", r, row.token,
                             config_.n_vocab);
    }
    if (row.pos < 0) return InvalidArgument("row %d: negative position %d", r, row.pos);
    n_logits += row.want_logits ? 1 : 0;
    if (r > 0 && rows[r - 1].seq == row.seq) {
      if (row.pos != rows[r - 1].pos + 1) {
        return InvalidArgument("row %d: sequence %d jumps from position %d to %d", r, row.seq,
                               rows[r - 1].pos, row.pos);
      }
      runs.back().end = r + 1;
    } else {
      for (const SeqRun& s : runs) {
        if (s.seq == row.seq) {
          return InvalidArgument("sequence %d appears in two separate runs of rows", row.seq);
        }
      }
      runs.push_back({row.seq, r, r + 1});
    }
  }
  if (!options_.embeddings && hidden_in.size() != static_cast<size_t>(n) * config_.d_model) {
    return InvalidArgument("hidden input has %zu floats, expected %d x %d", hidden_in.size(), n,
                           config_.d_model);
  }
  const size_t want_out = options_.head ? static_cast<size_t>(n_logits) * config_.n_vocab
                                        : static_cast<size_t>(n) * config_.d_model;
  if (out.size() != want_out) {
    return InvalidArgument("output has room for %zu floats, expected %zu", out.size(), want_out);
  }
  return Status::Ok();
}

Status Stage::Forward(std::span<const BatchRow> rows, std::span<const float> hidden_in,
                      std::span<float> out) {
  std::vector<SeqRun> runs;
  DAISY_RETURN_IF_ERROR(Validate(rows, hidden_in, out, runs));
  // Check every sequence before changing any, so that a refused batch changes nothing.
  for (const SeqRun& s : runs) {
    DAISY_RETURN_IF_ERROR(kv_.CheckPrepare(s.seq, rows[s.begin].pos, s.end - s.begin));
  }
  for (const SeqRun& s : runs) {
    DAISY_RETURN_IF_ERROR(kv_.Prepare(s.seq, rows[s.begin].pos, s.end - s.begin));
  }
  const int n = static_cast<int>(rows.size());
  const int64_t d = config_.d_model;
  if (options_.embeddings) {
    pool_.ParallelFor(n, 1, [&](int, int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        kernels::DequantizeRow(weights_.token_embd, rows[r].token, &x_[r * d]);
        if (config_.embed_scale) {  // Gemma: as ggml_scale by sqrtf(n_embd)
          const float s = std::sqrt(static_cast<float>(d));
          for (int64_t i = 0; i < d; ++i) x_[r * d + i] *= s;
        }
      }
    });
  } else {
    std::memcpy(x_.data(), hidden_in.data(), n * d * sizeof(float));
  }
  // Each row's RoPE angles, once for every layer and head of this forward (once per distinct
  // RoPE base among the stage's layers).
  const int hd = config_.head_dim;
  pool_.ParallelFor(n, 1, [&](int, int64_t b, int64_t e) {
    for (size_t t = 0; t < rope_bases_.size(); ++t) {
      for (int64_t r = b; r < e; ++r) {
        kernels::RopeAngles(rows[r].pos, hd, rope_bases_[t].theta, rope_factors_, rope_bases_[t].scale,
                            config_.rope_attn_factor, RopeTable(t, r));
      }
    }
  });
  for (int l = options_.first_layer; l < options_.last_layer; ++l) Layer(l, rows, n);
  for (const SeqRun& s : runs) kv_.SetLength(s.seq, rows[s.end - 1].pos + 1);

  if (!options_.head) {
    std::memcpy(out.data(), x_.data(), n * d * sizeof(float));
    return Status::Ok();
  }
  // Final norm and LM head for the rows that want logits only.
  int m = 0;
  for (int r = 0; r < n; ++r) {
    if (rows[r].want_logits) std::memcpy(&tmp_[m++ * d], &x_[r * d], d * sizeof(float));
  }
  RmsNorm(tmp_.data(), weights_.output_norm, m, xn_.data());
  Project(xn_.data(), m, {&weights_.output}, {out.data()});
  return Status::Ok();
}

void Stage::Layer(int l, std::span<const BatchRow> rows, int n) {
  const model::LayerWeights& w = weights_.layers[l];
  const int64_t d = config_.d_model, ff = config_.d_ff;
  const kernels::OpKernels& ops = kernels_.ops;
  // Attention block: x += Wo * Attention(Rope(Wq xn), Rope(Wk xn), Wv xn), xn = RmsNorm(x).
  RmsNorm(x_.data(), w.attn_norm, n, xn_.data());
  if (w.wqkv.data != nullptr) {
    ProjectFused(xn_.data(), n, w.wqkv, {q_.data(), k_.data(), v_.data()}, {q_dim_, kv_dim_, kv_dim_});
  } else {
    Project(xn_.data(), n, {&w.wq, &w.wk, &w.wv}, {q_.data(), k_.data(), v_.data()});
  }
  AddBias(q_.data(), w.bq, n, q_dim_);
  AddBias(k_.data(), w.bk, n, kv_dim_);
  AddBias(v_.data(), w.bv, n, kv_dim_);
  Rope(l, n);
  Attention(l, rows, n);
  Project(att_.data(), n, {&w.wo}, {tmp_.data()});
  AddBias(tmp_.data(), w.bo, n, d);
  if (w.attn_post_norm != nullptr) RmsNorm(tmp_.data(), w.attn_post_norm, n, tmp_.data());
  ops.add(x_.data(), tmp_.data(), n * d);
  // Feed-forward block: x += Wdown * (act(Wgate xn) * Wup xn), xn = RmsNorm(x), act SiLU or
  // GELU.
  RmsNorm(x_.data(), w.ffn_norm, n, xn_.data());
  if (w.w_gate_up.data != nullptr) {
    ProjectFused(xn_.data(), n, w.w_gate_up, {gate_.data(), up_.data()}, {ff, ff});
  } else {
    Project(xn_.data(), n, {&w.w_gate, &w.w_up}, {gate_.data(), up_.data()});
  }
  const auto act = config_.activation == model::Activation::kSilu ? ops.silu_mul : ops.gelu_mul;
  pool_.ParallelFor(n * ff, 256, [&](int, int64_t b, int64_t e) {
    act(gate_.data() + b, up_.data() + b, e - b);
  });
  Project(gate_.data(), n, {&w.w_down}, {tmp_.data()});
  if (w.ffn_post_norm != nullptr) RmsNorm(tmp_.data(), w.ffn_post_norm, n, tmp_.data());
  ops.add(x_.data(), tmp_.data(), n * d);
}

void Stage::Project(const float* x, int n, std::initializer_list<const kernels::WeightMatrix*> ws,
                    std::initializer_list<float*> ys) {
  const kernels::WeightMatrix* mats[3];
  float* outs[3];
  const int count = static_cast<int>(ws.size());
  DAISY_CHECK(count >= 1 && count <= 3 && ys.size() == ws.size());
  std::copy(ws.begin(), ws.end(), mats);
  std::copy(ys.begin(), ys.end(), outs);
  // Convert the input once per distinct weight type (usually once).
  uint8_t* base = reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(act_.data()) + kActAlign - 1) / kActAlign * kActAlign);
  const uint8_t* acts[3];
  size_t strides[3];
  size_t offset = 0;
  for (int i = 0; i < count; ++i) {
    int same = -1;
    for (int j = 0; j < i; ++j) {
      if (mats[j]->type == mats[i]->type) same = j;
    }
    strides[i] = ActStride(*mats[i]);
    if (same >= 0) {
      acts[i] = acts[same];
      continue;
    }
    uint8_t* dst = base + offset;
    acts[i] = dst;
    offset += strides[i] * n;
    const kernels::WeightMatrix& m = *mats[i];
    pool_.ParallelFor(n, 1, [&](int, int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        kernels::ConvertActRow(m.type, x + r * m.cols, m.cols, dst + r * strides[i]);
      }
    });
  }
  // One parallel loop over the concatenated output rows of all matrices.
  int64_t total = 0;
  int64_t starts[4];
  for (int i = 0; i < count; ++i) {
    starts[i] = total;
    total += mats[i]->rows;
  }
  starts[count] = total;
  pool_.ParallelFor(total, 16, [&](int, int64_t b, int64_t e) {
    for (int i = 0; i < count; ++i) {
      const int64_t lo = std::max(b, starts[i]), hi = std::min(e, starts[i + 1]);
      if (lo >= hi) continue;
      const kernels::WeightMatrix& m = *mats[i];
      kernels_.matmul[static_cast<int>(m.type)](m, acts[i], strides[i], n, outs[i], m.rows,
                                                lo - starts[i], hi - starts[i]);
    }
  });
}

void Stage::ProjectFused(const float* x, int n, const kernels::WeightMatrix& w, std::initializer_list<float*> parts,
                         std::initializer_list<int64_t> widths) {
  Project(x, n, {&w}, {fused_.data()});
  const int64_t total = w.rows;
  for (int r = 0; r < n; ++r) {
    int64_t offset = 0;
    auto width = widths.begin();
    for (float* part : parts) {
      std::memcpy(part + r * *width, &fused_[r * total + offset], *width * sizeof(float));
      offset += *width++;
    }
  }
}

void Stage::AddBias(float* y, const float* bias, int n, int64_t width) {
  if (bias == nullptr) return;  // the model has none here
  for (int r = 0; r < n; ++r) kernels_.ops.add(y + r * width, bias, width);
}

void Stage::RmsNorm(const float* x, const float* weight, int n, float* y) {
  const int64_t d = config_.d_model;
  pool_.ParallelFor(n, 1, [&](int, int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) kernels_.ops.rms_norm(x + r * d, weight, d, config_.rms_eps, y + r * d);
  });
}

void Stage::Rope(int l, int n) {
  const int hd = config_.head_dim;
  const size_t table = rope_base_of_[l - options_.first_layer];
  const model::LayerWeights& w = weights_.layers[l];
  const float eps = config_.rms_eps;
  const float q_scale = config_.attn_q_scale;
  pool_.ParallelFor(n, 1, [&](int, int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* q = &q_[r * q_dim_];
      float* k = &k_[r * kv_dim_];
      if (w.q_norm != nullptr) {
        for (int h = 0; h < config_.n_heads; ++h) kernels_.ops.rms_norm(q + h * hd, w.q_norm, hd, eps, q + h * hd);
      }
      if (w.k_norm != nullptr) {
        for (int h = 0; h < config_.n_kv_heads; ++h) kernels_.ops.rms_norm(k + h * hd, w.k_norm, hd, eps, k + h * hd);
      }
      const float* cs = RopeTable(table, r);
      kernels_.ops.rope(q, config_.n_heads, hd, cs, config_.rope_mode);
      kernels_.ops.rope(k, config_.n_kv_heads, hd, cs, config_.rope_mode);
      if (q_scale != 0) {
        for (int64_t i = 0; i < q_dim_; ++i) q[i] *= q_scale;
      }
    }
  });
}

void Stage::Attention(int l, std::span<const BatchRow> rows, int n) {
  const int hd = config_.head_dim;
  const int local = l - options_.first_layer;
  // Store this batch's keys and values first: a row attends to every earlier position of its
  // sequence, including rows earlier in this batch.
  for (int r = 0; r < n; ++r) {
    std::memcpy(kv_.Key(rows[r].seq, local, rows[r].pos), &k_[r * kv_dim_], kv_dim_ * sizeof(float));
    std::memcpy(kv_.Value(rows[r].seq, local, rows[r].pos), &v_[r * kv_dim_], kv_dim_ * sizeof(float));
  }
  const int group = config_.n_heads / config_.n_kv_heads;
  // Scores scaled by 1 / sqrt(head_dim), unless q was scaled already (Rope).
  const float scale = config_.attn_q_scale != 0 ? 1.0f : 1.0f / std::sqrt(static_cast<float>(hd));
  const int32_t window = config_.layers[l].sliding_window;
  const KvCache& kv = kv_;
  // Runs of up to attention_rows_ consecutive rows of one sequence.
  attention_chunks_.clear();
  for (int r = 0; r < n;) {
    int len = 1;
    while (r + len < n && len < attention_rows_ && rows[r + len].seq == rows[r].seq) ++len;
    attention_chunks_.push_back({r, len});
    r += len;
  }
  const int64_t scores_per_thread = kernels::AttentionScores(attention_rows_, group, options_.seq_capacity);
  // One task per (chunk, KV head): the group of query heads sharing that KV head, for every row
  // of the chunk, reads each of its keys and values once.
  const int64_t tasks = static_cast<int64_t>(attention_chunks_.size()) * config_.n_kv_heads;
  pool_.ParallelFor(tasks, 1, [&](int thread, int64_t b, int64_t e) {
    for (int64_t task = b; task < e; ++task) {
      const auto [r, len] = attention_chunks_[task / config_.n_kv_heads];
      const int kvh = static_cast<int>(task % config_.n_kv_heads);
      kernels::AttentionArgs a;
      a.q = &q_[r * q_dim_ + kvh * group * hd];
      a.out = &att_[r * q_dim_ + kvh * group * hd];
      a.group = group;
      a.head_dim = hd;
      a.keys = kv.Keys(rows[r].seq, local) + kvh * hd;
      a.values = kv.Values(rows[r].seq, local) + kvh * hd;
      a.kv_stride = kv_dim_;
      a.ring = kv.IsRing(local) ? kv.Slots(local) : 0;
      a.end = rows[r].pos + 1;
      a.begin = window > 0 ? std::max(0, a.end - window) : 0;
      a.window = window;
      a.rows = len;
      a.row_stride = q_dim_;
      a.scale = scale;
      a.scores = &scores_[static_cast<size_t>(thread) * scores_per_thread];
      kernels_.ops.attention(a);
    }
  });
}

}  // namespace daisy::runtime
