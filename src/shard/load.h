// Loading a shard: map it, read its daisy.shard keys, bind its tensors (already packed: no
// per-weight work) as a Model restricted to the shard's layers.
#pragma once

#include <filesystem>
#include <memory>

#include "base/status.h"
#include "model/model.h"
#include "shard/format.h"

namespace daisy::shard {

struct Shard {
  ShardInfo info;
  std::unique_ptr<model::Model> model;
  double load_seconds = 0;
};

// copy_packed: see model::LoadOptions (2 MiB pages instead of the page cache's 4 KiB ones).
Result<Shard> LoadShard(const std::filesystem::path& path, bool copy_packed = false);

}  // namespace daisy::shard
