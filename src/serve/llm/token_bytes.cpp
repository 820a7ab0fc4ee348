#include "serve/llm/token_bytes.h"

#include <algorithm>
#include <utility>

#include "zenith/text.h"

namespace zenith::serve::llm {

TokenBytes::TokenBytes(std::vector<std::optional<std::string>> bytes) : bytes_(std::move(bytes)) {
  for (auto& b : bytes_)
    if (b && b->empty()) b.reset();
  build_trie();
}

std::shared_ptr<const TokenBytes> TokenBytes::from_tokenizer(const text::Tokenizer& tokenizer) {
  std::vector<std::optional<std::string>> bytes(size_t(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.is_special(id)) continue;
    // In the middle of a text: no start-of-text space rule, no leading strip.
    text::DecodeState state{.position = 1,
                            .text_empty = false,
                            .start_done = true,
                            .space_taken = false,
                            .strip_left = 0};
    std::string out;
    try {
      tokenizer.append_token_bytes(id, state, out);
    } catch (const std::exception&) {
      continue;  // an id with no token (a hole in the vocabulary)
    }
    bytes[size_t(id)] = std::move(out);
  }
  return std::make_shared<const TokenBytes>(std::move(bytes));
}

// Inserting the tokens in byte order creates each node's children in byte order and the nodes
// in depth-first order, so the walk reads memory forwards.
void TokenBytes::build_trie() {
  std::vector<int32_t> order;
  for (int32_t id = 0; id < int32_t(bytes_.size()); ++id)
    if (bytes_[size_t(id)]) order.push_back(id);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t x, int32_t y) { return *bytes_[size_t(x)] < *bytes_[size_t(y)]; });
  std::vector<std::vector<Edge>> edges(1);
  std::vector<std::vector<int32_t>> tokens(1);
  for (int32_t id : order) {
    const std::string& s = *bytes_[size_t(id)];
    max_len_ = std::max(max_len_, int32_t(s.size()));
    int32_t node = 0;
    for (char ch : s) {
      uint8_t byte = uint8_t(ch);
      std::vector<Edge>& out = edges[size_t(node)];
      if (out.empty() || out.back().byte != byte) {
        int32_t child = int32_t(edges.size());
        out.push_back(Edge{byte, child});
        edges.emplace_back();
        tokens.emplace_back();
      }
      node = edges[size_t(node)].back().node;
    }
    tokens[size_t(node)].push_back(id);
  }
  nodes_.resize(edges.size());
  for (size_t i = 0; i < edges.size(); ++i) {
    nodes_[i] = Node{int32_t(children_.size()), int32_t(edges[i].size()),
                     int32_t(node_tokens_.size()), int32_t(tokens[i].size())};
    children_.insert(children_.end(), edges[i].begin(), edges[i].end());
    node_tokens_.insert(node_tokens_.end(), tokens[i].begin(), tokens[i].end());
  }
  plain_.assign(size_t((size() + 63) / 64), 0);
  plain_length_.assign(bytes_.size(), 0);
  for (int32_t id : order) {
    const std::string& s = *bytes_[size_t(id)];
    if (!std::all_of(s.begin(), s.end(), [](char c) { return plain_byte(uint8_t(c)); })) continue;
    plain_[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
    plain_length_[size_t(id)] = int32_t(s.size());
  }
  // Children come after their parents (depth-first order): one backward pass.
  other_below_.assign(nodes_.size(), false);
  for (size_t i = nodes_.size(); i-- > 0;) {
    const Node& n = nodes_[i];
    for (int32_t t = 0; t < n.token_count; ++t) {
      int32_t id = node_tokens_[size_t(n.first_token + t)];
      if (!((plain_[size_t(id) >> 6] >> (id & 63)) & 1)) other_below_[i] = true;
    }
    for (int32_t c = 0; c < n.child_count; ++c)
      if (other_below_[size_t(children_[size_t(n.first_child + c)].node)]) other_below_[i] = true;
  }
}

}  // namespace zenith::serve::llm
