#include <algorithm>

#include "serve/llm/json_grammar.h"

namespace zenith::serve::llm {

namespace {

struct Walk {
  const Grammar& g;
  const TokenBytes& vocab;
  std::vector<JsonState>& levels;
  std::vector<uint64_t>& bits;

  // levels[depth] is the state after the bytes of trie node `node`.
  void visit(int32_t node, size_t depth) {
    const TokenBytes::Node& n = vocab.nodes()[size_t(node)];
    const TokenBytes::Edge* edges = vocab.children().data() + n.first_child;
    for (int32_t i = 0; i < n.child_count; ++i) {
      JsonState& next = levels[depth + 1];
      next.copy_from(levels[depth]);
      if (!next.step(g, edges[i].byte)) continue;
      const TokenBytes::Node& child = vocab.nodes()[size_t(edges[i].node)];
      const int32_t* ids = vocab.node_tokens().data() + child.first_token;
      for (int32_t t = 0; t < child.token_count; ++t)
        bits[size_t(ids[t]) >> 6] |= uint64_t(1) << (ids[t] & 63);
      if (child.child_count > 0) visit(edges[i].node, depth + 1);
    }
  }
};

}  // namespace

void allowed_tokens(const Grammar& g, const TokenBytes& vocab, const JsonState& state,
                    std::vector<JsonState>& scratch, std::vector<uint64_t>& bits) {
  bits.assign(size_t((vocab.size() + 63) / 64), 0);
  scratch.resize(size_t(vocab.max_token_bytes()) + 1);
  scratch[0].copy_from(state);
  Walk{g, vocab, scratch, bits}.visit(0, 0);
}

}  // namespace zenith::serve::llm
