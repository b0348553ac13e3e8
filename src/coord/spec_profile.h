// A speculative-decoding profile: what the K controller learned about a target/draft pair
// (acceptance, per state and per tenth of the draft's confidence; verify times by rows; the
// draft's time per row), kept in a small JSON file between runs (`daisy run --spec-profile
// FILE`, `daisy serve --spec-profile FILE`), so a run starts where the last one ended instead
// of learning the pair again from a prior. It only steers K: the output is the same without it.
#pragma once

#include <string>

#include "base/status.h"
#include "coord/k_controller.h"

namespace daisy::coord {

// The most bytes a profile file may have (one holds a few hundred numbers).
inline constexpr size_t kMaxSpecProfileBytes = 1 << 20;

// Reads `path` into `k` (KController::Restore) when it is a profile for `pair`: a string naming
// the target, the draft and the decoding kind, which must match the one it was saved with.
// Returns whether it restored. A missing file, or a profile for another pair or another K
// setting, restores nothing (the latter with a warning: the next save replaces it). A file that
// is not a daisy profile, is larger than kMaxSpecProfileBytes or holds values out of range is an
// error, and is left as it is.
Result<bool> LoadSpecProfile(const std::string& path, const std::string& pair, KController& k);

// Writes what `k` learned to `path` for `pair` (through a temporary file in the same directory,
// renamed over it, so a reader never sees half a profile).
Status SaveSpecProfile(const std::string& path, const std::string& pair, const KController& k);

}  // namespace daisy::coord
