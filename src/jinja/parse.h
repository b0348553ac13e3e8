// The template's syntax tree (jinja.h), made by parse.cc and walked by render.cc.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jinja/jinja.h"

namespace daisy::jinja {

struct Expr;
using ExprP = std::shared_ptr<const Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // value
    kName,     // name
    kAttr,     // args[0].name
    kItem,     // args[0][args[1]]
    kSlice,    // args[0][args[1]:args[2]:args[3]] (null: omitted)
    kCall,     // args[0](args[1..], kwargs)
    kFilter,   // args[0] | name(args[1..], kwargs)
    kTest,     // args[0] is [not] name(args[1..])
    kNot,
    kNeg,
    kBinary,   // args[0] op args[1]: + - * / // % ** ~ == != < > <= >= in "not in"
    kAnd,
    kOr,
    kCond,     // args[0] if args[1] else args[2] (null: undefined)
    kList,
    kTuple,
    kDict,     // args: key, value, key, value, ...
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;  // name, attribute, filter, test or operator
  std::vector<ExprP> args;
  std::vector<std::pair<std::string, ExprP>> kwargs;
  bool negated = false;
};

struct Node;
using NodeP = std::shared_ptr<const Node>;
using Body = std::vector<NodeP>;

struct Node {
  enum class Kind {
    kText,       // text
    kOutput,     // {{ expr }}
    kIf,         // conds[i] -> bodies[i]; bodies.size() == conds.size() + 1 with an else
    kFor,        // for targets in expr [if cond]: bodies[0], else bodies[1]
    kSet,        // targets = expr, or target.attr = expr (attr non-empty)
    kSetBlock,   // targets[0] = rendered bodies[0] (| filters in `filters`)
    kMacro,      // name(params = defaults): bodies[0]
    kBreak,
    kContinue,
    kFilterBlock,  // bodies[0] rendered, then the filter chain `expr` applied (its subject is a
                   // placeholder literal)
    kSequence,   // bodies[0] (generation blocks and the root)
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprP expr;
  ExprP cond;
  std::vector<ExprP> conds;
  std::vector<Body> bodies;
  std::vector<std::string> targets;
  std::string attr;
  std::string name;
  std::vector<std::pair<std::string, ExprP>> params;  // macro parameters and their defaults (null: none)
};

Result<NodeP> ParseTemplate(std::string_view source);

// Whether render.cc has the filter / test of that name (the parser refuses the others).
bool KnownFilter(const std::string& name);
bool KnownTest(const std::string& name);

}  // namespace daisy::jinja
