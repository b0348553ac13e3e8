#include "grammar/token_mask.h"

#include <algorithm>
#include <bit>

namespace daisy::grammar {

int TokenMask::Count() const {
  int n = 0;
  for (uint32_t w : words) n += std::popcount(w);
  return n;
}

TokenVocab::TokenVocab(const tokenizer::Tokenizer& tok, const std::vector<int32_t>& preserved)
    : n_vocab_(tok.n_vocab()), bytes_(tok.n_vocab()), eog_(tok.n_vocab(), false) {
  trie_.emplace_back();
  for (int32_t id = 0; id < n_vocab_; ++id) {
    eog_[id] = tok.is_eog(id);
    if (eog_[id]) continue;
    const bool keep = std::find(preserved.begin(), preserved.end(), id) != preserved.end();
    bytes_[id] = std::string(tok.TokenToPiece(id, keep));
    if (bytes_[id].empty()) continue;
    uint32_t node = 0;
    for (char c : bytes_[id]) {
      const uint8_t b = static_cast<uint8_t>(c);
      auto& next = trie_[node].next;
      auto it = std::lower_bound(next.begin(), next.end(), b, [](const auto& e, uint8_t x) { return e.first < x; });
      if (it != next.end() && it->first == b) {
        node = it->second;
      } else {
        const uint32_t child = static_cast<uint32_t>(trie_.size());
        next.insert(it, {b, child});
        trie_.emplace_back();
        node = child;
      }
    }
    trie_[node].tokens.push_back(id);
  }
}

TokenMask TokenVocab::Allowed(const Matcher& m) const {
  TokenMask mask;
  mask.words.assign((n_vocab_ + 31) / 32, 0);
  if (m.CanEnd()) {
    for (int32_t id = 0; id < n_vocab_; ++id) {
      if (eog_[id]) mask.Add(id);
    }
  }
  // Depth-first over the trie, the grammar state carried along each path.
  struct Frame {
    uint32_t node;
    Matcher::State state;
  };
  std::vector<Frame> stack;
  stack.push_back({0, m.state()});
  while (!stack.empty()) {
    Frame f = std::move(stack.back());
    stack.pop_back();
    for (const auto& [b, child] : trie_[f.node].next) {
      Matcher::State s = m.Step(f.state, b);
      if (s.empty()) continue;
      for (int32_t id : trie_[child].tokens) mask.Add(id);
      if (!trie_[child].next.empty()) stack.push_back({child, std::move(s)});
    }
  }
  return mask;
}

TokenConstraint::TokenConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), matcher_(*grammar_) {}

TokenMask TokenConstraint::Next(std::span<const int32_t> extra) {
  Matcher m = matcher_;
  for (int32_t t : extra) {
    if (vocab_->is_eog(t) || !m.Advance(vocab_->bytes(t))) return TokenMask{std::vector<uint32_t>((vocab_->n_vocab() + 31) / 32, 0)};
  }
  const std::string key = m.Key();
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  TokenMask mask = vocab_->Allowed(m);
  if (cache_.size() >= 256) cache_.clear();  // a mask is n_vocab / 8 bytes: 256 of a 150k vocabulary, 5 MB
  cache_.emplace(key, mask);
  return mask;
}

bool TokenConstraint::Allows(std::span<const int32_t> extra, int32_t token) { return Next(extra).Has(token); }

bool TokenConstraint::Accept(int32_t token) {
  if (token < 0 || token >= vocab_->n_vocab()) return false;
  if (vocab_->is_eog(token)) return matcher_.CanEnd();
  const std::string& b = vocab_->bytes(token);
  return !b.empty() && matcher_.Advance(b);
}

}  // namespace daisy::grammar
