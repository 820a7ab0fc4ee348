// tokenizer.json "model" of type BPE: vocabulary, ranked merges, unk/byte fallback, and a word
// cache (encoding 1 MB of text touches a few thousand distinct words).
#pragma once

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace zenith::text::detail {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class Bpe {
 public:
  // `where` names the file and key ("DIR/tokenizer.json: model") in errors.
  Bpe(const nlohmann::json& config, const std::string& where);

  // Appends the ids of one pre-tokenized word.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  const Vocab& vocab() const { return vocab_; }
  int32_t unk_id() const { return unk_id_; }

 private:
  struct Merge {
    int32_t rank, id;
  };
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  const Merge* find_merge(int32_t left, int32_t right) const {
    auto it = merges_.find((uint64_t(uint32_t(left)) << 32) | uint32_t(right));
    return it == merges_.end() ? nullptr : &it->second;
  }

  Vocab vocab_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank, merged id
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  std::string continuing_subword_prefix_, end_of_word_suffix_;
  int32_t byte_ids_[256];  // <0xNN> tokens, -1 where absent

  static constexpr size_t kCacheCapacity = 10000, kMaxCachedWord = 256;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace zenith::text::detail
