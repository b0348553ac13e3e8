// Grammars for structured output: JSON text matching a JSON Schema (response_format json_schema
// and forced tool calls), or any JSON object (json_object).
//
// The schema subset: type (one or a list), properties (written in their order, the required
// ones always, the others optionally), additionalProperties (the values of an object without
// properties), items, minItems/maxItems, enum, const, anyOf/oneOf, allOf of one schema,
// $ref into the schema's own #/$defs or #/definitions (recursion allowed), minLength/maxLength,
// and the descriptive keywords (title, description, default, examples, format, $schema, $id,
// strict). Anything else that constrains values (pattern, minimum, maximum, ...) is refused,
// naming the keyword and where it is: a grammar that ignored it would produce output the schema
// rejects.
//
// The text is compact JSON: no whitespace except one optional space after ':' and ',' and one
// optional space or newline before the value. Numbers have at most 16 integer and 15 fraction
// digits (every output ends).
#pragma once

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "grammar/grammar.h"

namespace daisy::grammar {

class GrammarBuilder;

// One JSON value matching `schema`.
Result<Grammar> JsonSchemaGrammar(const nlohmann::ordered_json& schema);
// Any JSON object.
Grammar JsonObjectGrammar();

// A forced tool call: `prefix`, then {"name": "<name>", "<args_key>": <arguments matching the
// tool's parameters schema>}, then `suffix`; one alternative per tool.
struct ToolCallShape {
  std::string prefix, suffix;
  std::string args_key = "arguments";
};
Result<Grammar> ToolCallGrammar(const nlohmann::ordered_json& tools, const ToolCallShape& shape);

}  // namespace daisy::grammar
