// The JSON Schema subset that constrained decoding honours, and a validator for it.
//
// Supported keywords:
//   type           "object" "array" "string" "integer" "number" "boolean" "null", or a list of
//                  them (as anyOf)
//   object         properties, required; additionalProperties (any value: no extra property is
//                  ever produced), in the order the schema lists them; optional ones may be left
//                  out
//   array          items, minItems, maxItems (prefixItems is not supported)
//   string         minLength, maxLength (code points)
//   integer,       minimum / exclusiveMinimum 0 or 1 alone on an integer (no sign, no lone 0),
//   number         minimum 0 alone on a number, or an integer range of at most 1000 values
//                  (minimum and maximum, either exclusive); other bounds are a SchemaError
//   enum, const    any JSON values (written as nlohmann::json::dump writes them)
//   anyOf, oneOf   alternatives that start with different characters (e.g. a string or null, an
//                  object or an array); two objects or two strings is a SchemaError
//   $defs/definitions + $ref "#/$defs/X" (not recursive)
// Ignored (annotations): title, description, default, examples, $schema, $id, $comment,
//   strict, deprecated, readOnly, writeOnly.
// Anything else (pattern, format, multipleOf, allOf, not, if, ...) is a SchemaError naming the
// keyword and its JSON pointer.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace zenith::serve::llm {

// Whether `value` satisfies `schema` (the subset above; unsupported keywords are ignored here).
// nullopt when it does, else the first failure: "/items/2: expected integer, got \"x\"".
std::optional<std::string> validate_json(const nlohmann::json& value, const nlohmann::json& schema);

}  // namespace zenith::serve::llm
