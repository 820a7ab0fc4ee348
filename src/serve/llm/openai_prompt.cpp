#include "serve/llm/openai_prompt.h"

#include <algorithm>

#include "platform/http/reply.h"

namespace zenith::serve::llm {

using nlohmann::json;

namespace {

bool only_special(const text::Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  return !ids.empty() &&
         std::all_of(ids.begin(), ids.end(), [&](int32_t id) { return tokenizer.is_special(id); });
}

// The messages as the built-in templates take them (system, then user and assistant turns in
// turn): tool results become user turns, tool calls the assistant's text, and turns of the same
// role in a row are joined.
std::vector<text::ChatMessage> template_messages(const Request& r) {
  std::vector<text::ChatMessage> out;
  // The built-in templates have no place for tools: their names (and descriptions) go in a
  // system turn, kept short (a small model's context is short); a required or named call's
  // arguments are shaped by constrained decoding, not by the prompt; with "auto" the turn says
  // how a call is written (what openai_tools.h reads back).
  if (!r.tools.empty() && r.tool_choice != "none") {
    std::string list;
    for (const auto& t : r.tools)
      list += (list.empty() ? "" : "; ") + t.name +
              (t.description.empty() ? std::string() : " (" + t.description + ")");
    std::string how;  // "auto": the model decides, and must know how a call is written
    if (r.tool_choice == "auto")
      how = " To call one, answer only {\"name\": <function>, \"arguments\": {...}}.";
    out.push_back({"system", "Functions you can call: " + list + "." + how});
  }
  for (const auto& m : r.messages) {
    text::ChatMessage c{m.role, m.content};
    if (m.role == "tool") {
      c.role = "user";
      c.content = "Result of tool call" +
                  (m.tool_call_id.empty() ? std::string() : " " + m.tool_call_id) + ": " +
                  m.content;
    } else if (m.role == "assistant" && !m.tool_calls.is_null()) {
      c.content += (c.content.empty() ? "" : "\n") + platform::json_text(m.tool_calls);
    }
    if (!out.empty() && out.back().role == c.role) {
      out.back().content += "\n\n" + c.content;
    } else {
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace

std::vector<std::vector<int64_t>> prompt_ids(const Request& r, const text::Tokenizer& tokenizer,
                                             const text::ChatTemplate* chat_template,
                                             int64_t vocab_size) {
  if (r.chat) {
    for (size_t i = 0; i < r.messages.size(); ++i)
      if (only_special(tokenizer, tokenizer.encode(r.messages[i].content, false))) {
        const std::string at = "messages[" + std::to_string(i) + "].content";
        throw ApiError{400, "'" + at + "' holds only special tokens", at, ""};
      }
    if (!chat_template)
      throw ApiError{400,
                     "this model has no chat template (tokenizer_config.json's chat_template); "
                     "use /v1/completions",
                     "messages", ""};
    const auto messages = template_messages(r);
    try {
      const auto enc = text::encode_chat(tokenizer, *chat_template, messages, true);
      return {std::vector<int64_t>(enc.ids.begin(), enc.ids.end())};
    } catch (const std::exception& e) {
      throw ApiError{
          400,
          std::string("'messages' cannot be written with the model's chat template: ") + e.what(),
          "messages", ""};
    }
  }
  std::vector<std::vector<int64_t>> all;
  for (size_t p = 0; p < r.prompts.size(); ++p) {
    const Prompt& prompt = r.prompts[p];
    const std::string at = r.prompts.size() > 1 ? "prompt[" + std::to_string(p) + "]" : "prompt";
    if (prompt.is_ids) {
      for (size_t i = 0; i < prompt.ids.size(); ++i)
        if (prompt.ids[i] >= vocab_size)
          throw ApiError{400,
                         "'" + at + "[" + std::to_string(i) + "]' is token id " +
                             std::to_string(prompt.ids[i]) + ", outside the vocabulary of " +
                             std::to_string(vocab_size),
                         at, ""};
      all.push_back(prompt.ids);
      continue;
    }
    const auto enc = tokenizer.encode(prompt.text, true);
    if (only_special(tokenizer, enc))
      throw ApiError{400, "'" + at + "' holds only special tokens", at, ""};
    all.emplace_back(enc.begin(), enc.end());
  }
  return all;
}

int64_t completion_budget(const Request& r, int64_t prompt_tokens, int64_t context) {
  const std::string& field = r.max_tokens_field;
  if (prompt_tokens >= context)
    throw ApiError{400,
                   "This model's maximum context length is " + std::to_string(context) +
                       " tokens. However, your prompt is " + std::to_string(prompt_tokens) +
                       " tokens, which leaves no room for a completion.",
                   r.chat ? "messages" : "prompt", "context_length_exceeded"};
  if (!r.max_tokens) return context - prompt_tokens;
  if (prompt_tokens + *r.max_tokens > context)
    throw ApiError{400,
                   "This model's maximum context length is " + std::to_string(context) +
                       " tokens. However, you requested " +
                       std::to_string(prompt_tokens + *r.max_tokens) + " tokens (" +
                       std::to_string(prompt_tokens) + " in the prompt, " +
                       std::to_string(*r.max_tokens) + " in " + field +
                       "). Please reduce the prompt or " + field + ".",
                   field, "context_length_exceeded"};
  return *r.max_tokens;
}

}  // namespace zenith::serve::llm
