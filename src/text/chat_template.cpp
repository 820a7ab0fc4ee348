// The built-in chat templates: what the well-known Jinja chat_template strings of model
// repositories render, written out (zenith has no Jinja engine).
#include <algorithm>
#include <string_view>

#include "zenith/error.h"
#include "zenith/text.h"

namespace zenith::text {
namespace {

std::string list_names() {
  std::string s;
  for (const std::string& name : ChatTemplate::names()) s += (s.empty() ? "" : ", ") + name;
  return s;
}

// Python's str.strip() for ASCII whitespace (Jinja's trim filter).
std::string strip(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return "";
  return std::string(s.substr(begin, s.find_last_not_of(kSpace) - begin + 1));
}

// Collects segments, merging neighbours of the same kind.
struct Writer {
  std::vector<ChatSegment> segments;
  void add(std::string text, bool answer) {
    if (text.empty()) return;
    if (!segments.empty() && segments.back().answer == answer)
      segments.back().text += text;
    else
      segments.push_back({std::move(text), answer});
  }
  void prompt(std::string text) { add(std::move(text), false); }
  void answer(std::string text) { add(std::move(text), true); }
};

void check_role(const ChatMessage& m, size_t index, const std::string& name) {
  ZENITH_CHECK(m.role == "system" || m.role == "user" || m.role == "assistant", "[chat] ", name,
               ": message ", index, " has role \"", m.role,
               "\" (expected system, user or assistant)");
}

}  // namespace

const std::vector<std::string>& ChatTemplate::names() {
  static const std::vector<std::string> names = {"llama-2", "llama-3", "chatml", "alpaca"};
  return names;
}

ChatTemplate ChatTemplate::by_name(const std::string& name, std::string bos_token,
                                   std::string eos_token) {
  for (const std::string& known : names())
    if (name == known) return ChatTemplate(name, std::move(bos_token), std::move(eos_token));
  ZENITH_FAIL("[chat] unknown chat template \"", name, "\" (known: ", list_names(), ")");
}

ChatTemplate ChatTemplate::recognise(const std::string& jinja, std::string bos_token,
                                     std::string eos_token) {
  static const std::pair<const char*, const char*> kMarkers[] = {{"<|start_header_id|>", "llama-3"},
                                                                 {"<|im_start|>", "chatml"},
                                                                 {"[INST]", "llama-2"},
                                                                 {"### Instruction:", "alpaca"}};
  for (auto [marker, name] : kMarkers)
    if (jinja.find(marker) != std::string::npos)
      return ChatTemplate(name, std::move(bos_token), std::move(eos_token));
  ZENITH_FAIL("[chat] the chat_template is none of the known formats (", list_names(),
              "; recognised by <|start_header_id|>, <|im_start|>, [INST], ### Instruction:); "
              "pass one of them by name");
}

ChatTemplate ChatTemplate::for_tokenizer(const Tokenizer& tokenizer, const std::string& name) {
  if (!name.empty()) return by_name(name, tokenizer.bos_token(), tokenizer.eos_token());
  ZENITH_CHECK(!tokenizer.chat_template().empty(), "[chat] ", tokenizer.dir(),
               " has no chat_template in tokenizer_config.json; pass a template name (",
               list_names(), ")");
  try {
    return recognise(tokenizer.chat_template(), tokenizer.bos_token(), tokenizer.eos_token());
  } catch (const Error& e) {
    ZENITH_FAIL(e.what(), " (", tokenizer.dir(), "/tokenizer_config.json)");
  }
}

std::vector<ChatSegment> ChatTemplate::render_segments(std::span<const ChatMessage> messages,
                                                       bool add_generation_prompt) const {
  Writer w;
  if (name_ == "llama-3") {
    for (size_t i = 0; i < messages.size(); ++i) {
      const ChatMessage& m = messages[i];
      w.prompt((i == 0 ? bos_ : "") + "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n");
      w.add(strip(m.content) + "<|eot_id|>", m.role == "assistant");
    }
    if (add_generation_prompt) w.prompt("<|start_header_id|>assistant<|end_header_id|>\n\n");
  } else if (name_ == "chatml") {
    for (const ChatMessage& m : messages) {
      w.prompt("<|im_start|>" + m.role + "\n");
      w.add(m.content + "<|im_end|>", m.role == "assistant");
      w.prompt("\n");
    }
    if (add_generation_prompt) w.prompt("<|im_start|>assistant\n");
  } else if (name_ == "llama-2") {
    // [INST] turns; a system message goes into the first one. No generation prompt: the
    // rendering of a user turn already ends where the answer starts.
    size_t first = 0;
    std::string system;
    bool has_system = !messages.empty() && messages[0].role == "system";
    if (has_system) {
      system = messages[0].content;
      first = 1;
    }
    for (size_t i = first; i < messages.size(); ++i) {
      const ChatMessage& m = messages[i];
      check_role(m, i, name_);
      bool user_turn = (i - first) % 2 == 0;
      ZENITH_CHECK((m.role == "user") == user_turn && m.role != "system",
                   "[chat] llama-2: "
                   "roles must alternate user/assistant/user/... after an optional system "
                   "message; message ",
                   i, " is ", m.role);
      std::string content = m.content;
      if (i == first && has_system) content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
      if (m.role == "user")
        w.prompt(bos_ + "[INST] " + strip(content) + " [/INST]");
      else
        w.answer(std::string(" ").append(strip(content)).append(" ").append(eos_));
    }
  } else {  // alpaca
    for (size_t i = 0; i < messages.size(); ++i) {
      const ChatMessage& m = messages[i];
      check_role(m, i, name_);
      if (m.role == "system") {
        w.prompt(m.content + "\n\n");
      } else if (m.role == "user") {
        w.prompt("### Instruction:\n" + m.content + "\n\n");
      } else {
        w.prompt("### Response:\n");
        w.answer(m.content + eos_);
        w.prompt("\n\n");
      }
    }
    if (add_generation_prompt) w.prompt("### Response:\n");
  }
  return w.segments;
}

std::string ChatTemplate::render(std::span<const ChatMessage> messages,
                                 bool add_generation_prompt) const {
  std::string text;
  for (const ChatSegment& s : render_segments(messages, add_generation_prompt)) text += s.text;
  return text;
}

// The whole conversation encoded at once (segment by segment would differ: SentencePiece adds a
// leading space to every piece of text). A token belongs to the segment where it starts: the
// tokens of the encoded text up to a segment boundary that agree with the whole encoding.
ChatEncoding encode_chat(const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                         std::span<const ChatMessage> messages, bool add_generation_prompt) {
  std::vector<ChatSegment> segments =
      chat_template.render_segments(messages, add_generation_prompt);
  std::string text;
  for (const ChatSegment& s : segments) text += s.text;
  ChatEncoding e;
  e.ids = tokenizer.encode(text, /*add_special=*/false);
  e.answer.assign(e.ids.size(), 0);
  size_t begin = 0, end_byte = 0;  // token range and byte end of the current segment
  for (size_t k = 0; k < segments.size(); ++k) {
    end_byte += segments[k].text.size();
    size_t end = e.ids.size();
    if (k + 1 < segments.size()) {
      std::vector<int32_t> prefix = tokenizer.encode(text.substr(0, end_byte), false);
      end = 0;
      while (end < prefix.size() && end < e.ids.size() && prefix[end] == e.ids[end]) ++end;
      end = std::max(end, begin);
    }
    for (size_t i = begin; i < end; ++i) e.answer[i] = segments[k].answer ? 1 : 0;
    begin = end;
  }
  return e;
}

}  // namespace zenith::text
