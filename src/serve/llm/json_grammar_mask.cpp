#include <algorithm>
#include <limits>

#include "serve/llm/json_grammar.h"

namespace zenith::serve::llm {

namespace {

struct Walk {
  const Grammar& g;
  const TokenBytes& vocab;
  std::vector<JsonState>& levels;
  std::vector<uint64_t>& bits;
  bool root_plain;  // levels[0] is inside a string: the plain tokens that fit are marked

  // levels[level], with `pending` more plain bytes taken inside its string (counted only when
  // the string's length is bounded), is the state after the bytes of trie node `node`: a plain
  // byte in a string changes nothing but that count, so it needs no copy of the state.
  // Visiting writes only the levels above `level`. Level 0 with root_plain: every byte so far
  // was plain, and the plain tokens are marked.
  void visit(int32_t node, size_t level, int32_t pending) {
    const TokenBytes::Node& n = vocab.nodes()[size_t(node)];
    const TokenBytes::Edge* edges = vocab.children().data() + n.first_child;
    const JsonState& state = levels[level];
    const Frame* top = state.depth > 0 ? &state.frames[size_t(state.depth - 1)] : nullptr;
    const GrammarNode* text =
        top && top->phase == 1 && g.nodes[size_t(top->node)].kind == NodeKind::string
            ? &g.nodes[size_t(top->node)]
            : nullptr;
    bool bounded =
        text && (text->min_count > 0 || text->max_count < std::numeric_limits<int32_t>::max());
    bool plain_marked = root_plain && level == 0;
    for (int32_t i = 0; i < n.child_count; ++i) {
      size_t next = level;
      int32_t next_pending = 0;
      if (text && TokenBytes::plain_byte(edges[i].byte)) {
        if (bounded) {
          if (top->a + pending + 1 > text->max_count) continue;
          next_pending = pending + 1;
        }
        if (plain_marked && !vocab.has_other_below(edges[i].node)) continue;
      } else {
        next = level + 1;
        levels[next].copy_from(state);
        if (pending > 0) levels[next].frames[size_t(state.depth - 1)].a += pending;
        if (!levels[next].step(g, edges[i].byte)) continue;
      }
      const TokenBytes::Node& child = vocab.nodes()[size_t(edges[i].node)];
      const int32_t* ids = vocab.node_tokens().data() + child.first_token;
      for (int32_t t = 0; t < child.token_count; ++t)
        bits[size_t(ids[t]) >> 6] |= uint64_t(1) << (ids[t] & 63);
      if (child.child_count > 0) visit(edges[i].node, next, next_pending);
    }
  }
};

}  // namespace

void allowed_tokens(const Grammar& g, const TokenBytes& vocab, const JsonState& state,
                    std::vector<JsonState>& scratch, std::vector<uint64_t>& bits) {
  bits.assign(size_t((vocab.size() + 63) / 64), 0);
  scratch.resize(size_t(vocab.max_token_bytes()) + 1);
  scratch[0].copy_from(state);
  // Inside a string, every plain token that fits in the room its maxLength leaves is allowed:
  // marked here at once, so that the walk follows only subtrees holding other tokens.
  const Frame* top = state.depth > 0 ? &state.frames[size_t(state.depth - 1)] : nullptr;
  bool root_plain = top && top->phase == 1 && g.nodes[size_t(top->node)].kind == NodeKind::string;
  if (root_plain) {
    const GrammarNode& text = g.nodes[size_t(top->node)];
    bool bounded = text.min_count > 0 || text.max_count < std::numeric_limits<int32_t>::max();
    int64_t room = bounded ? text.max_count - top->a : std::numeric_limits<int64_t>::max();
    if (room >= vocab.max_token_bytes()) {
      bits = vocab.plain_tokens();
    } else {
      const std::vector<int32_t>& length = vocab.plain_lengths();
      for (size_t id = 0; id < length.size(); ++id)
        if (length[id] > 0 && length[id] <= room) bits[id >> 6] |= uint64_t(1) << (id & 63);
    }
  }
  Walk{g, vocab, scratch, bits, root_plain}.visit(0, 0, 0);
}

}  // namespace zenith::serve::llm
