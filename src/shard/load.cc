#include "shard/load.h"

#include <chrono>

#include "base/log.h"
#include "base/memory_stats.h"
#include "base/strings.h"

namespace daisy::shard {

Result<Shard> LoadShard(const std::filesystem::path& path, bool copy_packed) {
  const auto start = std::chrono::steady_clock::now();
  DAISY_ASSIGN_OR_RETURN(gguf::Reader reader, gguf::Reader::Open(path));
  Shard s;
  DAISY_ASSIGN_OR_RETURN(s.info, ReadShardInfo(reader));
  model::LoadOptions o;
  o.first_layer = s.info.first_layer;
  o.last_layer = s.info.last_layer;
  o.embeddings = s.info.embeddings();
  o.head = s.info.head();
  o.copy_packed = copy_packed;
  DAISY_ASSIGN_OR_RETURN(s.model, model::Model::Open(std::move(reader), o));
  s.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The kernel may refuse huge pages (THP "never", or memory too fragmented); decode can then be
  // several times slower, which is worth a line rather than a mystery.
  const uint64_t owned = s.model->owned_bytes(), huge = HugePageBytes();
  if (owned >= (uint64_t{256} << 20) && huge < owned / 2) {
    DAISY_LOG_WARN("%s: only %s of %s of weights are in huge pages (see "
                   "/sys/kernel/mm/transparent_hugepage/enabled); decode may be slower",
                   path.filename().c_str(), HumanBytes(huge).c_str(), HumanBytes(owned).c_str());
  }
  return s;
}

}  // namespace daisy::shard
