// Template text to syntax tree: a lexer that applies Jinja's whitespace rules (trim_blocks,
// lstrip_blocks and the - and + markers, exactly as Jinja2's lexer does) and a recursive
// descent parser with Jinja2's operator precedence.
#include <algorithm>
#include <set>

#include "base/strings.h"
#include "jinja/parse.h"

namespace daisy::jinja {
namespace {

struct Token {
  enum class Kind { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };
  Kind kind;
  std::string text;
  int line = 0;
  int64_t i = 0;
  double d = 0;
};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  Result<std::vector<Token>> Run() {
    size_t pos = 0;
    bool line_starting = true;
    const size_t n = src_.size();
    while (pos < n) {
      size_t open = std::string_view::npos;
      for (size_t p = src_.find('{', pos); p != std::string_view::npos && p + 1 < n; p = src_.find('{', p + 1)) {
        const char c = src_[p + 1];
        if (c == '{' || c == '%' || c == '#') {
          open = p;
          break;
        }
      }
      if (open == std::string_view::npos) {
        Emit(Token::Kind::kText, std::string(src_.substr(pos)), pos);
        break;
      }
      std::string text(src_.substr(pos, open - pos));
      const char kind = src_[open + 1];
      size_t p = open + 2;
      char sign = 0;
      if (p < n && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      if (sign == '-') {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: the whitespace between the line's start and a block or comment tag.
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if (l_pos > 0 || line_starting) {
          bool blank = true;
          for (size_t i = l_pos; i < text.size(); ++i) blank = blank && IsSpace(text[i]);
          if (blank) text.resize(l_pos);
        }
      }
      if (!text.empty()) Emit(Token::Kind::kText, std::move(text), pos);
      if (kind == '#') {
        const size_t close = src_.find("#}", p);
        if (close == std::string_view::npos) return Error(open, "a comment ({#) is never closed");
        pos = AfterTag(close, close + 2, true);
        line_starting = pos > 0 && src_[pos - 1] == '\n';
        continue;
      }
      if (kind == '%' && IsRaw(p)) {
        DAISY_RETURN_IF_ERROR(LexRaw(open, p, pos));
        line_starting = pos > 0 && src_[pos - 1] == '\n';
        continue;
      }
      const bool block = kind == '%';
      Emit(block ? Token::Kind::kBlockBegin : Token::Kind::kVarBegin, "", open);
      DAISY_RETURN_IF_ERROR(LexTag(block, p, pos));
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    Emit(Token::Kind::kEof, "", n);
    return std::move(tokens_);
  }

 private:
  int LineAt(size_t pos) const {
    return 1 + static_cast<int>(std::count(src_.begin(), src_.begin() + std::min(pos, src_.size()), '\n'));
  }
  void Emit(Token::Kind k, std::string text, size_t pos) { tokens_.push_back({k, std::move(text), LineAt(pos)}); }
  Status Error(size_t pos, const std::string& what) const {
    return InvalidArgument("template line %d: %s", LineAt(pos), what.c_str());
  }

  // The position after a tag whose closer starts at `close` and ends at `end`: a '-' before the
  // closer eats the whitespace that follows, else a block or comment eats one newline
  // (trim_blocks) unless marked '+'.
  size_t AfterTag(size_t close, size_t end, bool block) const {
    const char before = close > 0 ? src_[close - 1] : 0;
    size_t pos = end;
    if (before == '-') {
      while (pos < src_.size() && IsSpace(src_[pos])) ++pos;
    } else if (block && before != '+' && pos < src_.size() && src_[pos] == '\n') {
      ++pos;
    }
    return pos;
  }

  bool IsRaw(size_t p) const {
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    if (src_.substr(p, 3) != "raw") return false;
    p += 3;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    return src_.substr(p, 2) == "%}" || src_.substr(p, 3) == "-%}" || src_.substr(p, 3) == "+%}";
  }

  Status LexRaw(size_t open, size_t p, size_t& pos) {
    const size_t close = src_.find("%}", p);
    size_t body = AfterTag(close, close + 2, true);
    for (size_t q = src_.find("{%", body); q != std::string_view::npos; q = src_.find("{%", q + 2)) {
      size_t r = q + 2;
      const bool minus = r < src_.size() && src_[r] == '-';
      if (minus || (r < src_.size() && src_[r] == '+')) ++r;
      while (r < src_.size() && IsSpace(src_[r])) ++r;
      if (src_.substr(r, 6) != "endraw") continue;
      r += 6;
      while (r < src_.size() && IsSpace(src_[r])) ++r;
      const size_t end_close = src_.substr(r, 3) == "-%}" || src_.substr(r, 3) == "+%}" ? r + 1 : r;
      if (src_.substr(end_close, 2) != "%}") continue;
      std::string text(src_.substr(body, q - body));
      if (minus) {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      }
      if (!text.empty()) Emit(Token::Kind::kText, std::move(text), body);
      pos = AfterTag(end_close, end_close + 2, true);
      return Status::Ok();
    }
    return Error(open, "a {% raw %} block is never closed");
  }

  Status LexTag(bool block, size_t p, size_t& pos) {
    const size_t n = src_.size();
    int depth = 0;
    const size_t start = p;
    while (true) {
      while (p < n && IsSpace(src_[p])) ++p;
      if (p >= n) return Error(start, block ? "a {% tag is never closed" : "a {{ tag is never closed");
      if (depth == 0) {
        const std::string_view rest = src_.substr(p);
        const std::string_view closer = block ? "%}" : "}}";
        size_t close = std::string_view::npos;
        if (rest.substr(0, 2) == closer) {
          close = p;
        } else if ((rest[0] == '-' || (block && rest[0] == '+')) && rest.substr(1, 2) == closer) {
          close = p + 1;
        }
        if (close != std::string_view::npos) {
          Emit(block ? Token::Kind::kBlockEnd : Token::Kind::kVarEnd, "", p);
          pos = AfterTag(close, close + 2, block);
          return Status::Ok();
        }
      }
      const char c = src_[p];
      if (IsNameStart(c)) {
        size_t e = p;
        while (e < n && (IsNameStart(src_[e]) || IsDigit(src_[e]))) ++e;
        Emit(Token::Kind::kName, std::string(src_.substr(p, e - p)), p);
        p = e;
      } else if (IsDigit(c)) {
        size_t e = p;
        while (e < n && (IsDigit(src_[e]) || src_[e] == '_')) ++e;
        bool is_float = false;
        if (e + 1 < n && src_[e] == '.' && IsDigit(src_[e + 1])) {
          is_float = true;
          ++e;
          while (e < n && IsDigit(src_[e])) ++e;
        }
        if (e < n && (src_[e] == 'e' || src_[e] == 'E')) {
          size_t f = e + 1;
          if (f < n && (src_[f] == '+' || src_[f] == '-')) ++f;
          if (f < n && IsDigit(src_[f])) {
            is_float = true;
            e = f;
            while (e < n && IsDigit(src_[e])) ++e;
          }
        }
        std::string num;
        for (char ch : src_.substr(p, e - p)) {
          if (ch != '_') num += ch;
        }
        Token t{is_float ? Token::Kind::kFloat : Token::Kind::kInt, num, LineAt(p)};
        if (is_float) {
          t.d = std::strtod(num.c_str(), nullptr);
        } else {
          errno = 0;
          t.i = std::strtoll(num.c_str(), nullptr, 10);
          if (errno == ERANGE) return Error(p, "integer literal " + num + " is out of range");
        }
        tokens_.push_back(std::move(t));
        p = e;
      } else if (c == '\'' || c == '"') {
        std::string s;
        size_t e = p + 1;
        while (e < n && src_[e] != c) {
          if (src_[e] == '\\' && e + 1 < n) {
            DAISY_RETURN_IF_ERROR(Unescape(e, s));
          } else {
            s += src_[e++];
          }
        }
        if (e >= n) return Error(p, "a string literal is never closed");
        Emit(Token::Kind::kString, std::move(s), p);
        p = e + 1;
      } else {
        static const char* kOps2[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (const char* o : kOps2) {
          if (src_.substr(p, 2) == o) op = o;
        }
        if (op.empty()) {
          if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos) {
            return Error(p, StrFormat("unexpected character '%c' in a tag", c));
          }
          op = std::string(1, c);
          if (c == '(' || c == '[' || c == '{') ++depth;
          if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
        }
        Emit(Token::Kind::kOp, op, p);
        p += op.size();
      }
    }
  }

  // A backslash escape at src_[e] (Python's unicode-escape), appended to s; e moves past it.
  Status Unescape(size_t& e, std::string& s) {
    const char x = src_[e + 1];
    auto hex = [&](size_t at, int digits, uint32_t& cp) {
      cp = 0;
      if (at + digits > src_.size()) return false;
      for (int i = 0; i < digits; ++i) {
        const char h = src_[at + i];
        const int v = IsDigit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
        if (v < 0) return false;
        cp = cp * 16 + static_cast<uint32_t>(v);
      }
      return true;
    };
    switch (x) {
      case 'n': s += '\n'; break;
      case 't': s += '\t'; break;
      case 'r': s += '\r'; break;
      case '\\': s += '\\'; break;
      case '\'': s += '\''; break;
      case '"': s += '"'; break;
      case 'a': s += '\a'; break;
      case 'b': s += '\b'; break;
      case 'f': s += '\f'; break;
      case 'v': s += '\v'; break;
      case '0': s += '\0'; break;
      case '\n': break;
      case 'x':
      case 'u':
      case 'U': {
        const int digits = x == 'x' ? 2 : x == 'u' ? 4 : 8;
        uint32_t cp = 0;
        if (!hex(e + 2, digits, cp) || cp > 0x10FFFF) return Error(e, "a bad \\" + std::string(1, x) + " escape in a string literal");
        AppendUtf8(cp, s);
        e += 2 + digits;
        return Status::Ok();
      }
      default: s += '\\'; s += x;
    }
    e += 2;
    return Status::Ok();
  }

  std::string_view src_;
  std::vector<Token> tokens_;
};

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Result<NodeP> Run() {
    std::string stop;
    Body body;
    DAISY_RETURN_IF_ERROR(ParseBody({}, body, stop));
    auto root = std::make_shared<Node>();
    root->kind = Node::Kind::kSequence;
    root->bodies.push_back(std::move(body));
    return NodePtr(root);
  }

 private:
  static NodeP NodePtr(std::shared_ptr<Node> n) { return n; }
  const Token& Peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& Next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool IsOp(const char* op, size_t ahead = 0) const {
    return Peek(ahead).kind == Token::Kind::kOp && Peek(ahead).text == op;
  }
  bool IsName(const char* name, size_t ahead = 0) const {
    return Peek(ahead).kind == Token::Kind::kName && Peek(ahead).text == name;
  }
  Status Error(const std::string& what) const {
    return InvalidArgument("template line %d: %s", Peek().line, what.c_str());
  }
  std::string Describe(const Token& t) const {
    switch (t.kind) {
      case Token::Kind::kBlockEnd: return "'%}'";
      case Token::Kind::kVarEnd: return "'}}'";
      case Token::Kind::kEof: return "the end of the template";
      case Token::Kind::kString: return "a string";
      case Token::Kind::kInt:
      case Token::Kind::kFloat: return "a number";
      default: return "'" + t.text + "'";
    }
  }
  Status Expect(const char* op) {
    if (!IsOp(op)) return Error(StrFormat("expected '%s', found %s", op, Describe(Peek()).c_str()));
    ++i_;
    return Status::Ok();
  }
  Status ExpectBlockEnd(const std::string& what) {
    if (Peek().kind != Token::Kind::kBlockEnd) {
      return Error(StrFormat("expected the end of the {%% %s %%} tag, found %s", what.c_str(), Describe(Peek()).c_str()));
    }
    ++i_;
    return Status::Ok();
  }
  Result<std::string> ExpectName() {
    if (Peek().kind != Token::Kind::kName) return Error("expected a name, found " + Describe(Peek()));
    return Next().text;
  }

  // Statements until one of `stops` ({% stop ... %}): `stop` is set to it, and the parser is
  // left just after its name. With no stops, runs to the end of the template.
  Status ParseBody(const std::set<std::string>& stops, Body& body, std::string& stop) {
    while (true) {
      const Token& t = Peek();
      if (t.kind == Token::Kind::kEof) {
        if (stops.empty()) return Status::Ok();
        return Error(StrFormat("the template ends inside a block (expected {%% %s %%})", stops.rbegin()->c_str()));
      }
      if (t.kind == Token::Kind::kText) {
        auto n = std::make_shared<Node>();
        n->kind = Node::Kind::kText;
        n->line = t.line;
        n->text = t.text;
        body.push_back(std::move(n));
        ++i_;
      } else if (t.kind == Token::Kind::kVarBegin) {
        ++i_;
        auto n = std::make_shared<Node>();
        n->kind = Node::Kind::kOutput;
        n->line = t.line;
        DAISY_ASSIGN_OR_RETURN(n->expr, ParseTuple());
        if (Peek().kind != Token::Kind::kVarEnd) return Error("expected '}}', found " + Describe(Peek()));
        ++i_;
        body.push_back(std::move(n));
      } else if (t.kind == Token::Kind::kBlockBegin) {
        ++i_;
        if (Peek().kind != Token::Kind::kName) return Error("expected a statement name after '{%'");
        const std::string name = Peek().text;
        if (stops.count(name)) {
          ++i_;
          stop = name;
          return Status::Ok();
        }
        DAISY_ASSIGN_OR_RETURN(NodeP n, ParseStatement());
        body.push_back(std::move(n));
      } else {
        return Error("unexpected " + Describe(t));
      }
    }
  }

  Result<NodeP> ParseStatement() {
    if (++blocks_ > kMaxNesting) return Error("blocks nested deeper than 64 levels");
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{blocks_};
    const int line = Peek().line;
    const std::string name = Next().text;
    auto n = std::make_shared<Node>();
    n->line = line;
    std::string stop;
    if (name == "if") {
      n->kind = Node::Kind::kIf;
      while (true) {
        DAISY_ASSIGN_OR_RETURN(ExprP cond, ParseExpression());
        n->conds.push_back(std::move(cond));
        DAISY_RETURN_IF_ERROR(ExpectBlockEnd("if"));
        Body body;
        DAISY_RETURN_IF_ERROR(ParseBody({"elif", "else", "endif"}, body, stop));
        n->bodies.push_back(std::move(body));
        if (stop == "elif") continue;
        if (stop == "else") {
          DAISY_RETURN_IF_ERROR(ExpectBlockEnd("else"));
          Body other;
          DAISY_RETURN_IF_ERROR(ParseBody({"endif"}, other, stop));
          n->bodies.push_back(std::move(other));
        }
        return End(n, "endif");
      }
    }
    if (name == "for") {
      n->kind = Node::Kind::kFor;
      DAISY_RETURN_IF_ERROR(ParseTargets(n->targets));
      if (!IsName("in")) return Error("expected 'in' in the {% for %} tag");
      ++i_;
      DAISY_ASSIGN_OR_RETURN(n->expr, ParseTuple(/*with_cond=*/false));
      if (IsName("if")) {
        ++i_;
        DAISY_ASSIGN_OR_RETURN(n->cond, ParseExpression());
      }
      if (IsName("recursive")) return Error("recursive for loops are not supported");
      DAISY_RETURN_IF_ERROR(ExpectBlockEnd("for"));
      Body body, other;
      DAISY_RETURN_IF_ERROR(ParseBody({"else", "endfor"}, body, stop));
      if (stop == "else") {
        DAISY_RETURN_IF_ERROR(ExpectBlockEnd("else"));
        DAISY_RETURN_IF_ERROR(ParseBody({"endfor"}, other, stop));
      }
      n->bodies = {std::move(body), std::move(other)};
      return End(n, "endfor");
    }
    if (name == "set") {
      DAISY_ASSIGN_OR_RETURN(std::string first, ExpectName());
      if (IsOp(".")) {
        ++i_;
        DAISY_ASSIGN_OR_RETURN(n->attr, ExpectName());
        n->targets = {first};
      } else {
        n->targets = {first};
        while (IsOp(",")) {
          ++i_;
          DAISY_ASSIGN_OR_RETURN(std::string more, ExpectName());
          n->targets.push_back(more);
        }
      }
      if (IsOp("=")) {
        ++i_;
        n->kind = Node::Kind::kSet;
        DAISY_ASSIGN_OR_RETURN(n->expr, ParseTuple());
        DAISY_RETURN_IF_ERROR(ExpectBlockEnd("set"));
        return NodePtr(n);
      }
      if (!n->attr.empty() || n->targets.size() != 1) return Error("expected '=' in the {% set %} tag");
      n->kind = Node::Kind::kSetBlock;
      if (IsOp("|")) {  // {% set x | filter %}: the filters apply to the captured text
        auto placeholder = std::make_shared<Expr>();
        placeholder->kind = Expr::Kind::kLiteral;
        DAISY_ASSIGN_OR_RETURN(n->expr, ParseFilters(placeholder));
      }
      DAISY_RETURN_IF_ERROR(ExpectBlockEnd("set"));
      Body body;
      DAISY_RETURN_IF_ERROR(ParseBody({"endset"}, body, stop));
      n->bodies.push_back(std::move(body));
      return End(n, "endset");
    }
    if (name == "macro") {
      n->kind = Node::Kind::kMacro;
      DAISY_ASSIGN_OR_RETURN(n->name, ExpectName());
      DAISY_RETURN_IF_ERROR(Expect("("));
      while (!IsOp(")")) {
        DAISY_ASSIGN_OR_RETURN(std::string param, ExpectName());
        ExprP def;
        if (IsOp("=")) {
          ++i_;
          DAISY_ASSIGN_OR_RETURN(def, ParseExpression());
        }
        n->params.emplace_back(param, def);
        if (!IsOp(",")) break;
        ++i_;
      }
      DAISY_RETURN_IF_ERROR(Expect(")"));
      DAISY_RETURN_IF_ERROR(ExpectBlockEnd("macro"));
      Body body;
      DAISY_RETURN_IF_ERROR(ParseBody({"endmacro"}, body, stop));
      n->bodies.push_back(std::move(body));
      if (Peek().kind == Token::Kind::kName) ++i_;  // {% endmacro name %}
      return End(n, "endmacro");
    }
    if (name == "break" || name == "continue") {
      n->kind = name == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
      DAISY_RETURN_IF_ERROR(ExpectBlockEnd(name));
      return NodePtr(n);
    }
    if (name == "filter") {
      n->kind = Node::Kind::kFilterBlock;
      auto placeholder = std::make_shared<Expr>();
      placeholder->kind = Expr::Kind::kLiteral;
      --i_;  // ParseFilters expects a '|' first: parse "filter NAME ..." as "| NAME ..."
      DAISY_ASSIGN_OR_RETURN(n->expr, ParseFilters(placeholder, /*first_without_pipe=*/true));
      DAISY_RETURN_IF_ERROR(ExpectBlockEnd("filter"));
      Body body;
      DAISY_RETURN_IF_ERROR(ParseBody({"endfilter"}, body, stop));
      n->bodies.push_back(std::move(body));
      return End(n, "endfilter");
    }
    if (name == "generation") {  // transformers' assistant-mask marker: renders its body
      n->kind = Node::Kind::kSequence;
      DAISY_RETURN_IF_ERROR(ExpectBlockEnd(name));
      Body body;
      DAISY_RETURN_IF_ERROR(ParseBody({"endgeneration"}, body, stop));
      n->bodies.push_back(std::move(body));
      return End(n, "endgeneration");
    }
    --i_;
    return Error(StrFormat("the {%% %s %%} statement is not supported", EscapeForMessage(name).c_str()));
  }

  Result<NodeP> End(std::shared_ptr<Node> n, const char* what) {
    DAISY_RETURN_IF_ERROR(ExpectBlockEnd(what));
    return NodePtr(std::move(n));
  }

  Status ParseTargets(std::vector<std::string>& targets) {
    const bool paren = IsOp("(");
    if (paren) ++i_;
    while (true) {
      DAISY_ASSIGN_OR_RETURN(std::string name, ExpectName());
      targets.push_back(name);
      if (!IsOp(",")) break;
      ++i_;
    }
    if (paren) DAISY_RETURN_IF_ERROR(Expect(")"));
    return Status::Ok();
  }

  static ExprP Make(Expr::Kind k, int line, std::vector<ExprP> args, std::string name = "") {
    auto e = std::make_shared<Expr>();
    e->kind = k;
    e->line = line;
    e->args = std::move(args);
    e->name = std::move(name);
    return e;
  }

  // expr (, expr)*: a tuple when there is a comma.
  Result<ExprP> ParseTuple(bool with_cond = true) {
    const int line = Peek().line;
    DAISY_ASSIGN_OR_RETURN(ExprP first, with_cond ? ParseExpression() : ParseOr());
    if (!IsOp(",")) return first;
    std::vector<ExprP> items{first};
    while (IsOp(",")) {
      ++i_;
      if (Peek().kind == Token::Kind::kBlockEnd || Peek().kind == Token::Kind::kVarEnd) break;
      DAISY_ASSIGN_OR_RETURN(ExprP e, with_cond ? ParseExpression() : ParseOr());
      items.push_back(std::move(e));
    }
    return Make(Expr::Kind::kTuple, line, std::move(items));
  }

  Result<ExprP> ParseExpression() {
    const int line = Peek().line;
    DAISY_ASSIGN_OR_RETURN(ExprP e, ParseOr());
    if (!IsName("if")) return e;
    ++i_;
    DAISY_ASSIGN_OR_RETURN(ExprP cond, ParseOr());
    ExprP other;
    if (IsName("else")) {
      ++i_;
      DAISY_ASSIGN_OR_RETURN(other, ParseExpression());
    }
    return Make(Expr::Kind::kCond, line, {e, cond, other});
  }

  Result<ExprP> ParseOr() {
    DAISY_ASSIGN_OR_RETURN(ExprP e, ParseAnd());
    while (IsName("or")) {
      const int line = Next().line;
      DAISY_ASSIGN_OR_RETURN(ExprP r, ParseAnd());
      e = Make(Expr::Kind::kOr, line, {e, r});
    }
    return e;
  }

  Result<ExprP> ParseAnd() {
    DAISY_ASSIGN_OR_RETURN(ExprP e, ParseNot());
    while (IsName("and")) {
      const int line = Next().line;
      DAISY_ASSIGN_OR_RETURN(ExprP r, ParseNot());
      e = Make(Expr::Kind::kAnd, line, {e, r});
    }
    return e;
  }

  Result<ExprP> ParseNot() {
    if (IsName("not")) {
      const int line = Next().line;
      DAISY_ASSIGN_OR_RETURN(ExprP e, ParseNot());
      return Make(Expr::Kind::kNot, line, {e});
    }
    return ParseCompare();
  }

  Result<ExprP> ParseCompare() {
    DAISY_ASSIGN_OR_RETURN(ExprP e, ParseMath1());
    while (true) {
      std::string op;
      const int line = Peek().line;
      if (Peek().kind == Token::Kind::kOp &&
          (Peek().text == "==" || Peek().text == "!=" || Peek().text == "<" || Peek().text == ">" ||
           Peek().text == "<=" || Peek().text == ">=")) {
        op = Next().text;
      } else if (IsName("in")) {
        ++i_;
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        i_ += 2;
        op = "not in";
      } else {
        return e;
      }
      DAISY_ASSIGN_OR_RETURN(ExprP r, ParseMath1());
      e = Make(Expr::Kind::kBinary, line, {e, r}, op);
    }
  }

  Result<ExprP> ParseMath1() {
    DAISY_ASSIGN_OR_RETURN(ExprP e, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      const Token& t = Next();
      DAISY_ASSIGN_OR_RETURN(ExprP r, ParseConcat());
      e = Make(Expr::Kind::kBinary, t.line, {e, r}, t.text);
    }
    return e;
  }

  Result<ExprP> ParseConcat() {
    DAISY_ASSIGN_OR_RETURN(ExprP e, ParseMath2());
    while (IsOp("~")) {
      const int line = Next().line;
      DAISY_ASSIGN_OR_RETURN(ExprP r, ParseMath2());
      e = Make(Expr::Kind::kBinary, line, {e, r}, "~");
    }
    return e;
  }

  Result<ExprP> ParseMath2() {
    DAISY_ASSIGN_OR_RETURN(ExprP e, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token& t = Next();
      DAISY_ASSIGN_OR_RETURN(ExprP r, ParsePow());
      e = Make(Expr::Kind::kBinary, t.line, {e, r}, t.text);
    }
    return e;
  }

  Result<ExprP> ParsePow() {
    DAISY_ASSIGN_OR_RETURN(ExprP e, ParseUnary(true));
    while (IsOp("**")) {
      const int line = Next().line;
      DAISY_ASSIGN_OR_RETURN(ExprP r, ParseUnary(true));
      e = Make(Expr::Kind::kBinary, line, {e, r}, "**");
    }
    return e;
  }

  Result<ExprP> ParseUnary(bool with_filter) {
    // Nesting (parentheses, unary minus, lists, calls) is bounded: the parser recurses.
    if (++depth_ > kMaxNesting) return Error("expressions nested deeper than 64 levels");
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    ExprP e;
    const int line = Peek().line;
    if (IsOp("-")) {
      ++i_;
      DAISY_ASSIGN_OR_RETURN(ExprP inner, ParseUnary(false));
      e = Make(Expr::Kind::kNeg, line, {inner});
    } else if (IsOp("+")) {
      ++i_;
      DAISY_ASSIGN_OR_RETURN(e, ParseUnary(false));
    } else {
      DAISY_ASSIGN_OR_RETURN(e, ParsePrimary());
    }
    DAISY_ASSIGN_OR_RETURN(e, ParsePostfix(e));
    if (with_filter) {
      DAISY_ASSIGN_OR_RETURN(e, ParseFilters(e));
    }
    return e;
  }

  Result<ExprP> ParsePrimary() {
    const Token& t = Peek();
    const int line = t.line;
    auto literal = [&](Value v) {
      auto e = std::make_shared<Expr>();
      e->kind = Expr::Kind::kLiteral;
      e->line = line;
      e->value = std::move(v);
      return ExprP(e);
    };
    switch (t.kind) {
      case Token::Kind::kName: {
        ++i_;
        if (t.text == "true" || t.text == "True") return literal(Value(true));
        if (t.text == "false" || t.text == "False") return literal(Value(false));
        if (t.text == "none" || t.text == "None") return literal(Value::None());
        return Make(Expr::Kind::kName, line, {}, t.text);
      }
      case Token::Kind::kString: {
        std::string s;
        while (Peek().kind == Token::Kind::kString) s += Next().text;  // adjacent literals join
        return literal(Value(std::move(s)));
      }
      case Token::Kind::kInt: ++i_; return literal(Value(t.i));
      case Token::Kind::kFloat: ++i_; return literal(Value(t.d));
      case Token::Kind::kOp: {
        if (t.text == "(") {
          ++i_;
          if (IsOp(")")) {
            ++i_;
            return Make(Expr::Kind::kTuple, line, {});
          }
          DAISY_ASSIGN_OR_RETURN(ExprP first, ParseExpression());
          if (IsOp(")")) {
            ++i_;
            return first;
          }
          std::vector<ExprP> items{first};
          while (IsOp(",")) {
            ++i_;
            if (IsOp(")")) break;
            DAISY_ASSIGN_OR_RETURN(ExprP e, ParseExpression());
            items.push_back(std::move(e));
          }
          DAISY_RETURN_IF_ERROR(Expect(")"));
          return Make(Expr::Kind::kTuple, line, std::move(items));
        }
        if (t.text == "[") {
          ++i_;
          std::vector<ExprP> items;
          while (!IsOp("]")) {
            DAISY_ASSIGN_OR_RETURN(ExprP e, ParseExpression());
            items.push_back(std::move(e));
            if (!IsOp(",")) break;
            ++i_;
          }
          DAISY_RETURN_IF_ERROR(Expect("]"));
          return Make(Expr::Kind::kList, line, std::move(items));
        }
        if (t.text == "{") {
          ++i_;
          std::vector<ExprP> items;
          while (!IsOp("}")) {
            DAISY_ASSIGN_OR_RETURN(ExprP k, ParseExpression());
            DAISY_RETURN_IF_ERROR(Expect(":"));
            DAISY_ASSIGN_OR_RETURN(ExprP v, ParseExpression());
            items.push_back(std::move(k));
            items.push_back(std::move(v));
            if (!IsOp(",")) break;
            ++i_;
          }
          DAISY_RETURN_IF_ERROR(Expect("}"));
          return Make(Expr::Kind::kDict, line, std::move(items));
        }
        break;
      }
      default: break;
    }
    return Error("unexpected " + Describe(t) + " in an expression");
  }

  Result<ExprP> ParsePostfix(ExprP e) {
    while (true) {
      const int line = Peek().line;
      if (IsOp(".")) {
        ++i_;
        if (Peek().kind == Token::Kind::kInt) {
          auto idx = std::make_shared<Expr>();
          idx->kind = Expr::Kind::kLiteral;
          idx->value = Value(Next().i);
          e = Make(Expr::Kind::kItem, line, {e, idx});
          continue;
        }
        DAISY_ASSIGN_OR_RETURN(std::string name, ExpectName());
        e = Make(Expr::Kind::kAttr, line, {e}, name);
      } else if (IsOp("[")) {
        ++i_;
        ExprP start, stop, step;
        if (!IsOp(":")) {
          DAISY_ASSIGN_OR_RETURN(start, ParseExpression());
        }
        if (IsOp(":")) {
          ++i_;
          if (!IsOp(":") && !IsOp("]")) {
            DAISY_ASSIGN_OR_RETURN(stop, ParseExpression());
          }
          if (IsOp(":")) {
            ++i_;
            if (!IsOp("]")) {
              DAISY_ASSIGN_OR_RETURN(step, ParseExpression());
            }
          }
          DAISY_RETURN_IF_ERROR(Expect("]"));
          e = Make(Expr::Kind::kSlice, line, {e, start, stop, step});
        } else {
          DAISY_RETURN_IF_ERROR(Expect("]"));
          e = Make(Expr::Kind::kItem, line, {e, start});
        }
      } else if (IsOp("(")) {
        DAISY_ASSIGN_OR_RETURN(e, ParseCall(e));
      } else {
        return e;
      }
    }
  }

  // (args, name=value): the call of `callee`.
  Result<ExprP> ParseCall(ExprP callee) {
    auto call = std::make_shared<Expr>();
    call->kind = Expr::Kind::kCall;
    call->line = Peek().line;
    call->args.push_back(std::move(callee));
    DAISY_RETURN_IF_ERROR(ParseArgs(*call));
    return ExprP(call);
  }

  Status ParseArgs(Expr& e) {
    DAISY_RETURN_IF_ERROR(Expect("("));
    while (!IsOp(")")) {
      if (IsOp("*") || IsOp("**")) return Error("*args and **kwargs in calls are not supported");
      if (Peek().kind == Token::Kind::kName && IsOp("=", 1)) {
        const std::string name = Next().text;
        ++i_;
        DAISY_ASSIGN_OR_RETURN(ExprP v, ParseExpression());
        e.kwargs.emplace_back(name, std::move(v));
      } else {
        if (!e.kwargs.empty()) return Error("a positional argument after a keyword argument");
        DAISY_ASSIGN_OR_RETURN(ExprP v, ParseExpression());
        e.args.push_back(std::move(v));
      }
      if (!IsOp(",")) break;
      ++i_;
    }
    return Expect(")");
  }

  // | filter(args) ..., is [not] test args ..., and calls after them.
  Result<ExprP> ParseFilters(ExprP e, bool first_without_pipe = false) {
    bool first = first_without_pipe;
    while (true) {
      if (IsOp("|") || first) {
        ++i_;
        first = false;
        auto f = std::make_shared<Expr>();
        f->kind = Expr::Kind::kFilter;
        f->line = Peek().line;
        DAISY_ASSIGN_OR_RETURN(f->name, ExpectName());
        while (IsOp(".")) {
          ++i_;
          DAISY_ASSIGN_OR_RETURN(std::string more, ExpectName());
          f->name += "." + more;
        }
        if (!KnownFilter(f->name)) return Error("the filter '" + EscapeForMessage(f->name) + "' is not supported");
        f->args.push_back(e);
        if (IsOp("(")) DAISY_RETURN_IF_ERROR(ParseArgs(*f));
        e = f;
      } else if (IsName("is")) {
        ++i_;
        auto t = std::make_shared<Expr>();
        t->kind = Expr::Kind::kTest;
        t->line = Peek().line;
        if (IsName("not")) {
          ++i_;
          t->negated = true;
        }
        DAISY_ASSIGN_OR_RETURN(t->name, ExpectName());
        if (!KnownTest(t->name)) return Error("the test '" + EscapeForMessage(t->name) + "' is not supported");
        t->args.push_back(e);
        if (IsOp("(")) {
          DAISY_RETURN_IF_ERROR(ParseArgs(*t));
        } else {
          static const std::set<std::string> kNotArgs = {"else", "or", "and", "if", "in", "is", "not"};
          const Token& a = Peek();
          const bool arg = (a.kind == Token::Kind::kName && !kNotArgs.count(a.text)) || a.kind == Token::Kind::kString ||
                           a.kind == Token::Kind::kInt || a.kind == Token::Kind::kFloat || IsOp("[") || IsOp("{");
          if (arg) {
            DAISY_ASSIGN_OR_RETURN(ExprP v, ParsePrimary());
            DAISY_ASSIGN_OR_RETURN(v, ParsePostfix(v));
            t->args.push_back(std::move(v));
          }
        }
        e = t;
      } else if (IsOp("(")) {
        DAISY_ASSIGN_OR_RETURN(e, ParseCall(e));
      } else {
        return e;
      }
    }
  }

  static constexpr int kMaxNesting = 64;
  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int blocks_ = 0;
};

}  // namespace

Result<NodeP> ParseTemplate(std::string_view source) {
  DAISY_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lexer(source).Run());
  return Parser(std::move(tokens)).Run();
}

}  // namespace daisy::jinja
