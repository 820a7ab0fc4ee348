// tool_choice "auto" (OpenAI's default when a request has tools): the model writes freely and the
// finished output is read as vLLM's llama3_json and hermes tool parsers read it. It is a call
// when, after leading whitespace and an optional `<|python_tag|>` (Llama 3.1) or inside
// `<tool_call>...</tool_call>` (Hermes), it is
//   {"name": F, "arguments": {...}}   ("parameters" in place of "arguments", as Llama 3 writes)
// or several such objects separated by ';' or in a JSON list, each F one of the request's tools
// and its arguments valid against that function's parameters schema (serve/llm/json_schema.h).
// Anything else is plain text, answered as content.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "serve/llm/openai_request.h"

namespace zenith::serve::llm {

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // the arguments object as compact JSON text, in the model's order
};

// Whether output that begins with `text` could still turn out to be a tool call: only
// whitespace so far, or it starts with '{', '[', `<|python_tag|>` or `<tool_call>` (or a piece
// of one of those tags). A stream holds its text back while this is true.
bool could_be_tool_call(const std::string& text);

// The calls `text` (a whole output) makes, or nullopt when it is not one or more valid calls of
// `tools`.
std::optional<std::vector<ParsedToolCall>> parse_auto_tool_calls(
    const std::string& text, const std::vector<ToolFunction>& tools);

}  // namespace zenith::serve::llm
