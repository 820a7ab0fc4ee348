// OpenAI's request bodies for POST /v1/chat/completions and /v1/completions, parsed and checked
// before anything reaches the engine. A client's mistake is an ApiError (a 4xx in OpenAI's
// error envelope, naming the field), never an exception the server answers 500.
//
// Checked here (fields not listed are ignored, as vLLM ignores them): model; messages (roles
// system, developer, user, assistant, tool; content a string or text parts) or prompt (a
// string, token ids, or a list of either: one choice per prompt and n); max_tokens /
// max_completion_tokens; temperature 0..2; top_p (0, 1]; top_k (-1, 0: off); seed;
// n 1..kMaxChoices; presence/frequency_penalty -2..2; stop (a string or up to 4); logprobs and
// top_logprobs 0..20 (chat) or logprobs 0..5 (completions); stream; stream_options.include_usage;
// response_format (text, json_object, json_schema); tools and tool_choice; user; echo
// (completions). suffix is refused: LLaMA models have no fill-in-the-middle tokens.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace zenith::serve::llm {

// A 4xx (or 5xx) answered as {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int status = 400;
  std::string message;
  std::string param;         // the field, as a path: "messages[2].content"; "" when none
  std::string code;          // "" = null
  std::string type() const;  // "invalid_request_error", "authentication_error", ...
};

constexpr int kMaxChoices = 16;        // n, times the prompts of a completions request
constexpr int kMaxStops = 4;           // stop strings, as OpenAI
constexpr size_t kMaxStopBytes = 256;  // one stop string
constexpr int kMaxTopLogprobs = 20;    // chat's top_logprobs, as OpenAI
constexpr int kMaxCompletionLogprobs = 5;

struct Message {
  std::string role;  // system, user, assistant, tool ("developer" is read as system)
  std::string content;
  std::string tool_call_id;   // role tool
  nlohmann::json tool_calls;  // role assistant: its calls, or null
};

// One prompt of /v1/completions: text, or token ids.
struct Prompt {
  std::string text;
  std::vector<int64_t> ids;
  bool is_ids = false;
};

struct ToolFunction {
  std::string name, description;
  nlohmann::ordered_json parameters = nlohmann::ordered_json::object();  // in the request's order
};

struct Request {
  bool chat = true;  // /v1/chat/completions; false: /v1/completions
  std::string model;
  std::vector<Message> messages;      // chat
  std::vector<Prompt> prompts;        // completions: one or more (choice index: prompt * n + i)
  bool echo = false;                  // completions: the prompt comes back before the completion
  std::optional<int64_t> max_tokens;  // max_completion_tokens or max_tokens; none: to the context
  std::string max_tokens_field = "max_tokens";  // the one the client sent, for errors
  double temperature = 1, top_p = 1;
  int64_t top_k = 0;  // 0: off
  std::optional<uint64_t> seed;
  int n = 1;
  double presence_penalty = 0, frequency_penalty = 0;
  std::vector<std::string> stop;
  bool logprobs = false;
  int top_logprobs = 0;
  bool stream = false, include_usage = false;
  std::string response_format = "text";  // text, json_object, json_schema
  nlohmann::ordered_json json_schema;    // json_schema: its "schema", properties in order
  std::string json_schema_name;
  std::vector<ToolFunction> tools;
  std::string tool_choice = "none";  // none, auto, required, or "function" (tool_name)
  std::string tool_name;             // the named function of tool_choice
  std::string user;
};

// The body of a chat (chat = true) or completions request; throws ApiError naming the field.
// Bodies nested deeper than platform::kMaxJsonDepth and bytes that are not UTF-8 are refused
// before the JSON parser sees them.
Request parse_request(const std::string& body, bool chat);

// The first byte offset where `text` is not valid UTF-8, or nullopt.
std::optional<size_t> invalid_utf8_at(const std::string& text);

}  // namespace zenith::serve::llm
