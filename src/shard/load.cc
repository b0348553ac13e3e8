#include "shard/load.h"

#include <chrono>

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
  DAISY_ASSIGN_OR_RETURN(s.model, model::LlamaModel::Open(std::move(reader), o));
  s.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

}  // namespace daisy::shard
