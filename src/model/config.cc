#include "model/config.h"

#include <algorithm>
#include <cmath>

#include "base/strings.h"
#include "model/arch.h"
#include "model/tensors.h"

namespace daisy::model {
namespace {

constexpr uint64_t kMaxDim = 1u << 24;

// A dimension: present, 1..2^24.
Result<int> ReadDim(const gguf::Reader& r, const std::string& key) {
  DAISY_ASSIGN_OR_RETURN(uint64_t v, r.GetUint(key));
  if (v == 0 || v > kMaxDim) {
    return DataLoss("%s: %s = %llu is out of range", r.name().c_str(), key.c_str(),
                    static_cast<unsigned long long>(v));
  }
  return static_cast<int>(v);
}

// The layer count: a dimension of at most kMaxLayers.
Result<int> ReadLayers(const gguf::Reader& r, const std::string& key) {
  DAISY_ASSIGN_OR_RETURN(uint64_t v, r.GetUint(key));
  if (v == 0 || v > static_cast<uint64_t>(kMaxLayers)) {
    return DataLoss("%s: %s = %llu is out of range (1..%d layers)", r.name().c_str(), key.c_str(),
                    static_cast<unsigned long long>(v), kMaxLayers);
  }
  return static_cast<int>(v);
}

Result<float> ReadFloat(const gguf::Reader& r, const std::string& key) {
  DAISY_ASSIGN_OR_RETURN(double v, r.GetFloat(key));
  if (!std::isfinite(v)) return DataLoss("%s: %s is not a finite number", r.name().c_str(), key.c_str());
  return static_cast<float>(v);
}

// The vocabulary size and tying from the tensors (a model file has token_embd; the head is
// tied when output.weight is absent).
Status ReadVocabFromTensors(const gguf::Reader& r, ModelConfig& c) {
  const gguf::TensorInfo* embd = r.FindTensor("token_embd.weight");
  if (embd == nullptr) return DataLoss("%s: tensor token_embd.weight is missing", r.name().c_str());
  if (embd->n_dims != 2 || embd->ne[1] > static_cast<int64_t>(kMaxDim)) {
    return DataLoss("%s: tensor token_embd.weight has an unexpected shape", r.name().c_str());
  }
  c.n_vocab = static_cast<int>(embd->ne[1]);
  c.tied_embeddings = r.FindTensor("output.weight") == nullptr;
  return Status::Ok();
}

// The family's own keys, through its row of the architecture table.
Result<ModelConfig> FromFamilyKeys(const gguf::Reader& r) {
  DAISY_ASSIGN_OR_RETURN(std::string_view arch_name, r.GetString("general.architecture"));
  const ArchSpec* arch = FindArch(arch_name);
  if (arch == nullptr) {
    return Unimplemented("%s: architecture '%s' is not supported (daisy runs: %s)", r.name().c_str(),
                         EscapeForMessage(arch_name).c_str(), ArchNames().c_str());
  }
  ModelConfig c;
  c.arch = std::string(arch->name);
  const std::string p = c.arch + ".";
  DAISY_ASSIGN_OR_RETURN(c.d_model, ReadDim(r, p + "embedding_length"));
  DAISY_ASSIGN_OR_RETURN(c.n_layers, ReadLayers(r, p + "block_count"));
  DAISY_ASSIGN_OR_RETURN(c.n_heads, ReadDim(r, p + "attention.head_count"));
  c.n_kv_heads = c.n_heads;
  if (r.Find(p + "attention.head_count_kv") != nullptr) {
    DAISY_ASSIGN_OR_RETURN(c.n_kv_heads, ReadDim(r, p + "attention.head_count_kv"));
  }
  DAISY_ASSIGN_OR_RETURN(c.d_ff, ReadDim(r, p + "feed_forward_length"));
  DAISY_ASSIGN_OR_RETURN(c.context_length, ReadDim(r, p + "context_length"));
  // head_dim: the family's key_length when it has one (value_length must agree), else
  // d_model / n_heads.
  c.head_dim = c.d_model / c.n_heads;
  if (r.Find(p + "attention.key_length") != nullptr) {
    DAISY_ASSIGN_OR_RETURN(c.head_dim, ReadDim(r, p + "attention.key_length"));
  }
  if (r.Find(p + "attention.value_length") != nullptr) {
    DAISY_ASSIGN_OR_RETURN(int v, ReadDim(r, p + "attention.value_length"));
    if (v != c.head_dim) {
      return Unimplemented("%s: value heads of %d and key heads of %d values are not supported",
                           r.name().c_str(), v, c.head_dim);
    }
  }
  if (r.Find(p + "rope.dimension_count") != nullptr) {
    DAISY_ASSIGN_OR_RETURN(int rot, ReadDim(r, p + "rope.dimension_count"));
    if (rot != c.head_dim) {
      return Unimplemented("%s: partial rotary embeddings (rope.dimension_count %d, head_dim %d) "
                           "are not supported", r.name().c_str(), rot, c.head_dim);
    }
  }
  if (r.Find(p + "attention.layer_norm_rms_epsilon") != nullptr) {
    DAISY_ASSIGN_OR_RETURN(c.rms_eps, ReadFloat(r, p + "attention.layer_norm_rms_epsilon"));
  }
  if (r.Find(p + "rope.freq_base") != nullptr) {
    DAISY_ASSIGN_OR_RETURN(c.rope_theta, ReadFloat(r, p + "rope.freq_base"));
  }
  // Linear RoPE scaling (rope.scaling.factor; llama.cpp applies it to every family); the other
  // scaling types need more than a factor.
  if (r.Find(p + "rope.scaling.type") != nullptr) {
    DAISY_ASSIGN_OR_RETURN(std::string_view type, r.GetString(p + "rope.scaling.type"));
    if (type != "linear" && type != "none") {
      return Unimplemented("%s: RoPE scaling '%s' is not supported (daisy runs linear scaling and "
                           "Llama 3.1's rope_freqs)", r.name().c_str(), EscapeForMessage(type).c_str());
    }
  }
  if (r.Find(p + "rope.scaling.factor") != nullptr) {
    DAISY_ASSIGN_OR_RETURN(float factor, ReadFloat(r, p + "rope.scaling.factor"));
    if (factor < 0) return DataLoss("%s: negative rope.scaling.factor", r.name().c_str());
    if (factor != 0) c.rope_freq_scale = 1.0f / factor;
  }
  if (r.Find(p + "rope.scaling.original_context_length") != nullptr) {
    DAISY_ASSIGN_OR_RETURN(c.rope_original_context, ReadDim(r, p + "rope.scaling.original_context_length"));
  }
  if (r.Find(p + "rope.scaling.attn_factor") != nullptr) {
    DAISY_ASSIGN_OR_RETURN(c.rope_attn_factor, ReadFloat(r, p + "rope.scaling.attn_factor"));
  }
  ApplyArch(*arch, c);
  DAISY_RETURN_IF_ERROR(ReadVocabFromTensors(r, c));
  if (arch->read_extra != nullptr) DAISY_RETURN_IF_ERROR(arch->read_extra(r, c));
  return c;
}

// A shard's description: every feature explicit.
Result<ModelConfig> FromDescription(const gguf::Reader& r) {
  ModelConfig c;
  auto key = [](const char* name) { return DescriptionKey(name); };
  DAISY_ASSIGN_OR_RETURN(std::string_view arch, r.GetString(key("architecture")));
  if (FindArch(arch) == nullptr) {
    return Unimplemented("%s: architecture '%s' is not supported (daisy runs: %s)", r.name().c_str(),
                         EscapeForMessage(arch).c_str(), ArchNames().c_str());
  }
  c.arch = std::string(arch);
  DAISY_ASSIGN_OR_RETURN(c.n_vocab, ReadDim(r, key("vocab_size")));
  DAISY_ASSIGN_OR_RETURN(c.d_model, ReadDim(r, key("embedding_length")));
  DAISY_ASSIGN_OR_RETURN(c.n_layers, ReadLayers(r, key("block_count")));
  DAISY_ASSIGN_OR_RETURN(c.n_heads, ReadDim(r, key("head_count")));
  DAISY_ASSIGN_OR_RETURN(c.n_kv_heads, ReadDim(r, key("head_count_kv")));
  DAISY_ASSIGN_OR_RETURN(c.head_dim, ReadDim(r, key("head_dim")));
  DAISY_ASSIGN_OR_RETURN(c.d_ff, ReadDim(r, key("feed_forward_length")));
  DAISY_ASSIGN_OR_RETURN(c.context_length, ReadDim(r, key("context_length")));
  DAISY_ASSIGN_OR_RETURN(c.rms_eps, ReadFloat(r, key("rms_epsilon")));
  DAISY_ASSIGN_OR_RETURN(c.rope_theta, ReadFloat(r, key("rope_freq_base")));
  DAISY_ASSIGN_OR_RETURN(std::string_view mode, r.GetString(key("rope_mode")));
  if (mode == RopeModeName(kernels::RopeMode::kNorm)) {
    c.rope_mode = kernels::RopeMode::kNorm;
  } else if (mode == RopeModeName(kernels::RopeMode::kNeox)) {
    c.rope_mode = kernels::RopeMode::kNeox;
  } else {
    return DataLoss("%s: unknown rope mode '%s'", r.name().c_str(), EscapeForMessage(mode).c_str());
  }
  DAISY_ASSIGN_OR_RETURN(std::string_view act, r.GetString(key("activation")));
  if (act == ActivationName(Activation::kSilu)) {
    c.activation = Activation::kSilu;
  } else if (act == ActivationName(Activation::kGeluTanh)) {
    c.activation = Activation::kGeluTanh;
  } else {
    return DataLoss("%s: unknown activation '%s'", r.name().c_str(), EscapeForMessage(act).c_str());
  }
  DAISY_ASSIGN_OR_RETURN(c.tied_embeddings, r.GetBool(key("tied_embeddings")));
  DAISY_ASSIGN_OR_RETURN(c.embed_scale, r.GetBool(key("embedding_scale")));
  DAISY_ASSIGN_OR_RETURN(c.qk_norm, r.GetBool(key("qk_norm")));
  DAISY_ASSIGN_OR_RETURN(c.post_norms, r.GetBool(key("post_norms")));
  DAISY_ASSIGN_OR_RETURN(c.logit_softcap, ReadFloat(r, key("logit_softcap")));
  DAISY_ASSIGN_OR_RETURN(c.attn_softcap, ReadFloat(r, key("attention_softcap")));
  // Added after format 2's first shards: absent means unused.
  if (r.Find(key("attention_q_scale")) != nullptr) {
    DAISY_ASSIGN_OR_RETURN(c.attn_q_scale, ReadFloat(r, key("attention_q_scale")));
  }
  if (r.Find(key("rope_original_context")) != nullptr) {  // 0: context_length
    DAISY_ASSIGN_OR_RETURN(uint64_t original, r.GetUint(key("rope_original_context")));
    if (original > kMaxDim) {
      return DataLoss("%s: %s = %llu is out of range", r.name().c_str(), key("rope_original_context").c_str(),
                      static_cast<unsigned long long>(original));
    }
    c.rope_original_context = static_cast<int>(original);
  }
  if (r.Find(key("rope_attn_factor")) != nullptr) {
    DAISY_ASSIGN_OR_RETURN(c.rope_attn_factor, ReadFloat(r, key("rope_attn_factor")));
  }
  DAISY_ASSIGN_OR_RETURN(std::vector<double> thetas, r.GetFloatArray(key("layer_rope_freq_base")));
  DAISY_ASSIGN_OR_RETURN(std::vector<int64_t> windows, r.GetIntArray(key("layer_sliding_window")));
  std::vector<double> scales(thetas.size(), 1.0);
  if (r.Find(key("layer_rope_freq_scale")) != nullptr) {
    DAISY_ASSIGN_OR_RETURN(scales, r.GetFloatArray(key("layer_rope_freq_scale")));
  }
  if (thetas.size() != static_cast<size_t>(c.n_layers) || windows.size() != static_cast<size_t>(c.n_layers) ||
      scales.size() != static_cast<size_t>(c.n_layers)) {
    return DataLoss("%s: per-layer attention for %zu, %zu and %zu layers, the model has %d", r.name().c_str(),
                    thetas.size(), scales.size(), windows.size(), c.n_layers);
  }
  for (int l = 0; l < c.n_layers; ++l) {
    if (!(thetas[l] > 0) || !std::isfinite(thetas[l]) || !(scales[l] > 0) || !std::isfinite(scales[l]) ||
        windows[l] < 0 || windows[l] > static_cast<int64_t>(kMaxDim)) {
      return DataLoss("%s: layer %d has RoPE base %g, scale %g and window %lld", r.name().c_str(), l,
                      thetas[l], scales[l], static_cast<long long>(windows[l]));
    }
    c.layers.push_back({static_cast<float>(thetas[l]), static_cast<float>(scales[l]),
                        static_cast<int32_t>(windows[l])});
  }
  return c;
}

}  // namespace

const char* ActivationName(Activation a) { return a == Activation::kSilu ? "silu" : "gelu_tanh"; }
const char* RopeModeName(kernels::RopeMode m) { return m == kernels::RopeMode::kNorm ? "normal" : "neox"; }

std::string DescriptionKey(std::string_view name) { return "daisy.model." + std::string(name); }

bool HasDescription(const gguf::Reader& reader) {
  return reader.Find(DescriptionKey("architecture")) != nullptr;
}

Result<ModelConfig> ModelConfig::FromGguf(const gguf::Reader& r) {
  Result<ModelConfig> c = HasDescription(r) ? FromDescription(r) : FromFamilyKeys(r);
  if (!c.ok()) return c.status();
  c->rope_scaling.enabled = r.FindTensor(std::string(kRopeFreqs)) != nullptr;
  const bool long_factors = r.FindTensor(std::string(kRopeFactorsLong)) != nullptr;
  const bool short_factors = r.FindTensor(std::string(kRopeFactorsShort)) != nullptr;
  if (long_factors != short_factors) {
    return DataLoss("%s: %s without %s", r.name().c_str(),
                    std::string(long_factors ? kRopeFactorsLong : kRopeFactorsShort).c_str(),
                    std::string(long_factors ? kRopeFactorsShort : kRopeFactorsLong).c_str());
  }
  c->longrope = long_factors;
  if (c->longrope && (c->arch != "phi3" || c->rope_scaling.enabled)) {
    return Unimplemented("%s: LongRoPE factors (%s) in a %s file%s: daisy runs them for phi3 only",
                         r.name().c_str(), std::string(kRopeFactorsLong).c_str(), c->arch.c_str(),
                         c->rope_scaling.enabled ? " next to rope_freqs.weight" : "");
  }
  Status s = c->Resolve();
  if (!s.ok()) return s.With(r.name());
  return c;
}

void ModelConfig::EnableLongRope(int original) {
  longrope = true;
  rope_original_context = original;
  const double scale = static_cast<double>(context_length) / original;
  rope_attn_factor = scale > 1.0 ? static_cast<float>(std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(original))))
                                 : 1.0f;
}

std::vector<LayerSpec> ModelConfig::UniformLayers() const {
  std::vector<LayerSpec> out;
  if (n_layers <= 0 || n_layers > kMaxLayers) return out;
  for (int l = 0; l < n_layers; ++l) {
    const bool local = sliding_window > 0 && (swa_pattern == 0 || l % swa_pattern < swa_pattern - 1);
    if (local && swa_pattern > 0) {
      out.push_back({rope_theta_swa, 1.0f, sliding_window});
    } else {
      out.push_back({rope_theta, rope_freq_scale, local ? sliding_window : 0});
    }
  }
  return out;
}

Status ModelConfig::Resolve() {
  if (layers.empty()) layers = UniformLayers();
  return Validate();
}

Status ModelConfig::Validate() const {
  if (n_vocab <= 0 || d_model <= 0 || n_layers <= 0 || n_heads <= 0 || n_kv_heads <= 0 ||
      d_ff <= 0 || head_dim <= 0 || context_length <= 0) {
    return InvalidArgument("every dimension must be positive (vocab %d, d_model %d, layers %d, "
                           "heads %d, kv heads %d, d_ff %d, head_dim %d, context %d)",
                           n_vocab, d_model, n_layers, n_heads, n_kv_heads, d_ff, head_dim,
                           context_length);
  }
  if (n_layers > kMaxLayers) return InvalidArgument("%d layers (at most %d)", n_layers, kMaxLayers);
  if (n_heads % n_kv_heads != 0) {
    return InvalidArgument("%d attention heads are not a multiple of %d kv heads", n_heads,
                           n_kv_heads);
  }
  if (n_heads / n_kv_heads > kernels::kMaxAttentionGroup) {
    return Unimplemented("%d query heads per kv head (at most %d are supported)", n_heads / n_kv_heads,
                         kernels::kMaxAttentionGroup);
  }
  if (head_dim % 2 != 0) return InvalidArgument("head_dim %d is odd: RoPE needs pairs", head_dim);
  if (!(rope_attn_factor > 0) || !std::isfinite(rope_attn_factor) || rope_original_context < 0) {
    return InvalidArgument("rope attn_factor %g and original context %d must be positive", rope_attn_factor,
                           rope_original_context);
  }
  if (!(rms_eps > 0) || !(rope_theta > 0) || !(rope_freq_scale > 0) || !(rope_theta_swa > 0) ||
      sliding_window < 0 || swa_pattern < 0 || !(attn_q_scale >= 0) || !std::isfinite(attn_q_scale)) {
    return InvalidArgument("rms epsilon, RoPE bases and scales must be positive; windows and q scale not negative");
  }
  if (layers.size() != static_cast<size_t>(n_layers)) {
    return InvalidArgument("per-layer attention for %zu layers, the model has %d", layers.size(), n_layers);
  }
  return Status::Ok();
}

Status ModelConfig::CheckSupported() const {
  const char* missing = logit_softcap != 0 ? "a logit soft-cap"
                        : attn_softcap != 0  ? "an attention soft-cap"
                                             : nullptr;
  if (missing == nullptr) return Status::Ok();
  return Unimplemented("%s (architecture %s) is not supported yet", missing, arch.c_str());
}

std::vector<std::string> ModelConfig::FeatureNames() const {
  std::vector<std::string> f;
  f.push_back(std::string(RopeModeName(rope_mode)) + " rope");
  f.push_back(activation == Activation::kSilu ? "swiglu" : "geglu (tanh)");
  if (n_kv_heads != n_heads) f.push_back(StrFormat("grouped-query attention (%d q heads per kv head)", n_heads / n_kv_heads));
  if (head_dim * n_heads != d_model) f.push_back(StrFormat("head_dim %d", head_dim));
  if (tied_embeddings) f.push_back("tied head");
  if (rope_scaling.enabled) f.push_back("llama3 rope_freqs");
  if (longrope) {
    f.push_back(StrFormat("longrope (long factors above %d positions)",
                          rope_original_context > 0 ? rope_original_context : context_length));
  }
  if (rope_attn_factor != 1.0f) f.push_back(StrFormat("rope attn factor %g", rope_attn_factor));
  if (embed_scale) f.push_back("scaled embeddings");
  if (qk_norm) f.push_back("q/k norms");
  if (post_norms) f.push_back("post-norms");
  if (attn_q_scale != 0) f.push_back(StrFormat("q scaled by %g", attn_q_scale));
  int windowed = 0, window = 0, scaled = 0;
  std::vector<float> bases;
  for (const LayerSpec& l : layers) {
    if (l.sliding_window > 0) {
      ++windowed;
      window = std::max(window, l.sliding_window);
    }
    if (l.rope_freq_scale != 1.0f) ++scaled;
    if (std::find(bases.begin(), bases.end(), l.rope_theta) == bases.end()) bases.push_back(l.rope_theta);
  }
  if (windowed > 0) f.push_back(StrFormat("sliding window %d (%d of %d layers)", window, windowed, n_layers));
  if (scaled > 0) f.push_back(StrFormat("linear rope scaling (%d layers)", scaled));
  if (bases.size() > 1) f.push_back(StrFormat("%zu rope bases", bases.size()));
  if (logit_softcap != 0) f.push_back("logit soft-cap");
  if (attn_softcap != 0) f.push_back("attention soft-cap");
  return f;
}

void ModelConfig::WriteDescription(gguf::Writer& w) const {
  auto key = [](const char* name) { return DescriptionKey(name); };
  w.AddString(key("architecture"), arch);
  w.AddUint32(key("vocab_size"), static_cast<uint32_t>(n_vocab));
  w.AddUint32(key("embedding_length"), static_cast<uint32_t>(d_model));
  w.AddUint32(key("block_count"), static_cast<uint32_t>(n_layers));
  w.AddUint32(key("head_count"), static_cast<uint32_t>(n_heads));
  w.AddUint32(key("head_count_kv"), static_cast<uint32_t>(n_kv_heads));
  w.AddUint32(key("head_dim"), static_cast<uint32_t>(head_dim));
  w.AddUint32(key("feed_forward_length"), static_cast<uint32_t>(d_ff));
  w.AddUint32(key("context_length"), static_cast<uint32_t>(context_length));
  w.AddFloat32(key("rms_epsilon"), rms_eps);
  w.AddFloat32(key("rope_freq_base"), rope_theta);
  w.AddString(key("rope_mode"), RopeModeName(rope_mode));
  w.AddString(key("activation"), ActivationName(activation));
  w.AddBool(key("tied_embeddings"), tied_embeddings);
  w.AddBool(key("embedding_scale"), embed_scale);
  w.AddBool(key("qk_norm"), qk_norm);
  w.AddBool(key("post_norms"), post_norms);
  w.AddFloat32(key("logit_softcap"), logit_softcap);
  w.AddFloat32(key("attention_softcap"), attn_softcap);
  w.AddFloat32(key("attention_q_scale"), attn_q_scale);
  w.AddUint32(key("rope_original_context"), static_cast<uint32_t>(rope_original_context));
  w.AddFloat32(key("rope_attn_factor"), rope_attn_factor);
  std::vector<float> thetas, scales;
  std::vector<int32_t> windows;
  for (const LayerSpec& l : layers) {
    thetas.push_back(l.rope_theta);
    scales.push_back(l.rope_freq_scale);
    windows.push_back(l.sliding_window);
  }
  w.AddFloat32Array(key("layer_rope_freq_base"), thetas);
  w.AddFloat32Array(key("layer_rope_freq_scale"), scales);
  w.AddInt32Array(key("layer_sliding_window"), windows);
}

Status ModelConfig::CheckFamilyKeys() const {
  const ArchSpec* a = FindArch(arch);
  if (a == nullptr) return InvalidArgument("architecture '%s' is not one daisy knows", arch.c_str());
  ModelConfig family = *this;
  ApplyArch(*a, family);
  if (rope_mode != a->rope_mode || activation != a->activation || embed_scale != a->embed_scale ||
      qk_norm != a->qk_norm || post_norms != a->post_norms || logit_softcap != 0 || attn_softcap != 0 ||
      swa_pattern != family.swa_pattern || attn_q_scale != family.attn_q_scale ||
      rope_theta_swa != family.rope_theta_swa) {
    return InvalidArgument("the description's features are not those of architecture %s", arch.c_str());
  }
  if (sliding_window != 0 && a->write_extra == nullptr) {
    return InvalidArgument("%s files cannot express a sliding window", arch.c_str());
  }
  if (layers != UniformLayers()) {
    return InvalidArgument("%s files cannot express these per-layer RoPE bases or windows", arch.c_str());
  }
  return Status::Ok();
}

Status ModelConfig::WriteFamilyKeys(gguf::Writer& w) const {
  DAISY_RETURN_IF_ERROR(CheckFamilyKeys());
  const std::string p = arch + ".";
  w.AddUint32(p + "vocab_size", static_cast<uint32_t>(n_vocab));
  w.AddUint32(p + "context_length", static_cast<uint32_t>(context_length));
  w.AddUint32(p + "embedding_length", static_cast<uint32_t>(d_model));
  w.AddUint32(p + "block_count", static_cast<uint32_t>(n_layers));
  w.AddUint32(p + "feed_forward_length", static_cast<uint32_t>(d_ff));
  w.AddUint32(p + "rope.dimension_count", static_cast<uint32_t>(head_dim));
  w.AddUint32(p + "attention.head_count", static_cast<uint32_t>(n_heads));
  w.AddUint32(p + "attention.head_count_kv", static_cast<uint32_t>(n_kv_heads));
  if (head_dim * n_heads != d_model) {
    w.AddUint32(p + "attention.key_length", static_cast<uint32_t>(head_dim));
    w.AddUint32(p + "attention.value_length", static_cast<uint32_t>(head_dim));
  }
  w.AddFloat32(p + "attention.layer_norm_rms_epsilon", rms_eps);
  w.AddFloat32(p + "rope.freq_base", rope_theta);
  if (rope_freq_scale != 1.0f) {
    w.AddString(p + "rope.scaling.type", "linear");
    w.AddFloat32(p + "rope.scaling.factor", 1.0f / rope_freq_scale);
  }
  if (rope_original_context > 0) {
    w.AddUint32(p + "rope.scaling.original_context_length", static_cast<uint32_t>(rope_original_context));
  }
  if (rope_attn_factor != 1.0f) w.AddFloat32(p + "rope.scaling.attn_factor", rope_attn_factor);
  const ArchSpec* a = FindArch(arch);
  if (a->write_extra != nullptr) a->write_extra(*this, w);
  return Status::Ok();
}

}  // namespace daisy::model
