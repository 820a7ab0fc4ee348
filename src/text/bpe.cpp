#include "text/bpe.h"

#include <cstdio>
#include <queue>

#include "text/json_config.h"
#include "text/utf8.h"
#include "zenith/error.h"

namespace zenith::text::detail {

Bpe::Bpe(const nlohmann::json& config, const std::string& where) {
  ZENITH_CHECK(
      config.value("dropout", nlohmann::json()).is_null() || config["dropout"].get<double>() == 0.0,
      "[tokenizer] ", where, ".dropout: BPE dropout is not supported");
  const auto& vocab = member(config, "vocab", "object", where);
  vocab_.reserve(vocab.size());
  for (const auto& [piece, id] : vocab.items()) {
    ZENITH_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0, "[tokenizer] ", where,
                 ".vocab[\"", piece, "\"]: expected a non-negative integer id");
    vocab_.emplace(piece, id.get<int32_t>());
  }
  std::string unk = string_or(config, "unk_token", "", where);
  if (!unk.empty()) {
    auto it = vocab_.find(unk);
    ZENITH_CHECK(it != vocab_.end(), "[tokenizer] ", where, ".unk_token \"", unk,
                 "\" is not in the vocabulary");
    unk_id_ = it->second;
  }
  fuse_unk_ = bool_or(config, "fuse_unk", false, where);
  byte_fallback_ = bool_or(config, "byte_fallback", false, where);
  ignore_merges_ = bool_or(config, "ignore_merges", false, where);
  continuing_subword_prefix_ = string_or(config, "continuing_subword_prefix", "", where);
  end_of_word_suffix_ = string_or(config, "end_of_word_suffix", "", where);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = vocab_.find(std::string_view(name));
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }

  // Merges are "a b" strings (older files) or [a, b] pairs; a later duplicate wins.
  const auto& merges = member(config, "merges", "array", where);
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& m = merges[rank];
    std::string left, right;
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      size_t space = s.find(' ');
      ZENITH_CHECK(space != std::string::npos && s.find(' ', space + 1) == std::string::npos,
                   "[tokenizer] ", where, ".merges[", rank, "]: expected \"a b\", got \"", s, "\"");
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else {
      ZENITH_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
                   "[tokenizer] ", where, ".merges[", rank,
                   "]: expected \"a b\" or [\"a\", \"b\"], got ", m.dump());
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    }
    std::string merged = left + right.substr(right.compare(0, continuing_subword_prefix_.size(),
                                                           continuing_subword_prefix_) == 0
                                                 ? continuing_subword_prefix_.size()
                                                 : 0);
    auto a = vocab_.find(left), b = vocab_.find(right), c = vocab_.find(merged);
    ZENITH_CHECK(a != vocab_.end() && b != vocab_.end() && c != vocab_.end(), "[tokenizer] ", where,
                 ".merges[", rank, "]: \"", left, "\" + \"", right,
                 "\" uses a token that is not in the vocabulary");
    merges_[(uint64_t(uint32_t(a->second)) << 32) | uint32_t(b->second)] = {int32_t(rank),
                                                                            c->second};
  }
}

void Bpe::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    auto it = vocab_.find(word);
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (word.size() <= kMaxCachedWord) {
    std::lock_guard lock(cache_mutex_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  merge_word(word, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (word.size() <= kMaxCachedWord) {
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(std::string(word), std::move(ids));
  }
}

// The word's characters as symbols (unknown ones as byte tokens or unk), then the best-ranked
// adjacent pair merged until none is left; a heap of candidate merges, leftmost first on ties.
void Bpe::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // -1 at the ends
    bool alive;
  };
  std::vector<Symbol> symbols;
  auto add = [&](int32_t id) {
    int32_t index = int32_t(symbols.size());
    if (index > 0) symbols.back().next = index;
    symbols.push_back({id, index - 1, -1, true});
  };
  bool pending_unk = false;
  auto flush_unk = [&] {
    if (pending_unk) add(unk_id_);
    pending_unk = false;
  };
  std::string symbol;
  for (size_t i = 0; i < word.size();) {
    size_t n = char_len(word, i);
    symbol.clear();
    if (i > 0) symbol += continuing_subword_prefix_;
    symbol.append(word.substr(i, n));
    if (i + n == word.size()) symbol += end_of_word_suffix_;
    auto it = vocab_.find(symbol);
    if (it != vocab_.end()) {
      flush_unk();
      add(it->second);
    } else {
      bool bytes_known = byte_fallback_;
      for (size_t k = 0; bytes_known && k < n; ++k)
        bytes_known = byte_ids_[uint8_t(word[i + k])] >= 0;
      if (bytes_known) {
        flush_unk();
        for (size_t k = 0; k < n; ++k) add(byte_ids_[uint8_t(word[i + k])]);
      } else if (unk_id_ >= 0) {
        if (!fuse_unk_) flush_unk();
        pending_unk = true;
      }  // no unk token: the character is dropped, as tokenizers does
    }
    i += n;
  }
  flush_unk();

  struct Candidate {
    int32_t rank, pos, id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int32_t pos) {
    int32_t next = symbols[size_t(pos)].next;
    if (next < 0) return;
    if (const Merge* m = find_merge(symbols[size_t(pos)].id, symbols[size_t(next)].id))
      queue.push({m->rank, pos, m->id});
  };
  for (int32_t pos = 0; pos + 1 < int32_t(symbols.size()); ++pos) consider(pos);
  while (!queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[size_t(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[size_t(left.next)];
    const Merge* m = find_merge(left.id, right.id);
    if (!m || m->id != top.id) continue;  // stale: a neighbour changed since it was queued
    left.id = top.id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[size_t(right.next)].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  for (const Symbol& s : symbols)
    if (s.alive) out.push_back(s.id);
}

}  // namespace zenith::text::detail
