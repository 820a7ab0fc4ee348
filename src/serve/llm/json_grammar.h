// A character-level pushdown automaton for compact JSON under a compiled schema: the grammar
// (nodes built by json_schema_compile.cpp) and a state that advances one byte at a time. The
// state is a small stack of frames, copied cheaply so that masking can try every token.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "serve/llm/token_bytes.h"

namespace zenith::serve::llm {

enum class NodeKind : uint8_t {
  object,      // properties in order, optional ones may be skipped
  any_object,  // any keys, any values (json_object)
  array,
  string,
  integer,
  number,
  literals,  // one of a sorted set of texts (enum, const, true/false/null)
  any_of,    // alternatives told apart by their first byte
  tool_call  // {"name":<one of literals>,"arguments":<values[chosen]>}
};

struct GrammarNode {
  NodeKind kind = NodeKind::any_object;
  // object: one key text per property ("\"name\":"), its value node, whether it is required.
  // tool_call: keys unused, values[i] the arguments node of literals[i].
  std::vector<std::string> keys;
  std::vector<int32_t> values;
  std::vector<bool> required;
  bool non_negative = false, positive = false;  // integer, number: no '-'; integer: no lone 0
  int32_t items = -1;                           // array
  int64_t min_count = 0, max_count = std::numeric_limits<int32_t>::max();  // items / code points
  std::vector<std::string> literals;                                       // sorted
  std::array<int32_t, 256> first{};  // any_of: the alternative a byte starts, -1 none
};

struct Grammar {
  std::vector<GrammarNode> nodes;
  int32_t root = -1;
  int32_t any_value = -1;  // node of any JSON value (json_object's values)
  // Adds a node, returns its index.
  int32_t add(GrammarNode node);
  // The bytes a value of `node` may start with.
  std::array<bool, 256> first_bytes(int32_t node) const;
};

constexpr int kMaxDepth = 32;  // frames: nesting of objects, arrays and strings in them; a
                               // schema nests at most kMaxDepth - 3 (a tool call adds one)

struct Frame {
  int32_t node;
  int32_t a, b, c;  // meaning depends on the node's kind (json_grammar.cpp)
  uint8_t phase;
};

struct JsonState {
  std::array<Frame, kMaxDepth> frames;
  int32_t depth = 0;

  static JsonState start(const Grammar& g);
  // Advances by one byte; false (state then unspecified) when the grammar does not allow it.
  bool step(const Grammar& g, uint8_t byte);
  // A whole value has been produced (a number may still go on).
  bool complete(const Grammar& g) const;
  // Nothing more may follow.
  bool closed() const { return depth == 0; }
  void copy_from(const JsonState& other) {
    depth = other.depth;
    for (int32_t i = 0; i < depth; ++i) frames[size_t(i)] = other.frames[size_t(i)];
  }
  // The frames as bytes: equal keys, equal masks (the mask cache's key). A count that no token
  // of at most `max_token_bytes` bytes can take past a bound is left out, so that a bounded
  // string's mask repeats as a free string's does.
  std::string key(const Grammar& g, int32_t max_token_bytes) const;
};

// Marks in `bits` (one bit per id, vocab.size() bits) the tokens whose bytes `state` accepts,
// walking the vocabulary's trie once and pruning at the first byte refused. `scratch` holds
// one state per trie depth between calls.
void allowed_tokens(const Grammar& g, const TokenBytes& vocab, const JsonState& state,
                    std::vector<JsonState>& scratch, std::vector<uint64_t>& bits);

}  // namespace zenith::serve::llm
