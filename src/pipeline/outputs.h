// The last stage's job: from the logits of a forward's rows, what each sequence asked for
// (OutputSpec): the argmax, top-k log-probabilities, a sampled token, the full logits, or the
// verdict on drafted tokens (speculative decoding). The same code runs in a worker holding the
// last stage and in a coordinator that holds it itself.
#pragma once

#include <span>
#include <vector>

#include "kernels/ops.h"
#include "pipeline/protocol.h"

namespace daisy::pipeline {

// Rows of `s` that need logits, in order: every row (all_rows, or a verify), the last one, or
// none (kNone).
int LogitRows(const SeqRows& s);

// Outputs for `seqs` from their rows' logits ([LogitRows of each sequence, n_vocab], in
// sequence order).
// Log-probabilities are logit - ops.log_sum_exp(row).
ResultMsg ComputeOutputs(uint64_t id, std::span<const SeqRows> seqs, std::span<const float> logits,
                         int n_vocab, const kernels::OpKernels& ops);

// The decision for one kVerify sequence: `logits` holds its n_rows rows. Greedy (temperature 0,
// no penalty) accepts drafts while they equal the argmax; else the accept/reject rule of
// speculative sampling with the draft's distributions, so the output is distributed exactly as
// plain sampling's. `rows` receives the accepted drafts and one more token.
void Verify(const OutputSpec& out, std::span<const float> logits, int n_vocab, const kernels::OpKernels& ops,
            std::vector<RowOutput>& rows);

}  // namespace daisy::pipeline
