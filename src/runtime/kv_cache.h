// KvCache: per-sequence keys and values for the layers of one stage, in f32.
//
// A sequence's storage is allocated on first use and kept until Release(): `seq_capacity`
// positions per layer, except for a sliding-window layer (Gemma 3's local layers), which keeps
// only window + max_rows - 1 positions in a ring (position p in slot p % slots): what the rows of
// one forward can attend. Truncate is O(1) (it only moves the length), which is what makes the
// rewind of a forward's start_pos, and so speculative rollback, free; a rewind further back than
// a ring still holds is refused (OutOfRange) rather than computed on overwritten keys.
// Thread-compatible; during a forward pass different threads write different positions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/status.h"

namespace daisy::runtime {

struct KvCacheOptions {
  int n_layers = 0;      // layers held by this stage
  int kv_dim = 0;        // n_kv_heads * head_dim
  int seq_capacity = 0;  // most tokens one sequence can hold
  int max_seqs = 64;     // most sequences at once
  size_t budget_bytes = 0;  // 0: no limit beyond max_seqs
  // Per layer (empty: none): the sliding window (0: every earlier position), and the most rows
  // of one sequence in one forward.
  std::vector<int32_t> layer_window;
  int32_t max_rows = 1;
};

class KvCache {
 public:
  explicit KvCache(const KvCacheOptions& options);
  KvCache(KvCache&&) noexcept = default;
  KvCache& operator=(KvCache&&) noexcept = default;
  KvCache(const KvCache&) = delete;

  // Sets `seq`'s length to `start_pos` and makes room for `n_new` more tokens. Errors:
  // OutOfRange when start_pos is beyond the current length or the capacity would be exceeded;
  // ResourceExhausted when a new sequence does not fit the budget.
  Status Prepare(int32_t seq, int32_t start_pos, int32_t n_new);
  // The checks of Prepare without its effect: callers that prepare several sequences check
  // them all first, so that a refused batch changes nothing.
  Status CheckPrepare(int32_t seq, int32_t start_pos, int32_t n_new) const;
  // Commits the length after a forward pass appended tokens.
  void SetLength(int32_t seq, int32_t length);
  // Keeps the first `length` tokens (no-op when already shorter).
  Status Truncate(int32_t seq, int32_t length);
  void Release(int32_t seq);

  int32_t Length(int32_t seq) const;
  // [kv_dim] floats of `layer`'s key / value at `pos` (precondition: Prepare made room).
  float* Key(int32_t seq, int layer, int32_t pos);
  float* Value(int32_t seq, int layer, int32_t pos);
  // Slot 0 of `layer`'s keys / values; position t is in slot t % Slots(layer) (t itself when
  // the layer keeps every position), kv_dim floats a slot.
  const float* Keys(int32_t seq, int layer) const;
  const float* Values(int32_t seq, int layer) const;
  int32_t Slots(int layer) const { return slots_[layer]; }
  bool IsRing(int layer) const { return slots_[layer] < options_.seq_capacity; }

  size_t bytes_per_sequence() const { return bytes_per_sequence_; }
  size_t bytes_allocated() const { return seqs_.size() * bytes_per_sequence(); }
  size_t n_sequences() const { return seqs_.size(); }
  // Every sequence held, with its length, by sequence id.
  std::vector<std::pair<int32_t, int32_t>> Lengths() const;
  const KvCacheOptions& options() const { return options_; }

 private:
  struct Seq {
    AlignedBuffer data;  // per layer: float [2][slots][kv_dim]
    int32_t length = 0;
    int32_t high = 0;    // one past the furthest position ever written
  };
  float* Slot(const Seq& s, int layer, int which, int32_t pos) const;

  KvCacheOptions options_;
  std::vector<int32_t> slots_;        // per layer
  std::vector<size_t> layer_offset_;  // per layer, in floats
  size_t bytes_per_sequence_ = 0;
  std::unordered_map<int32_t, Seq> seqs_;
};

}  // namespace daisy::runtime
