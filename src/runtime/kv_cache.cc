#include "runtime/kv_cache.h"

#include <algorithm>

#include "base/check.h"
#include "base/strings.h"

namespace daisy::runtime {

KvCache::KvCache(const KvCacheOptions& options) : options_(options) {
  size_t offset = 0;
  for (int l = 0; l < options_.n_layers; ++l) {
    const int32_t window = l < static_cast<int>(options_.layer_window.size()) ? options_.layer_window[l] : 0;
    int32_t slots = options_.seq_capacity;
    if (window > 0) {
      slots = static_cast<int32_t>(std::min<int64_t>(slots, int64_t{window} + std::max(1, options_.max_rows) - 1));
    }
    slots_.push_back(slots);
    layer_offset_.push_back(offset);
    offset += static_cast<size_t>(2) * slots * options_.kv_dim;
  }
  bytes_per_sequence_ = offset * sizeof(float);
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
  } else {
    // A ring must still hold every position these rows attend once they are written.
    const int32_t high = std::max<int32_t>(it->second.high, start_pos + n_new);
    for (int l = 0; l < options_.n_layers; ++l) {
      if (!IsRing(l)) continue;
      const int32_t oldest = std::max(0, start_pos - options_.layer_window[l] + 1);
      if (oldest < high - slots_[l]) {
        return OutOfRange("sequence %d: rows from position %d attend positions from %d, which a sliding-window "
                          "layer no longer keeps (it keeps the last %d of %d written); rewind less or start over",
                          seq, start_pos, oldest, slots_[l], high);
      }
    }
  }
  if (n_new > options_.max_rows && std::any_of(slots_.begin(), slots_.end(), [&](int32_t s) {
        return s < options_.seq_capacity;
      })) {
    return OutOfRange("%d rows of sequence %d in one forward; the sliding-window layers keep room for %d", n_new,
                      seq, options_.max_rows);
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
  it->second.high = std::max(it->second.high, length);
}

Status KvCache::Truncate(int32_t seq, int32_t length) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return NotFound("sequence %d is not in the KV cache", seq);
  if (length < 0) return InvalidArgument("cannot truncate to %d", length);
  if (length < it->second.length) it->second.length = length;
  return Status::Ok();
}

void KvCache::Release(int32_t seq) { seqs_.erase(seq); }

std::vector<std::pair<int32_t, int32_t>> KvCache::Lengths() const {
  std::vector<std::pair<int32_t, int32_t>> out;
  out.reserve(seqs_.size());
  for (const auto& [seq, s] : seqs_) out.emplace_back(seq, s.length);
  std::sort(out.begin(), out.end());
  return out;
}

int32_t KvCache::Length(int32_t seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : it->second.length;
}

float* KvCache::Slot(const Seq& s, int layer, int which, int32_t pos) const {
  const int32_t slots = slots_[layer];
  return s.data.as<float>() + layer_offset_[layer] +
         (static_cast<size_t>(which) * slots + pos % slots) * options_.kv_dim;
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
