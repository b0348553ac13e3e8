#include "shard/format.h"

#include "base/strings.h"
#include "model/config.h"

namespace daisy::shard {
namespace {

Result<int> ReadSmall(const gguf::Reader& r, std::string_view key, int limit) {
  auto v = r.GetUint(key);
  if (!v.ok()) return DataLoss("%s: shard key %.*s: %s", r.name().c_str(), static_cast<int>(key.size()),
                               key.data(), v.status().message().c_str());
  if (*v > static_cast<uint64_t>(limit)) {
    return DataLoss("%s: shard key %.*s = %llu is out of range", r.name().c_str(),
                    static_cast<int>(key.size()), key.data(), static_cast<unsigned long long>(*v));
  }
  return static_cast<int>(*v);
}

}  // namespace

std::string ShardInfo::Describe() const {
  return StrFormat("%s: stage %d of %d, layers %d-%d of %d%s%s", file.c_str(), stage, n_stages,
                   first_layer, last_layer - 1, n_layers, embeddings() ? ", embeddings" : "",
                   head() ? ", head" : "");
}

Result<ShardInfo> ReadShardInfo(const gguf::Reader& r) {
  if (r.Find(kKeyFormatVersion) == nullptr) {
    return InvalidArgument("%s is not a daisy shard (no %.*s key); make shards with `daisy "
                           "compile -m MODEL --stages N -o DIR`", r.name().c_str(),
                           static_cast<int>(kKeyFormatVersion.size()), kKeyFormatVersion.data());
  }
  ShardInfo s;
  s.file = r.name();
  DAISY_ASSIGN_OR_RETURN(int version, ReadSmall(r, kKeyFormatVersion, 1 << 30));
  s.format_version = static_cast<uint32_t>(version);
  if (s.format_version != kFormatVersion) {
    return Unimplemented("%s: shard format version %u, this daisy reads version %u; recompile "
                         "the shards with this daisy", r.name().c_str(), s.format_version,
                         kFormatVersion);
  }
  auto fp = r.GetString(kKeyFingerprint);
  if (!fp.ok() || fp->size() != kFingerprintChars) {
    return DataLoss("%s: shard fingerprint is missing or malformed", r.name().c_str());
  }
  s.fingerprint = std::string(*fp);
  DAISY_ASSIGN_OR_RETURN(s.n_stages, ReadSmall(r, kKeyStages, 4096));
  DAISY_ASSIGN_OR_RETURN(s.stage, ReadSmall(r, kKeyStage, 4096));
  DAISY_ASSIGN_OR_RETURN(s.first_layer, ReadSmall(r, kKeyFirstLayer, 1 << 20));
  DAISY_ASSIGN_OR_RETURN(s.last_layer, ReadSmall(r, kKeyLastLayer, 1 << 20));
  DAISY_ASSIGN_OR_RETURN(s.n_layers, ReadSmall(r, model::DescriptionKey("block_count"), 1 << 20));
  DAISY_ASSIGN_OR_RETURN(s.d_model, ReadSmall(r, model::DescriptionKey("embedding_length"), 1 << 24));
  DAISY_ASSIGN_OR_RETURN(s.n_vocab, ReadSmall(r, model::DescriptionKey("vocab_size"), 1 << 26));
  if (s.n_stages < 1 || s.stage >= s.n_stages || s.first_layer >= s.last_layer ||
      s.last_layer > s.n_layers) {
    return DataLoss("%s: inconsistent shard keys (stage %d of %d, layers [%d, %d) of %d)",
                    r.name().c_str(), s.stage, s.n_stages, s.first_layer, s.last_layer, s.n_layers);
  }
  if (auto name = r.GetString("general.name"); name.ok()) s.model_name = std::string(*name);
  return s;
}

Status CheckChain(const std::vector<ShardInfo>& shards) {
  if (shards.empty()) return InvalidArgument("no shards");
  const ShardInfo& first = shards.front();
  for (size_t i = 0; i < shards.size(); ++i) {
    const ShardInfo& s = shards[i];
    if (s.fingerprint != first.fingerprint) {
      return InvalidArgument("%s belongs to another model (fingerprint %s) than %s (fingerprint "
                             "%s)", s.Describe().c_str(), s.fingerprint.c_str(),
                             first.file.c_str(), first.fingerprint.c_str());
    }
    if (s.n_stages != static_cast<int>(shards.size())) {
      return InvalidArgument("%s, but the pipeline has %zu stages", s.Describe().c_str(),
                             shards.size());
    }
    if (s.stage != static_cast<int>(i)) {
      return InvalidArgument("%s is at position %zu of the pipeline; give the shards in stage "
                             "order", s.Describe().c_str(), i);
    }
    const int expect = i == 0 ? 0 : shards[i - 1].last_layer;
    if (s.first_layer != expect) {
      return InvalidArgument("%s: layers %s %d (the previous stage ends at layer %d)",
                             s.Describe().c_str(), s.first_layer > expect ? "skip to" : "overlap at",
                             s.first_layer, expect - 1);
    }
  }
  if (shards.back().last_layer != shards.back().n_layers) {
    return InvalidArgument("%s: layers %d-%d are on no stage", shards.back().Describe().c_str(),
                           shards.back().last_layer, shards.back().n_layers - 1);
  }
  return Status::Ok();
}

}  // namespace daisy::shard
