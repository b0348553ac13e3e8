#include "grammar/grammar.h"

#include <algorithm>
#include <functional>

namespace daisy::grammar {

uint32_t Grammar::NewRule(std::string name) {
  rules_.push_back({std::move(name), {}, false});
  return static_cast<uint32_t>(rules_.size() - 1);
}

void Grammar::AddAlt(uint32_t rule, Production p) { rules_[rule].alts.push_back(std::move(p)); }

Symbol Grammar::Set(const ByteSet& s) {
  for (size_t i = 0; i < sets_.size(); ++i) {
    if (sets_[i] == s) return {true, static_cast<uint32_t>(i)};
  }
  sets_.push_back(s);
  return {true, static_cast<uint32_t>(sets_.size() - 1)};
}

Symbol Grammar::Byte(uint8_t b) {
  ByteSet s;
  s.Add(b);
  return Set(s);
}

uint32_t Grammar::Literal(std::string_view text) {
  std::string name = "\"";
  name.append(text).append("\"");
  const uint32_t r = NewRule(std::move(name));
  Production p;
  for (char c : text) p.push_back(Byte(static_cast<uint8_t>(c)));
  AddAlt(r, std::move(p));
  return r;
}

Status Grammar::Finish(uint32_t start) {
  if (start >= rules_.size()) return InvalidArgument("grammar: no start rule");
  start_ = start;
  for (const Rule& r : rules_) {
    if (r.alts.empty()) return InvalidArgument("grammar: rule %s has no alternatives", r.name.c_str());
    for (const Production& p : r.alts) {
      for (const Symbol& s : p) {
        if (!s.terminal && s.id >= rules_.size()) return InvalidArgument("grammar: rule %s refers to no rule", r.name.c_str());
      }
    }
  }
  // What can match nothing: a fixed point.
  for (bool changed = true; changed;) {
    changed = false;
    for (Rule& r : rules_) {
      if (r.nullable) continue;
      for (const Production& p : r.alts) {
        const bool all = std::all_of(p.begin(), p.end(), [&](const Symbol& s) { return !s.terminal && rules_[s.id].nullable; });
        if (all) {
          r.nullable = true;
          changed = true;
          break;
        }
      }
    }
  }
  // No left recursion: a rule must not reach itself without consuming a byte.
  std::vector<int> mark(rules_.size(), 0);  // 0 unvisited, 1 on the path, 2 done
  std::function<bool(uint32_t)> cyclic = [&](uint32_t r) {
    if (mark[r] == 1) return true;
    if (mark[r] == 2) return false;
    mark[r] = 1;
    for (const Production& p : rules_[r].alts) {
      for (const Symbol& s : p) {
        if (s.terminal) break;
        if (cyclic(s.id)) return true;
        if (!rules_[s.id].nullable) break;
      }
    }
    mark[r] = 2;
    return false;
  };
  for (uint32_t r = 0; r < rules_.size(); ++r) {
    if (cyclic(r)) return InvalidArgument("grammar: rule %s is left-recursive", rules_[r].name.c_str());
  }
  return Status::Ok();
}

Matcher::Matcher(const Grammar& g) : g_(&g) {
  for (size_t a = 0; a < g.rule(g.start()).alts.size(); ++a) {
    state_.push_back({Item{g.start(), static_cast<uint16_t>(a), 0}});
  }
}

Matcher::State Matcher::Step(const State& from, uint8_t b) const {
  State out;
  std::vector<Stack> work(from.begin(), from.end());
  size_t budget = 1 << 16;  // expansions per byte: a bad grammar cannot spin forever
  while (!work.empty() && budget-- > 0) {
    Stack s = std::move(work.back());
    work.pop_back();
    if (s.empty()) continue;  // a whole sentence: nothing may follow on this parse
    const Item top = s.back();
    const Production& prod = g_->rule(top.rule).alts[top.alt];
    if (top.dot == prod.size()) {  // complete: back to the parent
      s.pop_back();
      if (s.empty()) continue;
      ++s.back().dot;
      work.push_back(std::move(s));
      continue;
    }
    const Symbol sym = prod[top.dot];
    if (sym.terminal) {
      if (!g_->set(sym.id).Has(b)) continue;
      ++s.back().dot;
      // Completed items are popped now, so equal futures have equal stacks.
      while (!s.empty()) {
        const Item& t = s.back();
        if (t.dot < g_->rule(t.rule).alts[t.alt].size()) break;
        s.pop_back();
        if (!s.empty()) ++s.back().dot;
      }
      out.push_back(std::move(s));
      continue;
    }
    const bool tail = top.dot + 1u == prod.size();
    const Rule& r = g_->rule(sym.id);
    for (size_t a = 0; a < r.alts.size(); ++a) {
      Stack s2 = s;
      if (tail) s2.pop_back();  // nothing follows here: the child returns to our parent
      s2.push_back(Item{sym.id, static_cast<uint16_t>(a), 0});
      work.push_back(std::move(s2));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (out.size() > kMaxStacks || budget == static_cast<size_t>(-1)) return {};
  return out;
}

bool Matcher::StateCanEnd(const State& state) const {
  for (const Stack& s : state) {
    bool ok = true;
    for (size_t i = s.size(); i-- > 0 && ok;) {
      const Item& it = s[i];
      const Production& p = g_->rule(it.rule).alts[it.alt];
      const size_t from = i + 1 == s.size() ? it.dot : it.dot + 1u;
      for (size_t k = from; k < p.size() && ok; ++k) ok = !p[k].terminal && g_->rule(p[k].id).nullable;
    }
    if (ok) return true;
  }
  return false;
}

bool Matcher::Advance(std::string_view bytes) {
  State s = state_;
  for (char c : bytes) {
    s = Step(s, static_cast<uint8_t>(c));
    if (s.empty()) return false;
  }
  state_ = std::move(s);
  return true;
}

bool Matcher::CanEnd() const { return StateCanEnd(state_); }

bool Matcher::CanContinue() const {
  for (int b = 0; b < 256; ++b) {
    if (!Step(state_, static_cast<uint8_t>(b)).empty()) return true;
  }
  return false;
}

std::string Matcher::Key() const {
  std::string k;
  for (const Stack& s : state_) {
    for (const Item& it : s) {
      k.append(reinterpret_cast<const char*>(&it.rule), sizeof it.rule);
      k.append(reinterpret_cast<const char*>(&it.alt), sizeof it.alt);
      k.append(reinterpret_cast<const char*>(&it.dot), sizeof it.dot);
    }
    k.push_back('|');
  }
  return k;
}

}  // namespace daisy::grammar
