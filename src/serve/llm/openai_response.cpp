#include "serve/llm/openai_response.h"

#include <map>

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
  auto_holding_ = request.chat && request.tool_choice == "auto" && !request.tools.empty();
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
    out["tokens"].push_back(t);
    out["token_logprobs"].push_back(lp.logprob);
    out["top_logprobs"].push_back(top_logprobs_map(lp));
    out["text_offset"].push_back(text_offset_);
    text_offset_ += int64_t(t.size());
  }
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
    for (const auto& v : out[key]) logprobs_[key].push_back(v);
  return out;
}

// Completions' top_logprobs entry: {token text: logprob} of the most likely tokens, plus the
// position's own token (sampled, or the prompt's with echo) when it is not among them, as
// OpenAI's legacy completions and vLLM do: up to top_logprobs + 1 entries.
json ChoiceBuilder::top_logprobs_map(const TokenLogprob& lp) const {
  json top = json::object();
  for (int i = 0; i < request_.top_logprobs && i < int(lp.top.size()); ++i)
    top[printable(token_text(tokenizer_, lp.top[size_t(i)].first))] = lp.top[size_t(i)].second;
  const std::string own = printable(token_text(tokenizer_, lp.token));
  if (!top.contains(own)) top[own] = lp.logprob;
  return top;
}

void ChoiceBuilder::echo(const std::string& prompt_text, const std::vector<int64_t>& prompt_ids,
                         const std::vector<TokenLogprob>& forced) {
  text_ = prompt_text + text_;
  echo_text_ = prompt_text;
  if (!request_.logprobs || request_.chat) return;
  echo_logprobs_ = {{"tokens", json::array()},
                    {"token_logprobs", json::array()},
                    {"top_logprobs", json::array()},
                    {"text_offset", json::array()}};
  for (size_t i = 0; i < prompt_ids.size(); ++i) {
    const std::string t = printable(token_text(tokenizer_, prompt_ids[i]));
    const bool known = i > 0 && i - 1 < forced.size();
    echo_logprobs_["tokens"].push_back(t);
    echo_logprobs_["token_logprobs"].push_back(known ? json(forced[i - 1].logprob) : json());
    echo_logprobs_["top_logprobs"].push_back(known ? top_logprobs_map(forced[i - 1]) : json());
    echo_logprobs_["text_offset"].push_back(text_offset_);
    text_offset_ += int64_t(t.size());
  }
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
    for (const auto& v : echo_logprobs_[key]) logprobs_[key].push_back(v);
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

// tool_choice "auto": holds the text back while it could still be a tool call, then sends it
// whole as content, or (finished) the calls it makes.
json ChoiceBuilder::add_auto(const Event& e, json lp) {
  if (!lp.is_null())
    for (auto& entry : lp["content"]) held_logprobs_.push_back(std::move(entry));
  if (e.finished)
    auto_calls_ = parse_auto_tool_calls(text_, request_.tools);
  else if (could_be_tool_call(text_))
    return nullptr;
  auto_holding_ = false;
  json delta = json::object();
  if (!role_sent_) {
    delta["role"] = "assistant";
    role_sent_ = true;
  }
  if (auto_calls_)
    delta["tool_calls"] = auto_calls_json(true);
  else if (!text_.empty())
    delta["content"] = text_;
  json choice = {{"index", index_}, {"delta", delta}};
  choice["logprobs"] = request_.logprobs ? json{{"content", held_logprobs_}} : json();
  held_logprobs_ = json::array();
  choice["finish_reason"] = e.finished ? json(finish_reason()) : json();
  return choice;
}

// The calls of an "auto" output as OpenAI's tool_calls (delta: with each call's index).
json ChoiceBuilder::auto_calls_json(bool delta) const {
  json calls = json::array();
  for (size_t k = 0; k < auto_calls_->size(); ++k) {
    const auto& c = (*auto_calls_)[k];
    json call = {{"id", k == 0 ? call_id_ : call_id_ + "_" + std::to_string(k)},
                 {"type", "function"},
                 {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
    if (delta) call["index"] = k;
    calls.push_back(std::move(call));
  }
  return calls;
}

std::string ChoiceBuilder::finish_reason() const {
  if (auto_calls_) return "tool_calls";
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
  if (auto_holding_) return add_auto(e, std::move(lp));
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
    } else if (!e.text.empty() || !e.finished) {
      delta["content"] = e.text;  // "" for a token whose text is held back
    }
    if (delta.empty() && !e.finished) return nullptr;
    choice["delta"] = delta;
  } else {
    choice["text"] = echo_text_ + e.text;
    echo_text_.clear();
    if (!echo_logprobs_.is_null()) {  // the prompt's logprobs before the new tokens'
      for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
        for (const auto& v : lp[key]) echo_logprobs_[key].push_back(v);
      lp = std::move(echo_logprobs_);
      echo_logprobs_ = nullptr;
    }
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
  } else if (auto_calls_) {
    choice["message"] = {
        {"role", "assistant"}, {"content", nullptr}, {"tool_calls", auto_calls_json(false)}};
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
  // Each prompt's tokens count once (its n choices share it): choice prompt * n + i.
  std::map<int, Usage> prompts;
  for (const auto& c : choices) {
    Usage& p = prompts[c.index() / std::max(1, c.request().n)];
    p.prompt_tokens = c.usage().prompt_tokens;
    p.cached_tokens = std::max(p.cached_tokens, c.usage().cached_tokens);
    u.completion_tokens += c.usage().completion_tokens;
  }
  for (const auto& [i, p] : prompts) {
    u.prompt_tokens += p.prompt_tokens;
    u.cached_tokens += p.cached_tokens;
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
