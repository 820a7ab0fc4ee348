// Tokenizers for LLMs and chat templates: SentencePiece `tokenizer.model` files and Hugging Face
// `tokenizer.json` files (BPE: byte-level as GPT-2/LLaMA-3/Qwen2, metaspace + byte fallback as
// LLaMA-2), read from a model directory the way transformers reads it.
//
//   auto tok = text::Tokenizer::from_dir("TinyLlama-1.1B");
//   std::vector<int32_t> ids = tok->encode("Hello world");      // [1, 15043, 3186]
//   std::string back = tok->decode(ids, /*skip_special=*/true);  // "Hello world"
//   text::StreamDecoder stream(*tok);                            // text as tokens arrive
//   for (int32_t id : generated) std::cout << stream.push(id);
//   std::cout << stream.finish();
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zenith::text {

struct EncodeOptions {
  bool add_special = true;    // bos/eos as the tokenizer's post-processor or config says
  bool parse_special = true;  // special tokens written in the text ("<|eot_id|>") become their ids
};

// A token matched in the text before the model sees it (tokenizer.json's added_tokens, a
// SentencePiece model's control pieces, tokenizer_config.json's added_tokens_decoder).
struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = true;  // special tokens are dropped by decode(ids, skip_special = true)
};

// Where decoding stands: tokenizers treat the start of the text specially (a leading space that
// encoding added is removed). Used by decode() and StreamDecoder, opaque to callers.
struct DecodeState {
  int64_t position = 0;      // tokens decoded so far (skipped special tokens not counted)
  bool text_empty = true;    // no byte produced yet
  bool start_done = false;   // SentencePiece: the start-of-text space rule no longer applies
  bool space_taken = false;  // SentencePiece: the previous piece's leading space was removed
  int strip_left = -1;       // tokenizer.json Strip decoder: characters still to strip
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // DIR/tokenizer.json (preferred, as transformers does) or DIR/tokenizer.model, with DIR's
  // tokenizer_config.json (bos/eos/pad/unk tokens, add_bos_token, add_eos_token,
  // chat_template), special_tokens_map.json and generation_config.json (eos_token_id lists)
  // where present. Errors name the file and the JSON key.
  static std::shared_ptr<Tokenizer> from_dir(const std::string& dir);
  // from_dir, or null when DIR has neither tokenizer.json nor tokenizer.model (a model
  // directory without a tokenizer: its users give token ids).
  static std::shared_ptr<Tokenizer> find_in_dir(const std::string& dir);

  // Text (UTF-8) -> ids.
  std::vector<int32_t> encode(std::string_view text, bool add_special = true) const {
    return encode(text, EncodeOptions{.add_special = add_special});
  }
  virtual std::vector<int32_t> encode(std::string_view text,
                                      const EncodeOptions& options) const = 0;

  // Ids -> text; bytes that are not valid UTF-8 become U+FFFD. Fails on an id >= vocab_size().
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // Ids are 0 .. vocab_size() - 1, added tokens included.
  virtual int32_t vocab_size() const = 0;
  // The token's string as the vocabulary has it ("Ġworld", "▁world", "<0x0A>", "<s>").
  virtual std::string id_to_piece(int32_t id) const = 0;
  virtual std::optional<int32_t> piece_to_id(std::string_view piece) const = 0;
  virtual bool is_special(int32_t id) const = 0;
  const std::vector<AddedToken>& added_tokens() const { return added_tokens_; }
  // "tokenizer.json (BPE)" or "tokenizer.model (SentencePiece BPE)", for messages.
  virtual std::string kind() const = 0;

  // Special ids, -1 where the tokenizer has none.
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t pad_id() const { return pad_id_; }
  int32_t unk_id() const { return unk_id_; }
  // eos and generation_config.json's eos_token_id (LLaMA-3: <|end_of_text|> and <|eot_id|>).
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  bool is_eos(int32_t id) const;
  // The token strings of bos/eos ("" where none), as chat templates write them.
  std::string bos_token() const { return bos_id_ < 0 ? "" : id_to_piece(bos_id_); }
  std::string eos_token() const { return eos_id_ < 0 ? "" : id_to_piece(eos_id_); }
  // tokenizer_config.json's chat_template ("" where none).
  const std::string& chat_template() const { return chat_template_; }
  const std::string& dir() const { return dir_; }

  // Fails naming the id and the vocabulary size unless 0 <= id < vocab_size().
  void check_id(int32_t id) const;
  // Appends the bytes of token `id` (already checked) at `state`.
  virtual void append_token_bytes(int32_t id, DecodeState& state, std::string& out) const = 0;
  // How bytes that are not valid UTF-8 are replaced: false: one U+FFFD per maximal invalid
  // subpart (Rust's from_utf8_lossy, byte-level BPE); true: one per byte (SentencePiece).
  virtual bool replace_invalid_per_byte() const = 0;

 protected:
  void set_special_ids(int32_t bos, int32_t eos, int32_t pad, int32_t unk,
                       std::vector<int32_t> eos_ids);

  std::string dir_;
  std::string chat_template_;
  std::vector<AddedToken> added_tokens_;

 private:
  int32_t bos_id_ = -1, eos_id_ = -1, pad_id_ = -1, unk_id_ = -1;
  std::vector<int32_t> eos_ids_;
};

// The ids generation stops at by default: the model's (config.json's eos_token_id), then the
// tokenizer's (its eos and generation_config.json's) when there is one; `zenith generate` and
// zenith.llm's generate use them.
std::vector<int64_t> generation_eos_ids(std::vector<int64_t> model_eos_ids,
                                        const Tokenizer* tokenizer);

// Incremental decoding for streaming generation: push() returns the text that the new token
// completes. A token may end in the middle of a UTF-8 character (byte-fallback and byte-level
// tokens): those bytes are held back until the character is complete. The concatenation of all
// push() results and finish() equals decode() of all the ids. The tokenizer must outlive it.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false);
  std::string push(int32_t id);
  // The held-back rest (an incomplete character becomes U+FFFD); the decoder starts over.
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  DecodeState state_;
  std::string pending_;  // bytes not yet returned
};

// ---- chat templates --------------------------------------------------------------------------

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// A piece of rendered conversation; fine-tuning trains on the answer pieces only.
struct ChatSegment {
  std::string text;
  bool answer = false;  // an assistant message and its end marker (<|eot_id|>, </s>, <|im_end|>)
};

// The built-in renderings of the well-known chat formats: llama-2, llama-3, chatml, alpaca.
class ChatTemplate {
 public:
  static const std::vector<std::string>& names();
  // `name` is one of names(); bos/eos are the tokenizer's token strings.
  static ChatTemplate by_name(const std::string& name, std::string bos_token,
                              std::string eos_token);
  // The built-in template a Jinja chat_template (tokenizer_config.json) is, recognised by its
  // markers: <|start_header_id|>, <|im_start|>, [INST], ### Instruction:.
  static ChatTemplate recognise(const std::string& jinja, std::string bos_token,
                                std::string eos_token);
  // `name` if given, else the tokenizer's chat_template recognised; errors list names().
  static ChatTemplate for_tokenizer(const Tokenizer& tokenizer, const std::string& name = "");

  const std::string& name() const { return name_; }
  // The conversation as the template writes it; with add_generation_prompt, followed by the
  // assistant header a reply starts after.
  std::vector<ChatSegment> render_segments(std::span<const ChatMessage> messages,
                                           bool add_generation_prompt) const;
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

 private:
  ChatTemplate(std::string name, std::string bos, std::string eos)
      : name_(std::move(name)), bos_(std::move(bos)), eos_(std::move(eos)) {}
  std::string name_, bos_, eos_;
};

// A conversation as ids (the rendered text encoded with special tokens parsed and no extra bos:
// the template writes it); answer[i] is 1 where token i belongs to an answer segment (a token
// spanning a segment boundary goes to the later segment).
struct ChatEncoding {
  std::vector<int32_t> ids;
  std::vector<uint8_t> answer;
};
ChatEncoding encode_chat(const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                         std::span<const ChatMessage> messages, bool add_generation_prompt);

}  // namespace zenith::text
