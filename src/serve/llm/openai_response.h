// OpenAI's response bodies, built from the engine's events: chat.completion and
// text_completion objects, their streamed chunks framed as server-sent events
// (`data: {...}\n\n`, ending `data: [DONE]\n\n`), usage, logprobs, tool calls and the error
// envelope.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "serve/llm/engine.h"
#include "serve/llm/openai_request.h"
#include "serve/llm/openai_tools.h"
#include "zenith/text.h"

namespace zenith::serve::llm {

// {"error": {"message", "type", "param", "code"}} (param and code null when empty).
nlohmann::json error_body(const ApiError& error);

// One server-sent event carrying `value`; the end of a stream; a comment that keeps a waiting
// connection open.
std::string sse_event(const nlohmann::json& value);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";
inline constexpr const char* kSsePing = ": ping\n\n";

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  nlohmann::json to_json() const;
};

// The text of one token as a client sees it (mid-text: no start-of-text rule), and its bytes.
std::string token_text(const text::Tokenizer& tokenizer, int64_t id);

// What is common to a response's objects.
struct ResponseHead {
  std::string id;  // chatcmpl-... / cmpl-...
  int64_t created = 0;
  std::string model;
};

// One choice as it is generated: collects text, logprobs and the finish reason, and says what
// each new event adds to a stream (tool calls included: a constrained tool call's JSON text
// becomes tool_calls with its arguments streamed). With tool_choice "auto" the text is held back
// while it could still be a tool call (openai_tools.h) and then sent either as tool_calls or as
// content, never streamed and taken back.
class ChoiceBuilder {
 public:
  ChoiceBuilder(const Request& request, int index, const text::Tokenizer& tokenizer,
                std::string call_id);
  // Takes an event; returns the stream chunk's choice for it, or null when it adds nothing to
  // send yet.
  nlohmann::json add(const Event& event);
  // Completions with echo, before any event: the prompt's text, and with logprobs its tokens'
  // (`forced[k]` is prompt token k + 1's; the first token has none: null), come first, in the
  // whole choice and in a stream's first chunk.
  void echo(const std::string& prompt_text, const std::vector<int64_t>& prompt_ids,
            const std::vector<TokenLogprob>& forced);
  // Chat streams: the first chunk's choice, {"delta": {"role": "assistant", "content": ""}},
  // sent before any token.
  nlohmann::json role_choice();
  // The choice of the non-streaming response (after the last event).
  nlohmann::json final_choice() const;
  bool finished() const { return finished_; }
  int index() const { return index_; }
  const Request& request() const { return request_; }
  const Usage& usage() const { return usage_; }

 private:
  nlohmann::json logprobs_json(const std::vector<TokenLogprob>& lps);
  nlohmann::json top_logprobs_map(const TokenLogprob& lp) const;
  nlohmann::json tool_delta(bool last);
  nlohmann::json add_auto(const Event& event, nlohmann::json logprobs);
  nlohmann::json auto_calls_json(bool delta) const;
  std::string finish_reason() const;

  const Request& request_;
  int index_;
  const text::Tokenizer& tokenizer_;
  std::string call_id_;
  std::string text_;
  nlohmann::json logprobs_ = nullptr;  // accumulated: chat {"content": [...]}, or completions'
  int64_t text_offset_ = 0;
  std::string echo_text_;                   // echo: sent with the first chunk
  nlohmann::json echo_logprobs_ = nullptr;  // and the prompt's logprobs
  bool role_sent_ = false, finished_ = false;
  std::string finish_reason_;
  Usage usage_;
  // tool calls: the function's name once known, and how much of the arguments was streamed
  std::string tool_name_;
  size_t tool_args_sent_ = 0;
  bool tool_header_sent_ = false;
  // tool_choice "auto": whether the text is still held back, the logprobs held with it, and the
  // calls the finished output made (none: it is content)
  bool auto_holding_ = false;
  nlohmann::json held_logprobs_ = nlohmann::json::array();
  std::optional<std::vector<ParsedToolCall>> auto_calls_;
};

// A stream chunk holding `choices` (and "usage": null when include_usage asks for it).
nlohmann::json chunk_json(const Request& request, const ResponseHead& head, nlohmann::json choices);
// The final chunk of include_usage: empty choices and the usage.
nlohmann::json usage_chunk_json(const Request& request, const ResponseHead& head,
                                const Usage& usage);
// The whole non-streaming response.
nlohmann::json response_json(const Request& request, const ResponseHead& head,
                             const std::vector<ChoiceBuilder>& choices);
// Usage summed over choices (each prompt counted once, not once per choice).
Usage total_usage(const std::vector<ChoiceBuilder>& choices);

}  // namespace zenith::serve::llm
