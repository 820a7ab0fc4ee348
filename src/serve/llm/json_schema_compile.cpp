#include "serve/llm/json_schema_compile.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "serve/llm/json_schema.h"

namespace zenith::serve::llm {

namespace {

using ojson = nlohmann::ordered_json;

// Bounds on what a request's schema may cost (a hostile client's schema is compiled and walked
// at every token): the grammar's nodes, an enum's values, an object's properties.
constexpr size_t kMaxNodes = 20000, kMaxEnumValues = 1000, kMaxProperties = 1000;

const std::set<std::string>& annotations() {
  static const std::set<std::string> names = {
      "title",  "description", "default",  "examples",  "$schema", "$id",        "$comment",
      "strict", "deprecated",  "readOnly", "writeOnly", "$defs",   "definitions"};
  return names;
}

const std::set<std::string>& structural() {
  static const std::set<std::string> names = {"type",
                                              "properties",
                                              "required",
                                              "additionalProperties",
                                              "items",
                                              "minItems",
                                              "maxItems",
                                              "minLength",
                                              "maxLength",
                                              "enum",
                                              "const",
                                              "anyOf",
                                              "oneOf",
                                              "$ref",
                                              "minimum",
                                              "maximum",
                                              "exclusiveMinimum",
                                              "exclusiveMaximum"};
  return names;
}

std::string escape_pointer(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string show_byte(int byte) {
  if (byte >= 0x20 && byte < 0x7F) return std::string("'") + char(byte) + "'";
  return "byte " + std::to_string(byte);
}

class Compiler {
 public:
  Compiler(const ojson& root, std::string base) : root_(root), base_(std::move(base)) {}

  int32_t compile(const ojson& s, const std::string& at, int depth) {
    if (depth > kMaxDepth - 3)
      fail("", at, "nests deeper than " + std::to_string(kMaxDepth - 3) + " levels");
    if (g_.nodes.size() >= kMaxNodes)  // $refs can multiply a small schema
      fail("", at, "makes more than " + std::to_string(kMaxNodes) + " grammar nodes");
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail("false", at, "the schema false allows no value");
      return any_value();
    }
    if (!s.is_object()) fail("", at, "a schema must be an object or a boolean");
    for (const auto& [key, value] : s.items())
      if (!structural().count(key) && !annotations().count(key))
        fail(key, at + "/" + escape_pointer(key), "is not supported");
    if (s.contains("$ref")) return compile_ref(s, at, depth);
    if (s.contains("enum") || s.contains("const")) return compile_literals(s, at);
    for (const char* key : {"anyOf", "oneOf"})
      if (s.contains(key)) return compile_any_of(s, key, at, depth);
    std::string type;
    if (s.contains("type")) {
      const ojson& t = s["type"];
      if (t.is_array()) return compile_type_list(s, at, depth);
      if (!t.is_string()) fail("type", at + "/type", "must be a string or a list of strings");
      type = t.get<std::string>();
    } else if (s.contains("properties") || s.contains("required") ||
               s.contains("additionalProperties")) {
      type = "object";
    } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
      type = "array";
    } else if (s.contains("minLength") || s.contains("maxLength")) {
      type = "string";
    } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
               s.contains("exclusiveMaximum")) {
      type = "number";
    } else {
      return any_value();
    }
    if (type == "object") return compile_object(s, at, depth);
    if (type == "array") return compile_array(s, at, depth);
    GrammarNode n;
    if (type == "string") {
      n.kind = NodeKind::string;
      n.min_count = count(s, "minLength", at, 0);
      n.max_count = count(s, "maxLength", at, n.max_count);
      if (n.min_count > n.max_count) fail("minLength", at + "/minLength", "exceeds maxLength");
    } else if (type == "integer" || type == "number") {
      return compile_number(s, at, type == "integer");
    } else if (type == "boolean" || type == "null") {
      n.kind = NodeKind::literals;
      n.literals = type == "null" ? std::vector<std::string>{"null"}
                                  : std::vector<std::string>{"false", "true"};
    } else {
      fail("type", at + "/type", "\"" + type + "\" is not a JSON Schema type");
    }
    return g_.add(std::move(n));
  }

  int32_t any_value() {
    if (g_.any_value >= 0) return g_.any_value;
    GrammarNode choice;
    choice.kind = NodeKind::any_of;
    g_.any_value = g_.add(choice);
    GrammarNode key;
    key.kind = NodeKind::string;
    int32_t string = g_.add(key);
    GrammarNode object;
    object.kind = NodeKind::any_object;
    object.items = string;
    object.values = {g_.any_value};
    GrammarNode array;
    array.kind = NodeKind::array;
    array.items = g_.any_value;
    GrammarNode number;
    number.kind = NodeKind::number;
    GrammarNode words;
    words.kind = NodeKind::literals;
    words.literals = {"false", "null", "true"};
    std::vector<int32_t> alternatives = {g_.add(object), g_.add(array), string, g_.add(number),
                                         g_.add(words)};
    fill_first(g_.any_value, alternatives, "");
    return g_.any_value;
  }

  Grammar take(int32_t root) {
    g_.root = root;
    return std::move(g_);
  }

  [[noreturn]] void fail(const std::string& keyword, const std::string& at,
                         const std::string& what) {
    std::string where = base_ + at;
    throw SchemaError(keyword, where,
                      "[json_schema] " + (keyword.empty() ? std::string("schema") : keyword) +
                          " at " + (where.empty() ? "/" : where) + ": " + what);
  }

 private:
  int64_t count(const ojson& s, const char* key, const std::string& at, int64_t fallback) {
    if (!s.contains(key)) return fallback;
    const ojson& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      fail(key, at + "/" + key, "must be a non-negative integer");
    return std::min<int64_t>(v.get<int64_t>(), std::numeric_limits<int32_t>::max() - 1);
  }

  // Bounds that a byte-level automaton keeps cheaply: minimum 0 or 1 on an integer (no sign, no
  // lone 0), minimum 0 on a number, or an integer range of at most kMaxEnumValues values (an
  // enum of them).
  int32_t compile_number(const ojson& s, const std::string& at, bool integer) {
    GrammarNode n;
    n.kind = integer ? NodeKind::integer : NodeKind::number;
    std::optional<double> lo, hi;
    bool lo_open = false, hi_open = false;
    std::string lo_key, hi_key;
    for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      if (!s.contains(key)) continue;
      if (!s[key].is_number()) fail(key, at + "/" + key, "must be a number");
      double v = s[key].get<double>();
      if (std::fabs(v) > 1e15) fail(key, at + "/" + key, "is out of the supported range");
      bool open = key[0] == 'e', lower = std::string(key).find("inimum") != std::string::npos;
      std::optional<double>& bound = lower ? lo : hi;
      bool stricter = !bound || (lower ? v > *bound : v < *bound) || (v == *bound && open);
      if (!stricter) continue;
      bound = v;
      (lower ? lo_open : hi_open) = open;
      (lower ? lo_key : hi_key) = key;
    }
    if (!lo && !hi) return g_.add(std::move(n));
    if (integer) {
      int64_t first = lo ? int64_t(lo_open ? std::floor(*lo) + 1 : std::ceil(*lo)) : 0;
      int64_t last = hi ? int64_t(hi_open ? std::ceil(*hi) - 1 : std::floor(*hi)) : 0;
      if (lo && hi && first > last)
        fail(lo_key, at + "/" + lo_key, "leaves no integer below " + hi_key);
      if (lo && hi && last - first < int64_t(kMaxEnumValues)) {
        n.kind = NodeKind::literals;
        for (int64_t v = first; v <= last; ++v) n.literals.push_back(std::to_string(v));
        std::sort(n.literals.begin(), n.literals.end());
        return g_.add(std::move(n));
      }
      if (lo && !hi && (first == 0 || first == 1)) {
        n.non_negative = true;
        n.positive = first == 1;
        return g_.add(std::move(n));
      }
    } else if (lo && !hi && *lo == 0 && !lo_open) {
      n.non_negative = true;
      return g_.add(std::move(n));
    }
    const std::string& key = lo ? lo_key : hi_key;
    fail(key, at + "/" + key,
         "is supported only as minimum 0 or 1 on an integer, minimum 0 on a number, or an "
         "integer range of at most " +
             std::to_string(kMaxEnumValues) + " values");
  }

  int32_t compile_ref(const ojson& s, const std::string& at, int depth) {
    const ojson& ref = s["$ref"];
    if (!ref.is_string() || ref.get<std::string>().rfind("#", 0) != 0)
      fail("$ref", at + "/$ref", "must be a local reference (\"#/$defs/name\")");
    std::string target = ref.get<std::string>().substr(1);
    if (std::count(refs_.begin(), refs_.end(), target))
      fail("$ref", at + "/$ref", "is recursive (" + target + "), which is not supported");
    nlohmann::ordered_json::json_pointer pointer;
    try {
      pointer = nlohmann::ordered_json::json_pointer(target);
    } catch (const std::exception&) {
      fail("$ref", at + "/$ref", "is not a JSON pointer");
    }
    if (!root_.contains(pointer)) fail("$ref", at + "/$ref", target + " is not in the schema");
    refs_.push_back(target);
    int32_t node = compile(root_.at(pointer), target, depth);
    refs_.pop_back();
    return node;
  }

  int32_t compile_literals(const ojson& s, const std::string& at) {
    std::vector<ojson> values;
    std::string key = s.contains("enum") ? "enum" : "const";
    if (key == "enum") {
      if (!s["enum"].is_array() || s["enum"].empty())
        fail("enum", at + "/enum", "must be a non-empty list");
      if (s["enum"].size() > kMaxEnumValues)
        fail("enum", at + "/enum", "has more than " + std::to_string(kMaxEnumValues) + " values");
      for (const ojson& v : s["enum"]) values.push_back(v);
    } else {
      values.push_back(s["const"]);
    }
    GrammarNode n;
    n.kind = NodeKind::literals;
    nlohmann::json type_only = nlohmann::json::object();
    if (s.contains("type")) type_only["type"] = nlohmann::json::parse(s["type"].dump());
    for (const ojson& v : values) {
      std::string text = v.dump();
      if (validate_json(nlohmann::json::parse(text), type_only)) continue;
      n.literals.push_back(text);
    }
    if (n.literals.empty()) fail(key, at + "/" + key, "has no value of the schema's type");
    std::sort(n.literals.begin(), n.literals.end());
    n.literals.erase(std::unique(n.literals.begin(), n.literals.end()), n.literals.end());
    return g_.add(std::move(n));
  }

  int32_t compile_any_of(const ojson& s, const char* key, const std::string& at, int depth) {
    for (const auto& [k, v] : s.items())
      if (k != key && structural().count(k))
        fail(k, at + "/" + k, std::string("beside ") + key + " is not supported");
    const ojson& list = s[key];
    if (!list.is_array() || list.empty())
      fail(key, at + "/" + key, "must be a non-empty list of schemas");
    std::vector<int32_t> alternatives;
    for (size_t i = 0; i < list.size(); ++i)
      alternatives.push_back(compile(list[i], at + "/" + key + "/" + std::to_string(i), depth + 1));
    if (alternatives.size() == 1) return alternatives[0];
    GrammarNode n;
    n.kind = NodeKind::any_of;
    int32_t node = g_.add(n);
    fill_first(node, alternatives, at + "/" + key);
    return node;
  }

  int32_t compile_type_list(const ojson& s, const std::string& at, int depth) {
    const ojson& types = s["type"];
    if (types.empty()) fail("type", at + "/type", "must not be an empty list");
    std::vector<int32_t> alternatives;
    for (size_t i = 0; i < types.size(); ++i) {
      if (!types[i].is_string()) fail("type", at + "/type/" + std::to_string(i), "not a string");
      ojson one = s;
      one["type"] = types[i];
      alternatives.push_back(compile(one, at, depth));
    }
    if (alternatives.size() == 1) return alternatives[0];
    GrammarNode n;
    n.kind = NodeKind::any_of;
    int32_t node = g_.add(n);
    fill_first(node, alternatives, at + "/type");
    return node;
  }

  // Fills any_of node `node`'s first-byte table; alternatives must start differently.
  void fill_first(int32_t node, const std::vector<int32_t>& alternatives, const std::string& at) {
    std::array<int32_t, 256> first;
    std::array<int32_t, 256> owner;  // which listed alternative claimed the byte
    first.fill(-1);
    owner.fill(-1);
    for (size_t i = 0; i < alternatives.size(); ++i) {
      const GrammarNode& alt = g_.nodes[size_t(alternatives[i])];
      std::array<bool, 256> bytes = g_.first_bytes(alternatives[i]);
      for (size_t c = 0; c < 256; ++c) {
        if (!bytes[c]) continue;
        if (owner[c] >= 0)
          fail(at.substr(at.rfind('/') + 1), at,
               "alternatives " + std::to_string(owner[c]) + " and " + std::to_string(i) +
                   " both start with " + show_byte(int(c)) +
                   "; only alternatives that start differently are supported");
        owner[c] = int32_t(i);
        first[c] = alt.kind == NodeKind::any_of ? alt.first[c] : alternatives[i];
      }
    }
    g_.nodes[size_t(node)].first = first;
  }

  int32_t compile_object(const ojson& s, const std::string& at, int depth) {
    GrammarNode n;
    n.kind = NodeKind::object;
    if (!s.contains("properties")) {
      bool closed = s.contains("additionalProperties") && s["additionalProperties"] == false;
      if (!closed) {
        if (s.contains("required") && !s["required"].empty())
          fail("required", at + "/required", "names properties that properties does not define");
        return g_.nodes[size_t(any_value())].first['{'];
      }
    } else if (!s["properties"].is_object()) {
      fail("properties", at + "/properties", "must be an object");
    }
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail("required", at + "/required", "must be a list");
      for (size_t i = 0; i < s["required"].size(); ++i) {
        const ojson& name = s["required"][i];
        std::string where = at + "/required/" + std::to_string(i);
        if (!name.is_string()) fail("required", where, "must list strings");
        if (!s.contains("properties") || !s["properties"].contains(name.get<std::string>()))
          fail("required", where,
               "names \"" + name.get<std::string>() + "\", which properties does not define");
        required.insert(name.get<std::string>());
      }
    }
    if (s.contains("properties")) {
      if (s["properties"].size() > kMaxProperties)
        fail("properties", at + "/properties",
             "has more than " + std::to_string(kMaxProperties) + " properties");
      for (const auto& [name, sub] : s["properties"].items()) {
        n.keys.push_back(ojson(name).dump() + ":");
        n.required.push_back(required.count(name) > 0);
        n.values.push_back(compile(sub, at + "/properties/" + escape_pointer(name), depth + 1));
      }
    }
    return g_.add(std::move(n));
  }

  int32_t compile_array(const ojson& s, const std::string& at, int depth) {
    GrammarNode n;
    n.kind = NodeKind::array;
    n.min_count = count(s, "minItems", at, 0);
    n.max_count = count(s, "maxItems", at, n.max_count);
    if (n.min_count > n.max_count) fail("minItems", at + "/minItems", "exceeds maxItems");
    n.items = s.contains("items") ? compile(s["items"], at + "/items", depth + 1) : any_value();
    return g_.add(std::move(n));
  }

  const ojson& root_;
  std::string base_;
  std::vector<std::string> refs_;
  Grammar g_;
};

}  // namespace

Grammar compile_json_schema(const nlohmann::ordered_json& schema, const std::string& base) {
  Compiler compiler(schema, base);
  try {
    int32_t root = compiler.compile(schema, "", 0);
    return compiler.take(root);
  } catch (const nlohmann::json::exception& e) {  // a string that is not UTF-8, ...
    compiler.fail("", "", e.what());
  }
}

Grammar any_object_grammar() {
  Compiler compiler(ojson::object(), "");
  int32_t any = compiler.any_value();
  Grammar g = compiler.take(any);
  g.root = g.nodes[size_t(any)].first['{'];
  return g;
}

namespace {

// Function i's parameters (none: an object without properties) compiled alone.
Grammar compile_function(const FunctionSpec& f, size_t i) {
  std::string at = "/tools/" + std::to_string(i) + "/function/parameters";
  ojson parameters = ojson{{"type", "object"}, {"properties", ojson::object()}};
  try {
    if (!f.parameters.is_null()) parameters = ojson::parse(f.parameters.dump());
  } catch (const nlohmann::json::exception& e) {
    throw SchemaError("", at, "[json_schema] " + at + ": " + e.what());
  }
  return compile_json_schema(parameters, at);
}

}  // namespace

Grammar tool_call_grammar(const std::vector<FunctionSpec>& functions, const std::string& choice) {
  if (choice != "required") {
    for (size_t i = 0; i < functions.size(); ++i)
      if (functions[i].name == choice) return compile_function(functions[i], i);
    throw SchemaError("tool_choice", "",
                      "[tools] tool_choice names \"" + choice + "\", which tools does not offer");
  }
  if (functions.empty())
    throw SchemaError("tools", "", "[tools] tool_choice \"required\" needs tools");
  std::vector<std::pair<std::string, size_t>> sorted;  // names as JSON strings, in byte order
  for (size_t i = 0; i < functions.size(); ++i)
    sorted.push_back({ojson(functions[i].name).dump(), i});
  std::sort(sorted.begin(), sorted.end());
  Grammar all;
  GrammarNode call;
  call.kind = NodeKind::tool_call;
  // Each function's grammar compiled alone, then appended with its node indices shifted.
  for (const auto& [literal, i] : sorted) {
    if (!call.literals.empty() && call.literals.back() == literal)
      throw SchemaError("tools", "/tools/" + std::to_string(i),
                        "[tools] two functions are named " + literal);
    Grammar one = compile_function(functions[i], i);
    int32_t shift = int32_t(all.nodes.size());
    for (GrammarNode& n : one.nodes) {
      for (int32_t& v : n.values) v += shift;
      if (n.items >= 0) n.items += shift;
      if (n.kind == NodeKind::any_of)
        for (int32_t& f : n.first)
          if (f >= 0) f += shift;
      all.nodes.push_back(std::move(n));
    }
    call.literals.push_back(literal);
    call.values.push_back(one.root + shift);
  }
  all.root = all.add(std::move(call));
  return all;
}

}  // namespace zenith::serve::llm
