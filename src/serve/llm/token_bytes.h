// Each token id's bytes as they appear in generated text, and a trie over them: what constrained
// decoding (constraint.h) walks to decide which tokens may come next.
//
//   auto vocab = llm::TokenBytes::from_tokenizer(*tokenizer);
//   vocab->bytes(id);  // "▁world" -> " world", "<0x0A>" -> "\n", "Ġworld" -> " world"
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zenith::text {
class Tokenizer;
}

namespace zenith::serve::llm {

class TokenBytes {
 public:
  // One entry per id; nullopt for ids that never appear in constrained text (special and
  // control tokens, tokens with no bytes).
  explicit TokenBytes(std::vector<std::optional<std::string>> bytes);
  // The bytes each id decodes to in the middle of a text (after other text: SentencePiece's
  // start-of-text space rule does not apply); special tokens are excluded.
  static std::shared_ptr<const TokenBytes> from_tokenizer(const text::Tokenizer& tokenizer);

  int64_t size() const { return int64_t(bytes_.size()); }
  bool usable(int64_t id) const { return id >= 0 && id < size() && bytes_[size_t(id)]; }
  const std::string& bytes(int64_t id) const { return *bytes_[size_t(id)]; }

  // The trie over the usable tokens' bytes: node 0 is the root (the empty prefix).
  struct Node {
    int32_t first_child = 0, child_count = 0;  // into children()
    int32_t first_token = 0, token_count = 0;  // into node_tokens(): ids whose bytes end here
  };
  struct Edge {
    uint8_t byte;
    int32_t node;
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Edge>& children() const { return children_; }
  const std::vector<int32_t>& node_tokens() const { return node_tokens_; }
  int32_t max_token_bytes() const { return max_len_; }
  // Tokens that can stand inside a JSON string as they are (every byte printable ASCII but '"'
  // and '\\'), one bit per id; and per trie node, whether its subtree holds any other token.
  // Masking inside a free string marks the first at once and walks only the second.
  const std::vector<uint64_t>& plain_tokens() const { return plain_; }
  // A plain token's length in bytes (= characters), 0 for the others.
  const std::vector<int32_t>& plain_lengths() const { return plain_length_; }
  bool has_other_below(int32_t node) const { return other_below_[size_t(node)]; }
  static bool plain_byte(uint8_t b) { return b >= 0x20 && b < 0x7F && b != '"' && b != '\\'; }

 private:
  void build_trie();

  std::vector<std::optional<std::string>> bytes_;
  std::vector<Node> nodes_;
  std::vector<Edge> children_;
  std::vector<int32_t> node_tokens_;
  std::vector<uint64_t> plain_;
  std::vector<int32_t> plain_length_;
  std::vector<bool> other_below_;
  int32_t max_len_ = 0;
};

}  // namespace zenith::serve::llm
