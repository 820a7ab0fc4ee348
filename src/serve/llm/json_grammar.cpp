#include "serve/llm/json_grammar.h"

#include <cstring>
#include <string_view>

namespace zenith::serve::llm {

namespace {

// A frame's fields by node kind:
//   object      a: index of the last property written (-1 none), b: key candidate, c: key bytes
//               matched; phase 0 '{', 1 after '{', 2 in a key, 3 after a value, 4 after ','
//   any_object  phase 0 '{', 1 after '{', 2 after a key, 3 after ':', 4 after a value, 5 after ','
//   array       a: items begun; phase 0 '[', 1 after '[', 2 after an item, 3 after ','
//   string      a: code points (only when the length is bounded), b: UTF-8 continuation bytes
//               still due, c: their allowed range (lo | hi << 8); phase 0 '"', 1 in the text,
//               2 after '\', 3-6 the \u digits (b = 1: a 'd' led, no surrogates), 7 in a
//               multi-byte character
//   integer,    a: digits in the current part; phase 0 start, 1 after '-', 2 after a leading 0,
//   number      3 integer digits, 4 after '.', 5 fraction digits, 6 after 'e', 7 after its
//               sign, 8 exponent digits
//   literals    a, b: the range of literals still possible, c: bytes matched
//   tool_call   phase 0 the text kNamePrefix (c: bytes matched), 1 the name (as literals), 2 the
//               text kArgumentsPrefix, 3 after the arguments; a: the chosen function
constexpr std::string_view kNamePrefix = "{\"name\":";
constexpr std::string_view kArgumentsPrefix = ",\"arguments\":";
constexpr int32_t kMaxIntegerDigits = 18, kMaxFractionDigits = 18, kMaxExponentDigits = 2;

bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

bool number_can_end(const Frame& f) {
  return f.phase == 2 || f.phase == 3 || f.phase == 5 || f.phase == 8;
}

// Narrows the literal range [lo, hi) whose first `len` bytes match by `byte`.
bool narrow(const std::vector<std::string>& literals, int32_t& lo, int32_t& hi, int32_t len,
            uint8_t byte) {
  int32_t new_lo = -1, new_hi = -1;
  for (int32_t i = lo; i < hi; ++i) {
    const std::string& s = literals[size_t(i)];
    bool match = int32_t(s.size()) > len && uint8_t(s[size_t(len)]) == byte;
    if (match && new_lo < 0) new_lo = i;
    if (match) new_hi = i + 1;
    if (!match && new_lo >= 0) break;  // sorted: the matches are contiguous
  }
  if (new_lo < 0) return false;
  lo = new_lo;
  hi = new_hi;
  return true;
}

// The last property index a key after property `last` may name: the first required one.
int32_t key_window_end(const GrammarNode& n, int32_t last) {
  int32_t count = int32_t(n.keys.size());
  for (int32_t j = last + 1; j < count; ++j)
    if (n.required[size_t(j)]) return j;
  return count - 1;
}

bool none_required_after(const GrammarNode& n, int32_t last) {
  for (size_t j = size_t(last + 1); j < n.required.size(); ++j)
    if (n.required[j]) return false;
  return true;
}

// UTF-8 lead byte: continuation bytes due and the range of the first; false if not a lead.
bool utf8_lead(uint8_t byte, int32_t& due, uint8_t& lo, uint8_t& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (byte >= 0xC2 && byte <= 0xDF) {
    due = 1;
  } else if (byte >= 0xE0 && byte <= 0xEF) {
    due = 2;
    if (byte == 0xE0) lo = 0xA0;  // no overlong forms
    if (byte == 0xED) hi = 0x9F;  // no surrogates
  } else if (byte >= 0xF0 && byte <= 0xF4) {
    due = 3;
    if (byte == 0xF0) lo = 0x90;
    if (byte == 0xF4) hi = 0x8F;  // at most U+10FFFF
  } else {
    return false;
  }
  return true;
}

}  // namespace

int32_t Grammar::add(GrammarNode node) {
  nodes.push_back(std::move(node));
  return int32_t(nodes.size() - 1);
}

std::array<bool, 256> Grammar::first_bytes(int32_t node) const {
  std::array<bool, 256> out{};
  const GrammarNode& n = nodes[size_t(node)];
  switch (n.kind) {
    case NodeKind::object:
    case NodeKind::any_object:
    case NodeKind::tool_call:
      out['{'] = true;
      break;
    case NodeKind::array:
      out['['] = true;
      break;
    case NodeKind::string:
      out['"'] = true;
      break;
    case NodeKind::integer:
    case NodeKind::number:
      out['-'] = !n.non_negative;
      for (int c = '0'; c <= '9'; ++c) out[size_t(c)] = c != '0' || !n.positive;
      break;
    case NodeKind::literals:
      for (const std::string& s : n.literals) out[uint8_t(s[0])] = true;
      break;
    case NodeKind::any_of:
      for (size_t c = 0; c < 256; ++c) out[c] = n.first[c] >= 0;
      break;
  }
  return out;
}

JsonState JsonState::start(const Grammar& g) {
  JsonState s;
  s.depth = 1;
  s.frames[0] = Frame{g.root, 0, 0, 0, 0};
  return s;
}

bool JsonState::complete(const Grammar& g) const {
  if (depth == 0) return true;
  if (depth > 1) return false;
  const Frame& f = frames[0];
  const GrammarNode& n = g.nodes[size_t(f.node)];
  if (n.kind == NodeKind::integer || n.kind == NodeKind::number) return number_can_end(f);
  if (n.kind == NodeKind::literals)
    return f.phase == 1 && int32_t(n.literals[size_t(f.a)].size()) == f.c;
  return false;
}

std::string JsonState::key(const Grammar& g, int32_t max_token_bytes) const {
  std::string out;
  out.reserve(size_t(depth) * 17);
  const int64_t reach = max_token_bytes;
  for (int32_t i = 0; i < depth; ++i) {
    Frame f = frames[size_t(i)];
    const GrammarNode& n = g.nodes[size_t(f.node)];
    bool counts = n.kind == NodeKind::string || (n.kind == NodeKind::array && f.phase >= 2);
    if (counts && f.a >= n.min_count && f.a + reach <= n.max_count) f.a = -1;
    bool digits = (n.kind == NodeKind::integer || n.kind == NodeKind::number) &&
                  (f.phase == 3 || f.phase == 5);
    if (digits && f.a + reach <= kMaxIntegerDigits) f.a = -1;
    char buf[17];
    std::memcpy(buf, &f.node, 4);
    std::memcpy(buf + 4, &f.a, 4);
    std::memcpy(buf + 8, &f.b, 4);
    std::memcpy(buf + 12, &f.c, 4);
    buf[16] = char(f.phase);
    out.append(buf, sizeof buf);
  }
  return out;
}

bool JsonState::step(const Grammar& g, uint8_t byte) {
  auto push = [&](int32_t node) {
    if (depth == kMaxDepth) return false;
    frames[size_t(depth++)] = Frame{node, 0, 0, 0, 0};
    return true;
  };
  for (;;) {  // a number or literal that ends passes the byte on to its parent
    if (depth == 0) return false;
    Frame& f = frames[size_t(depth - 1)];
    const GrammarNode& n = g.nodes[size_t(f.node)];
    switch (n.kind) {
      case NodeKind::object:
        switch (f.phase) {
          case 0:
            if (byte != '{') return false;
            f.phase = 1;
            f.a = -1;
            return true;
          case 1:
          case 4:
            if (byte == '}' && f.phase == 1 && none_required_after(n, -1)) return --depth, true;
            if (byte != '"' || f.a + 1 >= int32_t(n.keys.size())) return false;
            f.phase = 2;
            f.b = f.a + 1;
            f.c = 1;
            return true;
          case 2: {
            const std::string& current = n.keys[size_t(f.b)];
            int32_t end = key_window_end(n, f.a);
            for (int32_t j = f.b; j <= end; ++j) {
              const std::string& key = n.keys[size_t(j)];
              if (int32_t(key.size()) <= f.c || uint8_t(key[size_t(f.c)]) != byte) continue;
              if (j != f.b && key.compare(0, size_t(f.c), current, 0, size_t(f.c)) != 0) continue;
              f.b = j;
              if (++f.c < int32_t(key.size())) return true;
              f.a = j;
              f.phase = 3;
              f.b = f.c = 0;
              return push(n.values[size_t(j)]);
            }
            return false;
          }
          default:  // 3
            if (byte == ',' && f.a + 1 < int32_t(n.keys.size())) return f.phase = 4, true;
            if (byte == '}' && none_required_after(n, f.a)) return --depth, true;
            return false;
        }
      case NodeKind::any_object:
        switch (f.phase) {
          case 0:
            return byte == '{' ? (f.phase = 1, true) : false;
          case 1:
          case 5:
            if (byte == '}' && f.phase == 1) return --depth, true;
            if (byte != '"' || !push(n.items)) return false;
            f.phase = 2;
            frames[size_t(depth - 1)].phase = 1;  // the key string, past its opening quote
            return true;
          case 2:
            return byte == ':' ? (f.phase = 3, true) : false;
          case 3:
            f.phase = 4;
            if (!push(n.values[0])) return false;
            continue;
          default:  // 4
            if (byte == ',') return f.phase = 5, true;
            if (byte == '}') return --depth, true;
            return false;
        }
      case NodeKind::array:
        switch (f.phase) {
          case 0:
            return byte == '[' ? (f.phase = 1, true) : false;
          case 1:
            if (byte == ']' && n.min_count == 0) return --depth, true;
            if (n.max_count == 0) return false;
            f.phase = 2;
            f.a = 1;
            if (!push(n.items)) return false;
            continue;
          case 2:
            if (byte == ',' && f.a < n.max_count) return f.phase = 3, true;
            if (byte == ']' && f.a >= n.min_count) return --depth, true;
            return false;
          default:  // 3
            f.phase = 2;
            ++f.a;
            if (!push(n.items)) return false;
            continue;
        }
      case NodeKind::string: {
        bool bounded = n.min_count > 0 || n.max_count < std::numeric_limits<int32_t>::max();
        auto count_char = [&] {
          if (!bounded) return true;
          if (f.a >= n.max_count) return false;
          ++f.a;
          return true;
        };
        switch (f.phase) {
          case 0:
            return byte == '"' ? (f.phase = 1, true) : false;
          case 1: {
            if (byte == '"') return f.a >= n.min_count ? (--depth, true) : false;
            if (byte < 0x20) return false;
            if (byte == '\\') return count_char() ? (f.phase = 2, true) : false;
            if (byte < 0x80) return count_char();
            int32_t due;
            uint8_t lo, hi;
            if (!utf8_lead(byte, due, lo, hi) || !count_char()) return false;
            f.phase = 7;
            f.b = due;
            f.c = lo | hi << 8;
            return true;
          }
          case 7:
            if (byte < (f.c & 0xFF) || byte > (f.c >> 8)) return false;
            f.c = 0x80 | 0xBF << 8;
            if (--f.b == 0) f.phase = 1, f.c = 0;
            return true;
          case 2:
            if (byte == 'u') return f.phase = 3, true;
            if (!std::strchr("\"\\/bfnrt", byte) || byte == 0) return false;
            return f.phase = 1, true;
          case 3:
            if (!is_hex(byte)) return false;
            f.b = byte == 'd' || byte == 'D';
            return f.phase = 4, true;
          case 4:
            if (!is_hex(byte) || (f.b == 1 && !(byte >= '0' && byte <= '7'))) return false;
            f.b = 0;
            return f.phase = 5, true;
          case 5:
            return is_hex(byte) ? (f.phase = 6, true) : false;
          default:  // 6
            return is_hex(byte) ? (f.phase = 1, true) : false;
        }
      }
      case NodeKind::integer:
      case NodeKind::number: {
        bool real = n.kind == NodeKind::number;
        auto start_part = [&](uint8_t phase) { return f.phase = phase, f.a = 1, true; };
        switch (f.phase) {
          case 0:
            if (byte == '-' && !n.non_negative) return f.phase = 1, true;
            [[fallthrough]];
          case 1:
            if (byte == '0' && !n.positive) return f.phase = 2, true;
            return byte >= '1' && byte <= '9' ? start_part(3) : false;
          case 2:
          case 3:
            if (f.phase == 3 && is_digit(byte) && f.a < kMaxIntegerDigits) return ++f.a, true;
            if (real && byte == '.') return f.phase = 4, f.a = 0, true;
            if (real && (byte == 'e' || byte == 'E')) return f.phase = 6, f.a = 0, true;
            break;
          case 4:
            return is_digit(byte) ? start_part(5) : false;
          case 5:
            if (is_digit(byte) && f.a < kMaxFractionDigits) return ++f.a, true;
            if (byte == 'e' || byte == 'E') return f.phase = 6, f.a = 0, true;
            break;
          case 6:
            if (byte == '+' || byte == '-') return f.phase = 7, true;
            [[fallthrough]];
          case 7:
            return is_digit(byte) ? start_part(8) : false;
          default:  // 8
            if (is_digit(byte) && f.a < kMaxExponentDigits) return ++f.a, true;
            break;
        }
        --depth;  // the number has ended: the byte is its parent's
        continue;
      }
      case NodeKind::literals:
        if (f.phase == 0) {
          f.phase = 1;
          f.a = 0;
          f.b = int32_t(n.literals.size());
          f.c = 0;
        }
        if (narrow(n.literals, f.a, f.b, f.c, byte)) {
          ++f.c;
          if (f.b - f.a == 1 && int32_t(n.literals[size_t(f.a)].size()) == f.c) --depth;
          return true;
        }
        if (int32_t(n.literals[size_t(f.a)].size()) != f.c) return false;
        --depth;  // "1" of {1, 12} has ended: the byte is the parent's
        continue;
      case NodeKind::any_of: {
        int32_t alternative = n.first[byte];
        if (alternative < 0) return false;
        f = Frame{alternative, 0, 0, 0, 0};
        continue;
      }
      case NodeKind::tool_call:
        switch (f.phase) {
          case 0:
          case 2: {
            std::string_view text = f.phase == 0 ? kNamePrefix : kArgumentsPrefix;
            if (uint8_t(text[size_t(f.c)]) != byte) return false;
            if (++f.c < int32_t(text.size())) return true;
            if (f.phase == 2) return f.phase = 3, f.c = 0, push(n.values[size_t(f.a)]);
            f.phase = 1;
            f.a = 0;
            f.b = int32_t(n.literals.size());
            f.c = 0;
            return true;
          }
          case 1:
            if (!narrow(n.literals, f.a, f.b, f.c, byte)) return false;
            if (++f.c == int32_t(n.literals[size_t(f.a)].size())) f.phase = 2, f.b = f.c = 0;
            return true;
          default:  // 3
            return byte == '}' ? (--depth, true) : false;
        }
    }
    return false;
  }
}

}  // namespace zenith::serve::llm
