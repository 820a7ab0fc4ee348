// Hugging Face tokenizer.json: added tokens, normalizer, pre-tokenizer, BPE model,
// post-processor and decoder, applied in that order as the tokenizers library does.
#include <algorithm>

#include "text/added_vocabulary.h"
#include "text/bpe.h"
#include "text/decoder.h"
#include "text/json_config.h"
#include "text/loaders.h"
#include "text/normalizer.h"
#include "text/pre_tokenizer.h"
#include "zenith/error.h"

namespace zenith::text::detail {
namespace {

// What the post-processor adds around a single sequence when add_special is set.
struct Template {
  std::vector<int32_t> prefix, suffix;
};

Template read_post_processor(const nlohmann::json& config, const std::string& where) {
  Template t;
  if (config.is_null()) return t;
  std::string type = type_of(config, where);
  if (type == "ByteLevel") return t;  // offsets only
  if (type == "Sequence") {
    const auto& list = member(config, "processors", "array", where);
    for (size_t i = 0; i < list.size(); ++i) {
      Template inner =
          read_post_processor(list[i], where + ".processors[" + std::to_string(i) + "]");
      t.prefix.insert(t.prefix.end(), inner.prefix.begin(), inner.prefix.end());
      t.suffix.insert(t.suffix.end(), inner.suffix.begin(), inner.suffix.end());
    }
    return t;
  }
  if (type == "TemplateProcessing") {
    const auto& specials = member(config, "special_tokens", "object", where);
    bool after_sequence = false;
    const auto& single = member(config, "single", "array", where);
    for (size_t i = 0; i < single.size(); ++i) {
      std::string item = where + ".single[" + std::to_string(i) + "]";
      if (single[i].contains("Sequence")) {
        after_sequence = true;
        continue;
      }
      const auto& special = member(single[i], "SpecialToken", "object", item);
      std::string name = member(special, "id", "string", item + ".SpecialToken").get<std::string>();
      ZENITH_CHECK(specials.contains(name), "[tokenizer] ", item, ": \"", name, "\" is not in ",
                   where, ".special_tokens");
      std::string entry = where + ".special_tokens[\"" + name + "\"]";
      for (const auto& id : member(specials[name], "ids", "array", entry)) {
        ZENITH_CHECK(id.is_number_integer(), "[tokenizer] ", entry, ".ids: expected integers");
        (after_sequence ? t.suffix : t.prefix).push_back(id.get<int32_t>());
      }
    }
    return t;
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    const auto& cls = member(config, "cls", "array", where);
    const auto& sep = member(config, "sep", "array", where);
    ZENITH_CHECK(cls.size() == 2 && sep.size() == 2 && cls[1].is_number_integer() &&
                     sep[1].is_number_integer(),
                 "[tokenizer] ", where, ": cls and sep must be [token, id]");
    return {{cls[1].get<int32_t>()}, {sep[1].get<int32_t>()}};
  }
  ZENITH_FAIL("[tokenizer] ", where, ".type: post-processor \"", type,
              "\" is not supported (supported: TemplateProcessing, ByteLevel, Sequence, "
              "RobertaProcessing, BertProcessing)");
}

class HfTokenizer : public Tokenizer {
 public:
  HfTokenizer(const std::string& path, const ModelDirConfig& config) : path_(path) {
    dir_ = config.dir;
    chat_template_ = config.chat_template;
    nlohmann::json j = read_json(path);
    ZENITH_CHECK(j.is_object(), "[tokenizer] ", path, ": expected a JSON object");
    const std::string w = path + ": ";
    const auto& model = member(j, "model", "object", w);
    std::string type = model.contains("type") ? type_of(model, w + "model") : "BPE";
    ZENITH_CHECK(type == "BPE", "[tokenizer] ", w, "model.type: \"", type,
                 "\" is not supported (supported: BPE; SentencePiece models of other types load "
                 "from tokenizer.model)");
    bpe_ = std::make_unique<Bpe>(model, w + "model");
    normalizer_ = make_normalizer(j.value("normalizer", nlohmann::json()), w + "normalizer");
    pre_tokenizer_ =
        make_pre_tokenizer(j.value("pre_tokenizer", nlohmann::json()), w + "pre_tokenizer");
    decoder_ = std::make_unique<TokenDecoder>(j.value("decoder", nlohmann::json()), w + "decoder");
    post_ = read_post_processor(j.value("post_processor", nlohmann::json()), w + "post_processor");

    int32_t size = 0;
    for (const auto& [piece, id] : bpe_->vocab()) size = std::max(size, id + 1);
    std::vector<AddedTokenSpec> raw, normalized;
    if (j.contains("added_tokens")) {
      const auto& list = member(j, "added_tokens", "array", w);
      for (size_t i = 0; i < list.size(); ++i) {
        std::string where = w + "added_tokens[" + std::to_string(i) + "]";
        AddedTokenSpec t;
        t.id = member(list[i], "id", "integer", where).get<int32_t>();
        ZENITH_CHECK(t.id >= 0, "[tokenizer] ", where, ".id is negative");
        t.content = member(list[i], "content", "string", where).get<std::string>();
        t.special = bool_or(list[i], "special", false, where);
        t.single_word = bool_or(list[i], "single_word", false, where);
        t.lstrip = bool_or(list[i], "lstrip", false, where);
        t.rstrip = bool_or(list[i], "rstrip", false, where);
        t.normalized = bool_or(list[i], "normalized", !t.special, where);
        size = std::max(size, t.id + 1);
        added_tokens_.push_back({t.id, t.content, t.special});
        if (t.normalized && normalizer_) {
          t.content = normalizer_->apply(t.content);
          normalized.push_back(t);
        } else {
          raw.push_back(t);
        }
      }
    }
    raw_tokens_ = AddedVocabulary(raw);
    normalized_tokens_ = AddedVocabulary(normalized);

    pieces_.assign(size_t(size), {});
    has_piece_.assign(size_t(size), false);
    special_.assign(size_t(size), false);
    for (const auto& [piece, id] : bpe_->vocab()) {
      pieces_[size_t(id)] = piece;
      has_piece_[size_t(id)] = true;
    }
    for (const AddedToken& t : added_tokens_) {
      pieces_[size_t(t.id)] = t.content;
      has_piece_[size_t(t.id)] = true;
      special_[size_t(t.id)] = t.special;
      added_ids_.emplace(t.content, t.id);
    }
    for (int32_t id : post_.prefix) check_template_id(id);
    for (int32_t id : post_.suffix) check_template_id(id);

    SpecialIds defaults;
    defaults.bos = post_.prefix.empty() ? -1 : post_.prefix.front();
    defaults.unk = bpe_->unk_id();
    SpecialIds s = resolve_special_ids(config, *this, defaults);
    set_special_ids(s.bos, s.eos, s.pad, s.unk, s.eos_ids);
    // transformers' LlamaTokenizerFast rebuilds the template from add_bos_token/add_eos_token.
    if (config.add_bos_token || config.add_eos_token) {
      post_.prefix.clear();
      post_.suffix.clear();
      if (config.add_bos_token.value_or(false) && s.bos >= 0) post_.prefix.push_back(s.bos);
      if (config.add_eos_token.value_or(false) && s.eos >= 0) post_.suffix.push_back(s.eos);
    }
  }

  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options) const override {
    check_utf8(text);
    std::vector<int32_t> ids;
    if (options.add_special) ids = post_.prefix;
    std::vector<Piece> pieces;
    for (const Segment& seg : raw_tokens_.split(text, !options.parse_special)) {
      if (seg.id >= 0) {
        ids.push_back(seg.id);
        continue;
      }
      std::string part(text.substr(seg.begin, seg.end - seg.begin));
      if (normalizer_) part = normalizer_->apply(std::move(part));
      for (const Segment& sub : normalized_tokens_.split(part, !options.parse_special)) {
        if (sub.id >= 0) {
          ids.push_back(sub.id);
          continue;
        }
        pieces.assign(
            1, {part.substr(sub.begin, sub.end - sub.begin), seg.begin == 0 && sub.begin == 0});
        if (pre_tokenizer_) pre_tokenizer_->apply(pieces);
        for (const Piece& piece : pieces) bpe_->tokenize(piece.text, ids);
      }
    }
    if (options.add_special) ids.insert(ids.end(), post_.suffix.begin(), post_.suffix.end());
    return ids;
  }

  int32_t vocab_size() const override { return int32_t(pieces_.size()); }
  std::string id_to_piece(int32_t id) const override {
    check_id(id);
    return pieces_[size_t(id)];
  }
  std::optional<int32_t> piece_to_id(std::string_view piece) const override {
    if (auto it = added_ids_.find(piece); it != added_ids_.end()) return it->second;
    if (auto it = bpe_->vocab().find(piece); it != bpe_->vocab().end()) return it->second;
    return std::nullopt;
  }
  bool is_special(int32_t id) const override {
    return id >= 0 && id < vocab_size() && special_[size_t(id)];
  }
  std::string kind() const override { return "tokenizer.json (BPE)"; }

  void append_token_bytes(int32_t id, DecodeState& state, std::string& out) const override {
    ZENITH_CHECK(has_piece_[size_t(id)], "[tokenizer] token id ", id, " has no token in ", path_);
    decoder_->append(pieces_[size_t(id)], state, out);
  }
  bool replace_invalid_per_byte() const override { return !decoder_->byte_level(); }

 private:
  void check_template_id(int32_t id) const {
    ZENITH_CHECK(id >= 0 && id < vocab_size(), "[tokenizer] ", path_, ": post_processor adds id ",
                 id, ", outside the vocabulary (size ", vocab_size(), ")");
  }

  std::string path_;
  std::unique_ptr<Bpe> bpe_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<TokenDecoder> decoder_;
  Template post_;
  AddedVocabulary raw_tokens_, normalized_tokens_;
  std::vector<std::string> pieces_;  // by id, added tokens included
  std::vector<bool> has_piece_, special_;
  Vocab added_ids_;
};

}  // namespace

std::shared_ptr<Tokenizer> load_hf_tokenizer(const std::string& path,
                                             const ModelDirConfig& config) {
  return std::make_shared<HfTokenizer>(path, config);
}

}  // namespace zenith::text::detail
