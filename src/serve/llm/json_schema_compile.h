// JSON Schema (the subset json_schema.h lists) -> the grammar constrained decoding walks.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serve/llm/constraint.h"
#include "serve/llm/json_grammar.h"

namespace zenith::serve::llm {

// Throws SchemaError naming the keyword and its pointer (prefixed with `base_pointer`).
Grammar compile_json_schema(const nlohmann::ordered_json& schema,
                            const std::string& base_pointer = "");
// Any JSON object (response_format json_object).
Grammar any_object_grammar();
// tool_choice `choice` ("required" or a function's name) over `functions` (constraint.h).
Grammar tool_call_grammar(const std::vector<FunctionSpec>& functions, const std::string& choice);

}  // namespace zenith::serve::llm
