#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/strings.h"
#include "tokenizer/utf8.h"

namespace daisy::tokenizer {
namespace {

// llama.cpp's whitespace set (Unicode White_Space). PCRE2's \s under UCP differs from it (it
// omits U+0085), so the patterns spell the class out. The members inside a character class:
constexpr const char* kWs =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

// Replaces the placeholder "WS" in `pattern` by the whitespace class members.
std::string WithWs(std::string pattern) {
  for (size_t at = pattern.find("WS"); at != std::string::npos; at = pattern.find("WS", at)) {
    pattern.replace(at, 2, kWs);
    at += std::char_traits<char>::length(kWs);
  }
  return pattern;
}

std::vector<std::string> Patterns(PreType type) {
  switch (type) {
    case PreType::kLlama3:
      // Llama 3's tokenizer.json regex with its case-insensitive contractions written out.
      return {WithWs("(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
                     "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^WS\\p{L}\\p{N}]+[\\r\\n]*"
                     "|[WS]*[\\r\\n]+|[WS]+(?![^WS])|[WS]+")};
    case PreType::kQwen2:
      return {WithWs("(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
                     "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^WS\\p{L}\\p{N}]+[\\r\\n]*"
                     "|[WS]*[\\r\\n]+|[WS]+(?![^WS])|[WS]+")};
    case PreType::kDeepseek3:
      // The CJK class as llama.cpp spells it: U+4E00-U+9FA5, U+3040-U+309F, U+30A0-U+30FF.
      return {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
              WithWs("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+"
                     "|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*"
                     "|[WS]*[\\r\\n]+|[WS]+(?![^WS])|[WS]+")};
    case PreType::kGpt2:
      return {WithWs("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^WS\\p{L}\\p{N}]+|[WS]+(?![^WS])|[WS]+")};
    case PreType::kSmollm:
      return {"\\p{N}",
              WithWs("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^WS\\p{L}\\p{N}]+|[WS]+(?![^WS])|[WS]+")};
    case PreType::kDefault:
      // Applied in turn, each within the pieces of the one before. The second is GPT-2's, with
      // the trailing \s+ that llama.cpp's hand-written matcher for it also applies.
      return {"[\\p{P}\\$\\+<=>\\^~\\|]+",
              WithWs("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^WS\\p{L}\\p{N}]+"
                     "|[WS]+(?![^WS])|[WS]+"),
              "\\p{N}+", "[0-9][0-9][0-9]"};
  }
  return {};
}

struct CodeDeleter {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
struct MatchDataDeleter {
  void operator()(pcre2_match_data* md) const { pcre2_match_data_free(md); }
};

}  // namespace

Result<PreType> ParsePreType(std::string_view name) {
  if (name.empty() || name == "default") return PreType::kDefault;
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") return PreType::kLlama3;
  if (name == "qwen2") return PreType::kQwen2;
  if (name == "deepseek-v3") return PreType::kDeepseek3;
  if (name == "gpt-2") return PreType::kGpt2;
  if (name == "smollm" || name == "starcoder") return PreType::kSmollm;
  return Unimplemented("pre-tokenizer '%s' is not supported (supported: default, llama-bpe, qwen2, deepseek-v3, "
                       "gpt-2, smollm, starcoder)",
                       EscapeForMessage(name).c_str());
}

struct PreTokenizer::Impl {
  std::vector<std::unique_ptr<pcre2_code, CodeDeleter>> regexes;
};

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

Result<PreTokenizer> PreTokenizer::Create(PreType type) {
  PreTokenizer pre;
  pre.impl_ = std::make_unique<Impl>();
  for (const std::string& pattern : Patterns(type)) {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                      PCRE2_UTF | PCRE2_UCP, &error, &error_offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      return Internal("pre-tokenizer regex does not compile at %zu: %s", error_offset,
                      reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
    pre.impl_->regexes.emplace_back(code);
  }
  return pre;
}

void PreTokenizer::Split(std::string_view text, std::vector<std::string_view>& words) const {
  // Each regex runs inside each piece left by the previous one; both matched and unmatched
  // stretches become pieces (llama.cpp's unicode_regex_split).
  std::vector<std::string_view> pieces{text};
  std::vector<std::string_view> next;
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
      pcre2_match_data_create(1, nullptr));
  for (const auto& regex : impl_->regexes) {
    next.clear();
    for (std::string_view piece : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t start = 0, gap = 0;
      while (start < piece.size()) {
        const int rc = pcre2_match(regex.get(), subject, piece.size(), start, PCRE2_NO_UTF_CHECK,
                                   md.get(), nullptr);
        if (rc < 0) break;  // no further match (or a match-limit error): the rest is a gap
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        const size_t begin = ov[0], end = ov[1];
        if (end == begin) {  // none of our patterns matches empty, but never loop forever
          start = begin + Utf8SeqLen(static_cast<uint8_t>(piece[begin]));
          continue;
        }
        if (begin > gap) next.push_back(piece.substr(gap, begin - gap));
        next.push_back(piece.substr(begin, end - begin));
        start = gap = end;
      }
      if (gap < piece.size()) next.push_back(piece.substr(gap));
    }
    pieces.swap(next);
  }
  words.insert(words.end(), pieces.begin(), pieces.end());
}

}  // namespace daisy::tokenizer
