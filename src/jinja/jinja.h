// A Jinja2 implementation for chat templates: the subset Hugging Face chat templates use,
// rendered as transformers renders them (trim_blocks and lstrip_blocks on, the loop controls
// extension, an immutable sandbox: no list.append, no attribute writes except on namespaces,
// `tojson` as json.dumps with ensure_ascii=False, `raise_exception`, `strftime_now`).
//
// What it knows:
//   statements  if/elif/else, for (tuple targets, `if` filter, else, loop.index/index0/
//               revindex/revindex0/first/last/length/previtem/nextitem/cycle), break,
//               continue, set (names, tuples, namespace attributes, blocks), macro (defaults,
//               keyword arguments), filter blocks, generation blocks (rendered as their body),
//               comments, whitespace control (-), raw
//   expressions literals, lists, dicts, tuples, attribute and item access, slices, calls,
//               filters, tests, `a if c else b`, and/or/not, in/not in, comparisons,
//               + - * / // % ** ~, string % formatting
//   values      undefined, none, booleans, integers, floats, strings, lists, dicts (insertion
//               ordered), namespaces, functions; printed as Python prints them
//   functions   range, namespace, dict, raise_exception, strftime_now
//   filters, tests, methods: see kFilters, kTests and CallMethod in jinja.cc
// Anything else is an error naming the construct and the line, at parse time where the syntax
// says it (an unknown statement, filter or test), else at render time (an unknown method).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace daisy::jinja {

class Value;
using Array = std::vector<Value>;
struct Object;
using KwArgs = std::vector<std::pair<std::string, Value>>;
using Function = std::function<Result<Value>(const std::vector<Value>& args, const KwArgs& kwargs)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kFunction };

  Value() = default;  // undefined
  static Value None();
  Value(bool b);
  Value(int64_t i);
  Value(int i) : Value(static_cast<int64_t>(i)) {}
  Value(double d);
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  static Value MakeArray(Array items = {}, bool tuple = false);
  static Value MakeObject();
  static Value MakeNamespace();
  static Value MakeFunction(Function f);
  // An integer beyond int64 (JSON's up to 2^64 - 1): printed exactly, computed as a double.
  static Value BigInt(uint64_t u);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_function() const { return kind_ == Kind::kFunction; }
  bool is_tuple() const;
  bool is_namespace() const;

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }
  double as_double() const { return kind_ == Kind::kFloat || !s_.empty() ? d_ : static_cast<double>(as_int()); }
  const std::string& str() const { return s_; }
  const Array& array() const { return *array_; }
  Array& mutable_array() { return *array_; }
  const Object& object() const { return *object_; }
  Object& mutable_object() { return *object_; }
  const Function& function() const { return *fn_; }

  // Python truthiness; str() as Python prints the value (undefined: ""); equality as Python's ==.
  bool Truthy() const;
  std::string ToString() const;
  bool Equals(const Value& other) const;
  // An object's member, undefined when absent (or when this is not an object).
  Value Get(std::string_view key) const;
  // Python's repr (strings quoted): for lists and dicts printed whole.
  std::string Repr() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::string s_;
  std::shared_ptr<Array> array_;
  std::shared_ptr<Object> object_;
  std::shared_ptr<Function> fn_;
  bool tuple_ = false;
};

// A dict in insertion order (Python's), or a namespace().
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  std::unordered_map<std::string, size_t> index;
  bool is_namespace = false;
  const Value* Find(std::string_view key) const;
  void Set(const std::string& key, Value v);
};

// The nesting depth of `j` (1 for a scalar), without recursion.
size_t JsonDepth(const nlohmann::ordered_json& j);
inline constexpr size_t kMaxJsonDepth = 64;  // FromJson's callers check their input against it

// JSON in (objects keep their key order) and out. ToJson is Python's json.dumps(v,
// ensure_ascii=False, indent=indent (< 0: none), sort_keys=sort_keys) with its separators: ", "
// and ": ", or "," at line ends when indented. Undefined values and functions cannot be written.
Value FromJson(const nlohmann::ordered_json& j);
Result<std::string> ToJson(const Value& v, int indent = -1, bool sort_keys = false);
// Python's repr() of a float: the shortest digits that read back, as 1.0, 0.1, 1e-05, 1e+20.
std::string PythonFloat(double d);

struct Node;

class Template {
 public:
  // Parses `source`; errors name the line and the construct (unknown statement, filter or
  // test, unclosed block, bad syntax).
  static Result<Template> Parse(std::string_view source);
  // Renders with `variables` (an object: messages, tools, add_generation_prompt, bos_token, ...)
  // over the globals. raise_exception(msg) fails the render with msg.
  Result<std::string> Render(const Value& variables) const;

 private:
  std::shared_ptr<const Node> root_;
};

}  // namespace daisy::jinja
