// Jinja values: Python's semantics for truth, equality, str() and repr(), and JSON both ways
// (json.dumps with ensure_ascii=False, as transformers' tojson).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "base/strings.h"
#include "jinja/jinja.h"

namespace daisy::jinja {

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value::Value(bool b) : kind_(Kind::kBool), b_(b) {}
Value::Value(int64_t i) : kind_(Kind::kInt), i_(i) {}
Value::Value(double d) : kind_(Kind::kFloat), d_(d) {}
Value::Value(std::string s) : kind_(Kind::kString), s_(std::move(s)) {}

Value Value::MakeArray(Array items, bool tuple) {
  Value v;
  v.kind_ = Kind::kArray;
  v.array_ = std::make_shared<Array>(std::move(items));
  v.tuple_ = tuple;
  return v;
}
Value Value::MakeObject() {
  Value v;
  v.kind_ = Kind::kObject;
  v.object_ = std::make_shared<Object>();
  return v;
}
Value Value::MakeNamespace() {
  Value v = MakeObject();
  v.object_->is_namespace = true;
  return v;
}
Value Value::MakeFunction(Function f) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.fn_ = std::make_shared<Function>(std::move(f));
  return v;
}

Value Value::BigInt(uint64_t u) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = INT64_MAX;
  v.d_ = static_cast<double>(u);
  v.s_ = std::to_string(u);
  return v;
}

bool Value::is_tuple() const { return kind_ == Kind::kArray && tuple_; }
bool Value::is_namespace() const { return kind_ == Kind::kObject && object_->is_namespace; }

const Value* Object::Find(std::string_view key) const {
  const auto it = index.find(std::string(key));
  return it == index.end() ? nullptr : &items[it->second].second;
}

void Object::Set(const std::string& key, Value v) {
  const auto it = index.find(key);
  if (it != index.end()) {
    items[it->second].second = std::move(v);
    return;
  }
  index.emplace(key, items.size());
  items.emplace_back(key, std::move(v));
}

Value Value::Get(std::string_view key) const {
  if (kind_ != Kind::kObject) return {};
  const Value* v = object_->Find(key);
  return v == nullptr ? Value() : *v;
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return d_ != 0;
    case Kind::kString: return !s_.empty();
    case Kind::kArray: return !array_->empty();
    case Kind::kObject: return object_->is_namespace || !object_->items.empty();
    case Kind::kFunction: return true;
  }
  return false;
}

std::string PythonFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // The shortest digits that read back, then Python's layout: positional for exponents
  // -4 <= e < 16, else d.ddde+XX.
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  const size_t e_at = sci.find('e');
  std::string mant = sci.substr(0, e_at);
  const int exp = std::stoi(sci.substr(e_at + 1));
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      if (digits.size() <= static_cast<size_t>(exp) + 1) {
        out.append(digits).append(exp + 1 - digits.size(), '0').append(".0");
      } else {
        out.append(digits, 0, exp + 1).append(".").append(digits, exp + 1);
      }
    } else {
      out.append("0.").append(-exp - 1, '0').append(digits);
    }
  } else {
    out.append(digits, 0, 1);
    if (digits.size() > 1) out.append(".").append(digits, 1);
    out.append(StrFormat("e%c%02d", exp < 0 ? '-' : '+', std::abs(exp)));
  }
  return out;
}

namespace {

std::string ReprString(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<unsigned char>(q)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += StrFormat("\\x%02x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += q;
  return out;
}

}  // namespace

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kString: return ReprString(s_);
    case Kind::kArray: {
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < array_->size(); ++i) {
        if (i > 0) out += ", ";
        out += (*array_)[i].Repr();
      }
      if (tuple_ && array_->size() == 1) out += ",";
      return out + (tuple_ ? ")" : "]");
    }
    case Kind::kObject: {
      if (object_->is_namespace) return "<Namespace>";
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : object_->items) {
        if (!first) out += ", ";
        first = false;
        out += ReprString(k) + ": " + v.Repr();
      }
      return out + "}";
    }
    default: return ToString();
  }
}

std::string Value::ToString() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return b_ ? "True" : "False";
    case Kind::kInt: return s_.empty() ? std::to_string(i_) : s_;
    case Kind::kFloat: return PythonFloat(d_);
    case Kind::kString: return s_;
    case Kind::kArray:
    case Kind::kObject: return Repr();
    case Kind::kFunction: return "<function>";
  }
  return "";
}

bool Value::Equals(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (is_int() && o.is_int() && (!s_.empty() || !o.s_.empty())) return s_ == o.s_ && i_ == o.i_;
    if (is_float() || o.is_float()) return as_double() == o.as_double();
    return as_int() == o.as_int();
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return s_ == o.s_;
    case Kind::kArray: {
      if (array_->size() != o.array_->size() || tuple_ != o.tuple_) return false;
      for (size_t i = 0; i < array_->size(); ++i) {
        if (!(*array_)[i].Equals((*o.array_)[i])) return false;
      }
      return true;
    }
    case Kind::kObject: {
      if (object_ == o.object_) return true;
      if (object_->is_namespace || o.object_->is_namespace) return false;
      if (object_->items.size() != o.object_->items.size()) return false;
      for (const auto& [k, v] : object_->items) {
        const Value* w = o.object_->Find(k);
        if (w == nullptr || !v.Equals(*w)) return false;
      }
      return true;
    }
    case Kind::kFunction: return fn_ == o.fn_;
    default: return false;
  }
}

size_t JsonDepth(const nlohmann::ordered_json& j) {
  size_t deepest = 0;
  std::vector<std::pair<const nlohmann::ordered_json*, size_t>> todo{{&j, 1}};
  while (!todo.empty()) {
    const auto [v, d] = todo.back();
    todo.pop_back();
    deepest = std::max(deepest, d);
    if (v->is_structured()) {
      for (const auto& c : *v) todo.emplace_back(&c, d + 1);
    }
  }
  return deepest;
}

Value FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::None();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::BigInt(u);
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      a.reserve(j.size());
      for (const auto& e : j) a.push_back(FromJson(e));
      return Value::MakeArray(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value o = Value::MakeObject();
      for (auto it = j.begin(); it != j.end(); ++it) o.mutable_object().Set(it.key(), FromJson(it.value()));
      return o;
    }
    default: return {};
  }
}

namespace {

void JsonString(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

Status JsonValue(const Value& v, int indent, bool sort_keys, int depth, std::string& out) {
  if (depth > 512) return InvalidArgument("tojson: nested deeper than 512 levels");
  auto newline = [&](int d) {
    if (indent >= 0) out.append(1, '\n').append(static_cast<size_t>(indent) * d, ' ');
  };
  const char* item_sep = indent >= 0 ? "," : ", ";
  switch (v.kind()) {
    case Value::Kind::kNone: out += "null"; return Status::Ok();
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return Status::Ok();
    case Value::Kind::kInt: out += v.ToString(); return Status::Ok();
    case Value::Kind::kFloat: {
      const double d = v.as_double();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : PythonFloat(d);
      return Status::Ok();
    }
    case Value::Kind::kString: JsonString(v.str(), out); return Status::Ok();
    case Value::Kind::kArray: {
      if (v.array().empty()) {
        out += "[]";
        return Status::Ok();
      }
      out += '[';
      for (size_t i = 0; i < v.array().size(); ++i) {
        if (i > 0) out += item_sep;
        newline(depth + 1);
        DAISY_RETURN_IF_ERROR(JsonValue(v.array()[i], indent, sort_keys, depth + 1, out));
      }
      newline(depth);
      out += ']';
      return Status::Ok();
    }
    case Value::Kind::kObject: {
      if (v.is_namespace()) return InvalidArgument("tojson: a namespace is not JSON serializable");
      if (v.object().items.empty()) {
        out += "{}";
        return Status::Ok();
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.object().items) items.push_back(&kv);
      if (sort_keys) {
        std::stable_sort(items.begin(), items.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += item_sep;
        newline(depth + 1);
        JsonString(items[i]->first, out);
        out += ": ";
        DAISY_RETURN_IF_ERROR(JsonValue(items[i]->second, indent, sort_keys, depth + 1, out));
      }
      newline(depth);
      out += '}';
      return Status::Ok();
    }
    case Value::Kind::kUndefined: return InvalidArgument("tojson: an undefined value is not JSON serializable");
    case Value::Kind::kFunction: return InvalidArgument("tojson: a function is not JSON serializable");
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> ToJson(const Value& v, int indent, bool sort_keys) {
  std::string out;
  DAISY_RETURN_IF_ERROR(JsonValue(v, indent, sort_keys, 0, out));
  return out;
}

}  // namespace daisy::jinja
