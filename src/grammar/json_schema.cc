#include "grammar/json_schema.h"

#include <functional>
#include <map>
#include <optional>
#include <set>

#include "base/strings.h"

namespace daisy::grammar {

constexpr int kMaxStringCount = 10000;  // minLength/maxLength: each count is a rule

using ojson = nlohmann::ordered_json;

class GrammarBuilder {
 public:
  explicit GrammarBuilder(const ojson* root) : root_(root) {}
  Grammar& g() { return g_; }
  // The schema that "#" refers to from now on.
  void SetRoot(const ojson* root) {
    root_ = root;
    refs_.clear();
  }

  // --- pieces ------------------------------------------------------------------------------
  uint32_t Rule(const std::string& name, std::vector<Production> alts) {
    const uint32_t r = g_.NewRule(name);
    for (Production& p : alts) g_.AddAlt(r, std::move(p));
    return r;
  }
  Symbol R(uint32_t rule) const { return g_.Ref(rule); }
  Symbol Lit(std::string_view s) {
    auto it = literals_.find(std::string(s));
    if (it != literals_.end()) return R(it->second);
    const uint32_t r = g_.Literal(s);
    literals_[std::string(s)] = r;
    return R(r);
  }
  Symbol Space() {  // one optional space
    if (!space_) space_ = Rule("space", {{}, {g_.Byte(' ')}});
    return R(*space_);
  }
  Symbol Digit() {
    ByteSet d;
    d.AddRange('0', '9');
    return g_.Set(d);
  }
  // `elem` repeated between `lo` and `hi` times (hi < 0: unbounded), `sep` between them.
  Symbol Repeat(const std::string& name, Symbol elem, std::optional<Symbol> sep, int lo, int hi) {
    auto with_sep = [&](Production p) {
      if (sep) p.insert(p.begin(), *sep);
      return p;
    };
    // rest(k, m): the items after the first, at least k more, at most m more (m < 0: any); it is
    // empty (k = 0) or one more item and rest(k - 1, m - 1). Built as a chain, without recursion:
    // a maxLength of thousands is thousands of rules (fuzz_json_schema overflowed the stack).
    const uint32_t list = g_.NewRule(name);
    if (lo <= 0) g_.AddAlt(list, {});
    if (hi == 0) return R(list);
    const auto next = [](std::pair<int, int> key) {
      return std::make_pair(std::max(0, key.first - 1), key.second < 0 ? -1 : key.second - 1);
    };
    std::map<std::pair<int, int>, uint32_t> ids;
    std::vector<std::pair<int, int>> chain;
    for (auto key = std::make_pair(std::max(0, lo - 1), hi < 0 ? -1 : hi - 1); !ids.count(key); key = next(key)) {
      ids[key] = g_.NewRule(StrFormat("%s-rest-%d-%d", name.c_str(), key.first, key.second));
      chain.push_back(key);
      if (key.second == 0) break;
    }
    for (const auto& key : chain) {
      const uint32_t r = ids[key];
      if (key.first <= 0) g_.AddAlt(r, {});
      if (key.second != 0) g_.AddAlt(r, with_sep({elem, R(ids.at(next(key)))}));
    }
    g_.AddAlt(list, {elem, R(ids.at(chain.front()))});
    return R(list);
  }

  Symbol StringChar() {
    if (string_char_) return R(*string_char_);
    // Printable ASCII but the quote and the backslash, or a whole UTF-8 character.
    ByteSet plain;
    plain.AddRange(0x20, 0x7F);
    plain.bits['"' >> 6] &= ~(uint64_t{1} << ('"' & 63));
    plain.bits['\\' >> 6] &= ~(uint64_t{1} << ('\\' & 63));
    ByteSet cont, lead2, lead3, lead4;
    cont.AddRange(0x80, 0xBF);
    lead2.AddRange(0xC2, 0xDF);
    lead3.AddRange(0xE0, 0xEF);
    lead4.AddRange(0xF0, 0xF4);
    const Symbol cb = g_.Set(cont);
    ByteSet esc;
    for (char c : std::string("\"\\/bfnrt")) esc.Add(static_cast<uint8_t>(c));
    ByteSet hex;
    hex.AddRange('0', '9');
    hex.AddRange('a', 'f');
    hex.AddRange('A', 'F');
    const Symbol h = g_.Set(hex);
    string_char_ = Rule("char", {{g_.Set(plain)},
                                 {g_.Set(lead2), cb},
                                 {g_.Set(lead3), cb, cb},
                                 {g_.Set(lead4), cb, cb, cb},
                                 {g_.Byte('\\'), g_.Set(esc)},
                                 {g_.Byte('\\'), g_.Byte('u'), h, h, h, h}});
    return R(*string_char_);
  }
  Symbol String(int lo, int hi) {
    const auto key = std::make_pair(lo, hi);
    if (auto it = strings_.find(key); it != strings_.end()) return R(it->second);
    const Symbol chars = Repeat(StrFormat("chars-%d-%d", lo, hi), StringChar(), std::nullopt, lo, hi);
    const uint32_t r = Rule(StrFormat("string-%d-%d", lo, hi), {{g_.Byte('"'), chars, g_.Byte('"')}});
    strings_[key] = r;
    return R(r);
  }
  Symbol Integer() {
    if (integer_) return R(*integer_);
    ByteSet nz;
    nz.AddRange('1', '9');
    const Symbol digits = Repeat("int-digits", Digit(), std::nullopt, 0, 15);
    const uint32_t unsigned_int = Rule("uint", {{g_.Byte('0')}, {g_.Set(nz), digits}});
    integer_ = Rule("integer", {{R(unsigned_int)}, {g_.Byte('-'), R(unsigned_int)}});
    return R(*integer_);
  }
  Symbol Number() {
    if (number_) return R(*number_);
    const Symbol frac_digits = Repeat("frac-digits", Digit(), std::nullopt, 1, 15);
    const uint32_t frac = Rule("frac", {{}, {g_.Byte('.'), frac_digits}});
    ByteSet e;
    e.Add('e');
    e.Add('E');
    ByteSet sign;
    sign.Add('+');
    sign.Add('-');
    const uint32_t opt_sign = Rule("exp-sign", {{}, {g_.Set(sign)}});
    const Symbol exp_digits = Repeat("exp-digits", Digit(), std::nullopt, 1, 3);
    const uint32_t exp = Rule("exp", {{}, {g_.Set(e), R(opt_sign), exp_digits}});
    number_ = Rule("number", {{Integer(), R(frac), R(exp)}});
    return R(*number_);
  }
  Symbol AnyValue() {
    if (any_) return R(*any_);
    any_ = g_.NewRule("value");
    const uint32_t member = Rule("member", {{String(0, -1), g_.Byte(':'), Space(), R(*any_)}});
    const Symbol members = Repeat("members", R(member), Rule2Sep(), 0, -1);
    const uint32_t object = Rule("object", {{g_.Byte('{'), members, g_.Byte('}')}});
    const Symbol items = Repeat("items", R(*any_), Rule2Sep(), 0, -1);
    const uint32_t array = Rule("array", {{g_.Byte('['), items, g_.Byte(']')}});
    for (Production p : std::vector<Production>{{R(object)}, {R(array)}, {String(0, -1)}, {Number()},
                                                 {Lit("true")}, {Lit("false")}, {Lit("null")}}) {
      g_.AddAlt(*any_, std::move(p));
    }
    any_object_ = object;
    return R(*any_);
  }
  Symbol AnyObject() {
    AnyValue();
    return R(*any_object_);
  }
  Symbol Rule2Sep() {  // ", " with the space optional
    if (!sep_) sep_ = Rule("comma", {{g_.Byte(','), Space()}});
    return R(*sep_);
  }

  // --- schemas -----------------------------------------------------------------------------
  Result<Symbol> Value(const ojson& s, const std::string& path, int depth = 0) {
    if (depth > 64) return InvalidArgument("the JSON schema nests deeper than 64 levels at %s", path.c_str());
    if (s.is_boolean()) {
      if (!s.get<bool>()) return InvalidArgument("the JSON schema at %s matches nothing (false)", path.c_str());
      return AnyValue();
    }
    if (!s.is_object()) return InvalidArgument("the JSON schema at %s must be an object", path.c_str());
    static const std::set<std::string> kDescriptive = {"title", "description", "default", "examples", "format",
                                                       "$schema", "$id", "strict", "$comment", "deprecated",
                                                       "readOnly", "writeOnly", "$defs", "definitions"};
    static const std::set<std::string> kKnown = {"type", "properties", "required", "additionalProperties", "items",
                                                 "minItems", "maxItems", "enum", "const", "anyOf", "oneOf", "allOf",
                                                 "$ref", "minLength", "maxLength"};
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (!kDescriptive.count(it.key()) && !kKnown.count(it.key())) {
        return InvalidArgument("the JSON schema keyword '%s' (at %s) is not supported for constrained output",
                               EscapeForMessage(it.key()).c_str(), path.c_str());
      }
    }
    if (s.contains("$ref")) return Ref(s["$ref"], path, depth);
    if (s.contains("const")) return Lit(Compact(s["const"]));
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) return InvalidArgument("'enum' at %s must be a non-empty array", path.c_str());
      std::vector<Production> alts;
      for (const ojson& v : s["enum"]) alts.push_back({Lit(Compact(v))});
      return R(Rule("enum " + path, std::move(alts)));
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      if (!s[key].is_array() || s[key].empty()) return InvalidArgument("'%s' at %s must be a non-empty array", key, path.c_str());
      std::vector<Production> alts;
      for (size_t i = 0; i < s[key].size(); ++i) {
        DAISY_ASSIGN_OR_RETURN(Symbol v, Value(s[key][i], StrFormat("%s/%s/%zu", path.c_str(), key, i), depth + 1));
        alts.push_back({v});
      }
      return R(Rule(std::string(key) + " " + path, std::move(alts)));
    }
    if (s.contains("allOf")) {
      if (!s["allOf"].is_array() || s["allOf"].size() != 1) {
        return InvalidArgument("'allOf' at %s: only a single schema is supported", path.c_str());
      }
      return Value(s["allOf"][0], path + "/allOf/0", depth + 1);
    }
    if (!s.contains("type")) {
      if (s.contains("properties")) return Object(s, path, depth);
      if (s.contains("items")) return Array(s, path, depth);
      return AnyValue();
    }
    const ojson& type = s["type"];
    if (type.is_array()) {
      std::vector<Production> alts;
      for (const ojson& t : type) {
        if (!t.is_string()) return InvalidArgument("'type' at %s must hold strings", path.c_str());
        DAISY_ASSIGN_OR_RETURN(Symbol v, Typed(s, t.get<std::string>(), path, depth));
        alts.push_back({v});
      }
      if (alts.empty()) return InvalidArgument("'type' at %s is an empty list", path.c_str());
      return R(Rule("types " + path, std::move(alts)));
    }
    if (!type.is_string()) return InvalidArgument("'type' at %s must be a string or a list of strings", path.c_str());
    return Typed(s, type.get<std::string>(), path, depth);
  }

 private:
  static std::string Compact(const ojson& v) { return v.dump(-1, ' ', false, ojson::error_handler_t::replace); }

  Result<int> Count(const ojson& s, const char* key, const std::string& path, int def) {
    if (!s.contains(key)) return def;
    if (!s[key].is_number_integer() || s[key].get<int64_t>() < 0 || s[key].get<int64_t>() > 100000) {
      return InvalidArgument("'%s' at %s must be an integer from 0 to 100000", key, path.c_str());
    }
    return static_cast<int>(s[key].get<int64_t>());
  }

  Result<Symbol> Typed(const ojson& s, const std::string& type, const std::string& path, int depth) {
    if (type == "string") {
      DAISY_ASSIGN_OR_RETURN(int lo, Count(s, "minLength", path, 0));
      DAISY_ASSIGN_OR_RETURN(int hi, Count(s, "maxLength", path, -1));
      if (hi >= 0 && hi < lo) return InvalidArgument("maxLength < minLength at %s", path.c_str());
      // Each count is a grammar rule: bounded like minItems/maxItems.
      if (lo > kMaxStringCount || hi > kMaxStringCount) {
        return InvalidArgument("minLength/maxLength above %d at %s are not supported", kMaxStringCount, path.c_str());
      }
      return String(lo, hi);
    }
    if (type == "integer") return Integer();
    if (type == "number") return Number();
    if (type == "boolean") return R(Rule("boolean", {{Lit("true")}, {Lit("false")}}));
    if (type == "null") return Lit("null");
    if (type == "object") return Object(s, path, depth);
    if (type == "array") return Array(s, path, depth);
    return InvalidArgument("the JSON schema type '%s' at %s is not one of string, integer, number, boolean, null, "
                           "object, array", EscapeForMessage(type).c_str(), path.c_str());
  }

  Result<Symbol> Array(const ojson& s, const std::string& path, int depth) {
    Symbol item = AnyValue();
    if (s.contains("items")) {
      DAISY_ASSIGN_OR_RETURN(item, Value(s["items"], path + "/items", depth + 1));
    }
    DAISY_ASSIGN_OR_RETURN(int lo, Count(s, "minItems", path, 0));
    DAISY_ASSIGN_OR_RETURN(int hi, Count(s, "maxItems", path, -1));
    if (hi >= 0 && hi < lo) return InvalidArgument("maxItems < minItems at %s", path.c_str());
    if (lo > 1000 || hi > 1000) return InvalidArgument("minItems/maxItems above 1000 at %s are not supported", path.c_str());
    const Symbol items = Repeat("items " + path, item, Rule2Sep(), lo, hi);
    return R(Rule("array " + path, {{g_.Byte('['), items, g_.Byte(']')}}));
  }

  Result<Symbol> Object(const ojson& s, const std::string& path, int depth) {
    if (!s.contains("properties")) {
      if (!s.contains("additionalProperties") || s["additionalProperties"].is_boolean()) {
        if (s.contains("additionalProperties") && s["additionalProperties"] == false) return Lit("{}");
        return AnyObject();
      }
      DAISY_ASSIGN_OR_RETURN(Symbol v, Value(s["additionalProperties"], path + "/additionalProperties", depth + 1));
      const uint32_t member = Rule("member " + path, {{String(0, -1), g_.Byte(':'), Space(), v}});
      const Symbol members = Repeat("members " + path, R(member), Rule2Sep(), 0, -1);
      return R(Rule("object " + path, {{g_.Byte('{'), members, g_.Byte('}')}}));
    }
    const ojson& props = s["properties"];
    if (!props.is_object()) return InvalidArgument("'properties' at %s must be an object", path.c_str());
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return InvalidArgument("'required' at %s must be an array", path.c_str());
      for (const ojson& r : s["required"]) {
        if (!r.is_string() || !props.contains(r.get<std::string>())) {
          return InvalidArgument("'required' at %s names %s, which is not among the properties", path.c_str(),
                                 EscapeForMessage(Compact(r)).c_str());
        }
        required.insert(r.get<std::string>());
      }
    }
    // Each property: "name": value, in the schema's order.
    std::vector<std::pair<Symbol, bool>> members;
    for (auto it = props.begin(); it != props.end(); ++it) {
      DAISY_ASSIGN_OR_RETURN(Symbol v, Value(it.value(), path + "/properties/" + it.key(), depth + 1));
      const uint32_t m = Rule("property " + it.key(), {{Lit(Compact(ojson(it.key()))), g_.Byte(':'), Space(), v}});
      members.emplace_back(R(m), required.count(it.key()) > 0);
    }
    // tail(i, first): properties i.. with a comma before each unless none was written yet.
    const size_t n = members.size();
    std::map<std::pair<size_t, bool>, uint32_t> memo;
    std::function<uint32_t(size_t, bool)> tail = [&](size_t i, bool first) -> uint32_t {
      const auto key = std::make_pair(i, first);
      if (auto it = memo.find(key); it != memo.end()) return it->second;
      const uint32_t r = g_.NewRule(StrFormat("props %s %zu%s", path.c_str(), i, first ? " first" : ""));
      memo[key] = r;
      if (i == n) {
        g_.AddAlt(r, {});
        return r;
      }
      Production take;
      if (!first) take.push_back(Rule2Sep());
      take.push_back(members[i].first);
      take.push_back(R(tail(i + 1, false)));
      g_.AddAlt(r, std::move(take));
      if (!members[i].second) g_.AddAlt(r, {R(tail(i + 1, first))});
      return r;
    };
    return R(Rule("object " + path, {{g_.Byte('{'), R(tail(0, true)), g_.Byte('}')}}));
  }

  Result<Symbol> Ref(const ojson& ref, const std::string& path, int depth) {
    if (!ref.is_string()) return InvalidArgument("'$ref' at %s must be a string", path.c_str());
    const std::string r = ref.get<std::string>();
    if (auto it = refs_.find(r); it != refs_.end()) return R(it->second);
    const ojson* target = nullptr;
    if (r == "#") {
      target = root_;
    } else if (r.rfind("#/", 0) == 0) {
      target = root_;
      for (const std::string& part : StrSplit(r.substr(2), '/')) {
        if (!target->is_object() || !target->contains(part)) {
          target = nullptr;
          break;
        }
        target = &(*target)[part];
      }
    }
    if (target == nullptr) {
      return InvalidArgument("'$ref' %s at %s: only references into the schema itself (#/$defs/...) are supported",
                             EscapeForMessage(r).c_str(), path.c_str());
    }
    // The rule first, its body after: a schema may refer to itself.
    const uint32_t rule = g_.NewRule("ref " + r);
    refs_[r] = rule;
    DAISY_ASSIGN_OR_RETURN(Symbol body, Value(*target, r, depth + 1));
    g_.AddAlt(rule, {body});
    return R(rule);
  }

  Grammar g_;
  const ojson* root_;
  std::map<std::string, uint32_t> literals_, refs_;
  std::map<std::pair<int, int>, uint32_t> strings_;
  std::optional<uint32_t> space_, string_char_, integer_, number_, any_, any_object_, sep_;
};

namespace {


// The sentence: an optional leading space or newline (a SentencePiece model's first piece may
// carry one), then `body`.
Status Finish(GrammarBuilder& b, Symbol body) {
  Grammar& g = b.g();
  const uint32_t lead = g.NewRule("lead");
  g.AddAlt(lead, {});
  g.AddAlt(lead, {g.Byte(' ')});
  g.AddAlt(lead, {g.Byte('\n')});
  const uint32_t start = g.NewRule("root");
  g.AddAlt(start, {g.Ref(lead), body});
  return g.Finish(start);
}

}  // namespace

Result<Grammar> JsonSchemaGrammar(const ojson& schema) {
  GrammarBuilder b(&schema);
  DAISY_ASSIGN_OR_RETURN(Symbol v, b.Value(schema, "#"));
  DAISY_RETURN_IF_ERROR(Finish(b, v));
  return std::move(b.g());
}

Grammar JsonObjectGrammar() {
  const ojson none = ojson::object();
  GrammarBuilder b(&none);
  const Symbol v = b.AnyObject();
  const Status s = Finish(b, v);
  (void)s;  // a fixed grammar: always valid
  return std::move(b.g());
}

Result<Grammar> ToolCallGrammar(const ojson& tools, const ToolCallShape& shape) {
  if (!tools.is_array() || tools.empty()) return InvalidArgument("a forced tool call needs 'tools'");
  GrammarBuilder b(&tools);
  Grammar& g = b.g();
  const uint32_t call = g.NewRule("call");
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string where = StrFormat("tools[%zu]", i);
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object() || !t["function"].contains("name") ||
        !t["function"]["name"].is_string()) {
      return InvalidArgument("'%s' must be {\"type\": \"function\", \"function\": {\"name\": ..., \"parameters\": ...}}",
                             where.c_str());
    }
    const ojson params = t["function"].contains("parameters") ? t["function"]["parameters"] : ojson::object();
    b.SetRoot(&params);
    DAISY_ASSIGN_OR_RETURN(Symbol args, b.Value(params, where + ".function.parameters"));
    const std::string head = "{\"name\": " + ojson(t["function"]["name"]).dump() + ", \"" + shape.args_key + "\": ";
    g.AddAlt(call, {b.Lit(head), args, b.Lit("}")});
  }
  Production p;
  if (!shape.prefix.empty()) p.push_back(b.Lit(shape.prefix));
  p.push_back(g.Ref(call));
  if (!shape.suffix.empty()) p.push_back(b.Lit(shape.suffix));
  const uint32_t body = g.NewRule("tool-call");
  g.AddAlt(body, std::move(p));
  DAISY_RETURN_IF_ERROR(Finish(b, g.Ref(body)));
  return std::move(b.g());
}

}  // namespace daisy::grammar
