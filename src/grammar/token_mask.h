// Grammars over tokens: which of a vocabulary's tokens may come next for a grammar's state.
// A token may come next when its bytes keep the grammar alive; an end-of-generation token when
// the text so far is a whole sentence. Tokens that print nothing (control tokens, unless the
// format needs their text: `preserved`) never may.
//
// TokenVocab holds every token's bytes in a trie, so a mask walks the grammar only along the
// prefixes some token has and stops at the first byte the grammar refuses.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

namespace daisy::grammar {

// A set of token ids: a bitset over the vocabulary.
struct TokenMask {
  std::vector<uint32_t> words;
  bool Has(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id >> 5) < words.size() && ((words[id >> 5] >> (id & 31)) & 1);
  }
  void Add(int32_t id) { words[id >> 5] |= uint32_t{1} << (id & 31); }
  int Count() const;
};

class TokenVocab {
 public:
  TokenVocab(const tokenizer::Tokenizer& tokenizer, const std::vector<int32_t>& preserved);
  int32_t n_vocab() const { return n_vocab_; }
  // The tokens allowed after the matcher's bytes.
  TokenMask Allowed(const Matcher& m) const;
  // A token's bytes ("" for the ones never allowed as text).
  const std::string& bytes(int32_t id) const { return bytes_[id]; }
  bool is_eog(int32_t id) const { return eog_[id]; }

 private:
  struct Node {
    std::vector<std::pair<uint8_t, uint32_t>> next;  // sorted by byte
    std::vector<int32_t> tokens;                     // the tokens whose bytes end here
  };
  int32_t n_vocab_ = 0;
  std::vector<std::string> bytes_;
  std::vector<bool> eog_;
  std::vector<Node> trie_;
};

// One sequence's grammar state over tokens: the matcher after the settled tokens, masks for
// what may come next (cached by grammar state), and the same for hypothetical continuations
// (the drafts of a speculative step).
class TokenConstraint {
 public:
  TokenConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab);

  // The mask after the settled tokens and then `extra` (which must each have been allowed).
  TokenMask Next(std::span<const int32_t> extra = {});
  // Whether `token` may follow the settled tokens and then `extra`.
  bool Allows(std::span<const int32_t> extra, int32_t token);
  // A token settled; false when the grammar does not allow it (the state is then unchanged).
  bool Accept(int32_t token);
  // The settled text is a whole sentence.
  bool Complete() const { return matcher_.CanEnd(); }

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenVocab> vocab_;
  Matcher matcher_;
  std::unordered_map<std::string, TokenMask> cache_;
};

}  // namespace daisy::grammar
