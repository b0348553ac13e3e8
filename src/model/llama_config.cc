#include "model/llama_config.h"

#include "base/strings.h"

namespace daisy::model {
namespace {

Result<int> ReadDim(const gguf::Reader& r, const char* key) {
  DAISY_ASSIGN_OR_RETURN(uint64_t v, r.GetUint(key));
  if (v == 0 || v > (1u << 24)) {
    return DataLoss("%s: %s = %llu is out of range", r.name().c_str(), key,
                    static_cast<unsigned long long>(v));
  }
  return static_cast<int>(v);
}

LlamaConfig Shape(int d_model, int n_layers, int n_heads, int n_kv_heads, int d_ff, int ctx,
                  float theta, bool tied, int n_vocab, float scaling_factor) {
  LlamaConfig c;
  c.n_vocab = n_vocab;
  c.d_model = d_model;
  c.n_layers = n_layers;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = d_model / n_heads;
  c.d_ff = d_ff;
  c.context_length = ctx;
  c.rope_theta = theta;
  c.tied_embeddings = tied;
  c.rope_scaling.enabled = scaling_factor > 0;
  if (scaling_factor > 0) c.rope_scaling.factor = scaling_factor;
  return c;
}

}  // namespace

Status LlamaConfig::Validate() const {
  if (n_vocab <= 0 || d_model <= 0 || n_layers <= 0 || n_heads <= 0 || n_kv_heads <= 0 ||
      d_ff <= 0 || head_dim <= 0 || context_length <= 0) {
    return InvalidArgument("every dimension must be positive (vocab %d, d_model %d, layers %d, "
                           "heads %d, kv heads %d, d_ff %d, head_dim %d, context %d)",
                           n_vocab, d_model, n_layers, n_heads, n_kv_heads, d_ff, head_dim,
                           context_length);
  }
  if (n_heads % n_kv_heads != 0) {
    return InvalidArgument("%d attention heads are not a multiple of %d kv heads", n_heads,
                           n_kv_heads);
  }
  if (head_dim % 2 != 0) return InvalidArgument("head_dim %d is odd: RoPE needs pairs", head_dim);
  if (!(rms_eps > 0) || !(rope_theta > 0)) {
    return InvalidArgument("rms epsilon and rope theta must be positive");
  }
  return Status::Ok();
}

Result<LlamaConfig> LlamaConfig::FromGguf(const gguf::Reader& r) {
  DAISY_ASSIGN_OR_RETURN(std::string_view arch, r.GetString("general.architecture"));
  if (arch != "llama") {
    return Unimplemented("%s: architecture '%s' is not supported (daisy runs 'llama')",
                         r.name().c_str(), EscapeForMessage(arch).c_str());
  }
  LlamaConfig c;
  DAISY_ASSIGN_OR_RETURN(c.d_model, ReadDim(r, "llama.embedding_length"));
  DAISY_ASSIGN_OR_RETURN(c.n_layers, ReadDim(r, "llama.block_count"));
  DAISY_ASSIGN_OR_RETURN(c.n_heads, ReadDim(r, "llama.attention.head_count"));
  c.n_kv_heads = c.n_heads;
  if (r.Find("llama.attention.head_count_kv") != nullptr) {
    DAISY_ASSIGN_OR_RETURN(c.n_kv_heads, ReadDim(r, "llama.attention.head_count_kv"));
  }
  DAISY_ASSIGN_OR_RETURN(c.d_ff, ReadDim(r, "llama.feed_forward_length"));
  DAISY_ASSIGN_OR_RETURN(c.context_length, ReadDim(r, "llama.context_length"));
  c.head_dim = c.d_model / c.n_heads;
  if (r.Find("llama.rope.dimension_count") != nullptr) {
    DAISY_ASSIGN_OR_RETURN(int rot, ReadDim(r, "llama.rope.dimension_count"));
    if (rot != c.head_dim) {
      return Unimplemented("%s: partial rotary embeddings (rope.dimension_count %d, head_dim %d) "
                           "are not supported", r.name().c_str(), rot, c.head_dim);
    }
  }
  if (r.Find("llama.attention.layer_norm_rms_epsilon") != nullptr) {
    DAISY_ASSIGN_OR_RETURN(double eps, r.GetFloat("llama.attention.layer_norm_rms_epsilon"));
    c.rms_eps = static_cast<float>(eps);
  }
  if (r.Find("llama.rope.freq_base") != nullptr) {
    DAISY_ASSIGN_OR_RETURN(double theta, r.GetFloat("llama.rope.freq_base"));
    c.rope_theta = static_cast<float>(theta);
  }
  // A pipeline shard (shard/format.h) may hold neither the embeddings nor the head: it states
  // the vocabulary size and the tying in metadata instead.
  if (r.Find(kTiedEmbeddingsKey) != nullptr) {
    DAISY_ASSIGN_OR_RETURN(c.n_vocab, ReadDim(r, "llama.vocab_size"));
    DAISY_ASSIGN_OR_RETURN(c.tied_embeddings, r.GetBool(kTiedEmbeddingsKey));
  } else {
    const gguf::TensorInfo* embd = r.FindTensor("token_embd.weight");
    if (embd == nullptr) return DataLoss("%s: tensor token_embd.weight is missing", r.name().c_str());
    c.n_vocab = static_cast<int>(embd->ne[1]);
    c.tied_embeddings = r.FindTensor("output.weight") == nullptr;
  }
  c.rope_scaling.enabled = r.FindTensor("rope_freqs.weight") != nullptr;
  Status s = c.Validate();
  if (!s.ok()) return s.With(r.name());
  if (c.n_heads * c.head_dim != c.d_model) {
    return Unimplemented("%s: head_count * head_dim != embedding_length", r.name().c_str());
  }
  return c;
}

std::vector<std::string> ShapeNames() {
  return {"tiny", "small", "llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "llama-3.1-70b"};
}

Result<ModelShape> FindShape(std::string_view name) {
  constexpr int kLlama3Vocab = 128256;
  if (name == "tiny") return ModelShape{"tiny", Shape(64, 2, 4, 2, 192, 4096, 10000, false, 0, 0)};
  if (name == "small") {
    return ModelShape{"small", Shape(256, 4, 8, 2, 768, 4096, 500000, false, 0, 0)};
  }
  if (name == "llama-3.2-1b") {
    return ModelShape{std::string(name),
                      Shape(2048, 16, 32, 8, 8192, 131072, 500000, true, kLlama3Vocab, 32)};
  }
  if (name == "llama-3.2-3b") {
    return ModelShape{std::string(name),
                      Shape(3072, 28, 24, 8, 8192, 131072, 500000, true, kLlama3Vocab, 32)};
  }
  if (name == "llama-3.1-8b") {
    return ModelShape{std::string(name),
                      Shape(4096, 32, 32, 8, 14336, 131072, 500000, false, kLlama3Vocab, 8)};
  }
  if (name == "llama-3.1-70b") {
    return ModelShape{std::string(name),
                      Shape(8192, 80, 64, 8, 28672, 131072, 500000, false, kLlama3Vocab, 8)};
  }
  std::string known;
  for (const std::string& n : ShapeNames()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgument("unknown shape '%s' (known: %s)", EscapeForMessage(name).c_str(),
                         known.c_str());
}

}  // namespace daisy::model
