#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "base/check.h"
#include "base/strings.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/utf8.h"

namespace daisy::tokenizer {
namespace {

enum class Kind { kBpe, kSpm };

// Token texts that end a turn or a generation; llama.cpp forces these to control tokens, by
// text whatever the vocabulary's own type says: "</s>" too (added for PaddleOCR), so in a
// byte-level vocabulary where "</s>" is an ordinary token (Qwen's) it becomes special text.
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>",     "<|im_end|>",   "<|end|>",       "<|return|>", "<|call|>",
    "<|flush|>",      "<|calls|>",    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>",
    "<EOT>",          "_<EOT>",       "<|end_of_text|>", "<end_of_utterance>"};
constexpr std::string_view kEotTexts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                          "<|endoftext|>", "<EOT>", "_<EOT>", "<end_of_utterance>"};

// A symbol of a word being merged: a byte range of the word, linked to its neighbours.
struct Symbol {
  int prev;
  int next;
  size_t offset;
  size_t n;  // 0 once merged into its left neighbour
};

// A candidate merge of symbols `left` and left's next, whose texts total `size` bytes.
struct Bigram {
  double priority;  // BPE: -rank; SPM: score. Higher pops first.
  int left;
  int right;
  size_t size;
};
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    // Highest priority first; on ties, the leftmost pair (both llama.cpp tokenizers do this).
    return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
  }
};
using BigramQueue = std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder>;

// Pops candidate merges best first and merges them, skipping stale ones (a side already merged
// away or grown since the candidate was queued); each merge queues the new neighbours through
// add_bigram(left, right). Shared by BPE (priority = -rank) and SentencePiece (= score).
template <typename AddBigram>
void MergeAll(std::vector<Symbol>& symbols, BigramQueue& queue, const AddBigram& add_bigram) {
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    Symbol& r = symbols[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    add_bigram(l.prev, b.left);
    add_bigram(b.left, l.next);
  }
}

std::vector<Symbol> SplitIntoChars(std::string_view word) {
  std::vector<Symbol> symbols;
  for (size_t off = 0; off < word.size();) {
    const size_t len = std::min(Utf8SeqLen(static_cast<uint8_t>(word[off])), word.size() - off);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, index + 1, off, len});
    off += len;
  }
  if (!symbols.empty()) symbols.back().next = -1;
  return symbols;
}

}  // namespace

struct Tokenizer::Impl {
  // The steps of Create: the algorithm and its defaults; token types, end-of-generation and
  // special tokens; BPE merge ranks or byte tokens; the pieces tokens render as.
  Status SetKind();
  Status SetTypesAndSpecials();
  void SetMergesOrBytes();
  void SetPieces();

  VocabData vocab;
  Kind kind = Kind::kBpe;
  bool ignore_merges = false;
  bool add_bos = false;
  bool add_space_prefix = false;
  std::vector<TokenType> types;
  std::vector<std::string> pieces;  // rendering with special = true
  std::unordered_map<std::string_view, int32_t> token_to_id;
  std::unordered_map<std::string, int> bpe_ranks;  // "left\0right" -> rank
  std::vector<int32_t> special_tokens;  // control, user-defined, unknown: longest first
  std::vector<bool> rstrip;             // a matched special token eats the whitespace after it
  std::vector<bool> eog;
  std::optional<PreTokenizer> pre;
  int32_t byte_tokens[256];  // SPM: <0xXX> ids (or the 1-byte token), -1 when absent

  int32_t Lookup(std::string_view text) const {
    auto it = token_to_id.find(text);
    return it == token_to_id.end() ? -1 : it->second;
  }
  int Rank(std::string_view left, std::string_view right, std::string& key) const {
    key.assign(left);
    key += '\0';
    key.append(right);
    auto it = bpe_ranks.find(key);
    return it == bpe_ranks.end() ? -1 : it->second;
  }

  void EncodeRaw(std::string_view text, bool& prev_special, std::vector<int32_t>& out) const;
  void EncodeBpeWord(std::string_view word, std::vector<int32_t>& out) const;
  void EncodeSpm(std::string_view text, std::vector<int32_t>& out) const;
};

Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::FromGguf(const gguf::Reader& reader) {
  DAISY_ASSIGN_OR_RETURN(VocabData vocab, ReadVocab(reader));
  auto tok = Create(std::move(vocab));
  if (!tok.ok()) return tok.status().With(reader.name());
  return tok;
}

// Which algorithm the file's tokenizer.ggml.model names, and its defaults.
Status Tokenizer::Impl::SetKind() {
  Impl& m = *this;
  const VocabData& v = m.vocab;
  if (v.model == "gpt2") {
    m.kind = Kind::kBpe;
    DAISY_ASSIGN_OR_RETURN(PreType pre_type, ParsePreType(v.pre));
    DAISY_ASSIGN_OR_RETURN(PreTokenizer p, PreTokenizer::Create(pre_type));
    m.pre.emplace(std::move(p));
    m.ignore_merges = pre_type == PreType::kLlama3;
    m.add_bos = v.add_bos.value_or(pre_type == PreType::kLlama3);
    // Affects only detokenisation for BPE, and defaults off.
    m.add_space_prefix = v.add_space_prefix.value_or(false);
  } else if (v.model == "llama") {
    m.kind = Kind::kSpm;
    m.add_bos = v.add_bos.value_or(true);
    m.add_space_prefix = v.add_space_prefix.value_or(true);
  } else {
    return Unimplemented("tokenizer model '%s' is not supported (supported: gpt2, llama)",
                         EscapeForMessage(v.model).c_str());
  }
  return Status::Ok();
}

// Token types, the text -> id map, the end-of-generation set (its tokens forced to control
// tokens, as llama.cpp does) and the special tokens, longest first.
Status Tokenizer::Impl::SetTypesAndSpecials() {
  Impl& m = *this;
  const VocabData& v = m.vocab;
  const size_t n = v.tokens.size();
  m.types.resize(n, TokenType::kNormal);
  for (size_t i = 0; i < v.token_types.size() && i < n; ++i) {
    const int32_t raw = v.token_types[i];
    m.types[i] = raw >= 1 && raw <= 6 ? static_cast<TokenType>(raw) : TokenType::kUndefined;
  }
  m.token_to_id.reserve(n);
  // A duplicated text maps to its last id, as in llama.cpp.
  for (size_t i = 0; i < n; ++i) m.token_to_id[v.tokens[i]] = static_cast<int32_t>(i);
  m.eog.assign(n, false);
  for (std::string_view text : kEogTexts) {
    const int32_t id = m.Lookup(text);
    if (id < 0) continue;
    m.eog[id] = true;
    m.types[id] = TokenType::kControl;
  }
  int32_t eot = v.eot_id;
  for (size_t k = 0; eot < 0 && k < std::size(kEotTexts); ++k) eot = m.Lookup(kEotTexts[k]);
  m.vocab.eot_id = eot;
  if (m.kind == Kind::kSpm) {
    if (m.vocab.bos_id < 0 && n > 1) m.vocab.bos_id = 1;
    if (m.vocab.eos_id < 0 && n > 2) m.vocab.eos_id = 2;
    if (m.vocab.unk_id < 0) m.vocab.unk_id = 0;
  }
  if (m.vocab.eos_id >= 0) m.eog[m.vocab.eos_id] = true;
  if (eot >= 0) m.eog[eot] = true;
  if (m.add_bos && m.vocab.bos_id < 0) {
    return DataLoss("the tokenizer adds BOS but defines no tokenizer.ggml.bos_token_id");
  }
  for (size_t i = 0; i < n; ++i) {
    const TokenType type = m.types[i];
    if (type == TokenType::kControl || type == TokenType::kUserDefined || type == TokenType::kUnknown) {
      if (!v.tokens[i].empty()) m.special_tokens.push_back(static_cast<int32_t>(i));
    }
  }
  // llama.cpp's attributes by model name: every special token of a model named Phi-3 strips the
  // whitespace after it, except <unk>, <s> and <|endoftext|>.
  m.rstrip.assign(n, false);
  std::string name = v.model_name;
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : m.special_tokens) m.rstrip[id] = true;
    for (std::string_view text : {"</s>"}) {
      if (const int32_t id = m.Lookup(text); id >= 0) m.rstrip[id] = true;
    }
    for (std::string_view text : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (const int32_t id = m.Lookup(text); id >= 0) m.rstrip[id] = false;
    }
  }
  std::stable_sort(m.special_tokens.begin(), m.special_tokens.end(), [&](int32_t a, int32_t b) {
    return v.tokens[a].size() > v.tokens[b].size();
  });
  return Status::Ok();
}

// BPE: the merge ranks; SentencePiece: the byte-fallback tokens.
void Tokenizer::Impl::SetMergesOrBytes() {
  Impl& m = *this;
  const VocabData& v = m.vocab;
  if (m.kind != Kind::kBpe) {
    for (int b = 0; b < 256; ++b) {
      int32_t id = m.Lookup(StrFormat("<0x%02X>", b));
      if (id < 0) id = m.Lookup(std::string(1, static_cast<char>(b)));
      m.byte_tokens[b] = id;
    }
    return;
  }
  m.bpe_ranks.reserve(v.merges.size());
  for (size_t rank = 0; rank < v.merges.size(); ++rank) {
    const std::string& merge = v.merges[rank];
    const size_t space = merge.find(' ', 1);
    std::string key;
    if (space != std::string::npos) {
      key = merge.substr(0, space);
      key += '\0';
      key += merge.substr(space + 1);
    } else {
      key = std::string(1, '\0');  // llama.cpp records ("", "") for a merge without a space
    }
    m.bpe_ranks.emplace(std::move(key), static_cast<int>(rank));  // first rank wins
  }
}

namespace {
// A normal BPE token's bytes: its byte-level characters mapped back to bytes.
std::string BpePiece(const std::string& text) {
  std::string piece;
  for (size_t pos = 0; pos < text.size();) {
    const size_t start = pos;
    const int byte = UnicodeToByte(DecodeUtf8(text, pos));
    if (byte >= 0) {
      piece += static_cast<char>(byte);
    } else {
      // As llama.cpp renders a character outside the byte-level alphabet.
      piece += "[UNK_BYTE_0x";
      for (size_t k = start; k < pos; ++k) piece += StrFormat("%02x", static_cast<uint8_t>(text[k]));
      piece += text + "]";
    }
  }
  return piece;
}
}  // namespace

// Pieces (llama.cpp's token_to_piece with special = true).
void Tokenizer::Impl::SetPieces() {
  Impl& m = *this;
  const VocabData& v = m.vocab;
  const size_t n = v.tokens.size();
  m.pieces.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& text = v.tokens[i];
    const TokenType type = m.types[i];
    std::string& piece = m.pieces[i];
    if (type == TokenType::kControl || type == TokenType::kUserDefined || type == TokenType::kUnknown) {
      piece = text;
    } else if (type == TokenType::kNormal && m.kind == Kind::kBpe) {
      piece = BpePiece(text);
    } else if (type == TokenType::kNormal) {
      for (size_t pos = 0; pos < text.size();) {
        if (text.compare(pos, 3, "\xe2\x96\x81") == 0) {
          piece += ' ';
          pos += 3;
        } else {
          piece += text[pos++];
        }
      }
    } else if (type == TokenType::kByte && m.kind == Kind::kSpm && text.size() == 6 &&
               text.compare(0, 3, "<0x") == 0) {
      piece = std::string(1, static_cast<char>(std::stoi(text.substr(3, 2), nullptr, 16)));
    }
  }
}

Result<Tokenizer> Tokenizer::Create(VocabData vocab) {
  Tokenizer t;
  t.impl_ = std::make_unique<Impl>();
  Impl& m = *t.impl_;
  m.vocab = std::move(vocab);
  if (m.vocab.tokens.empty()) return InvalidArgument("tokenizer has no tokens");
  DAISY_RETURN_IF_ERROR(m.SetKind());
  DAISY_RETURN_IF_ERROR(m.SetTypesAndSpecials());
  m.SetMergesOrBytes();
  m.SetPieces();
  return t;
}

void Tokenizer::Impl::EncodeBpeWord(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges) {
    const int32_t id = Lookup(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> symbols = SplitIntoChars(word);
  std::string key;
  BigramQueue queue;
  const auto add_bigram = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    const int rank = Rank(word.substr(l.offset, l.n), word.substr(r.offset, r.n), key);
    if (rank < 0) return;
    queue.push({-static_cast<double>(rank), left, right, l.n + r.n});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) add_bigram(i - 1, i);
  MergeAll(symbols, queue, add_bigram);
  for (int i = 0; i >= 0 && i < static_cast<int>(symbols.size()); i = symbols[i].next) {
    const std::string_view text = word.substr(symbols[i].offset, symbols[i].n);
    const int32_t id = Lookup(text);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Not in the vocabulary: llama.cpp emits each byte that is itself a token, drops the rest.
    for (char c : text) {
      const int32_t byte_id = Lookup(std::string_view(&c, 1));
      if (byte_id >= 0) out.push_back(byte_id);
    }
  }
}

void Tokenizer::Impl::EncodeSpm(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols = SplitIntoChars(text);
  BigramQueue queue;
  const auto add_bigram = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    const int32_t id = Lookup(text.substr(l.offset, l.n + r.n));
    if (id < 0) return;
    const double score = vocab.scores.empty() ? 0.0 : vocab.scores[id];
    queue.push({score, left, right, l.n + r.n});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) add_bigram(i - 1, i);
  MergeAll(symbols, queue, add_bigram);
  for (int i = 0; i >= 0 && i < static_cast<int>(symbols.size()); i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].offset, symbols[i].n);
    const int32_t id = Lookup(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {  // byte fallback
      const int32_t byte_id = byte_tokens[static_cast<uint8_t>(c)];
      if (byte_id >= 0) {
        out.push_back(byte_id);
      } else if (vocab.unk_id >= 0) {
        out.push_back(vocab.unk_id);  // llama.cpp throws here; we degrade to <unk>
      }
    }
  }
}

void Tokenizer::Impl::EncodeRaw(std::string_view raw, bool& prev_special,
                                std::vector<int32_t>& out) const {
  std::string sanitized;
  std::string_view text = raw;
  if (!IsValidUtf8(raw)) {
    sanitized = SanitizeUtf8(raw);
    text = sanitized;
  }
  if (kind == Kind::kBpe) {
    std::vector<std::string_view> words;
    pre->Split(text, words);
    std::string encoded;
    for (std::string_view word : words) {
      encoded.clear();
      for (char c : word) encoded += ByteToUnicode(static_cast<uint8_t>(c));
      EncodeBpeWord(encoded, out);
    }
  } else {
    std::string escaped;
    escaped.reserve(text.size() + 3);
    if (add_space_prefix && prev_special) escaped += "\xe2\x96\x81";
    for (char c : text) {
      if (c == ' ') {
        escaped += "\xe2\x96\x81";
      } else {
        escaped += c;
      }
    }
    EncodeSpm(escaped, out);
  }
  prev_special = false;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool parse_special,
                                       bool add_bos) const {
  const Impl& m = *impl_;
  std::vector<int32_t> out;
  if (add_bos && m.add_bos) out.push_back(m.vocab.bos_id);
  if (text.empty()) return out;

  // Partition on special-token text: each token in turn, longest first, splits every raw
  // fragment at each of its occurrences (llama.cpp's tokenizer_st_partition).
  struct Fragment {
    int32_t id;  // -1: raw text
    size_t offset, length;
  };
  std::vector<Fragment> fragments{{-1, 0, text.size()}};
  for (int32_t id : m.special_tokens) {
    const TokenType type = m.types[id];
    if (!parse_special && (type == TokenType::kControl || type == TokenType::kUnknown)) continue;
    const std::string& special = m.vocab.tokens[id];
    std::vector<Fragment> next;
    bool changed = false;
    for (const Fragment& f : fragments) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      size_t start = f.offset;
      const size_t end = f.offset + f.length;
      while (start < end) {
        const size_t hit = text.substr(0, end).find(special, start);
        if (hit == std::string_view::npos) break;
        if (hit > start) next.push_back({-1, start, hit - start});
        next.push_back({id, hit, special.size()});
        start = hit + special.size();
        if (m.rstrip[id]) {  // the whitespace after it is dropped (C isspace, as llama.cpp)
          while (start < end && std::isspace(static_cast<unsigned char>(text[start]))) ++start;
        }
        changed = true;
      }
      if (start < end) next.push_back({-1, start, end - start});
    }
    if (changed) fragments.swap(next);
  }

  bool prev_special = true;  // SentencePiece adds its space prefix after specials too
  for (const Fragment& f : fragments) {
    if (f.id >= 0) {
      out.push_back(f.id);
      prev_special = true;
    } else {
      m.EncodeRaw(text.substr(f.offset, f.length), prev_special, out);
    }
  }
  return out;
}

const std::string& Tokenizer::Piece(int32_t id) const {
  DAISY_CHECK(id >= 0 && id < n_vocab());
  return impl_->pieces[id];
}

std::string_view Tokenizer::TokenToPiece(int32_t id, bool special) const {
  const TokenType t = type(id);
  if (!special && (t == TokenType::kControl || t == TokenType::kUnknown)) return {};
  return Piece(id);
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool special) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string_view piece = TokenToPiece(ids[i], special);
    if (i == 0 && impl_->add_space_prefix && !piece.empty() && piece[0] == ' ') {
      piece.remove_prefix(1);
    }
    out.append(piece);
  }
  return out;
}

int32_t Tokenizer::n_vocab() const { return static_cast<int32_t>(impl_->vocab.tokens.size()); }
int32_t Tokenizer::bos_id() const { return impl_->vocab.bos_id; }
int32_t Tokenizer::eos_id() const { return impl_->vocab.eos_id; }
int32_t Tokenizer::eot_id() const { return impl_->vocab.eot_id; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::is_eog(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->eog[id];
}
TokenType Tokenizer::type(int32_t id) const {
  DAISY_CHECK(id >= 0 && id < n_vocab());
  return impl_->types[id];
}
const VocabData& Tokenizer::vocab() const { return impl_->vocab; }
int32_t Tokenizer::Find(std::string_view text) const { return impl_->Lookup(text); }

std::string StreamDecoder::Push(int32_t id) {
  std::string_view piece = tokenizer_.TokenToPiece(id, special_);
  if (first_) {
    first_ = false;
    pending_ = tokenizer_.Decode(std::span(&id, 1), special_);
  } else {
    pending_.append(piece);
  }
  const size_t hold = IncompleteUtf8Tail(pending_);
  std::string ready = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return ready;
}

std::string StreamDecoder::Flush() { return std::exchange(pending_, std::string()); }

}  // namespace daisy::tokenizer
