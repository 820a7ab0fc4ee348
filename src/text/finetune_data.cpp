// Fine-tuning data: JSONL records (Alpaca, chat, prompt/completion, text, pre-tokenized) -> ids
// + labels.
#include "zenith/finetune_data.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "zenith/error.h"

namespace zenith::finetune {

namespace {

constexpr int64_t kIgnore = -100;

// A bad record: the message becomes "FILE:LINE: message" in the load error.
struct BadLine {
  std::string message;
};

const std::string& string_field(const nlohmann::json& j, const char* key, bool required) {
  static const std::string empty;
  if (!j.contains(key)) {
    if (required) throw BadLine{std::string("missing \"") + key + "\""};
    return empty;
  }
  if (!j[key].is_string())
    throw BadLine{std::string("\"") + key + "\" is " + j[key].type_name() + ", expected a string"};
  return j[key].get_ref<const std::string&>();
}

std::vector<int64_t> id_array(const nlohmann::json& j, const char* key, bool allow_ignore,
                              int64_t vocab) {
  if (!j[key].is_array())
    throw BadLine{std::string("\"") + key + "\" is " + j[key].type_name() +
                  ", expected an array of integers"};
  std::vector<int64_t> out;
  for (size_t i = 0; i < j[key].size(); ++i) {
    const auto& v = j[key][i];
    if (!v.is_number_integer())
      throw BadLine{std::string("\"") + key + "\"[" + std::to_string(i) + "] is not an integer"};
    const int64_t id = v.get<int64_t>();
    const bool ignored = allow_ignore && id == kIgnore;
    if (!ignored && (id < 0 || (vocab > 0 && id >= vocab)))
      throw BadLine{std::string("\"") + key + "\"[" + std::to_string(i) +
                    "] = " + std::to_string(id) + " is outside the vocabulary [0, " +
                    std::to_string(vocab) + ")"};
    out.push_back(id);
  }
  return out;
}

const text::Tokenizer& need_tokenizer(const text::Tokenizer* tokenizer, const char* format) {
  if (tokenizer == nullptr)
    throw BadLine{std::string("a ") + format +
                  " record needs the model's tokenizer (tokenizer.json or tokenizer.model)"};
  return *tokenizer;
}

// A rendered conversation: the answer tokens learned (every token with train_on_prompt); the
// tokens after the last answer dropped (nothing to learn there); an eos appended and learned
// where the template wrote none.
Example from_chat(const text::Tokenizer& tok, const text::ChatTemplate& tmpl,
                  const std::vector<text::ChatMessage>& messages, bool train_on_prompt) {
  if (messages.empty() || messages.back().role != "assistant")
    throw BadLine{"the conversation must end with an assistant message (the answer to learn)"};
  text::ChatEncoding enc = text::encode_chat(tok, tmpl, messages, false);
  size_t end = enc.ids.size();
  while (end > 0 && !enc.answer[end - 1]) --end;
  if (end == 0) throw BadLine{"the answer renders to no tokens"};
  Example e;
  for (size_t i = 0; i < end; ++i) {
    e.ids.push_back(enc.ids[i]);
    e.labels.push_back(enc.answer[i] || train_on_prompt ? enc.ids[i] : kIgnore);
  }
  if (!tok.is_eos(int32_t(e.ids.back()))) {
    if (tok.eos_id() < 0) throw BadLine{"the tokenizer has no eos token to end the answer with"};
    e.ids.push_back(tok.eos_id());
    e.labels.push_back(tok.eos_id());
  }
  return e;
}

std::vector<text::ChatMessage> message_list(const nlohmann::json& list, const char* key) {
  if (!list.is_array()) throw BadLine{std::string("\"") + key + "\" is not an array"};
  std::vector<text::ChatMessage> messages;
  for (const auto& m : list) {
    if (!m.is_object()) throw BadLine{"a message is not an object {\"role\", \"content\"}"};
    messages.push_back({string_field(m, "role", true), string_field(m, "content", true)});
  }
  return messages;
}

// TRL's prompt-completion record. Strings: prompt + completion encoded as one text, the
// completion's tokens (those past the prompt's own encoding) and an eos learned, as TRL's
// SFTTrainer (completion_only_loss). Message lists: one conversation through the chat template.
Example from_prompt_completion(const nlohmann::json& j, const text::Tokenizer* tokenizer,
                               const DataOptions& o) {
  if (!j.contains("completion")) throw BadLine{"a \"prompt\" record needs a \"completion\""};
  const auto& tok = need_tokenizer(tokenizer, "prompt/completion");
  if (j["prompt"].is_array()) {
    std::vector<text::ChatMessage> messages = message_list(j["prompt"], "prompt");
    for (auto& m : message_list(j["completion"], "completion")) messages.push_back(std::move(m));
    return from_chat(tok, text::ChatTemplate::for_tokenizer(tok, o.chat_template), messages,
                     o.train_on_prompt);
  }
  const std::string& prompt = string_field(j, "prompt", true);
  const std::string& completion = string_field(j, "completion", true);
  if (completion.empty()) throw BadLine{"\"completion\" is empty: nothing to learn"};
  const size_t prompt_len = tok.encode(prompt).size();
  Example e;
  for (int32_t id : tok.encode(prompt + completion)) e.ids.push_back(id);
  if (!tok.is_eos(int32_t(e.ids.back()))) {
    if (tok.eos_id() < 0) throw BadLine{"the tokenizer has no eos token to end the completion"};
    e.ids.push_back(tok.eos_id());
  }
  for (size_t i = 0; i < e.ids.size(); ++i)
    e.labels.push_back(i >= prompt_len || o.train_on_prompt ? e.ids[i] : kIgnore);
  return e;
}

Example parse_record(const nlohmann::json& j, const text::Tokenizer* tokenizer,
                     const DataOptions& o, std::string& format) {
  if (!j.is_object()) throw BadLine{std::string("a record is a JSON object, got ") + j.type_name()};
  if (j.contains("input_ids")) {
    format = "tokenized";
    Example e;
    e.ids = id_array(j, "input_ids", false, o.vocab_size);
    if (j.contains("labels")) {
      e.labels = id_array(j, "labels", true, o.vocab_size);
      if (e.labels.size() != e.ids.size())
        throw BadLine{"\"labels\" has " + std::to_string(e.labels.size()) +
                      " entries, \"input_ids\" " + std::to_string(e.ids.size())};
    } else {
      e.labels = e.ids;
    }
    return e;
  }
  if (j.contains("messages")) {
    format = "chat";
    const std::vector<text::ChatMessage> messages = message_list(j["messages"], "messages");
    const auto& tok = need_tokenizer(tokenizer, "chat");
    return from_chat(tok, text::ChatTemplate::for_tokenizer(tok, o.chat_template), messages,
                     o.train_on_prompt);
  }
  if (j.contains("prompt")) {
    format = "prompt_completion";
    return from_prompt_completion(j, tokenizer, o);
  }
  if (j.contains("instruction")) {
    format = "alpaca";
    std::string prompt = string_field(j, "instruction", true);
    const std::string& input = string_field(j, "input", false);
    if (!input.empty()) prompt += "\n\n### Input:\n" + input;
    const std::vector<text::ChatMessage> messages = {
        {"user", prompt}, {"assistant", string_field(j, "output", true)}};
    const auto& tok = need_tokenizer(tokenizer, "Alpaca");
    const std::string name = o.chat_template.empty() ? "alpaca" : o.chat_template;
    return from_chat(tok, text::ChatTemplate::by_name(name, tok.bos_token(), tok.eos_token()),
                     messages, o.train_on_prompt);
  }
  if (j.contains("text")) {
    format = "text";
    const auto& tok = need_tokenizer(tokenizer, "text");
    Example e;
    for (int32_t id : tok.encode(string_field(j, "text", true))) e.ids.push_back(id);
    if (tok.eos_id() >= 0) e.ids.push_back(tok.eos_id());
    e.labels = e.ids;
    return e;
  }
  throw BadLine{
      "no known format: expected \"instruction\"/\"output\" (Alpaca), \"messages\" (chat), "
      "\"prompt\"/\"completion\" (TRL), \"text\", or \"input_ids\" (pre-tokenized)"};
}

bool learns_something(const Example& e) {
  for (size_t i = 1; i < e.labels.size(); ++i)
    if (e.labels[i] != kIgnore) return true;
  return false;
}

}  // namespace

Data load_data(const std::string& path, const text::Tokenizer* tokenizer,
               const DataOptions& options) {
  ZENITH_CHECK(options.max_seq_len >= 2, "[finetune] --max-seq-len must be at least 2, got ",
               options.max_seq_len);
  std::ifstream in(path, std::ios::binary);
  ZENITH_CHECK(in.good(), "[finetune] cannot read data file ", path);
  Data data;
  std::vector<std::string> errors;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ++data.lines;
    try {
      std::string format;
      Example e = parse_record(nlohmann::json::parse(line), tokenizer, options, format);
      ++data.formats[format];
      if (int64_t(e.ids.size()) > options.max_seq_len) {
        e.ids.resize(size_t(options.max_seq_len));
        e.labels.resize(size_t(options.max_seq_len));
        ++data.truncated;
      }
      if (!learns_something(e)) {
        ++data.skipped;
        continue;
      }
      data.examples.push_back(std::move(e));
    } catch (const BadLine& b) {
      errors.push_back(path + ":" + std::to_string(number) + ": " + b.message);
    } catch (const nlohmann::json::exception& x) {
      errors.push_back(path + ":" + std::to_string(number) + ": not JSON (" + x.what() + ")");
    } catch (const Error& x) {
      errors.push_back(path + ":" + std::to_string(number) + ": " + x.what());
    }
  }
  if (!errors.empty()) {
    std::ostringstream s;
    s << "[finetune] " << errors.size() << " malformed line" << (errors.size() > 1 ? "s" : "")
      << " in " << path << ":";
    for (size_t i = 0; i < errors.size() && i < 20; ++i) s << "\n  " << errors[i];
    if (errors.size() > 20) s << "\n  ... and " << errors.size() - 20 << " more";
    ZENITH_FAIL(s.str());
  }
  ZENITH_CHECK(data.lines > 0, "[finetune] ", path, " has no records");
  ZENITH_CHECK(!data.examples.empty(), "[finetune] ", path, ": none of its ", data.lines,
               " records has a learned token within --max-seq-len ", options.max_seq_len,
               " (all prompts too long, or all labels -100)");
  return data;
}

}  // namespace zenith::finetune
