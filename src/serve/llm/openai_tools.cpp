#include "serve/llm/openai_tools.h"

#include <cctype>

#include "platform/http/reply.h"
#include "serve/llm/json_schema.h"

namespace zenith::serve::llm {

namespace {

using ordered = nlohmann::ordered_json;

constexpr const char* kPythonTag = "<|python_tag|>";
constexpr const char* kToolCallOpen = "<tool_call>";
constexpr const char* kToolCallClose = "</tool_call>";

size_t skip_space(const std::string& s, size_t i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

bool starts_with(const std::string& s, size_t at, const std::string& prefix) {
  return s.compare(at, prefix.size(), prefix) == 0;
}

// The end (one past) of the JSON object or array that starts at s[at], or npos when it is not
// closed. Strings are skipped with their escapes, so brackets inside them do not count.
size_t value_end(const std::string& s, size_t at) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = at; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string::npos;
}

// One call object: {"name", "arguments" | "parameters"} (and optionally "type": "function",
// "id"), naming one of `tools` with arguments that validate.
std::optional<ParsedToolCall> read_call(const ordered& call,
                                        const std::vector<ToolFunction>& tools) {
  if (!call.is_object() || !call.contains("name") || !call["name"].is_string()) return std::nullopt;
  const bool has_args = call.contains("arguments"), has_params = call.contains("parameters");
  if (has_args == has_params) return std::nullopt;  // exactly one of them
  for (const auto& [key, value] : call.items())
    if (key != "name" && key != "arguments" && key != "parameters" && key != "type" && key != "id")
      return std::nullopt;
  if (call.contains("type") && call["type"] != "function") return std::nullopt;
  ordered args = has_args ? call["arguments"] : call["parameters"];
  if (args.is_string()) {  // OpenAI's own form: the arguments as a JSON text
    args = ordered::parse(args.get<std::string>(), nullptr, false);
    if (args.is_discarded()) return std::nullopt;
  }
  if (!args.is_object()) return std::nullopt;
  const std::string name = call["name"].get<std::string>();
  for (const auto& tool : tools) {
    if (tool.name != name) continue;
    if (validate_json(nlohmann::json::parse(args.dump()),
                      nlohmann::json::parse(tool.parameters.dump())))
      return std::nullopt;
    return ParsedToolCall{name, args.dump()};
  }
  return std::nullopt;
}

// The calls in s[at, end): JSON objects separated by ';', or one JSON list of them.
std::optional<std::vector<ParsedToolCall>> read_calls(const std::string& s, size_t at, size_t end,
                                                      const std::vector<ToolFunction>& tools) {
  std::vector<ParsedToolCall> calls;
  at = skip_space(s, at);
  if (at < end && s[at] == '[') {
    const size_t close = value_end(s, at);
    if (close == std::string::npos || close > end || skip_space(s, close) < end)
      return std::nullopt;
    const ordered list = ordered::parse(s.substr(at, close - at), nullptr, false);
    if (!list.is_array() || list.empty()) return std::nullopt;
    for (const auto& item : list) {
      auto call = read_call(item, tools);
      if (!call) return std::nullopt;
      calls.push_back(std::move(*call));
    }
    return calls;
  }
  while (true) {
    if (at >= end || s[at] != '{') return std::nullopt;
    const size_t close = value_end(s, at);
    if (close == std::string::npos || close > end) return std::nullopt;
    auto call = read_call(ordered::parse(s.substr(at, close - at), nullptr, false), tools);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    at = skip_space(s, close);
    if (at >= end) return calls;
    if (s[at] != ';') return std::nullopt;
    at = skip_space(s, at + 1);
    if (at >= end) return calls;  // a trailing ';'
  }
}

}  // namespace

bool could_be_tool_call(const std::string& text) {
  const size_t at = skip_space(text, 0);
  if (at == text.size()) return true;
  if (text[at] == '{' || text[at] == '[') return true;
  const std::string rest = text.substr(at);
  for (const std::string tag : {kPythonTag, kToolCallOpen})
    if (starts_with(rest, 0, tag) || starts_with(tag, 0, rest)) return true;
  return false;
}

std::optional<std::vector<ParsedToolCall>> parse_auto_tool_calls(
    const std::string& text, const std::vector<ToolFunction>& tools) {
  // (A model can write anything: nesting past what a request may hold is not read as a call.)
  if (tools.empty() || platform::nesting_depth(text) > platform::kMaxJsonDepth) return std::nullopt;
  size_t at = skip_space(text, 0);
  size_t end = text.size();
  while (end > at && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  if (starts_with(text, at, kPythonTag))
    return read_calls(text, at + std::string(kPythonTag).size(), end, tools);
  if (!starts_with(text, at, kToolCallOpen)) return read_calls(text, at, end, tools);
  // Hermes: one or more <tool_call>{...}</tool_call>, whitespace between them.
  std::vector<ParsedToolCall> calls;
  const std::string open = kToolCallOpen, close = kToolCallClose;
  while (at < end) {
    if (!starts_with(text, at, open)) return std::nullopt;
    const size_t body = at + open.size();
    const size_t stop = text.find(close, body);
    if (stop == std::string::npos || stop + close.size() > end) return std::nullopt;
    auto some = read_calls(text, body, stop, tools);
    if (!some) return std::nullopt;
    calls.insert(calls.end(), some->begin(), some->end());
    at = skip_space(text, stop + close.size());
  }
  return calls;
}

}  // namespace zenith::serve::llm
