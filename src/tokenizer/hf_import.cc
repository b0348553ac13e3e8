#include "tokenizer/hf_import.h"

#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "base/log.h"
#include "base/strings.h"
#include "tokenizer/utf8.h"

namespace daisy::tokenizer {
namespace {

using nlohmann::json;

// Llama 3's pre-tokenizer regex as tokenizer.json spells it.
constexpr std::string_view kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Qwen2's (Qwen2.5, Qwen3): Llama 3's with single digits.
constexpr std::string_view kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// DeepSeek V3's CJK split (one of its three).
constexpr std::string_view kDeepseek3CjkRegex = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+";

constexpr const char* kLlama3ChatTemplate =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim "
    "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif "
    "%}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

Result<json> ParseJsonFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("%s: cannot open", path.c_str());
  std::stringstream buffer;
  buffer << in.rdbuf();
  json j = json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("%s: not valid JSON", path.c_str());
  return j;
}

// A tokenizer_config.json token entry is a string or {"content": "..."}.
std::string TokenContent(const json& entry) {
  if (entry.is_string()) return entry.get<std::string>();
  if (entry.is_object() && entry.contains("content") && entry["content"].is_string()) {
    return entry["content"].get<std::string>();
  }
  return {};
}

// Finds the Split regex of a (possibly nested) pre_tokenizer description.
bool ContainsRegex(const json& node, std::string_view regex) {
  if (node.is_object()) {
    if (node.contains("Regex") && node["Regex"].is_string() &&
        node["Regex"].get<std::string>() == regex) {
      return true;
    }
    for (const auto& [key, value] : node.items()) {
      if (ContainsRegex(value, regex)) return true;
    }
  } else if (node.is_array()) {
    for (const auto& value : node) {
      if (ContainsRegex(value, regex)) return true;
    }
  }
  return false;
}

bool PrependsSpace(const json& tok) {
  // Llama 2's normalizer: Prepend "▁" then Replace " " -> "▁".
  const json& norm = tok.contains("normalizer") ? tok["normalizer"] : json();
  return norm.dump().find("\"Prepend\"") != std::string::npos;
}

}  // namespace

namespace {

// The id -> text table of model.vocab and added_tokens, as tokens and types (holes filled with
// "[PADn]" user-defined tokens, as llama.cpp's converter does; added tokens are control tokens
// when special, else user-defined).
Status ReadTokens(const json& tok, const json& model, const std::filesystem::path& path, VocabData& v) {
  const auto fail = [&](const char* what) { return InvalidArgument("%s: %s", path.c_str(), what); };
  std::map<int64_t, std::string> by_id;
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (1 << 24)) {
      return fail("a vocabulary id is not an integer in [0, 2^24)");
    }
    by_id[id.get<int64_t>()] = text;
  }
  std::unordered_map<int64_t, bool> added;  // id -> special
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array()) {
    for (const json& a : tok["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
          !a.contains("content") || !a["content"].is_string()) {
        return fail("an added_tokens entry lacks id or content");
      }
      const int64_t id = a["id"].get<int64_t>();
      if (id < 0 || id >= (1 << 24)) return fail("an added token id is out of range");
      by_id[id] = a["content"].get<std::string>();
      added[id] = a.value("special", false);
    }
  }
  if (by_id.empty()) return fail("empty vocabulary");
  const size_t n = static_cast<size_t>(by_id.rbegin()->first) + 1;
  v.tokens.resize(n);
  v.token_types.assign(n, static_cast<int32_t>(TokenType::kNormal));
  for (size_t i = 0; i < n; ++i) {
    auto it = by_id.find(static_cast<int64_t>(i));
    if (it == by_id.end()) {
      v.tokens[i] = StrFormat("[PAD%zu]", i);
      v.token_types[i] = static_cast<int32_t>(TokenType::kUserDefined);
      continue;
    }
    v.tokens[i] = it->second;
    if (auto a = added.find(static_cast<int64_t>(i)); a != added.end()) {
      v.token_types[i] = static_cast<int32_t>(a->second ? TokenType::kControl : TokenType::kUserDefined);
    }
  }
  return Status::Ok();
}

Result<std::vector<std::string>> ReadMerges(const json& model, const std::filesystem::path& path) {
  std::vector<std::string> merges;
  merges.reserve(model["merges"].size());
  for (const json& m : model["merges"]) {
    if (m.is_string()) {
      merges.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    } else {
      return InvalidArgument("%s: a merge is neither \"a b\" nor [\"a\", \"b\"]", path.c_str());
    }
  }
  return merges;
}

// tokenizer_config.json beside the tokenizer: BOS/EOS, add_bos/add_eos, the chat template.
Status ReadTokenizerConfig(const std::filesystem::path& path, const std::function<int32_t(const std::string&)>& find_id,
                           VocabData& v) {
  const auto config_path = path.parent_path() / "tokenizer_config.json";
  if (!std::filesystem::exists(config_path)) return Status::Ok();
  DAISY_ASSIGN_OR_RETURN(json config, ParseJsonFile(config_path));
  if (!config.is_object()) return Status::Ok();
  if (config.contains("bos_token")) v.bos_id = find_id(TokenContent(config["bos_token"]));
  if (config.contains("eos_token")) v.eos_id = find_id(TokenContent(config["eos_token"]));
  if (config.contains("add_bos_token") && config["add_bos_token"].is_boolean()) {
    v.add_bos = config["add_bos_token"].get<bool>();
  }
  if (config.contains("add_eos_token") && config["add_eos_token"].is_boolean()) {
    v.add_eos = config["add_eos_token"].get<bool>();
  }
  if (config.contains("chat_template") && config["chat_template"].is_string()) {
    v.chat_template = config["chat_template"].get<std::string>();
  }
  return Status::Ok();
}

// SentencePiece exported as BPE (byte_fallback): a token's score is minus the rank of the merge
// that makes it, so SentencePiece's highest-score-first merging replays the BPE merge order.
void FinishSentencePiece(const json& tok, const json& model, const std::vector<std::string>& merges,
                         const std::function<int32_t(const std::string&)>& find_id, VocabData& v) {
  const size_t n = v.tokens.size();
  v.scores.assign(n, 0.f);
  std::vector<bool> scored(n, false);
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const size_t space = merges[rank].find(' ', 1);
    if (space == std::string::npos) continue;
    const int32_t id = find_id(merges[rank].substr(0, space) + merges[rank].substr(space + 1));
    if (id >= 0 && !scored[id]) {
      v.scores[id] = -static_cast<float>(rank);
      scored[id] = true;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = v.tokens[i];
    if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
      v.token_types[i] = static_cast<int32_t>(TokenType::kByte);
    }
  }
  const std::string unk = model.value("unk_token", std::string("<unk>"));
  v.unk_id = find_id(unk);
  if (v.unk_id >= 0) v.token_types[v.unk_id] = static_cast<int32_t>(TokenType::kUnknown);
  if (v.bos_id < 0) v.bos_id = find_id("<s>");
  if (v.eos_id < 0) v.eos_id = find_id("</s>");
  v.add_space_prefix = PrependsSpace(tok);
  // User-defined (added, not special) tokens carry real spaces, as llama.cpp's converter writes
  // them ("pre-normalize user-defined spaces"): Gemma's runs of "▁" match runs of spaces in the
  // text and print as spaces.
  for (size_t i = 0; i < n; ++i) {
    if (v.token_types[i] != static_cast<int32_t>(TokenType::kUserDefined)) continue;
    const std::string_view t = v.tokens[i];
    std::string spaced;
    for (size_t at = 0; at < t.size();) {
      if (t.substr(at, 3) == "\xe2\x96\x81") {
        spaced += ' ';
        at += 3;
      } else {
        spaced += t[at++];
      }
    }
    v.tokens[i] = std::move(spaced);
  }
  if (!v.add_bos) v.add_bos = true;
}

// Byte-level BPE: the merges, and the pre-tokenizer recognised from its regex.
void FinishBpe(const json& tok, std::vector<std::string> merges, const HfImportOptions& options,
               const std::filesystem::path& path, const std::function<int32_t(const std::string&)>& find_id,
               VocabData& v) {
  v.merges = std::move(merges);
  if (!options.pre.empty()) {
    v.pre = options.pre;
  } else if (const json pre = tok.contains("pre_tokenizer") ? tok["pre_tokenizer"] : json();
             ContainsRegex(pre, kLlama3Regex)) {
    v.pre = "llama-bpe";
  } else if (ContainsRegex(pre, kQwen2Regex)) {
    v.pre = "qwen2";
  } else if (ContainsRegex(pre, kDeepseek3CjkRegex)) {
    v.pre = "deepseek-v3";
  } else {
    v.pre = "default";
    DAISY_LOG_WARN("%s: pre-tokenizer not recognised (Llama 3, Qwen2, DeepSeek V3); using \"default\" "
                   "(override with --pre)", path.c_str());
  }
  if (v.bos_id < 0) v.bos_id = find_id("<|begin_of_text|>");
  // Qwen has no BOS of its own; its converter names <|endoftext|> (and does not add it).
  if (v.bos_id < 0 && v.pre == "qwen2") v.bos_id = find_id("<|endoftext|>");
  if (v.eos_id < 0) v.eos_id = find_id("<|end_of_text|>");
  if (!v.add_bos && v.pre == "llama-bpe") v.add_bos = true;
}

}  // namespace

Result<VocabData> ImportHfTokenizer(const std::filesystem::path& path,
                                    const HfImportOptions& options) {
  DAISY_ASSIGN_OR_RETURN(json tok, ParseJsonFile(path));
  const auto fail = [&](const char* what) {
    return InvalidArgument("%s: %s", path.c_str(), what);
  };
  if (!tok.is_object() || !tok.contains("model") || !tok["model"].is_object()) {
    return fail("no \"model\" object: not a Hugging Face tokenizer.json");
  }
  const json& model = tok["model"];
  if (model.value("type", "") != "BPE") return fail("only BPE tokenizers can be imported");
  if (!model.contains("vocab") || !model["vocab"].is_object()) return fail("model.vocab missing");
  if (!model.contains("merges") || !model["merges"].is_array()) return fail("model.merges missing");
  VocabData v;
  const bool byte_fallback = model.value("byte_fallback", false);
  v.model = byte_fallback ? "llama" : "gpt2";
  DAISY_RETURN_IF_ERROR(ReadTokens(tok, model, path, v));
  DAISY_ASSIGN_OR_RETURN(std::vector<std::string> merges, ReadMerges(model, path));
  std::unordered_map<std::string, int32_t> id_of;
  for (size_t i = 0; i < v.tokens.size(); ++i) id_of.emplace(v.tokens[i], static_cast<int32_t>(i));
  const std::function<int32_t(const std::string&)> find_id = [&](const std::string& text) {
    auto it = id_of.find(text);
    return it == id_of.end() ? -1 : it->second;
  };
  DAISY_RETURN_IF_ERROR(ReadTokenizerConfig(path, find_id, v));
  if (byte_fallback) {
    FinishSentencePiece(tok, model, merges, find_id, v);
  } else {
    FinishBpe(tok, std::move(merges), options, path, find_id, v);
  }
  return v;
}

VocabData BuiltinByteVocab() {
  VocabData v;
  v.model = "gpt2";
  v.pre = "default";
  for (int b = 0; b < 256; ++b) v.tokens.push_back(ByteToUnicode(static_cast<uint8_t>(b)));
  v.token_types.assign(256, static_cast<int32_t>(TokenType::kNormal));
  // A few English merges so that BPE merging is exercised ("Ġ" is the byte-level space).
  static const char* const kMerges[] = {
      "t h", "h e", "i n", "e r", "a n", "r e", "o n", "a t", "e n", "n d", "o r", "e s",
      "Ġ t", "Ġ a", "Ġ s", "Ġ w", "Ġ o", "Ġ i", "Ġ c", "Ġ b", "Ġ f", "Ġ m", "Ġ p", "Ġ d",
      "Ġt he", "Ġ th", "i s", "i t", "o u", "l l", "in g", "Ġ in", "Ġa n", "Ġan d", "e d",
      "Ġ h", "Ġo f", "Ġt o", "a r", "a l", "s t", "l e", "o w", "Ġ l", "Ġ e", "Ġ n", "i c",
      "Ġ Ġ", "ĠĠ ĠĠ", "0 0", "1 2", "Ġth e"};
  for (const char* m : kMerges) {
    std::string merge = m;
    const size_t space = merge.find(' ');
    const std::string joined = merge.substr(0, space) + merge.substr(space + 1);
    v.merges.push_back(merge);
    bool exists = false;
    for (const std::string& t : v.tokens) exists = exists || t == joined;
    if (!exists) {
      v.tokens.push_back(joined);
      v.token_types.push_back(static_cast<int32_t>(TokenType::kNormal));
    }
  }
  for (const char* special : {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                              "<|end_header_id|>", "<|eot_id|>"}) {
    v.tokens.emplace_back(special);
    v.token_types.push_back(static_cast<int32_t>(TokenType::kControl));
  }
  const int32_t n = static_cast<int32_t>(v.tokens.size());
  v.bos_id = n - 5;
  v.eos_id = n - 4;
  v.eot_id = n - 1;
  v.add_bos = true;
  v.chat_template = kLlama3ChatTemplate;
  return v;
}

}  // namespace daisy::tokenizer
