// Constrained decoding: a context-free grammar over bytes (made from a JSON schema, or for a
// forced tool call), recognised incrementally, and the set of tokens that may come next.
//
//   Grammar g = ...;                         // json_schema.h builds them
//   Matcher m(g);                            // one per sequence
//   m.Advance("{\"a\": ");                   // false: the bytes leave the grammar
//   m.CanEnd();                              // a complete sentence so far
//   TokenMask mask = vocab.Allowed(m);       // token_mask.h: the tokens that keep it alive
//
// The recogniser keeps every parse still possible (a set of stacks of (rule, alternative,
// position) items, as a GLR parser without the tree), so any grammar without left recursion is
// recognised, ambiguous ones included. The stacks are bounded (kMaxStacks).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace daisy::grammar {

// A set of bytes: one terminal symbol.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool Has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void Add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void AddRange(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Add(static_cast<uint8_t>(b));
  }
  bool operator==(const ByteSet&) const = default;
};

struct Symbol {
  bool terminal = false;
  uint32_t id = 0;  // a ByteSet (terminal) or a rule
  bool operator==(const Symbol&) const = default;
};
using Production = std::vector<Symbol>;

struct Rule {
  std::string name;  // for messages and debugging
  std::vector<Production> alts;
  bool nullable = false;
};

class Grammar {
 public:
  // Building: a rule is made, then given its alternatives (rules may refer to each other,
  // recursion included, except left recursion).
  uint32_t NewRule(std::string name);
  void AddAlt(uint32_t rule, Production p);
  Symbol Set(const ByteSet& s);
  Symbol Byte(uint8_t b);
  Symbol Ref(uint32_t rule) const { return {false, rule}; }
  // A rule matching exactly `text`.
  uint32_t Literal(std::string_view text);
  // Finishing: `start` is the sentence; computes what can match nothing. Errors: an unknown
  // rule, a rule without alternatives, left recursion.
  Status Finish(uint32_t start);

  const Rule& rule(uint32_t i) const { return rules_[i]; }
  const ByteSet& set(uint32_t i) const { return sets_[i]; }
  uint32_t start() const { return start_; }
  size_t rules() const { return rules_.size(); }

 private:
  std::vector<Rule> rules_;
  std::vector<ByteSet> sets_;
  uint32_t start_ = 0;
};

// The recogniser: where the bytes so far may be in the grammar.
class Matcher {
 public:
  static constexpr size_t kMaxStacks = 256;
  explicit Matcher(const Grammar& g);

  // Consumes `bytes`; false (and the matcher unchanged) when they cannot continue a sentence.
  bool Advance(std::string_view bytes);
  // Whether the bytes so far are a whole sentence.
  bool CanEnd() const;
  // Whether any byte may follow.
  bool CanContinue() const;
  // A key identifying the state (equal keys: the same future).
  std::string Key() const;
  const Grammar& grammar() const { return *g_; }

  // One step on a copy: the state after byte `b` (empty: dead). For mask computation.
  struct Item {
    uint32_t rule;
    uint16_t alt;
    uint16_t dot;
    bool operator==(const Item&) const = default;
    bool operator<(const Item& o) const {
      return rule != o.rule ? rule < o.rule : alt != o.alt ? alt < o.alt : dot < o.dot;
    }
  };
  using Stack = std::vector<Item>;
  using State = std::vector<Stack>;
  const State& state() const { return state_; }
  State Step(const State& from, uint8_t b) const;
  bool StateCanEnd(const State& s) const;

 private:
  const Grammar* g_;
  State state_;
};

}  // namespace daisy::grammar
