#include "runtime/kv_cache.h"

#include "base/check.h"
#include "base/strings.h"

namespace daisy::runtime {

size_t KvCache::bytes_per_sequence() const {
  return static_cast<size_t>(options_.n_layers) * 2 * options_.seq_capacity * options_.kv_dim *
         sizeof(float);
}

Status KvCache::CheckPrepare(int32_t seq, int32_t start_pos, int32_t n_new) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) {
    if (start_pos != 0) {
      return OutOfRange("sequence %d is new but the rows start at position %d", seq, start_pos);
    }
    if (static_cast<int>(seqs_.size()) >= options_.max_seqs) {
      return ResourceExhausted("KV cache holds its maximum of %d sequences", options_.max_seqs);
    }
    if (options_.budget_bytes != 0 &&
        bytes_allocated() + bytes_per_sequence() > options_.budget_bytes) {
      return ResourceExhausted("KV cache budget of %s is used up (%zu sequences of %s)",
                               HumanBytes(options_.budget_bytes).c_str(), seqs_.size(),
                               HumanBytes(bytes_per_sequence()).c_str());
    }
  } else if (start_pos > it->second.length) {
    return OutOfRange("sequence %d has %d positions; rows cannot start at %d", seq,
                      it->second.length, start_pos);
  }
  if (static_cast<int64_t>(start_pos) + n_new > options_.seq_capacity) {
    return OutOfRange("sequence %d would reach %d positions; the KV cache holds %d per sequence",
                      seq, start_pos + n_new, options_.seq_capacity);
  }
  return Status::Ok();
}

Status KvCache::Prepare(int32_t seq, int32_t start_pos, int32_t n_new) {
  DAISY_RETURN_IF_ERROR(CheckPrepare(seq, start_pos, n_new));
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) {
    Seq s;
    s.data = AlignedBuffer::Allocate(bytes_per_sequence());
    if (s.data.data() == nullptr) {
      return ResourceExhausted("cannot allocate %s of KV cache for sequence %d",
                               HumanBytes(bytes_per_sequence()).c_str(), seq);
    }
    it = seqs_.emplace(seq, std::move(s)).first;
  }
  it->second.length = start_pos;  // the rewind: positions from start_pos on are overwritten
  return Status::Ok();
}

void KvCache::SetLength(int32_t seq, int32_t length) {
  auto it = seqs_.find(seq);
  DAISY_CHECK(it != seqs_.end());
  DAISY_CHECK_LE(length, options_.seq_capacity);
  it->second.length = length;
}

Status KvCache::Truncate(int32_t seq, int32_t length) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return NotFound("sequence %d is not in the KV cache", seq);
  if (length < 0) return InvalidArgument("cannot truncate to %d", length);
  if (length < it->second.length) it->second.length = length;
  return Status::Ok();
}

void KvCache::Release(int32_t seq) { seqs_.erase(seq); }

int32_t KvCache::Length(int32_t seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : it->second.length;
}

float* KvCache::Slot(const Seq& s, int layer, int which, int32_t pos) const {
  const size_t per_layer = static_cast<size_t>(2) * options_.seq_capacity * options_.kv_dim;
  return s.data.as<float>() + layer * per_layer +
         (static_cast<size_t>(which) * options_.seq_capacity + pos) * options_.kv_dim;
}

float* KvCache::Key(int32_t seq, int layer, int32_t pos) { return Slot(seqs_.at(seq), layer, 0, pos); }
float* KvCache::Value(int32_t seq, int layer, int32_t pos) {
  return Slot(seqs_.at(seq), layer, 1, pos);
}
const float* KvCache::Keys(int32_t seq, int layer) const {
  return Slot(seqs_.at(seq), layer, 0, 0);
}
const float* KvCache::Values(int32_t seq, int layer) const {
  return Slot(seqs_.at(seq), layer, 1, 0);
}

}  // namespace daisy::runtime
