// Fixtures every test shares (test code only, built with DAISY_TESTS): scratch directories,
// generated models (never downloaded), shards, prompts. A fixture that cannot be made ends the
// test binary with the reason: every test after it would only fail confusingly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/types.h"
#include "model/config.h"
#include "model/generator.h"

namespace daisy::testing {

// <temp>/<name>-<pid>, emptied when made and removed when destroyed.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(std::string_view name);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path operator/(std::string_view name) const { return path / name; }
};

// A test model: a shape ("tiny" unless said) with the changes asked for.
struct ModelSpec {
  std::string shape = "tiny";
  std::string arch = "";  // "": the shape's (gen-model --arch)
  int sliding_window = 0;  // Gemma 3's local layers
  int layers = 0;    // 0: the shape's
  int kv_heads = 0;  // 0: the shape's
  bool tied = false;
  bool bias = false;  // attention biases
  int longrope = 0;   // Phi-3 LongRoPE from this original context (0: none)
  gguf::TensorType type = gguf::TensorType::kQ8_0;
  uint64_t seed = 1;
  // For target/draft pairs (model/generator.h): residual scaling as for this many layers.
  int branch_layers = 0;
  int scaled_from = -1;
  float scaled_by = 1.0f;
};
model::GenerateOptions Options(const ModelSpec& spec);
// Writes `spec`'s model (with the built-in byte-level vocabulary) to `path`.
std::filesystem::path MakeModel(const ModelSpec& spec, const std::filesystem::path& path);

// A target of `target_layers` and its draft (the target's first `draft_layers` layers,
// embeddings and head), as target.gguf and draft.gguf in `dir`; the target's later layers
// scaled by `scaled_by` (how far the draft's guesses are from the target's).
void MakeTargetAndDraft(const std::filesystem::path& dir, int target_layers, int draft_layers, uint64_t seed,
                        float scaled_by);

// A copy of the model at `src` whose family keys are replaced by its description, changed by
// `change` (RoPE mode, per-layer bases and windows, ...): a model daisy's recipe runs with
// features no generated family file can state. Tensors are copied as they are.
std::filesystem::path WithDescription(const std::filesystem::path& src, const std::filesystem::path& dst,
                                      const std::function<void(model::ModelConfig&)>& change);

// Compiles `model` into `stages` shards in `out`, quietly.
void CompileShards(const std::filesystem::path& model, const std::filesystem::path& out, int stages,
                   std::vector<int> layer_counts = {});

// n token ids in [1, 250] that differ with `salt`.
std::vector<int32_t> Prompt(int n, int salt);
// n token ids drawn uniformly below `vocab` from `seed`.
std::vector<int32_t> RandomTokens(int n, uint32_t seed, int vocab);

}  // namespace daisy::testing
