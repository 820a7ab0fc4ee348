// Tokenizer::from_dir, decoding and streaming shared by both implementations.
#include <algorithm>
#include <filesystem>

#include "text/loaders.h"
#include "text/utf8.h"
#include "zenith/error.h"
#include "zenith/text.h"

namespace zenith::text {

std::shared_ptr<Tokenizer> Tokenizer::from_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  ZENITH_CHECK(fs::is_directory(dir), "[tokenizer] ", dir, " is not a directory");
  std::string json = (fs::path(dir) / "tokenizer.json").string();
  std::string model = (fs::path(dir) / "tokenizer.model").string();
  bool has_json = fs::exists(json), has_model = fs::exists(model);
  ZENITH_CHECK(has_json || has_model, "[tokenizer] ", dir,
               " has neither tokenizer.json nor tokenizer.model");
  detail::ModelDirConfig config = detail::read_model_dir_config(dir);
  return has_json ? detail::load_hf_tokenizer(json, config)
                  : detail::load_sentencepiece(model, config);
}

std::shared_ptr<Tokenizer> Tokenizer::find_in_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::exists(fs::path(dir) / "tokenizer.json") &&
      !fs::exists(fs::path(dir) / "tokenizer.model"))
    return nullptr;
  return from_dir(dir);
}

std::vector<int64_t> generation_eos_ids(std::vector<int64_t> model_eos_ids,
                                        const Tokenizer* tokenizer) {
  if (tokenizer)
    model_eos_ids.insert(model_eos_ids.end(), tokenizer->eos_ids().begin(),
                         tokenizer->eos_ids().end());
  return model_eos_ids;
}

bool Tokenizer::is_eos(int32_t id) const {
  return std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end();
}

void Tokenizer::set_special_ids(int32_t bos, int32_t eos, int32_t pad, int32_t unk,
                                std::vector<int32_t> eos_ids) {
  bos_id_ = bos;
  eos_id_ = eos;
  pad_id_ = pad;
  unk_id_ = unk;
  eos_ids_ = std::move(eos_ids);
}

void Tokenizer::check_id(int32_t id) const {
  ZENITH_CHECK(id >= 0 && id < vocab_size(), "[tokenizer] token id ", id,
               " is outside the vocabulary (size ", vocab_size(), ") of ", kind(), " in ", dir_);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  DecodeState state;
  std::string bytes;
  for (int32_t id : ids) {
    check_id(id);
    if (skip_special && is_special(id)) continue;
    append_token_bytes(id, state, bytes);
  }
  std::string text;
  detail::append_lossy(bytes, replace_invalid_per_byte(), /*final=*/true, text);
  return text;
}

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string StreamDecoder::push(int32_t id) {
  tokenizer_.check_id(id);
  if (skip_special_ && tokenizer_.is_special(id)) return "";
  tokenizer_.append_token_bytes(id, state_, pending_);
  std::string text;
  size_t used =
      detail::append_lossy(pending_, tokenizer_.replace_invalid_per_byte(), /*final=*/false, text);
  pending_.erase(0, used);
  return text;
}

std::string StreamDecoder::finish() {
  std::string text;
  detail::append_lossy(pending_, tokenizer_.replace_invalid_per_byte(), /*final=*/true, text);
  pending_.clear();
  state_ = DecodeState{};
  return text;
}

namespace detail {

void check_utf8(std::string_view text) {
  size_t bad = find_invalid_utf8(text);
  ZENITH_CHECK(bad == std::string_view::npos, "[tokenizer] the text is not valid UTF-8 (byte ", bad,
               " of ", text.size(), ")");
}

}  // namespace detail
}  // namespace zenith::text
