#include "serve/llm/openai_request.h"

#include <cmath>

#include "platform/http/reply.h"

namespace zenith::serve::llm {

using nlohmann::json;

std::string ApiError::type() const {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "invalid_request_error";
    case 429:
      return "rate_limit_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::optional<size_t> invalid_utf8_at(const std::string& text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    size_t len = 0;
    uint32_t min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, min = 0x10000;
    } else {
      return i;
    }
    if (i + len > n) return i;
    uint32_t cp = c & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::nullopt;
}

namespace {

ApiError bad(const std::string& param, const std::string& message) {
  return ApiError{400, message, param, ""};
}

// The JSON key whose value holds byte `at` of `body`: the last `"key":` before it.
std::string key_before(const std::string& body, size_t at) {
  for (size_t colon = body.rfind(':', at); colon != std::string::npos && colon > 0;
       colon = body.rfind(':', colon - 1)) {
    size_t end = colon;
    while (end > 0 && std::isspace(static_cast<unsigned char>(body[end - 1]))) --end;
    if (end == 0 || body[end - 1] != '"') continue;
    const size_t start = body.rfind('"', end - 2);
    if (start == std::string::npos) return "";
    return body.substr(start + 1, end - 2 - start);
  }
  return "";
}

std::string type_name(const json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

// Typed reads of one object's fields; errors name the field's path.
struct Fields {
  const json& obj;
  std::string prefix;  // "" at the top, "messages[1]." inside

  std::string path(const std::string& key) const { return prefix + key; }
  const json* get(const std::string& key) const {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  [[noreturn]] void wrong(const std::string& key, const std::string& want) const {
    throw bad(path(key), "'" + path(key) + "' must be " + want + ", got " + type_name(obj[key]));
  }
  std::optional<std::string> str(const std::string& key) const {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) wrong(key, "a string");
    return v->get<std::string>();
  }
  std::optional<bool> boolean(const std::string& key) const {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) wrong(key, "a boolean");
    return v->get<bool>();
  }
  std::optional<double> number(const std::string& key, double lo, double hi) const {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) wrong(key, "a number");
    const double x = v->get<double>();
    if (!(x >= lo && x <= hi))
      throw bad(path(key), "'" + path(key) + "' is " + v->dump() + "; it must be in [" +
                               json(lo).dump() + ", " + json(hi).dump() + "]");
    return x;
  }
  std::optional<int64_t> integer(const std::string& key, int64_t lo, int64_t hi) const {
    const json* v = get(key);
    if (!v) return std::nullopt;
    // 10.0 is an integer in JSON's number model; 1e9 arrives as a float from some clients.
    if (!v->is_number() ||
        (v->is_number_float() && v->get<double>() != std::floor(v->get<double>())))
      wrong(key, "an integer");
    const double as_double = v->get<double>();
    if (as_double < double(lo) || as_double > double(hi))
      throw bad(path(key), "'" + path(key) + "' is " + v->dump() + "; it must be in " +
                               std::to_string(lo) + ".." + std::to_string(hi));
    return v->is_number_float() ? int64_t(as_double) : v->get<int64_t>();
  }
  const json* object(const std::string& key) const {
    const json* v = get(key);
    if (v && !v->is_object()) wrong(key, "an object");
    return v;
  }
  const json* array(const std::string& key) const {
    const json* v = get(key);
    if (v && !v->is_array()) wrong(key, "an array");
    return v;
  }
};

// A message's content: a string, or an array of {"type": "text", "text"} parts.
std::string content_text(const json& content, const std::string& path) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    throw bad(path, "'" + path + "' must be a string or an array of text parts, got " +
                        type_name(content));
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    const json& part = content[i];
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
        !part["text"].is_string())
      throw bad(p, "'" + p +
                       "' must be {\"type\": \"text\", \"text\": string} (only text parts "
                       "are supported)");
    text += part["text"].get<std::string>();
  }
  return text;
}

std::vector<Message> parse_messages(const Fields& f) {
  const json* list = f.array("messages");
  if (!list) throw bad("messages", "'messages' is required");
  if (list->empty()) throw bad("messages", "'messages' must hold at least one message");
  std::vector<Message> out;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const json& m = (*list)[i];
    if (!m.is_object()) throw bad(at, "'" + at + "' must be an object, got " + type_name(m));
    Fields mf{m, at + "."};
    Message msg;
    msg.role = mf.str("role").value_or("");
    if (msg.role == "developer") msg.role = "system";
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
      throw bad(at + ".role", "'" + at +
                                  ".role' must be system, developer, user, assistant or "
                                  "tool, got " +
                                  m.value("role", json()).dump());
    if (const json* tc = mf.array("tool_calls"); tc && msg.role == "assistant")
      msg.tool_calls = *tc;
    const json* content = mf.get("content");
    if (!content && !(msg.role == "assistant" && !msg.tool_calls.is_null()))
      throw bad(at + ".content", "'" + at + ".content' is required");
    if (content) msg.content = content_text(*content, at + ".content");
    if (msg.role == "tool") msg.tool_call_id = mf.str("tool_call_id").value_or("");
    out.push_back(std::move(msg));
  }
  return out;
}

// prompt: a string, token ids, or a list of strings or of token-id lists (one prompt each).
void parse_prompt(const Fields& f, Request& r) {
  const json* p = f.get("prompt");
  if (!p) throw bad("prompt", "'prompt' is required");
  auto ids_of = [](const json& list, const std::string& path) {
    Prompt prompt;
    prompt.is_ids = true;
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_number_integer() || list[i].get<int64_t>() < 0)
        throw bad(path, "'" + path + "[" + std::to_string(i) +
                            "]' must be a token id (an integer >= 0), got " + list[i].dump());
      prompt.ids.push_back(list[i].get<int64_t>());
    }
    if (prompt.ids.empty()) throw bad(path, "'" + path + "' is empty");
    return prompt;
  };
  auto text_of = [](const json& text, const std::string& path) {
    if (text.get<std::string>().empty()) throw bad(path, "'" + path + "' is empty");
    return Prompt{text.get<std::string>(), {}, false};
  };
  const std::string want =
      "a string, an array of token ids, or an array of strings or of "
      "token-id arrays";
  if (p->is_string()) {
    r.prompts.push_back(text_of(*p, "prompt"));
  } else if (!p->is_array()) {
    f.wrong("prompt", want);
  } else if (p->empty()) {
    throw bad("prompt", "'prompt' is an empty array");
  } else if ((*p)[0].is_number()) {
    r.prompts.push_back(ids_of(*p, "prompt"));
  } else {
    if (p->size() > size_t(kMaxChoices))
      throw bad("prompt", "'prompt' holds " + std::to_string(p->size()) + " prompts; at most " +
                              std::to_string(kMaxChoices) + " are allowed");
    const bool strings = (*p)[0].is_string();
    for (size_t i = 0; i < p->size(); ++i) {
      const std::string at = "prompt[" + std::to_string(i) + "]";
      const json& item = (*p)[i];
      if (strings && item.is_string())
        r.prompts.push_back(text_of(item, at));
      else if (!strings && item.is_array())
        r.prompts.push_back(ids_of(item, at));
      else
        throw bad(at, "'" + at + "' must be " +
                          (strings ? "a string, as 'prompt[0]' is" : "an array of token ids") +
                          ", got " + type_name(item));
    }
  }
}

void parse_stop(const Fields& f, Request& r) {
  const json* s = f.get("stop");
  if (!s) return;
  if (s->is_string()) {
    r.stop.push_back(s->get<std::string>());
  } else if (s->is_array()) {
    if (s->size() > size_t(kMaxStops))
      throw bad("stop", "'stop' holds " + std::to_string(s->size()) + " strings; at most " +
                            std::to_string(kMaxStops) + " are allowed");
    for (size_t i = 0; i < s->size(); ++i) {
      if (!(*s)[i].is_string())
        throw bad("stop",
                  "'stop[" + std::to_string(i) + "]' must be a string, got " + type_name((*s)[i]));
      r.stop.push_back((*s)[i].get<std::string>());
    }
  } else {
    f.wrong("stop", "a string or an array of strings");
  }
  for (const auto& stop : r.stop) {
    if (stop.empty()) throw bad("stop", "'stop' holds an empty string");
    if (stop.size() > kMaxStopBytes)
      throw bad("stop", "a 'stop' string is " + std::to_string(stop.size()) + " bytes; at most " +
                            std::to_string(kMaxStopBytes));
  }
}

void parse_response_format(const Fields& f, Request& r) {
  const json* rf = f.object("response_format");
  if (!rf) return;
  Fields rff{*rf, "response_format."};
  r.response_format = rff.str("type").value_or("");
  if (r.response_format == "json_schema") {
    const json* js = rff.object("json_schema");
    if (!js) throw bad("response_format.json_schema", "'response_format.json_schema' is required");
    Fields jf{*js, "response_format.json_schema."};
    r.json_schema_name = jf.str("name").value_or("");
    const json* schema = jf.object("schema");
    if (!schema)
      throw bad("response_format.json_schema.schema",
                "'response_format.json_schema.schema' is required");
    jf.boolean("strict");  // the schema itself is read in its order by parse_request
  } else if (r.response_format != "text" && r.response_format != "json_object") {
    throw bad("response_format.type",
              "'response_format.type' must be text, json_object or "
              "json_schema, got " +
                  rf->value("type", json()).dump());
  }
}

void parse_tools(const Fields& f, Request& r) {
  if (const json* tools = f.array("tools")) {
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string at = "tools[" + std::to_string(i) + "]";
      const json& t = (*tools)[i];
      if (!t.is_object() || t.value("type", json()) != "function" || !t.contains("function") ||
          !t["function"].is_object())
        throw bad(at, "'" + at + "' must be {\"type\": \"function\", \"function\": {...}}");
      Fields ff{t["function"], at + ".function."};
      ToolFunction fn;
      fn.name = ff.str("name").value_or("");
      if (fn.name.empty())
        throw bad(at + ".function.name", "'" + at + ".function.name' is required");
      fn.description = ff.str("description").value_or("");
      if (const json* p = ff.object("parameters")) fn.parameters = *p;
      r.tools.push_back(std::move(fn));
    }
  }
  r.tool_choice = r.tools.empty() ? "none" : "auto";
  const json* tc = f.get("tool_choice");
  if (!tc) return;
  if (tc->is_string()) {
    r.tool_choice = tc->get<std::string>();
    if (r.tool_choice != "none" && r.tool_choice != "auto" && r.tool_choice != "required")
      throw bad("tool_choice",
                "'tool_choice' must be none, auto, required or {\"type\": "
                "\"function\", \"function\": {\"name\"}}, got " +
                    tc->dump());
  } else if (tc->is_object() && tc->contains("function") && (*tc)["function"].is_object() &&
             (*tc)["function"].value("name", json()).is_string()) {
    r.tool_choice = "function";
    r.tool_name = (*tc)["function"]["name"].get<std::string>();
    bool known = false;
    for (const auto& t : r.tools) known = known || t.name == r.tool_name;
    if (!known)
      throw bad("tool_choice",
                "'tool_choice' names function '" + r.tool_name + "', which is not in 'tools'");
  } else {
    f.wrong("tool_choice", "a string or {\"type\": \"function\", \"function\": {\"name\"}}");
  }
  if (r.tool_choice != "none" && r.tool_choice != "auto" && r.tools.empty())
    throw bad("tool_choice", "'tool_choice' is " + tc->dump() + " but 'tools' is empty");
}

}  // namespace

Request parse_request(const std::string& body, bool chat) {
  if (platform::nesting_depth(body) > platform::kMaxJsonDepth)
    throw bad("", "the JSON body is nested deeper than " + std::to_string(platform::kMaxJsonDepth) +
                      " levels");
  if (auto at = invalid_utf8_at(body)) {
    const std::string key = key_before(body, *at);
    throw bad(key, "the body is not valid UTF-8 at byte " + std::to_string(*at) +
                       (key.empty() ? std::string() : " (in '" + key + "')"));
  }
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {
    throw bad("", std::string("malformed JSON body: ") + e.what());
  }
  if (!j.is_object()) throw bad("", "the body must be a JSON object, got " + type_name(j));
  Fields f{j, ""};
  Request r;
  r.chat = chat;
  r.model = f.str("model").value_or("");
  if (r.model.empty()) throw bad("model", "'model' is required (GET /v1/models lists them)");
  if (chat)
    r.messages = parse_messages(f);
  else
    parse_prompt(f, r);
  constexpr int64_t kBig = int64_t(1) << 53;
  auto max_new = f.integer("max_completion_tokens", 1, kBig);
  if (max_new)
    r.max_tokens_field = "max_completion_tokens";
  else
    max_new = f.integer("max_tokens", 1, kBig);
  r.max_tokens = max_new;
  r.temperature = f.number("temperature", 0, 2).value_or(1);
  r.top_p = f.number("top_p", 0, 1).value_or(1);
  if (r.top_p <= 0) throw bad("top_p", "'top_p' must be in (0, 1], got 0");
  r.top_k = f.integer("top_k", -1, 1 << 30).value_or(0);
  if (r.top_k < 0) r.top_k = 0;
  if (auto seed = f.integer("seed", INT64_MIN, INT64_MAX)) r.seed = uint64_t(*seed);
  r.n = int(f.integer("n", 1, kMaxChoices).value_or(1));
  r.presence_penalty = f.number("presence_penalty", -2, 2).value_or(0);
  r.frequency_penalty = f.number("frequency_penalty", -2, 2).value_or(0);
  parse_stop(f, r);
  if (chat) {
    r.logprobs = f.boolean("logprobs").value_or(false);
    r.top_logprobs = int(f.integer("top_logprobs", 0, kMaxTopLogprobs).value_or(0));
    if (r.top_logprobs > 0 && !r.logprobs)
      throw bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    parse_response_format(f, r);
    parse_tools(f, r);
    if (r.tool_choice == "required" || r.tool_choice == "function") {
      if (r.response_format != "text")
        throw bad("response_format",
                  "'response_format' and a required 'tool_choice' cannot be "
                  "combined");
    }
  } else {
    if (auto lp = f.integer("logprobs", 0, kMaxCompletionLogprobs)) {
      r.logprobs = true;
      r.top_logprobs = int(*lp);
    }
    r.echo = f.boolean("echo").value_or(false);
    if (f.str("suffix"))
      throw bad("suffix",
                "'suffix' is not supported: this model has no fill-in-the-middle tokens (LLaMA "
                "models are not trained for insertion)");
    if (r.prompts.size() * size_t(r.n) > size_t(kMaxChoices))
      throw bad(r.n > 1 ? "n" : "prompt",
                std::to_string(r.prompts.size()) + " prompts times 'n' " + std::to_string(r.n) +
                    " is " + std::to_string(r.prompts.size() * size_t(r.n)) + " choices; at most " +
                    std::to_string(kMaxChoices) + " are allowed");
  }
  r.stream = f.boolean("stream").value_or(false);
  if (const json* so = f.object("stream_options")) {
    if (!r.stream)
      throw bad("stream_options", "'stream_options' is only allowed with 'stream': true");
    r.include_usage = Fields{*so, "stream_options."}.boolean("include_usage").value_or(false);
  }
  r.user = f.str("user").value_or("");
  // The schemas again, keeping the order of their properties (json sorts keys).
  if (r.response_format == "json_schema" || !r.tools.empty()) {
    const auto ordered = nlohmann::ordered_json::parse(body);
    if (r.response_format == "json_schema")
      r.json_schema = ordered["response_format"]["json_schema"]["schema"];
    for (size_t i = 0; i < r.tools.size(); ++i) {
      const auto& fn = ordered["tools"][i]["function"];
      if (fn.contains("parameters") && fn["parameters"].is_object())
        r.tools[i].parameters = fn["parameters"];
    }
  }
  return r;
}

}  // namespace zenith::serve::llm
