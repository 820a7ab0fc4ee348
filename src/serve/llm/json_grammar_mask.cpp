#include <algorithm>
#include <limits>

#include "serve/llm/json_grammar.h"

namespace zenith::serve::llm {

namespace {

// Inside a string that no token can take past its length bounds, a printable ASCII byte
// other than '"' and '\\' leaves the state as it is (but for the count, which cannot matter
// within one token): the walk reuses the state instead of copying and stepping it.
bool in_free_string(const Grammar& g, const JsonState& s, int64_t reach) {
  if (s.depth == 0) return false;
  const Frame& top = s.frames[size_t(s.depth - 1)];
  const GrammarNode& n = g.nodes[size_t(top.node)];
  if (n.kind != NodeKind::string || top.phase != 1) return false;
  bool unbounded = n.min_count == 0 && n.max_count == std::numeric_limits<int32_t>::max();
  return unbounded || (top.a >= n.min_count && top.a + reach <= n.max_count);
}

struct Walk {
  const Grammar& g;
  const TokenBytes& vocab;
  std::vector<JsonState>& levels;
  std::vector<uint64_t>& bits;
  bool root_free;  // levels[0] is in a free string: plain tokens are already marked

  // levels[level] is the state after the bytes of trie node `node`; visiting writes only the
  // levels above it. Level 0 with root_free: every byte so far was plain.
  void visit(int32_t node, size_t level) {
    const TokenBytes::Node& n = vocab.nodes()[size_t(node)];
    const TokenBytes::Edge* edges = vocab.children().data() + n.first_child;
    bool free_string = in_free_string(g, levels[level], vocab.max_token_bytes());
    bool plain_marked = root_free && level == 0;
    for (int32_t i = 0; i < n.child_count; ++i) {
      size_t next = level;
      if (free_string && TokenBytes::plain_byte(edges[i].byte)) {
        if (plain_marked && !vocab.has_other_below(edges[i].node)) continue;
      } else {
        next = level + 1;
        levels[next].copy_from(levels[level]);
        if (!levels[next].step(g, edges[i].byte)) continue;
      }
      const TokenBytes::Node& child = vocab.nodes()[size_t(edges[i].node)];
      const int32_t* ids = vocab.node_tokens().data() + child.first_token;
      for (int32_t t = 0; t < child.token_count; ++t)
        bits[size_t(ids[t]) >> 6] |= uint64_t(1) << (ids[t] & 63);
      if (child.child_count > 0) visit(edges[i].node, next);
    }
  }
};

}  // namespace

void allowed_tokens(const Grammar& g, const TokenBytes& vocab, const JsonState& state,
                    std::vector<JsonState>& scratch, std::vector<uint64_t>& bits) {
  bits.assign(size_t((vocab.size() + 63) / 64), 0);
  scratch.resize(size_t(vocab.max_token_bytes()) + 1);
  scratch[0].copy_from(state);
  bool root_free = in_free_string(g, state, vocab.max_token_bytes());
  if (root_free) bits = vocab.plain_tokens();
  Walk{g, vocab, scratch, bits, root_free}.visit(0, 0);
}

}  // namespace zenith::serve::llm
