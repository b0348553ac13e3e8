// Rendering the syntax tree: Jinja2's scoping (a for loop's body is a fresh scope each
// iteration, macros see the template's top-level variables, `set` writes the innermost scope,
// namespaces are the one thing a `set` can change in place), Python's operators, and the
// filters, tests and methods chat templates use.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>

#include "base/strings.h"
#include "jinja/parse.h"

namespace daisy::jinja {
namespace {

constexpr size_t kMaxOutput = 64u << 20;   // bytes a render may produce
constexpr int kMaxDepth = 48;              // nested macro calls (bounded by the stack)
constexpr int64_t kMaxItems = 1 << 22;     // elements a range(), repetition or join may make

// ---- strings as Python sees them (code points) ------------------------------------------

std::vector<std::string> CodePoints(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    len = std::min(len, s.size() - i);
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

uint32_t Decode(const std::string& cp) {
  const unsigned char c = cp[0];
  if (c < 0x80 || cp.size() == 1) return c;
  uint32_t v = cp.size() == 2 ? (c & 0x1F) : cp.size() == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t i = 1; i < cp.size(); ++i) v = (v << 6) | (static_cast<unsigned char>(cp[i]) & 0x3F);
  return v;
}

bool IsPySpace(const std::string& cp) {
  const uint32_t c = Decode(cp);
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

std::string Join(const std::vector<std::string>& cps, size_t b, size_t e) {
  std::string s;
  for (size_t i = b; i < e; ++i) s += cps[i];
  return s;
}

// str.strip / lstrip / rstrip: `chars` none strips whitespace.
std::string Strip(const std::string& s, const Value& chars, bool left, bool right) {
  const std::vector<std::string> cps = CodePoints(s);
  std::vector<std::string> set;
  const bool ws = !chars.is_string();
  if (!ws) set = CodePoints(chars.str());
  auto strip = [&](const std::string& cp) {
    return ws ? IsPySpace(cp) : std::find(set.begin(), set.end(), cp) != set.end();
  };
  size_t b = 0, e = cps.size();
  while (left && b < e && strip(cps[b])) ++b;
  while (right && e > b && strip(cps[e - 1])) --e;
  return Join(cps, b, e);
}

std::string AsciiMap(const std::string& s, int (*f)(int)) {
  std::string out = s;
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(f(c));
  }
  return out;
}

bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string Capitalize(const std::string& s) {
  std::string out = AsciiMap(s, [](int c) { return std::tolower(c); });
  if (!out.empty() && static_cast<unsigned char>(out[0]) < 0x80) out[0] = static_cast<char>(std::toupper(out[0]));
  return out;
}

std::string Title(const std::string& s) {
  std::string out;
  bool prev_letter = false;
  for (char c : s) {
    if (IsAlpha(c)) {
      out += static_cast<char>(prev_letter ? std::tolower(c) : std::toupper(c));
      prev_letter = true;
    } else {
      out += c;
      prev_letter = static_cast<unsigned char>(c) >= 0x80;
    }
  }
  return out;
}

std::vector<std::string> Split(const std::string& s, const Value& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (!sep.is_string()) {  // runs of whitespace, none at the ends
    const std::vector<std::string> cps = CodePoints(s);
    size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && IsPySpace(cps[i])) ++i;
      if (i >= cps.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = cps.size();
        while (e > i && IsPySpace(cps[e - 1])) --e;
        out.push_back(Join(cps, i, e));
        break;
      }
      size_t j = i;
      while (j < cps.size() && !IsPySpace(cps[j])) ++j;
      out.push_back(Join(cps, i, j));
      i = j;
    }
    return out;
  }
  const std::string& d = sep.str();
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    const size_t at = s.find(d, pos);
    if (at == std::string::npos) break;
    out.push_back(s.substr(pos, at - pos));
    pos = at + d.size();
  }
  out.push_back(s.substr(pos));
  return out;
}

std::string Replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) {
    std::string out;
    int64_t n = 0;
    for (const std::string& cp : CodePoints(s)) {
      if (count < 0 || n++ < count) out += to;
      out += cp;
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  std::string out;
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t at = s.find(from, pos);
    if (at == std::string::npos) break;
    out += s.substr(pos, at - pos) + to;
    pos = at + from.size();
    ++n;
  }
  return out + s.substr(pos);
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* TypeName(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kArray: return v.is_tuple() ? "tuple" : "list";
    case Value::Kind::kObject: return v.is_namespace() ? "Namespace" : "dict";
    case Value::Kind::kFunction: return "function";
  }
  return "?";
}

// Python's floor division and modulo.
int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

struct Args {
  const std::vector<Value>& pos;
  const KwArgs& kw;
  // The argument at position i or named `name`, else `def`.
  Value Get(size_t i, const char* name, Value def = Value()) const {
    for (const auto& [k, v] : kw) {
      if (k == name) return v;
    }
    return i < pos.size() ? pos[i] : def;
  }
};

class Renderer;
using FilterFn = Result<Value> (*)(Renderer&, const Value&, const Args&);
using TestFn = Result<bool> (*)(Renderer&, const Value&, const Args&);
const std::map<std::string, FilterFn>& Filters();
const std::map<std::string, TestFn>& Tests();

struct Frame {
  std::unordered_map<std::string, Value> vars;
  const Frame* parent = nullptr;
};

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  explicit Renderer(const Value& variables) {
    if (variables.is_object()) {
      for (const auto& [k, v] : variables.object().items) root_.vars[k] = v;
    }
    AddGlobals();
  }

  Status Render(const Node& root, std::string& out) {
    Flow flow = Flow::kNormal;
    return Exec(root.bodies[0], root_, out, flow);
  }

  Status Error(int line, const std::string& what) const {
    return InvalidArgument("template line %d: %s", line, what.c_str());
  }
  int line() const { return line_; }

  Result<Value> CallValue(const Value& fn, const std::vector<Value>& args, const KwArgs& kwargs, const std::string& what) {
    if (!fn.is_function()) {
      if (fn.is_undefined()) return Error(line_, what + " is undefined");
      return Error(line_, StrFormat("%s ('%s') is not callable", what.c_str(), TypeName(fn)));
    }
    return fn.function()(args, kwargs);
  }

  // The items a for loop or a filter walks: list elements, dict keys, string characters.
  Result<std::vector<Value>> Iterate(const Value& v) {
    switch (v.kind()) {
      case Value::Kind::kUndefined: return std::vector<Value>{};
      case Value::Kind::kArray: return v.array();
      case Value::Kind::kObject: {
        if (v.is_namespace()) break;
        std::vector<Value> keys;
        for (const auto& [k, x] : v.object().items) keys.push_back(Value(k));
        return keys;
      }
      case Value::Kind::kString: {
        std::vector<Value> chars;
        for (std::string& cp : CodePoints(v.str())) chars.push_back(Value(std::move(cp)));
        return chars;
      }
      default: break;
    }
    return Error(line_, StrFormat("'%s' object is not iterable", TypeName(v)));
  }

  Result<Value> ApplyFilter(const std::string& name, const Value& subject, const std::vector<Value>& args,
                            const KwArgs& kwargs) {
    const auto it = Filters().find(name);
    if (it == Filters().end()) return Error(line_, "the filter '" + name + "' is not supported");
    return it->second(*this, subject, Args{args, kwargs});
  }

  Result<bool> ApplyTest(const std::string& name, const Value& subject, const std::vector<Value>& args,
                         const KwArgs& kwargs) {
    const auto it = Tests().find(name);
    if (it == Tests().end()) return Error(line_, "the test '" + name + "' is not supported");
    return it->second(*this, subject, Args{args, kwargs});
  }

  // obj.name / obj[name] as Jinja's getattr: a dict's member, else undefined.
  Value Member(const Value& obj, const Value& key) {
    if (obj.is_object()) return key.is_string() ? obj.Get(key.str()) : Value();
    if ((obj.is_array() || obj.is_string()) && key.is_number() && !key.is_float()) {
      if (obj.is_array()) {
        const int64_t n = static_cast<int64_t>(obj.array().size());
        int64_t i = key.as_int();
        if (i < 0) i += n;
        return i >= 0 && i < n ? obj.array()[i] : Value();
      }
      const std::vector<std::string> cps = CodePoints(obj.str());
      const int64_t n = static_cast<int64_t>(cps.size());
      int64_t i = key.as_int();
      if (i < 0) i += n;
      return i >= 0 && i < n ? Value(cps[i]) : Value();
    }
    return {};
  }

 private:
  void AddGlobals() {
    auto& g = globals_;
    g["raise_exception"] = Value::MakeFunction([this](const std::vector<Value>& a, const KwArgs&) -> Result<Value> {
      return InvalidArgument("template line %d: the template raised an error: %s", line_,
                             a.empty() ? "" : a[0].ToString().c_str());
    });
    g["namespace"] = Value::MakeFunction([](const std::vector<Value>& a, const KwArgs& kw) -> Result<Value> {
      Value ns = Value::MakeNamespace();
      if (!a.empty() && a[0].is_object()) {
        for (const auto& [k, v] : a[0].object().items) ns.mutable_object().Set(k, v);
      }
      for (const auto& [k, v] : kw) ns.mutable_object().Set(k, v);
      return ns;
    });
    g["dict"] = Value::MakeFunction([](const std::vector<Value>& a, const KwArgs& kw) -> Result<Value> {
      Value d = Value::MakeObject();
      if (!a.empty() && a[0].is_object()) {
        for (const auto& [k, v] : a[0].object().items) d.mutable_object().Set(k, v);
      }
      for (const auto& [k, v] : kw) d.mutable_object().Set(k, v);
      return d;
    });
    g["range"] = Value::MakeFunction([this](const std::vector<Value>& a, const KwArgs&) -> Result<Value> {
      int64_t start = 0, stop = 0, step = 1;
      for (const Value& v : a) {
        if (!v.is_number() || v.is_float()) return Error(line_, "range() takes integers");
      }
      if (a.size() == 1) {
        stop = a[0].as_int();
      } else if (a.size() >= 2) {
        start = a[0].as_int();
        stop = a[1].as_int();
        if (a.size() >= 3) step = a[2].as_int();
      } else {
        return Error(line_, "range() needs an argument");
      }
      if (step == 0) return Error(line_, "range() step must not be zero");
      Array out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (static_cast<int64_t>(out.size()) >= kMaxItems) return Error(line_, "range() is too long");
        out.push_back(Value(i));
      }
      return Value::MakeArray(std::move(out));
    });
    g["strftime_now"] = Value::MakeFunction([this](const std::vector<Value>& a, const KwArgs&) -> Result<Value> {
      if (a.empty() || !a[0].is_string()) return Error(line_, "strftime_now() takes a format string");
      const std::time_t now = std::time(nullptr);
      std::tm tm{};
      localtime_r(&now, &tm);
      char buf[512];
      const size_t n = std::strftime(buf, sizeof buf, a[0].str().c_str(), &tm);
      return Value(std::string(buf, n));
    });
  }

  Value Lookup(const std::string& name, const Frame& f) const {
    for (const Frame* p = &f; p != nullptr; p = p->parent) {
      const auto it = p->vars.find(name);
      if (it != p->vars.end()) return it->second;
    }
    const auto it = globals_.find(name);
    return it == globals_.end() ? Value() : it->second;
  }

  Status Append(std::string& out, const std::string& s) {
    out += s;
    if (out.size() > kMaxOutput) return Error(line_, StrFormat("the output exceeds %zu bytes", kMaxOutput));
    return Status::Ok();
  }

  Status Exec(const Body& body, Frame& f, std::string& out, Flow& flow) {
    for (const NodeP& n : body) {
      DAISY_RETURN_IF_ERROR(ExecNode(*n, f, out, flow));
      if (flow != Flow::kNormal) return Status::Ok();
    }
    return Status::Ok();
  }

  Status Assign(Frame& f, const std::vector<std::string>& targets, const Value& v) {
    if (targets.size() == 1) {
      f.vars[targets[0]] = v;
      return Status::Ok();
    }
    if (!v.is_array() || v.array().size() != targets.size()) {
      return Error(line_, StrFormat("cannot unpack %s into %zu names", TypeName(v), targets.size()));
    }
    for (size_t i = 0; i < targets.size(); ++i) f.vars[targets[i]] = v.array()[i];
    return Status::Ok();
  }

  Status ExecNode(const Node& n, Frame& f, std::string& out, Flow& flow) {
    line_ = n.line;
    switch (n.kind) {
      case Node::Kind::kText: return Append(out, n.text);
      case Node::Kind::kOutput: {
        DAISY_ASSIGN_OR_RETURN(Value v, Eval(*n.expr, f));
        return Append(out, v.ToString());
      }
      case Node::Kind::kIf: {
        for (size_t i = 0; i < n.conds.size(); ++i) {
          DAISY_ASSIGN_OR_RETURN(Value c, Eval(*n.conds[i], f));
          if (c.Truthy()) return Exec(n.bodies[i], f, out, flow);
        }
        if (n.bodies.size() > n.conds.size()) return Exec(n.bodies.back(), f, out, flow);
        return Status::Ok();
      }
      case Node::Kind::kFor: return ExecFor(n, f, out);
      case Node::Kind::kSet: {
        DAISY_ASSIGN_OR_RETURN(Value v, Eval(*n.expr, f));
        if (!n.attr.empty()) {
          Value ns = Lookup(n.targets[0], f);
          if (!ns.is_namespace()) {
            return Error(n.line, StrFormat("cannot set an attribute of '%s' (only of a namespace())", n.targets[0].c_str()));
          }
          ns.mutable_object().Set(n.attr, std::move(v));
          return Status::Ok();
        }
        return Assign(f, n.targets, v);
      }
      case Node::Kind::kSetBlock: {
        std::string captured;
        Flow inner = Flow::kNormal;
        DAISY_RETURN_IF_ERROR(Exec(n.bodies[0], f, captured, inner));
        Value v(std::move(captured));
        if (n.expr) {
          DAISY_ASSIGN_OR_RETURN(v, ApplyChain(*n.expr, v, f));
        }
        f.vars[n.targets[0]] = std::move(v);
        return Status::Ok();
      }
      case Node::Kind::kMacro: {
        f.vars[n.name] = MakeMacro(n);
        return Status::Ok();
      }
      case Node::Kind::kBreak: flow = Flow::kBreak; return Status::Ok();
      case Node::Kind::kContinue: flow = Flow::kContinue; return Status::Ok();
      case Node::Kind::kFilterBlock: {
        std::string captured;
        DAISY_RETURN_IF_ERROR(Exec(n.bodies[0], f, captured, flow));
        DAISY_ASSIGN_OR_RETURN(Value v, ApplyChain(*n.expr, Value(std::move(captured)), f));
        return Append(out, v.ToString());
      }
      case Node::Kind::kSequence: return Exec(n.bodies[0], f, out, flow);
    }
    return Status::Ok();
  }

  Status ExecFor(const Node& n, Frame& f, std::string& out) {
    DAISY_ASSIGN_OR_RETURN(Value seq, Eval(*n.expr, f));
    if (seq.is_none()) return Error(n.line, "'NoneType' object is not iterable");
    DAISY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(seq));
    if (n.cond) {  // {% for x in xs if cond %}: filtered before the loop counts
      std::vector<Value> kept;
      for (const Value& item : items) {
        Frame probe{{}, &f};
        DAISY_RETURN_IF_ERROR(Assign(probe, n.targets, item));
        DAISY_ASSIGN_OR_RETURN(Value c, Eval(*n.cond, probe));
        if (c.Truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      Frame inner{{}, &f};
      Flow flow = Flow::kNormal;
      return Exec(n.bodies[1], inner, out, flow);
    }
    const int64_t len = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < len; ++i) {
      Frame inner{{}, &f};
      DAISY_RETURN_IF_ERROR(Assign(inner, n.targets, items[i]));
      Value loop = Value::MakeObject();
      Object& o = loop.mutable_object();
      o.Set("index", Value(i + 1));
      o.Set("index0", Value(i));
      o.Set("revindex", Value(len - i));
      o.Set("revindex0", Value(len - i - 1));
      o.Set("first", Value(i == 0));
      o.Set("last", Value(i == len - 1));
      o.Set("length", Value(len));
      o.Set("depth", Value(int64_t{1}));
      o.Set("depth0", Value(int64_t{0}));
      if (i > 0) o.Set("previtem", items[i - 1]);
      if (i + 1 < len) o.Set("nextitem", items[i + 1]);
      o.Set("cycle", Value::MakeFunction([i, this](const std::vector<Value>& a, const KwArgs&) -> Result<Value> {
        if (a.empty()) return Error(line_, "loop.cycle() needs values");
        return a[static_cast<size_t>(i) % a.size()];
      }));
      inner.vars["loop"] = std::move(loop);
      Flow flow = Flow::kNormal;
      DAISY_RETURN_IF_ERROR(Exec(n.bodies[0], inner, out, flow));
      line_ = n.line;
      if (flow == Flow::kBreak) break;
    }
    return Status::Ok();
  }

  Value MakeMacro(const Node& n) {
    const Node* node = &n;
    return Value::MakeFunction([this, node](const std::vector<Value>& args, const KwArgs& kwargs) -> Result<Value> {
      if (args.size() > node->params.size()) {
        return Error(line_, StrFormat("macro '%s' takes %zu arguments, %zu given", node->name.c_str(),
                                      node->params.size(), args.size()));
      }
      if (++depth_ > kMaxDepth) {
        --depth_;
        return Error(line_, StrFormat("macro calls nested deeper than %d", kMaxDepth));
      }
      Frame frame{{}, &root_};
      for (const auto& kv : kwargs) {
        const std::string& k = kv.first;
        const bool known = std::any_of(node->params.begin(), node->params.end(), [&](const auto& p) { return p.first == k; });
        if (!known) {
          --depth_;
          return Error(line_, StrFormat("macro '%s' has no argument '%s'", node->name.c_str(), k.c_str()));
        }
      }
      const int call_line = line_;
      for (size_t i = 0; i < node->params.size(); ++i) {
        const auto& [name, def] = node->params[i];
        Value v;
        bool given = false;
        for (const auto& [k, kv] : kwargs) {
          if (k == name) {
            v = kv;
            given = true;
          }
        }
        if (!given && i < args.size()) {
          v = args[i];
          given = true;
        }
        if (!given && def) {
          Result<Value> d = Eval(*def, frame);
          if (!d.ok()) {
            --depth_;
            return d.status();
          }
          v = std::move(*d);
        }
        frame.vars[name] = std::move(v);
      }
      std::string out;
      Flow flow = Flow::kNormal;
      const Status s = Exec(node->bodies[0], frame, out, flow);
      --depth_;
      line_ = call_line;
      if (!s.ok()) return s;
      return Value(std::move(out));
    });
  }

  // A filter chain parsed around a placeholder ({% filter %}, {% set x | f %}) applied to v.
  Result<Value> ApplyChain(const Expr& e, Value v, Frame& f) {
    if (e.kind != Expr::Kind::kFilter) return v;
    DAISY_ASSIGN_OR_RETURN(Value inner, ApplyChain(*e.args[0], std::move(v), f));
    std::vector<Value> args;
    KwArgs kwargs;
    DAISY_RETURN_IF_ERROR(EvalArgs(e, 1, f, args, kwargs));
    line_ = e.line;
    return ApplyFilter(e.name, inner, args, kwargs);
  }

  Status EvalArgs(const Expr& e, size_t from, Frame& f, std::vector<Value>& args, KwArgs& kwargs) {
    for (size_t i = from; i < e.args.size(); ++i) {
      DAISY_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i], f));
      args.push_back(std::move(v));
    }
    for (const auto& [k, x] : e.kwargs) {
      DAISY_ASSIGN_OR_RETURN(Value v, Eval(*x, f));
      kwargs.emplace_back(k, std::move(v));
    }
    return Status::Ok();
  }

  static std::string Describe(const Expr& e) {
    if (e.kind == Expr::Kind::kName) return "'" + e.name + "'";
    if (e.kind == Expr::Kind::kAttr) return Describe(*e.args[0]) + "." + e.name;
    return "a value";
  }

  Result<Value> Eval(const Expr& e, Frame& f) {
    line_ = e.line;
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.value;
      case Expr::Kind::kName: return Lookup(e.name, f);
      case Expr::Kind::kAttr: {
        DAISY_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], f));
        line_ = e.line;
        if (obj.is_undefined()) return Error(e.line, Describe(*e.args[0]) + " is undefined (reading ." + e.name + ")");
        return Member(obj, Value(e.name));
      }
      case Expr::Kind::kItem: {
        DAISY_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], f));
        DAISY_ASSIGN_OR_RETURN(Value key, Eval(*e.args[1], f));
        line_ = e.line;
        if (obj.is_undefined()) return Error(e.line, Describe(*e.args[0]) + " is undefined (reading an item)");
        return Member(obj, key);
      }
      case Expr::Kind::kSlice: return EvalSlice(e, f);
      case Expr::Kind::kCall: return EvalCall(e, f);
      case Expr::Kind::kFilter: {
        DAISY_ASSIGN_OR_RETURN(Value subject, Eval(*e.args[0], f));
        std::vector<Value> args;
        KwArgs kwargs;
        DAISY_RETURN_IF_ERROR(EvalArgs(e, 1, f, args, kwargs));
        line_ = e.line;
        return ApplyFilter(e.name, subject, args, kwargs);
      }
      case Expr::Kind::kTest: {
        DAISY_ASSIGN_OR_RETURN(Value subject, Eval(*e.args[0], f));
        std::vector<Value> args;
        KwArgs kwargs;
        DAISY_RETURN_IF_ERROR(EvalArgs(e, 1, f, args, kwargs));
        line_ = e.line;
        DAISY_ASSIGN_OR_RETURN(bool r, ApplyTest(e.name, subject, args, kwargs));
        return Value(r != e.negated);
      }
      case Expr::Kind::kNot: {
        DAISY_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], f));
        return Value(!v.Truthy());
      }
      case Expr::Kind::kNeg: {
        DAISY_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], f));
        if (v.is_float()) return Value(-v.as_double());
        if (v.is_number()) return Value(-v.as_int());
        return Error(e.line, StrFormat("bad operand type for unary -: '%s'", TypeName(v)));
      }
      case Expr::Kind::kAnd: {
        DAISY_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], f));
        if (!a.Truthy()) return a;
        return Eval(*e.args[1], f);
      }
      case Expr::Kind::kOr: {
        DAISY_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], f));
        if (a.Truthy()) return a;
        return Eval(*e.args[1], f);
      }
      case Expr::Kind::kCond: {
        DAISY_ASSIGN_OR_RETURN(Value c, Eval(*e.args[1], f));
        if (c.Truthy()) return Eval(*e.args[0], f);
        if (e.args[2]) return Eval(*e.args[2], f);
        return Value();
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        Array items;
        for (const ExprP& x : e.args) {
          DAISY_ASSIGN_OR_RETURN(Value v, Eval(*x, f));
          items.push_back(std::move(v));
        }
        return Value::MakeArray(std::move(items), e.kind == Expr::Kind::kTuple);
      }
      case Expr::Kind::kDict: {
        Value d = Value::MakeObject();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          DAISY_ASSIGN_OR_RETURN(Value k, Eval(*e.args[i], f));
          DAISY_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1], f));
          d.mutable_object().Set(k.ToString(), std::move(v));
        }
        return d;
      }
      case Expr::Kind::kBinary: {
        DAISY_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], f));
        DAISY_ASSIGN_OR_RETURN(Value b, Eval(*e.args[1], f));
        line_ = e.line;
        return Binary(e.name, a, b);
      }
    }
    return Error(e.line, "unknown expression");
  }

  Result<Value> EvalSlice(const Expr& e, Frame& f) {
    DAISY_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], f));
    int64_t bounds[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int k = 0; k < 3; ++k) {
      if (!e.args[k + 1]) continue;
      DAISY_ASSIGN_OR_RETURN(Value v, Eval(*e.args[k + 1], f));
      if (v.is_none()) continue;
      if (!v.is_number() || v.is_float()) return Error(e.line, "slice indices must be integers");
      bounds[k] = v.as_int();
      given[k] = true;
    }
    line_ = e.line;
    const int64_t step = bounds[2];
    if (step == 0) return Error(e.line, "slice step cannot be zero");
    std::vector<Value> items;
    if (obj.is_array()) {
      items = obj.array();
    } else if (obj.is_string()) {
      for (std::string& cp : CodePoints(obj.str())) items.push_back(Value(std::move(cp)));
    } else if (obj.is_undefined()) {
      return Error(e.line, Describe(*e.args[0]) + " is undefined (slicing it)");
    } else {
      return Error(e.line, StrFormat("'%s' object is not subscriptable", TypeName(obj)));
    }
    const int64_t n = static_cast<int64_t>(items.size());
    auto clamp = [&](int64_t v, bool is_start) {
      if (v < 0) v += n;
      if (step > 0) return std::clamp<int64_t>(v, 0, n);
      return std::clamp<int64_t>(v, -1, n - 1) + (is_start ? 0 : 0);
    };
    int64_t start = given[0] ? clamp(bounds[0], true) : (step > 0 ? 0 : n - 1);
    int64_t stop = given[1] ? clamp(bounds[1], false) : (step > 0 ? n : -1);
    std::vector<Value> picked;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) picked.push_back(items[i]);
    if (obj.is_string()) {
      std::string s;
      for (const Value& v : picked) s += v.str();
      return Value(std::move(s));
    }
    return Value::MakeArray(std::move(picked), obj.is_tuple());
  }

  Result<Value> EvalCall(const Expr& e, Frame& f) {
    const Expr& callee = *e.args[0];
    std::vector<Value> args;
    KwArgs kwargs;
    if (callee.kind == Expr::Kind::kAttr) {
      DAISY_ASSIGN_OR_RETURN(Value obj, Eval(*callee.args[0], f));
      DAISY_RETURN_IF_ERROR(EvalArgs(e, 1, f, args, kwargs));
      line_ = e.line;
      if (obj.is_undefined()) return Error(e.line, Describe(*callee.args[0]) + " is undefined (calling ." + callee.name + "())");
      const Value member = Member(obj, Value(callee.name));
      if (member.is_function()) return member.function()(args, kwargs);
      return CallMethod(obj, callee.name, Args{args, kwargs});
    }
    DAISY_ASSIGN_OR_RETURN(Value fn, Eval(callee, f));
    DAISY_RETURN_IF_ERROR(EvalArgs(e, 1, f, args, kwargs));
    line_ = e.line;
    return CallValue(fn, args, kwargs, Describe(callee));
  }

  Result<Value> CallMethod(const Value& obj, const std::string& name, const Args& a) {
    if (obj.is_string()) {
      const std::string& s = obj.str();
      if (name == "startswith" || name == "endswith") {
        const Value p = a.Get(0, "prefix");
        std::vector<Value> options = p.is_array() ? p.array() : std::vector<Value>{p};
        for (const Value& o : options) {
          if (!o.is_string()) return Error(line_, name + "() takes a string or a tuple of strings");
          const std::string& x = o.str();
          const bool hit = name == "startswith" ? s.compare(0, x.size(), x) == 0 && s.size() >= x.size()
                                                : s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
          if (hit) return Value(true);
        }
        return Value(false);
      }
      if (name == "strip") return Value(Strip(s, a.Get(0, "chars"), true, true));
      if (name == "lstrip") return Value(Strip(s, a.Get(0, "chars"), true, false));
      if (name == "rstrip") return Value(Strip(s, a.Get(0, "chars"), false, true));
      if (name == "split" || name == "rsplit") {
        const Value sep = a.Get(0, "sep");
        const Value max = a.Get(1, "maxsplit", Value(int64_t{-1}));
        if (sep.is_string() && sep.str().empty()) return Error(line_, "split(): empty separator");
        if (name == "rsplit" && max.as_int() >= 0) return Error(line_, "rsplit() with maxsplit is not supported");
        Array out;
        for (std::string& part : Split(s, sep, max.as_int())) out.push_back(Value(std::move(part)));
        return Value::MakeArray(std::move(out));
      }
      if (name == "splitlines") {
        Array out;
        for (std::string& part : Split(s, Value("\n"), -1)) out.push_back(Value(std::move(part)));
        if (!out.empty() && out.back().str().empty()) out.pop_back();
        return Value::MakeArray(std::move(out));
      }
      if (name == "upper") return Value(AsciiMap(s, [](int c) { return std::toupper(c); }));
      if (name == "lower") return Value(AsciiMap(s, [](int c) { return std::tolower(c); }));
      if (name == "capitalize") return Value(Capitalize(s));
      if (name == "title") return Value(Title(s));
      if (name == "replace") {
        const Value from = a.Get(0, "old"), to = a.Get(1, "new"), count = a.Get(2, "count", Value(int64_t{-1}));
        if (!from.is_string() || !to.is_string()) return Error(line_, "replace() takes strings");
        return Value(Replace(s, from.str(), to.str(), count.as_int()));
      }
      if (name == "find" || name == "rfind" || name == "count" || name == "index") {
        const Value sub = a.Get(0, "sub");
        if (!sub.is_string()) return Error(line_, name + "() takes a string");
        if (name == "count") {
          if (sub.str().empty()) return Value(static_cast<int64_t>(CodePoints(s).size() + 1));
          int64_t n = 0;
          for (size_t p = s.find(sub.str()); p != std::string::npos; p = s.find(sub.str(), p + sub.str().size())) ++n;
          return Value(n);
        }
        const size_t at = name == "rfind" ? s.rfind(sub.str()) : s.find(sub.str());
        if (at == std::string::npos) {
          if (name == "index") return Error(line_, "substring not found");
          return Value(int64_t{-1});
        }
        return Value(static_cast<int64_t>(CodePoints(s.substr(0, at)).size()));
      }
      if (name == "join") {
        DAISY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(a.Get(0, "iterable")));
        std::string out;
        for (size_t i = 0; i < items.size(); ++i) {
          if (!items[i].is_string()) return Error(line_, "join() takes strings");
          if (i > 0) out += s;
          out += items[i].str();
        }
        return Value(std::move(out));
      }
      if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum") {
        if (s.empty()) return Value(false);
        for (const std::string& cp : CodePoints(s)) {
          const uint32_t c = Decode(cp);
          const bool ok = name == "isdigit"   ? (c >= '0' && c <= '9')
                          : name == "isalpha" ? (c < 0x80 ? IsAlpha(static_cast<char>(c)) : true)
                          : name == "isspace" ? IsPySpace(cp)
                                              : (c < 0x80 ? (IsAlpha(static_cast<char>(c)) || (c >= '0' && c <= '9')) : true);
          if (!ok) return Value(false);
        }
        return Value(true);
      }
      if (name == "format") {
        std::string out;
        size_t next = 0;
        for (size_t i = 0; i < s.size(); ++i) {
          if (s[i] == '{' && i + 1 < s.size() && s[i + 1] == '{') {
            out += '{';
            ++i;
          } else if (s[i] == '}' && i + 1 < s.size() && s[i + 1] == '}') {
            out += '}';
            ++i;
          } else if (s[i] == '{') {
            const size_t close = s.find('}', i);
            if (close == std::string::npos) return Error(line_, "format(): unclosed '{'");
            const std::string field = s.substr(i + 1, close - i - 1);
            Value v;
            if (field.empty()) {
              v = a.Get(next++, "");
            } else if (std::all_of(field.begin(), field.end(), [](char c) { return c >= '0' && c <= '9'; })) {
              v = a.Get(std::stoul(field), "");
            } else {
              v = a.Get(SIZE_MAX, field.c_str());
            }
            out += v.ToString();
            i = close;
          } else {
            out += s[i];
          }
        }
        return Value(std::move(out));
      }
    } else if (obj.is_object() && !obj.is_namespace()) {
      if (name == "items") {
        Array out;
        for (const auto& [k, v] : obj.object().items) out.push_back(Value::MakeArray({Value(k), v}, true));
        return Value::MakeArray(std::move(out));
      }
      if (name == "keys" || name == "values") {
        Array out;
        for (const auto& [k, v] : obj.object().items) out.push_back(name == "keys" ? Value(k) : v);
        return Value::MakeArray(std::move(out));
      }
      if (name == "get") {
        const Value key = a.Get(0, "key");
        const Value* v = key.is_string() ? obj.object().Find(key.str()) : nullptr;
        return v != nullptr ? *v : a.Get(1, "default", Value::None());
      }
    } else if (obj.is_array()) {
      if (name == "index" || name == "count") {
        const Value x = a.Get(0, "value");
        int64_t n = 0;
        for (size_t i = 0; i < obj.array().size(); ++i) {
          if (obj.array()[i].Equals(x)) {
            if (name == "index") return Value(static_cast<int64_t>(i));
            ++n;
          }
        }
        if (name == "index") return Error(line_, "list.index(x): x not in list");
        return Value(n);
      }
      if (name == "append" || name == "extend" || name == "pop" || name == "insert" || name == "remove") {
        return Error(line_, "lists cannot be modified in a chat template (" + name + "(): the sandbox is immutable)");
      }
    }
    return Error(line_, StrFormat("'%s' object has no method '%s' (not supported)", TypeName(obj), name.c_str()));
  }


 public:
  Result<Value> PercentFormat(const std::string& fmt, const Value& args) {
    std::vector<Value> list = args.is_tuple() ? args.array() : std::vector<Value>{args};
    size_t next = 0;
    std::string out;
    for (size_t i = 0; i < fmt.size(); ++i) {
      if (fmt[i] != '%') {
        out += fmt[i];
        continue;
      }
      if (++i >= fmt.size()) return Error(line_, "incomplete format");
      Value v;
      if (fmt[i] == '%') {
        out += '%';
        continue;
      }
      if (fmt[i] == '(') {
        const size_t close = fmt.find(')', i);
        if (close == std::string::npos || !args.is_object()) return Error(line_, "bad %(name) format");
        v = args.Get(fmt.substr(i + 1, close - i - 1));
        i = close + 1;
      } else {
        if (next >= list.size()) return Error(line_, "not enough arguments for format string");
        v = list[next++];
      }
      std::string spec;
      while (i < fmt.size() && (std::isdigit(static_cast<unsigned char>(fmt[i])) || fmt[i] == '.' || fmt[i] == '-' || fmt[i] == '+' || fmt[i] == ' ' || fmt[i] == '0')) {
        spec += fmt[i++];
      }
      if (i >= fmt.size()) return Error(line_, "incomplete format");
      const char conv = fmt[i];
      switch (conv) {
        case 's': out += StrFormat(("%" + spec + "s").c_str(), v.ToString().c_str()); break;
        case 'r': out += StrFormat(("%" + spec + "s").c_str(), v.Repr().c_str()); break;
        case 'd':
        case 'i':
          if (!v.is_number()) return Error(line_, StrFormat("%%d format: a number is required, not %s", TypeName(v)));
          out += StrFormat(("%" + spec + "lld").c_str(), static_cast<long long>(v.is_float() ? std::trunc(v.as_double()) : v.as_int()));
          break;
        case 'f':
        case 'e':
        case 'g':
          if (!v.is_number()) return Error(line_, StrFormat("%%%c format: a number is required, not %s", conv, TypeName(v)));
          out += StrFormat(("%" + spec + conv).c_str(), v.as_double());
          break;
        case 'x':
        case 'X':
          if (!v.is_number() || v.is_float()) return Error(line_, "%x format: an integer is required");
          out += StrFormat(("%" + spec + "ll" + conv).c_str(), static_cast<long long>(v.as_int()));
          break;
        default: return Error(line_, StrFormat("unsupported format character '%c'", conv));
      }
    }
    if (!args.is_object() && next < list.size()) return Error(line_, "not all arguments converted during string formatting");
    return Value(std::move(out));
  }

 private:

  Result<Value> Binary(const std::string& op, const Value& a, const Value& b) {
    auto bad = [&]() {
      return Error(line_, StrFormat("unsupported operand types for %s: '%s' and '%s'", op.c_str(), TypeName(a), TypeName(b)));
    };
    if (op == "==") return Value(a.Equals(b));
    if (op == "!=") return Value(!a.Equals(b));
    if (op == "~") return Value(a.ToString() + b.ToString());
    if (op == "in" || op == "not in") {
      DAISY_ASSIGN_OR_RETURN(bool r, Contains(b, a));
      return Value(op == "in" ? r : !r);
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int cmp = 0;
      if (a.is_number() && b.is_number()) {
        const double x = a.as_double(), y = b.as_double();
        cmp = x < y ? -1 : x > y ? 1 : 0;
      } else if (a.is_string() && b.is_string()) {
        cmp = a.str().compare(b.str());
      } else {
        return Error(line_, StrFormat("'%s' not supported between '%s' and '%s'", op.c_str(), TypeName(a), TypeName(b)));
      }
      const bool r = op == "<" ? cmp < 0 : op == ">" ? cmp > 0 : op == "<=" ? cmp <= 0 : cmp >= 0;
      return Value(r);
    }
    if (op == "+") {
      if (a.is_string() && b.is_string()) return Value(a.str() + b.str());
      if (a.is_array() && b.is_array() && a.is_tuple() == b.is_tuple()) {
        Array out = a.array();
        out.insert(out.end(), b.array().begin(), b.array().end());
        return Value::MakeArray(std::move(out), a.is_tuple());
      }
    }
    if (op == "%" && a.is_string()) return PercentFormat(a.str(), b);
    if (op == "*" && ((a.is_string() || a.is_array()) && b.is_number() && !b.is_float())) {
      const int64_t n = std::max<int64_t>(0, b.as_int());
      const int64_t size = a.is_string() ? static_cast<int64_t>(a.str().size()) : static_cast<int64_t>(a.array().size());
      if (n > 0 && size > kMaxItems / n) return Error(line_, "a repetition is too long");
      if (a.is_string()) {
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += a.str();
        return Value(std::move(out));
      }
      Array out;
      for (int64_t i = 0; i < n; ++i) out.insert(out.end(), a.array().begin(), a.array().end());
      return Value::MakeArray(std::move(out), a.is_tuple());
    }
    if (!a.is_number() || !b.is_number()) return bad();
    const bool floats = a.is_float() || b.is_float();
    if (op == "/") {
      if (b.as_double() == 0) return Error(line_, "division by zero");
      return Value(a.as_double() / b.as_double());
    }
    if (op == "**") {
      if (!floats && b.as_int() >= 0) {
        const double r = std::pow(static_cast<double>(a.as_int()), static_cast<double>(b.as_int()));
        if (std::fabs(r) < 9.2e18) {
          int64_t out = 1;
          for (int64_t i = 0; i < b.as_int(); ++i) out *= a.as_int();
          return Value(out);
        }
        return Value(r);
      }
      return Value(std::pow(a.as_double(), b.as_double()));
    }
    if (floats) {
      const double x = a.as_double(), y = b.as_double();
      if (op == "+") return Value(x + y);
      if (op == "-") return Value(x - y);
      if (op == "*") return Value(x * y);
      if (y == 0 && (op == "//" || op == "%")) return Error(line_, "division by zero");
      if (op == "//") return Value(std::floor(x / y));
      if (op == "%") {
        double m = std::fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return Value(m);
      }
      return bad();
    }
    const int64_t x = a.as_int(), y = b.as_int();
    int64_t r = 0;
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) return Value(static_cast<double>(x) + static_cast<double>(y));
      return Value(r);
    }
    if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) return Value(static_cast<double>(x) - static_cast<double>(y));
      return Value(r);
    }
    if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) return Value(static_cast<double>(x) * static_cast<double>(y));
      return Value(r);
    }
    if (y == 0) return Error(line_, "integer division or modulo by zero");
    if (op == "//") return Value(FloorDiv(x, y));
    if (op == "%") return Value(x - FloorDiv(x, y) * y);
    return bad();
  }

 public:
  Result<bool> Contains(const Value& container, const Value& item) {
    switch (container.kind()) {
      case Value::Kind::kUndefined: return false;
      case Value::Kind::kString:
        if (!item.is_string()) return Error(line_, StrFormat("'in <string>' requires a string, not %s", TypeName(item)));
        return container.str().find(item.str()) != std::string::npos;
      case Value::Kind::kArray:
        for (const Value& v : container.array()) {
          if (v.Equals(item)) return true;
        }
        return false;
      case Value::Kind::kObject: return item.is_string() && container.object().Find(item.str()) != nullptr;
      default: return Error(line_, StrFormat("argument of type '%s' is not iterable", TypeName(container)));
    }
  }

 private:
  Frame root_;
  std::unordered_map<std::string, Value> globals_;
  int line_ = 0;
  int depth_ = 0;
};

// ---- filters ---------------------------------------------------------------------------

Result<Value> Attribute(Renderer& r, const Value& item, const Value& attr) {
  if (!attr.is_string()) return item;
  Value v = item;
  for (const std::string& part : StrSplit(attr.str(), '.')) {
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = r.Member(v, digits ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
  }
  return v;
}

Result<Value> FLength(Renderer& r, const Value& v, const Args&) {
  if (v.is_string()) return Value(static_cast<int64_t>(CodePoints(v.str()).size()));
  if (v.is_array()) return Value(static_cast<int64_t>(v.array().size()));
  if (v.is_object()) return Value(static_cast<int64_t>(v.object().items.size()));
  if (v.is_undefined()) return Value(int64_t{0});
  return r.Error(r.line(), StrFormat("object of type '%s' has no len()", TypeName(v)));
}

Result<Value> FTojson(Renderer& r, const Value& v, const Args& a) {
  const Value indent = a.Get(0, "indent");
  const Value sort = a.Get(99, "sort_keys", Value(false));
  const Value separators = a.Get(99, "separators");
  if (!separators.is_undefined() && !separators.is_none()) {
    return r.Error(r.line(), "tojson(separators=...) is not supported");
  }
  int width = -1;
  if (indent.is_number() && !indent.is_float()) width = static_cast<int>(std::clamp<int64_t>(indent.as_int(), 0, 64));
  Result<std::string> s = ToJson(v, width, sort.Truthy());
  if (!s.ok()) return r.Error(r.line(), s.status().message());
  return Value(std::move(*s));
}

Result<Value> FTrim(Renderer&, const Value& v, const Args& a) { return Value(Strip(v.ToString(), a.Get(0, "chars"), true, true)); }
Result<Value> FString(Renderer&, const Value& v, const Args&) { return Value(v.ToString()); }
Result<Value> FSafe(Renderer&, const Value& v, const Args&) { return v; }
Result<Value> FUpper(Renderer&, const Value& v, const Args&) {
  return Value(AsciiMap(v.ToString(), [](int c) { return std::toupper(c); }));
}
Result<Value> FLower(Renderer&, const Value& v, const Args&) {
  return Value(AsciiMap(v.ToString(), [](int c) { return std::tolower(c); }));
}
Result<Value> FCapitalize(Renderer&, const Value& v, const Args&) { return Value(Capitalize(v.ToString())); }
Result<Value> FTitle(Renderer&, const Value& v, const Args&) { return Value(Title(v.ToString())); }
Result<Value> FEscape(Renderer&, const Value& v, const Args&) { return Value(HtmlEscape(v.ToString())); }

Result<Value> FItems(Renderer& r, const Value& v, const Args&) {
  if (v.is_undefined()) return Value::MakeArray();
  if (!v.is_object() || v.is_namespace()) return r.Error(r.line(), StrFormat("items: a dict is required, not %s", TypeName(v)));
  Array out;
  for (const auto& [k, x] : v.object().items) out.push_back(Value::MakeArray({Value(k), x}, true));
  return Value::MakeArray(std::move(out));
}

Result<Value> FDictsort(Renderer& r, const Value& v, const Args& a) {
  DAISY_ASSIGN_OR_RETURN(Value items, FItems(r, v, a));
  Array out = items.array();
  std::stable_sort(out.begin(), out.end(), [](const Value& x, const Value& y) { return x.array()[0].str() < y.array()[0].str(); });
  return Value::MakeArray(std::move(out));
}

Result<Value> FList(Renderer& r, const Value& v, const Args&) {
  DAISY_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(v));
  return Value::MakeArray(std::move(items));
}

Result<Value> FFirst(Renderer& r, const Value& v, const Args&) {
  DAISY_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(v));
  return items.empty() ? Value() : items.front();
}
Result<Value> FLast(Renderer& r, const Value& v, const Args&) {
  DAISY_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(v));
  return items.empty() ? Value() : items.back();
}

Result<Value> FReverse(Renderer& r, const Value& v, const Args&) {
  DAISY_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(v));
  std::reverse(items.begin(), items.end());
  if (v.is_string()) {
    std::string s;
    for (const Value& c : items) s += c.str();
    return Value(std::move(s));
  }
  return Value::MakeArray(std::move(items));
}

Result<Value> FJoin(Renderer& r, const Value& v, const Args& a) {
  const Value sep = a.Get(0, "d", Value(""));
  const Value attr = a.Get(1, "attribute");
  DAISY_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(v));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep.ToString();
    DAISY_ASSIGN_OR_RETURN(Value x, Attribute(r, items[i], attr));
    out += x.ToString();
  }
  return Value(std::move(out));
}

Result<Value> FDefault(Renderer&, const Value& v, const Args& a) {
  const Value def = a.Get(0, "default_value", Value(""));
  const bool boolean = a.Get(1, "boolean", Value(false)).Truthy();
  if (v.is_undefined() || (boolean && !v.Truthy())) return def;
  return v;
}

Result<Value> FReplace(Renderer& r, const Value& v, const Args& a) {
  const Value from = a.Get(0, "old"), to = a.Get(1, "new"), count = a.Get(2, "count", Value::None());
  if (!from.is_string() || !to.is_string()) return r.Error(r.line(), "replace: strings are required");
  return Value(Replace(v.ToString(), from.str(), to.str(), count.is_none() ? -1 : count.as_int()));
}

Result<Value> FInt(Renderer&, const Value& v, const Args& a) {
  const Value def = a.Get(0, "default", Value(int64_t{0}));
  if (v.is_float()) return Value(static_cast<int64_t>(std::trunc(v.as_double())));
  if (v.is_number()) return Value(v.as_int());
  if (v.is_string()) {
    const std::string s = Strip(v.str(), Value(), true, true);
    char* end = nullptr;
    errno = 0;
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && *end == '\0' && errno == 0) return Value(static_cast<int64_t>(i));
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return Value(static_cast<int64_t>(std::trunc(d)));
  }
  return def;
}

Result<Value> FFloat(Renderer&, const Value& v, const Args& a) {
  const Value def = a.Get(0, "default", Value(0.0));
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    const std::string s = Strip(v.str(), Value(), true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return Value(d);
  }
  return def;
}

Result<Value> FAbs(Renderer& r, const Value& v, const Args&) {
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  if (v.is_number()) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  return r.Error(r.line(), StrFormat("bad operand type for abs(): '%s'", TypeName(v)));
}

Result<Value> FRound(Renderer& r, const Value& v, const Args& a) {
  if (!v.is_number()) return r.Error(r.line(), "round: a number is required");
  const int64_t precision = a.Get(0, "precision", Value(int64_t{0})).as_int();
  const std::string method = a.Get(1, "method", Value("common")).ToString();
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  double y = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
  return Value(y / scale);
}

Result<Value> FIndent(Renderer&, const Value& v, const Args& a) {
  const Value w = a.Get(0, "width", Value(int64_t{4}));
  const std::string pad = w.is_string() ? w.str() : std::string(static_cast<size_t>(std::clamp<int64_t>(w.as_int(), 0, 256)), ' ');
  const bool first = a.Get(1, "first", Value(false)).Truthy();
  const bool blank = a.Get(2, "blank", Value(false)).Truthy();
  const std::vector<std::string> lines = Split(v.ToString(), Value("\n"), -1);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    const bool indent = (i > 0 || first) && (blank || !Strip(lines[i], Value(), true, true).empty());
    out += (indent ? pad : "") + lines[i];
  }
  return Value(std::move(out));
}

Result<Value> FWordcount(Renderer&, const Value& v, const Args&) {
  return Value(static_cast<int64_t>(Split(v.ToString(), Value(), -1).size()));
}

Result<Value> FUnique(Renderer& r, const Value& v, const Args& a) {
  const Value attr = a.Get(1, "attribute");
  DAISY_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(v));
  Array out, keys;
  for (const Value& x : items) {
    DAISY_ASSIGN_OR_RETURN(Value k, Attribute(r, x, attr));
    if (std::none_of(keys.begin(), keys.end(), [&](const Value& y) { return y.Equals(k); })) {
      keys.push_back(k);
      out.push_back(x);
    }
  }
  return Value::MakeArray(std::move(out));
}

Result<Value> FSort(Renderer& r, const Value& v, const Args& a) {
  const bool reverse = a.Get(0, "reverse", Value(false)).Truthy();
  const bool case_sensitive = a.Get(1, "case_sensitive", Value(false)).Truthy();
  const Value attr = a.Get(2, "attribute");
  DAISY_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(v));
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& x : items) {
    DAISY_ASSIGN_OR_RETURN(Value k, Attribute(r, x, attr));
    if (k.is_string() && !case_sensitive) k = Value(AsciiMap(k.str(), [](int c) { return std::tolower(c); }));
    keyed.emplace_back(k, x);
  }
  bool bad = false;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    if (x.first.is_number() && y.first.is_number()) return reverse ? y.first.as_double() < x.first.as_double() : x.first.as_double() < y.first.as_double();
    if (x.first.is_string() && y.first.is_string()) return reverse ? y.first.str() < x.first.str() : x.first.str() < y.first.str();
    bad = true;
    return false;
  });
  if (bad) return r.Error(r.line(), "sort: values of different types cannot be ordered");
  Array out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::MakeArray(std::move(out));
}

Result<Value> MinMax(Renderer& r, const Value& v, const Args& a, bool max) {
  const Value attr = a.Get(1, "attribute");
  DAISY_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(v));
  if (items.empty()) return Value();
  Value best = items[0];
  DAISY_ASSIGN_OR_RETURN(Value best_key, Attribute(r, best, attr));
  for (size_t i = 1; i < items.size(); ++i) {
    DAISY_ASSIGN_OR_RETURN(Value k, Attribute(r, items[i], attr));
    const bool better = k.is_number() && best_key.is_number() ? (max ? k.as_double() > best_key.as_double() : k.as_double() < best_key.as_double())
                        : k.is_string() && best_key.is_string() ? (max ? k.str() > best_key.str() : k.str() < best_key.str())
                                                                : false;
    if (better) {
      best = items[i];
      best_key = k;
    }
  }
  return best;
}
Result<Value> FMax(Renderer& r, const Value& v, const Args& a) { return MinMax(r, v, a, true); }
Result<Value> FMin(Renderer& r, const Value& v, const Args& a) { return MinMax(r, v, a, false); }

Result<Value> FSum(Renderer& r, const Value& v, const Args& a) {
  const Value attr = a.Get(0, "attribute");
  Value total = a.Get(1, "start", Value(int64_t{0}));
  DAISY_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(v));
  for (const Value& x : items) {
    DAISY_ASSIGN_OR_RETURN(Value k, Attribute(r, x, attr));
    if (!k.is_number() || !total.is_number()) return r.Error(r.line(), "sum: numbers are required");
    total = total.is_float() || k.is_float() ? Value(total.as_double() + k.as_double()) : Value(total.as_int() + k.as_int());
  }
  return total;
}

Result<Value> FAttr(Renderer& r, const Value& v, const Args& a) { return Attribute(r, v, a.Get(0, "name")); }

// select / reject (by a test or truthiness) and selectattr / rejectattr (on an attribute).
Result<Value> SelectImpl(Renderer& r, const Value& v, const Args& a, bool on_attr, bool keep) {
  DAISY_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(v));
  const size_t first = on_attr ? 1 : 0;
  const Value attr = on_attr ? a.Get(0, "attribute") : Value();
  const Value test = first < a.pos.size() ? a.pos[first] : Value();
  std::vector<Value> test_args(a.pos.begin() + std::min(a.pos.size(), first + 1), a.pos.end());
  Array out;
  for (const Value& x : items) {
    Value subject = x;
    if (on_attr) {
      DAISY_ASSIGN_OR_RETURN(subject, Attribute(r, x, attr));
    }
    bool pass = subject.Truthy();
    if (test.is_string()) {
      DAISY_ASSIGN_OR_RETURN(pass, r.ApplyTest(test.str(), subject, test_args, {}));
    }
    if (pass == keep) out.push_back(x);
  }
  return Value::MakeArray(std::move(out));
}
Result<Value> FSelect(Renderer& r, const Value& v, const Args& a) { return SelectImpl(r, v, a, false, true); }
Result<Value> FReject(Renderer& r, const Value& v, const Args& a) { return SelectImpl(r, v, a, false, false); }
Result<Value> FSelectattr(Renderer& r, const Value& v, const Args& a) { return SelectImpl(r, v, a, true, true); }
Result<Value> FRejectattr(Renderer& r, const Value& v, const Args& a) { return SelectImpl(r, v, a, true, false); }

Result<Value> FMap(Renderer& r, const Value& v, const Args& a) {
  DAISY_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(v));
  const Value attr = a.Get(99, "attribute");
  Array out;
  if (!attr.is_undefined()) {
    const Value def = a.Get(99, "default");
    for (const Value& x : items) {
      DAISY_ASSIGN_OR_RETURN(Value m, Attribute(r, x, attr));
      out.push_back(m.is_undefined() && !def.is_undefined() ? def : m);
    }
    return Value::MakeArray(std::move(out));
  }
  if (a.pos.empty() || !a.pos[0].is_string()) return r.Error(r.line(), "map: a filter name or attribute= is required");
  std::vector<Value> rest(a.pos.begin() + 1, a.pos.end());
  for (const Value& x : items) {
    DAISY_ASSIGN_OR_RETURN(Value m, r.ApplyFilter(a.pos[0].str(), x, rest, {}));
    out.push_back(std::move(m));
  }
  return Value::MakeArray(std::move(out));
}

Result<Value> FFormat(Renderer& r, const Value& v, const Args& a) {
  // "fmt" | format(x, y) is "fmt" % (x, y).
  const Value args = a.pos.size() == 1 && a.pos[0].is_object() ? a.pos[0] : Value::MakeArray(a.pos, true);
  return r.PercentFormat(v.ToString(), args);
}

const std::map<std::string, FilterFn>& Filters() {
  static const std::map<std::string, FilterFn> filters = {
      {"abs", FAbs},           {"attr", FAttr},         {"capitalize", FCapitalize}, {"count", FLength},
      {"d", FDefault},         {"default", FDefault},   {"dictsort", FDictsort},     {"e", FEscape},
      {"escape", FEscape},     {"first", FFirst},       {"float", FFloat},           {"format", FFormat},
      {"indent", FIndent},     {"int", FInt},           {"items", FItems},           {"join", FJoin},
      {"last", FLast},         {"length", FLength},     {"list", FList},             {"lower", FLower},
      {"map", FMap},           {"max", FMax},           {"min", FMin},               {"reject", FReject},
      {"rejectattr", FRejectattr}, {"replace", FReplace}, {"reverse", FReverse},     {"round", FRound},
      {"safe", FSafe},         {"select", FSelect},     {"selectattr", FSelectattr}, {"sort", FSort},
      {"string", FString},     {"sum", FSum},           {"title", FTitle},           {"tojson", FTojson},
      {"trim", FTrim},         {"unique", FUnique},     {"upper", FUpper},           {"wordcount", FWordcount},
  };
  return filters;
}

// ---- tests -----------------------------------------------------------------------------

Result<bool> TDefined(Renderer&, const Value& v, const Args&) { return !v.is_undefined(); }
Result<bool> TUndefined(Renderer&, const Value& v, const Args&) { return v.is_undefined(); }
Result<bool> TNone(Renderer&, const Value& v, const Args&) { return v.is_none(); }
Result<bool> TBoolean(Renderer&, const Value& v, const Args&) { return v.is_bool(); }
Result<bool> TTrue(Renderer&, const Value& v, const Args&) { return v.is_bool() && v.as_bool(); }
Result<bool> TFalse(Renderer&, const Value& v, const Args&) { return v.is_bool() && !v.as_bool(); }
Result<bool> TInteger(Renderer&, const Value& v, const Args&) { return v.is_int(); }
Result<bool> TFloat(Renderer&, const Value& v, const Args&) { return v.is_float(); }
Result<bool> TNumber(Renderer&, const Value& v, const Args&) { return v.is_number(); }
Result<bool> TString(Renderer&, const Value& v, const Args&) { return v.is_string(); }
Result<bool> TMapping(Renderer&, const Value& v, const Args&) { return v.is_object() && !v.is_namespace(); }
Result<bool> TIterable(Renderer&, const Value& v, const Args&) {
  return v.is_undefined() || v.is_string() || v.is_array() || (v.is_object() && !v.is_namespace());
}
Result<bool> TSequence(Renderer&, const Value& v, const Args&) {
  return v.is_undefined() || v.is_string() || v.is_array() || (v.is_object() && !v.is_namespace());
}
Result<bool> TCallable(Renderer&, const Value& v, const Args&) { return v.is_function(); }
Result<bool> TOdd(Renderer& r, const Value& v, const Args&) {
  if (!v.is_number() || v.is_float()) return r.Error(r.line(), "odd: an integer is required");
  return v.as_int() % 2 != 0;
}
Result<bool> TEven(Renderer& r, const Value& v, const Args&) {
  if (!v.is_number() || v.is_float()) return r.Error(r.line(), "even: an integer is required");
  return v.as_int() % 2 == 0;
}
Result<bool> TDivisibleby(Renderer& r, const Value& v, const Args& a) {
  const Value n = a.Get(0, "num");
  if (!v.is_number() || !n.is_number() || n.as_double() == 0) return r.Error(r.line(), "divisibleby: numbers are required");
  return std::fmod(v.as_double(), n.as_double()) == 0;
}
Result<bool> TEq(Renderer&, const Value& v, const Args& a) { return v.Equals(a.Get(0, "other")); }
Result<bool> TNe(Renderer&, const Value& v, const Args& a) { return !v.Equals(a.Get(0, "other")); }
Result<bool> Order(Renderer& r, const Value& v, const Value& o, const char* op) {
  if (v.is_number() && o.is_number()) {
    const double x = v.as_double(), y = o.as_double();
    return op[0] == '<' ? (op[1] ? x <= y : x < y) : (op[1] ? x >= y : x > y);
  }
  if (v.is_string() && o.is_string()) {
    const int c = v.str().compare(o.str());
    return op[0] == '<' ? (op[1] ? c <= 0 : c < 0) : (op[1] ? c >= 0 : c > 0);
  }
  return r.Error(r.line(), StrFormat("'%s' not supported between '%s' and '%s'", op, TypeName(v), TypeName(o)));
}
Result<bool> TLt(Renderer& r, const Value& v, const Args& a) { return Order(r, v, a.Get(0, "other"), "<"); }
Result<bool> TLe(Renderer& r, const Value& v, const Args& a) { return Order(r, v, a.Get(0, "other"), "<="); }
Result<bool> TGt(Renderer& r, const Value& v, const Args& a) { return Order(r, v, a.Get(0, "other"), ">"); }
Result<bool> TGe(Renderer& r, const Value& v, const Args& a) { return Order(r, v, a.Get(0, "other"), ">="); }
Result<bool> TIn(Renderer& r, const Value& v, const Args& a) { return r.Contains(a.Get(0, "seq"), v); }
Result<bool> TLower(Renderer&, const Value& v, const Args&) {
  return v.is_string() && AsciiMap(v.str(), [](int c) { return std::tolower(c); }) == v.str();
}
Result<bool> TUpper(Renderer&, const Value& v, const Args&) {
  return v.is_string() && AsciiMap(v.str(), [](int c) { return std::toupper(c); }) == v.str();
}
Result<bool> TSameas(Renderer&, const Value& v, const Args& a) {
  const Value o = a.Get(0, "other");
  if (v.kind() != o.kind()) return false;
  if (v.is_none() || v.is_undefined()) return true;
  if (v.is_bool()) return v.as_bool() == o.as_bool();
  return v.Equals(o) && !v.is_array() && !v.is_object();
}

const std::map<std::string, TestFn>& Tests() {
  static const std::map<std::string, TestFn> tests = {
      {"boolean", TBoolean}, {"callable", TCallable}, {"defined", TDefined}, {"divisibleby", TDivisibleby},
      {"eq", TEq},           {"equalto", TEq},        {"==", TEq},           {"even", TEven},
      {"false", TFalse},     {"float", TFloat},       {"ge", TGe},           {">=", TGe},
      {"gt", TGt},           {">", TGt},              {"greaterthan", TGt},  {"in", TIn},
      {"integer", TInteger}, {"iterable", TIterable}, {"le", TLe},           {"<=", TLe},
      {"lower", TLower},     {"lt", TLt},             {"<", TLt},            {"lessthan", TLt},
      {"mapping", TMapping}, {"ne", TNe},             {"!=", TNe},           {"none", TNone},
      {"number", TNumber},   {"odd", TOdd},           {"sameas", TSameas},   {"sequence", TSequence},
      {"string", TString},   {"true", TTrue},         {"undefined", TUndefined}, {"upper", TUpper},
  };
  return tests;
}

}  // namespace

bool KnownFilter(const std::string& name) { return Filters().count(name) > 0; }
bool KnownTest(const std::string& name) { return Tests().count(name) > 0; }

Result<Template> Template::Parse(std::string_view source) {
  DAISY_ASSIGN_OR_RETURN(NodeP root, ParseTemplate(source));
  Template t;
  t.root_ = std::move(root);
  return t;
}

Result<std::string> Template::Render(const Value& variables) const {
  Renderer r(variables);
  std::string out;
  DAISY_RETURN_IF_ERROR(r.Render(*root_, out));
  return out;
}

}  // namespace daisy::jinja
