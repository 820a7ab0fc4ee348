#include "serve/llm/openai_response.h"

#include "platform/http/reply.h"
#include "serve/llm/constraint.h"

namespace zenith::serve::llm {

using nlohmann::json;

json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type()},
            {"param", e.param.empty() ? json() : json(e.param)},
            {"code", e.code.empty() ? json() : json(e.code)}}}};
}

std::string sse_event(const json& value) { return "data: " + platform::json_text(value) + "\n\n"; }

json Usage::to_json() const {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

std::string token_text(const text::Tokenizer& tokenizer, int64_t id) {
  if (id < 0 || id >= tokenizer.vocab_size()) return "";
  text::DecodeState state;
  state.position = 1;  // mid-text: SentencePiece's start-of-text rule does not apply
  state.text_empty = false;
  state.start_done = true;
  state.strip_left = 0;  // tokenizer.json's Strip decoder: only at the start of a text
  std::string out;
  tokenizer.append_token_bytes(int32_t(id), state, out);
  return out;
}

namespace {

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

// A token's text as JSON can carry it (a piece of a UTF-8 character becomes U+FFFD).
std::string printable(const std::string& s) { return json::parse(platform::json_text(s)); }

}  // namespace

ChoiceBuilder::ChoiceBuilder(const Request& request, int index, const text::Tokenizer& tokenizer,
                             std::string call_id)
    : request_(request), index_(index), tokenizer_(tokenizer), call_id_(std::move(call_id)) {
  if (request.tool_choice == "function") tool_name_ = request.tool_name;
  if (request.logprobs)
    logprobs_ = request.chat ? json{{"content", json::array()}}
                             : json{{"tokens", json::array()},
                                    {"token_logprobs", json::array()},
                                    {"top_logprobs", json::array()},
                                    {"text_offset", json::array()}};
}

// The logprobs of `lps` in the request's format; also appended to the choice's total.
json ChoiceBuilder::logprobs_json(const std::vector<TokenLogprob>& lps) {
  if (!request_.logprobs) return nullptr;
  if (request_.chat) {
    json content = json::array();
    for (const auto& lp : lps) {
      const std::string t = token_text(tokenizer_, lp.token);
      json top = json::array();
      for (int i = 0; i < request_.top_logprobs && i < int(lp.top.size()); ++i) {
        const std::string tt = token_text(tokenizer_, lp.top[size_t(i)].first);
        top.push_back({{"token", printable(tt)},
                       {"logprob", lp.top[size_t(i)].second},
                       {"bytes", bytes_of(tt)}});
      }
      content.push_back({{"token", printable(t)},
                         {"logprob", lp.logprob},
                         {"bytes", bytes_of(t)},
                         {"top_logprobs", top}});
      logprobs_["content"].push_back(content.back());
    }
    return {{"content", content}};
  }
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (const auto& lp : lps) {
    const std::string t = printable(token_text(tokenizer_, lp.token));
    json top = json::object();
    for (int i = 0; i < request_.top_logprobs && i < int(lp.top.size()); ++i)
      top[printable(token_text(tokenizer_, lp.top[size_t(i)].first))] = lp.top[size_t(i)].second;
    out["tokens"].push_back(t);
    out["token_logprobs"].push_back(lp.logprob);
    out["top_logprobs"].push_back(top);
    out["text_offset"].push_back(text_offset_);
    text_offset_ += int64_t(t.size());
  }
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
    for (const auto& v : out[key]) logprobs_[key].push_back(v);
  return out;
}

// The delta.tool_calls a constrained tool call's new text adds (null: nothing yet).
json ChoiceBuilder::tool_delta(bool last) {
  json call = {{"index", 0}};
  size_t args_start = 0;
  if (request_.tool_choice == "required") {
    if (tool_name_.empty())
      for (const auto& t : request_.tools)
        if (text_.rfind(tool_call_prefix(t.name), 0) == 0) tool_name_ = t.name;
    if (tool_name_.empty()) return nullptr;
    args_start = tool_call_prefix(tool_name_).size();
  }
  if (!tool_header_sent_) {
    call["id"] = call_id_;
    call["type"] = "function";
    call["function"] = {{"name", tool_name_}, {"arguments", ""}};
    tool_header_sent_ = true;
  }
  // "required" output ends with the '}' that closes {"name", "arguments"}: held back.
  const size_t hold = request_.tool_choice == "required" ? 1 : 0;
  size_t end = text_.size() > args_start + hold ? text_.size() - hold : args_start;
  if (last && hold && end > args_start && text_.back() != '}') end = text_.size();
  const size_t from = args_start + tool_args_sent_;
  if (end > from) {
    if (!call.contains("function")) call["function"] = json::object();
    call["function"]["arguments"] = text_.substr(from, end - from);
    tool_args_sent_ += end - from;
  }
  if (!call.contains("function")) return nullptr;
  return json::array({call});
}

std::string ChoiceBuilder::finish_reason() const {
  if (finish_reason_ == "stop" &&
      (request_.tool_choice == "required" || request_.tool_choice == "function"))
    return "tool_calls";
  if (finish_reason_ == "abort" || finish_reason_ == "error") return "stop";
  return finish_reason_;
}

json ChoiceBuilder::add(const Event& e) {
  text_ += e.text;
  const bool tools = request_.tool_choice == "required" || request_.tool_choice == "function";
  json lp = logprobs_json(e.logprobs);
  if (e.finished) {
    finished_ = true;
    finish_reason_ = e.finish_reason;
    usage_ = {e.prompt_tokens, e.completion_tokens, e.cached_tokens};
  }
  json choice = {{"index", index_}};
  if (request_.chat) {
    json delta = json::object();
    if (!role_sent_) {
      delta["role"] = "assistant";
      role_sent_ = true;
    }
    if (tools) {
      json calls = tool_delta(e.finished);
      if (!calls.is_null()) delta["tool_calls"] = calls;
    } else if (!e.text.empty()) {
      delta["content"] = e.text;
    }
    if (delta.empty() && !e.finished) return nullptr;
    choice["delta"] = delta;
  } else {
    if (e.text.empty() && !e.finished) return nullptr;
    choice["text"] = e.text;
  }
  choice["logprobs"] = lp;
  choice["finish_reason"] = e.finished ? json(finish_reason()) : json();
  return choice;
}

json ChoiceBuilder::role_choice() {
  role_sent_ = true;
  json delta = {{"role", "assistant"}};
  if (request_.tool_choice != "required" && request_.tool_choice != "function")
    delta["content"] = "";
  return {{"index", index_}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
}

json ChoiceBuilder::final_choice() const {
  json choice = {{"index", index_}};
  if (!request_.chat) {
    choice["text"] = text_;
  } else if (request_.tool_choice == "required" || request_.tool_choice == "function") {
    std::string name = request_.tool_name, args = text_;
    if (request_.tool_choice == "required") {
      try {
        auto call = parse_tool_call_output(text_);
        name = call.name;
        args = call.arguments;
      } catch (const std::exception&) {
        // Cut short (max_tokens): the text as it is, as OpenAI returns truncated arguments.
      }
    }
    choice["message"] = {{"role", "assistant"},
                         {"content", nullptr},
                         {"tool_calls",
                          {{{"id", call_id_},
                            {"type", "function"},
                            {"function", {{"name", name}, {"arguments", args}}}}}}};
  } else {
    choice["message"] = {{"role", "assistant"}, {"content", text_}};
  }
  choice["logprobs"] = logprobs_;
  choice["finish_reason"] = finish_reason();
  return choice;
}

json chunk_json(const Request& r, const ResponseHead& head, json choices) {
  json chunk = {{"id", head.id},
                {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
                {"created", head.created},
                {"model", head.model},
                {"choices", std::move(choices)}};
  if (r.include_usage) chunk["usage"] = nullptr;
  return chunk;
}

json usage_chunk_json(const Request& r, const ResponseHead& head, const Usage& usage) {
  json chunk = chunk_json(r, head, json::array());
  chunk["usage"] = usage.to_json();
  return chunk;
}

Usage total_usage(const std::vector<ChoiceBuilder>& choices) {
  Usage u;
  for (const auto& c : choices) {
    u.prompt_tokens = c.usage().prompt_tokens;
    u.cached_tokens = std::max(u.cached_tokens, c.usage().cached_tokens);
    u.completion_tokens += c.usage().completion_tokens;
  }
  return u;
}

json response_json(const Request& r, const ResponseHead& head,
                   const std::vector<ChoiceBuilder>& choices) {
  json list = json::array();
  for (const auto& c : choices) list.push_back(c.final_choice());
  return {{"id", head.id},           {"object", r.chat ? "chat.completion" : "text_completion"},
          {"created", head.created}, {"model", head.model},
          {"choices", list},         {"usage", total_usage(choices).to_json()}};
}

}  // namespace zenith::serve::llm
