// SentencePiece tokenizer.model through Debian's libsentencepiece. Encoding is the library's;
// decoding is done here piece by piece (the library's rules, so streaming can share them).
#include <sentencepiece_processor.h>

#include <algorithm>

#include "text/added_vocabulary.h"
#include "text/loaders.h"
#include "zenith/error.h"

namespace zenith::text::detail {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // ▁

// The few ModelProto fields decoding needs, read from the serialized protobuf.
struct ModelSettings {
  bool add_dummy_prefix = true;                // normalizer_spec (3).add_dummy_prefix (3)
  bool remove_extra_whitespaces = true;        // normalizer_spec (3).remove_extra_whitespaces (4)
  bool treat_whitespace_as_suffix = false;     // trainer_spec (2).treat_whitespace_as_suffix (24)
  std::string unk_surface = " \xE2\x81\x87 ";  // trainer_spec (2).unk_surface (44): " ⁇ "
};

// Calls fn(field, wire_type, varint, bytes) for each field of a protobuf message; false when the
// message is malformed.
template <typename Fn>
bool for_each_field(std::string_view msg, Fn&& fn) {
  size_t i = 0;
  auto varint = [&](uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64 && i < msg.size(); shift += 7) {
      auto b = uint8_t(msg[i++]);
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  while (i < msg.size()) {
    uint64_t key = 0, v = 0;
    if (!varint(key)) return false;
    std::string_view bytes;
    switch (key & 7) {
      case 0:
        if (!varint(v)) return false;
        break;
      case 1:
      case 5: {
        size_t n = (key & 7) == 1 ? 8 : 4;
        if (i + n > msg.size()) return false;
        i += n;
        break;
      }
      case 2:
        if (!varint(v) || v > msg.size() - i) return false;
        bytes = msg.substr(i, v);
        i += v;
        break;
      default:
        return false;
    }
    fn(uint32_t(key >> 3), uint32_t(key & 7), v, bytes);
  }
  return true;
}

ModelSettings read_settings(const std::string& proto, const std::string& path) {
  ModelSettings s;
  bool ok = for_each_field(proto, [&](uint32_t field, uint32_t wire, uint64_t, std::string_view m) {
    if (wire != 2) return;
    if (field == 3)
      for_each_field(m, [&](uint32_t f, uint32_t w, uint64_t v, std::string_view) {
        if (w == 0 && f == 3) s.add_dummy_prefix = v != 0;
        if (w == 0 && f == 4) s.remove_extra_whitespaces = v != 0;
      });
    if (field == 2)
      for_each_field(m, [&](uint32_t f, uint32_t w, uint64_t v, std::string_view bytes) {
        if (w == 0 && f == 24) s.treat_whitespace_as_suffix = v != 0;
        if (w == 2 && f == 44) s.unk_surface = std::string(bytes);
      });
  });
  ZENITH_CHECK(ok, "[tokenizer] ", path, ": malformed SentencePiece model");
  return s;
}

class SentencePieceTokenizer : public Tokenizer {
 public:
  SentencePieceTokenizer(const std::string& path, const ModelDirConfig& config) : path_(path) {
    dir_ = config.dir;
    chat_template_ = config.chat_template;
    auto status = sp_.Load(path);
    ZENITH_CHECK(status.ok(), "[tokenizer] ", path, ": not a SentencePiece model (",
                 status.ToString(), ")");
    settings_ = read_settings(sp_.serialized_model_proto(), path);
    ZENITH_CHECK(!settings_.treat_whitespace_as_suffix, "[tokenizer] ", path,
                 ": treat_whitespace_as_suffix models are not supported");
    sp_size_ = sp_.GetPieceSize();

    // Control and unknown pieces (<s>, </s>, <unk>) and tokenizer_config.json's added tokens
    // are matched in the text, as transformers' LlamaTokenizer does.
    std::vector<AddedTokenSpec> specials;
    for (int id = 0; id < sp_size_; ++id)
      if (sp_.IsControl(id) || sp_.IsUnknown(id)) {
        specials.push_back({.id = id, .content = sp_.IdToPiece(id), .special = true});
        added_tokens_.push_back({id, sp_.IdToPiece(id), true});
      }
    vocab_size_ = sp_size_;
    for (const AddedTokenSpec& t : config.added_tokens) {
      if (t.id < sp_size_) {
        ZENITH_CHECK(sp_.IdToPiece(t.id) == t.content, "[tokenizer] ", config.dir,
                     "/tokenizer_config.json: added_tokens_decoder.", t.id, " is \"", t.content,
                     "\" but the model's piece ", t.id, " is \"", sp_.IdToPiece(t.id), "\"");
        if (sp_.IsControl(t.id) || sp_.IsUnknown(t.id)) continue;  // already matched
      } else {
        vocab_size_ = std::max(vocab_size_, t.id + 1);
        extra_.resize(size_t(vocab_size_ - sp_size_));
        extra_[size_t(t.id - sp_size_)] = t;
      }
      specials.push_back(t);
      added_tokens_.push_back({t.id, t.content, t.special});
    }
    specials_ = AddedVocabulary(specials);
    add_bos_ = config.add_bos_token.value_or(true);
    add_eos_ = config.add_eos_token.value_or(false);

    SpecialIds defaults;
    defaults.bos = sp_.bos_id();
    defaults.eos = sp_.eos_id();
    defaults.pad = sp_.pad_id();
    defaults.unk = sp_.unk_id();
    SpecialIds s = resolve_special_ids(config, *this, defaults);
    set_special_ids(s.bos, s.eos, s.pad, s.unk, s.eos_ids);
  }

  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options) const override {
    check_utf8(text);
    std::vector<int32_t> ids;
    if (options.add_special && add_bos_ && bos_id() >= 0) ids.push_back(bos_id());
    std::vector<int> part;
    auto encode_part = [&](std::string_view s) {
      auto status = sp_.Encode(s, &part);
      ZENITH_CHECK(status.ok(), "[tokenizer] ", path_, ": ", status.ToString());
      ids.insert(ids.end(), part.begin(), part.end());
    };
    for (const Segment& seg : specials_.split(text, /*skip_special=*/!options.parse_special)) {
      if (seg.id >= 0)
        ids.push_back(seg.id);
      else
        encode_part(text.substr(seg.begin, seg.end - seg.begin));
    }
    if (options.add_special && add_eos_ && eos_id() >= 0) ids.push_back(eos_id());
    return ids;
  }

  int32_t vocab_size() const override { return vocab_size_; }
  std::string id_to_piece(int32_t id) const override {
    check_id(id);
    return id < sp_size_ ? sp_.IdToPiece(id) : extra_[size_t(id - sp_size_)].content;
  }
  std::optional<int32_t> piece_to_id(std::string_view piece) const override {
    for (const AddedTokenSpec& t : extra_)
      if (t.content == piece && t.id >= 0) return t.id;
    int id = sp_.PieceToId(piece);
    // PieceToId answers unk_id for unknown pieces.
    if (id >= 0 && id < sp_size_ && sp_.IdToPiece(id) == piece) return id;
    return std::nullopt;
  }
  bool is_special(int32_t id) const override {
    if (id >= sp_size_) return id < vocab_size_ && extra_[size_t(id - sp_size_)].special;
    return id >= 0 && (sp_.IsControl(id) || sp_.IsUnknown(id));
  }
  std::string kind() const override { return "tokenizer.model (SentencePiece)"; }

  // SentencePiece's DecodeSentencePiece: control pieces are invisible, <unk> is " ⁇ ", byte
  // pieces are raw bytes, "▁" is a space except the first piece's leading one.
  void append_token_bytes(int32_t id, DecodeState& state, std::string& out) const override {
    if (id < sp_size_ && sp_.IsByte(id)) {
      out.push_back(char(std::stoi(sp_.IdToPiece(id).substr(3, 2), nullptr, 16)));
      state.text_empty = false;
      ++state.position;
      return;
    }
    if (state.space_taken || !state.text_empty) state.start_done = true;
    state.space_taken = false;
    if (id >= sp_size_) {  // an added token: its text as it is
      const AddedTokenSpec& token = extra_[size_t(id - sp_size_)];
      ZENITH_CHECK(token.id >= 0, "[tokenizer] token id ", id, " has no token in ", path_);
      append_surface(token.content, state, out);
      return;
    }
    if (sp_.IsControl(id)) {
      ++state.position;
      return;
    }
    if (sp_.IsUnknown(id)) {
      append_surface(settings_.unk_surface, state, out);
      return;
    }
    std::string_view piece = sp_.IdToPiece(id);
    if (!state.start_done && (settings_.add_dummy_prefix || settings_.remove_extra_whitespaces) &&
        piece.substr(0, kSpace.size()) == kSpace) {
      piece.remove_prefix(kSpace.size());
      state.space_taken = !settings_.remove_extra_whitespaces;
    }
    std::string surface;
    for (size_t at = piece.find(kSpace); at != std::string_view::npos; at = piece.find(kSpace)) {
      surface.append(piece.substr(0, at)).push_back(' ');
      piece.remove_prefix(at + kSpace.size());
    }
    surface.append(piece);
    append_surface(surface, state, out);
  }
  bool replace_invalid_per_byte() const override { return true; }

 private:
  static void append_surface(std::string_view surface, DecodeState& state, std::string& out) {
    out.append(surface);
    if (!surface.empty()) state.text_empty = false;
    ++state.position;
  }

  std::string path_;
  sentencepiece::SentencePieceProcessor sp_;
  ModelSettings settings_;
  int32_t sp_size_ = 0, vocab_size_ = 0;
  std::vector<AddedTokenSpec> extra_;  // tokenizer_config.json's tokens past the model's ids
  AddedVocabulary specials_;
  bool add_bos_ = true, add_eos_ = false;
};

}  // namespace

std::shared_ptr<Tokenizer> load_sentencepiece(const std::string& path,
                                              const ModelDirConfig& config) {
  return std::make_shared<SentencePieceTokenizer>(path, config);
}

}  // namespace zenith::text::detail
