// Stage: runs a contiguous range of a model's layers for a batch of rows, plus the embeddings
// (first stage) and the final norm + LM head (last stage). A whole model is the one-stage case.
// It is the recipe: the model's description (model/config.h) says what happens, the kernel
// table's ops and matrix kernels say how; Layer() reads as the block's steps, one kernel call on
// named, preallocated buffers each. Owns the KV cache of its layers and the activation buffers
// of its largest batch; borrows the weights, the kernels and the thread pool (they must outlive
// it). Thread-compatible: one Forward at a time.
//
// Batch invariance: every row's result depends only on its own sequence (token, position and
// KV history), never on the other rows in the batch, the batch size or the thread count: the
// kernels' contract plus per-row norms, RoPE, attention and activation quantisation.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/kernel_table.h"
#include "model/model.h"
#include "runtime/kv_cache.h"
#include "runtime/thread_pool.h"

namespace daisy::runtime {

struct StageOptions {
  int first_layer = 0;
  int last_layer = -1;      // -1: the model's last layer
  bool embeddings = true;   // rows carry token ids
  bool head = true;         // produce logits (else hidden states)
  int max_batch_rows = 256; // the largest Forward; callers chunk longer prompts
  int seq_capacity = 4096;  // KV positions per sequence
  int max_seqs = 64;
  size_t kv_budget_bytes = 0;
  // The context the user asked for, when seq_capacity holds more (speculation's room for K
  // drafted rows): what decides LongRoPE's factor set (0: seq_capacity). Every stage of a
  // pipeline gets the same.
  int rope_context = 0;
};

// One row of a batch: a token (or hidden state) of sequence `seq` at position `pos`.
struct BatchRow {
  int32_t seq = 0;
  int32_t pos = 0;
  int32_t token = 0;         // used when the stage has the embeddings
  bool want_logits = false;  // head stage: produce this row's logits
};

class Stage {
 public:
  Stage(const model::Model& model, const StageOptions& options,
        const kernels::KernelTable& kernels, ThreadPool& pool);

  // Runs `rows`. Rows of one sequence must be adjacent with consecutive positions; the first
  // row of each sequence sets that sequence's KV length to its position (the rewind) before
  // appending. Without embeddings, `hidden_in` holds [rows, d_model]. With the head, `out`
  // receives [rows wanting logits, n_vocab] in row order; otherwise [rows, d_model] hidden
  // states. Errors (nothing is changed): InvalidArgument for malformed batches, OutOfRange /
  // ResourceExhausted from the KV cache.
  // The kernels its forwards run (the output rows' normaliser too: pipeline::ComputeOutputs).
  const kernels::KernelTable& kernels() const { return kernels_; }

  Status Forward(std::span<const BatchRow> rows, std::span<const float> hidden_in,
                 std::span<float> out);

  Status Truncate(int32_t seq, int32_t length) { return kv_.Truncate(seq, length); }
  void Release(int32_t seq) { kv_.Release(seq); }
  const KvCache& kv() const { return kv_; }
  const model::ModelConfig& config() const { return config_; }
  const StageOptions& options() const { return options_; }

 private:
  struct SeqRun {  // the rows of one sequence in this batch
    int32_t seq;
    int begin, end;  // row indices
  };
  Status Validate(std::span<const BatchRow> rows, std::span<const float> hidden_in,
                  std::span<float> out, std::vector<SeqRun>& runs) const;
  void Layer(int layer, std::span<const BatchRow> rows, int n);
  // y[n][w.rows] = x[n][w.cols] * w^T for up to three matrices sharing the input.
  void Project(const float* x, int n, std::initializer_list<const kernels::WeightMatrix*> ws,
               std::initializer_list<float*> ys);
  void RmsNorm(const float* x, const float* weight, int n, float* y);
  // y[r] += bias for n rows of `width`; nothing when bias is null.
  void AddBias(float* y, const float* bias, int n, int64_t width);
  // q_ and k_ of n rows: their per-head norms when the model has them, the rotation by the
  // layer's RoPE table, and q's scale when the model scales q instead of the scores.
  void Rope(int layer, int n);
  // y = W x for a fused matrix whose output rows are the concatenation of `parts` (widths
  // `widths`): projected into fused_, then copied apart.
  void ProjectFused(const float* x, int n, const kernels::WeightMatrix& w, std::initializer_list<float*> parts,
                    std::initializer_list<int64_t> widths);
  // The angles of `row` for the stage's RoPE base number `base` (rope_bases_).
  float* RopeTable(size_t base, int64_t row);
  void Attention(int layer, std::span<const BatchRow> rows, int n);

  const model::ModelConfig& config_;
  const model::Weights& weights_;
  StageOptions options_;
  const kernels::KernelTable& kernels_;
  ThreadPool& pool_;
  KvCache kv_;
  int q_dim_, kv_dim_;
  // Activation buffers for max_batch_rows rows.
  std::vector<float> x_, xn_, q_, k_, v_, att_, tmp_, gate_, up_;
  std::vector<float> fused_;           // a fused matrix's rows (Phi-3's q/k/v, gate/up) before the split
  std::vector<uint8_t> act_;           // converted activation rows
  std::vector<float> scores_;          // [threads][attention_rows_][group][seq_capacity] attention scratch
  int attention_rows_ = 1;             // consecutive rows of a sequence per attention call
  std::vector<std::pair<int, int>> attention_chunks_;  // this forward's (first row, rows) per call
  std::vector<float> rope_;            // [bases][rows][head_dim] cos/sin of this forward's rows
  struct RopeBase {
    float theta, scale;
    bool operator==(const RopeBase&) const = default;
  };
  std::vector<RopeBase> rope_bases_;   // the distinct RoPE bases (and scales) of the stage's layers
  const float* rope_factors_ = nullptr;  // per-pair RoPE frequency factors, or null
  std::vector<size_t> rope_base_of_;   // per stage layer: its index in rope_bases_
};

}  // namespace daisy::runtime
