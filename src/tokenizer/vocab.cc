#include "tokenizer/vocab.h"

#include "base/strings.h"

namespace daisy::tokenizer {
namespace {

// Optional u32 id key: -1 when absent; an error when present but out of range.
Status ReadId(const gguf::Reader& r, const char* key, size_t n_vocab, int32_t* out) {
  if (r.Find(key) == nullptr) return Status::Ok();
  DAISY_ASSIGN_OR_RETURN(uint64_t id, r.GetUint(key));
  if (id >= n_vocab) {
    return DataLoss("%s: %s is %llu but the vocabulary has %zu tokens", r.name().c_str(), key,
                    static_cast<unsigned long long>(id), n_vocab);
  }
  *out = static_cast<int32_t>(id);
  return Status::Ok();
}

Status ReadOptionalBool(const gguf::Reader& r, const char* key, std::optional<bool>* out) {
  if (r.Find(key) == nullptr) return Status::Ok();
  DAISY_ASSIGN_OR_RETURN(bool b, r.GetBool(key));
  *out = b;
  return Status::Ok();
}

}  // namespace

Result<VocabData> ReadVocab(const gguf::Reader& r) {
  VocabData v;
  DAISY_ASSIGN_OR_RETURN(std::string_view model, r.GetString("tokenizer.ggml.model"));
  if (r.Find("general.name") != nullptr) {
    if (auto name = r.GetString("general.name"); name.ok()) v.model_name = std::string(*name);
  }
  v.model = std::string(model);
  if (v.model != "gpt2" && v.model != "llama") {
    return Unimplemented("%s: tokenizer model '%s' is not supported (daisy reads 'gpt2' and "
                         "'llama')", r.name().c_str(), EscapeForMessage(model).c_str());
  }
  if (r.Find("tokenizer.ggml.pre") != nullptr) {
    DAISY_ASSIGN_OR_RETURN(std::string_view pre, r.GetString("tokenizer.ggml.pre"));
    v.pre = std::string(pre);
  }
  DAISY_ASSIGN_OR_RETURN(auto tokens, r.GetStringArray("tokenizer.ggml.tokens"));
  if (tokens.empty()) return DataLoss("%s: tokenizer.ggml.tokens is empty", r.name().c_str());
  if (tokens.size() > (1u << 30)) {
    return DataLoss("%s: %zu tokens is more than daisy supports", r.name().c_str(), tokens.size());
  }
  v.tokens.assign(tokens.begin(), tokens.end());
  const size_t n = v.tokens.size();
  if (r.Find("tokenizer.ggml.scores") != nullptr) {
    DAISY_ASSIGN_OR_RETURN(auto scores, r.GetFloatArray("tokenizer.ggml.scores"));
    if (scores.size() != n) {
      return DataLoss("%s: tokenizer.ggml.scores has %zu entries for %zu tokens",
                      r.name().c_str(), scores.size(), n);
    }
    v.scores.assign(scores.begin(), scores.end());
  }
  if (r.Find("tokenizer.ggml.token_type") != nullptr) {
    DAISY_ASSIGN_OR_RETURN(auto types, r.GetIntArray("tokenizer.ggml.token_type"));
    if (types.size() != n) {
      return DataLoss("%s: tokenizer.ggml.token_type has %zu entries for %zu tokens",
                      r.name().c_str(), types.size(), n);
    }
    v.token_types.reserve(n);
    for (int64_t t : types) v.token_types.push_back(static_cast<int32_t>(t));
  }
  if (r.Find("tokenizer.ggml.merges") != nullptr) {
    DAISY_ASSIGN_OR_RETURN(auto merges, r.GetStringArray("tokenizer.ggml.merges"));
    v.merges.assign(merges.begin(), merges.end());
  } else if (v.model == "gpt2") {
    return DataLoss("%s: a gpt2 tokenizer needs tokenizer.ggml.merges", r.name().c_str());
  }
  DAISY_RETURN_IF_ERROR(ReadId(r, "tokenizer.ggml.bos_token_id", n, &v.bos_id));
  DAISY_RETURN_IF_ERROR(ReadId(r, "tokenizer.ggml.eos_token_id", n, &v.eos_id));
  DAISY_RETURN_IF_ERROR(ReadId(r, "tokenizer.ggml.eot_token_id", n, &v.eot_id));
  DAISY_RETURN_IF_ERROR(ReadId(r, "tokenizer.ggml.unknown_token_id", n, &v.unk_id));
  DAISY_RETURN_IF_ERROR(ReadId(r, "tokenizer.ggml.padding_token_id", n, &v.pad_id));
  DAISY_RETURN_IF_ERROR(ReadOptionalBool(r, "tokenizer.ggml.add_bos_token", &v.add_bos));
  DAISY_RETURN_IF_ERROR(ReadOptionalBool(r, "tokenizer.ggml.add_eos_token", &v.add_eos));
  DAISY_RETURN_IF_ERROR(ReadOptionalBool(r, "tokenizer.ggml.add_space_prefix", &v.add_space_prefix));
  if (r.Find("tokenizer.chat_template") != nullptr) {
    DAISY_ASSIGN_OR_RETURN(std::string_view tmpl, r.GetString("tokenizer.chat_template"));
    v.chat_template = std::string(tmpl);
  }
  return v;
}

void WriteVocab(const VocabData& v, gguf::Writer& w) {
  w.AddString("tokenizer.ggml.model", v.model);
  if (!v.pre.empty()) w.AddString("tokenizer.ggml.pre", v.pre);
  w.AddStringArray("tokenizer.ggml.tokens", v.tokens);
  if (!v.scores.empty()) w.AddFloat32Array("tokenizer.ggml.scores", v.scores);
  if (!v.token_types.empty()) w.AddInt32Array("tokenizer.ggml.token_type", v.token_types);
  if (!v.merges.empty()) w.AddStringArray("tokenizer.ggml.merges", v.merges);
  const auto id = [&](const char* key, int32_t value) {
    if (value >= 0) w.AddUint32(key, static_cast<uint32_t>(value));
  };
  id("tokenizer.ggml.bos_token_id", v.bos_id);
  id("tokenizer.ggml.eos_token_id", v.eos_id);
  id("tokenizer.ggml.eot_token_id", v.eot_id);
  id("tokenizer.ggml.unknown_token_id", v.unk_id);
  id("tokenizer.ggml.padding_token_id", v.pad_id);
  if (v.add_bos) w.AddBool("tokenizer.ggml.add_bos_token", *v.add_bos);
  if (v.add_eos) w.AddBool("tokenizer.ggml.add_eos_token", *v.add_eos);
  if (v.add_space_prefix) w.AddBool("tokenizer.ggml.add_space_prefix", *v.add_space_prefix);
  if (!v.chat_template.empty()) w.AddString("tokenizer.chat_template", v.chat_template);
}

}  // namespace daisy::tokenizer
