// Constrained decoding: a TokenConstraint holds one sequence's place in a grammar (a JSON schema,
// any JSON object, a tool call) and masks the logits before each sample, so that every output
// parses and validates whatever the temperature.
//
//   auto vocab = llm::TokenBytes::from_tokenizer(*tokenizer);        // once per model
//   auto c = llm::json_schema_constraint(schema, vocab, eos_ids);    // per request; throws
//   for (;;) {                                                        // SchemaError on bad input
//     c->mask(logits);                   // disallowed ids -> -inf (never all of them)
//     int64_t t = sample(logits);
//     if (is_eos(t)) break;              // eos is allowed only when c->complete()
//     c->accept(t);
//     if (c->done()) break;              // the value is closed: nothing else may follow
//   }
//
// The text produced is compact JSON: no whitespace outside strings, object properties in the
// order the schema lists them (optional ones may be left out), numbers without leading zeros
// (integers at most 18 digits, fractions 18, exponents 2), strings as valid UTF-8 with the
// escapes \" \\ \/ \b \f \n \r \t \uXXXX (no surrogate escapes), nesting at most 32 deep for
// json_object. The supported JSON Schema subset is listed in json_schema.h.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "serve/llm/token_bytes.h"

namespace zenith::serve::llm {

class TokenConstraint {  // grammar state for one sequence; not thread-safe (one per sequence)
 public:
  virtual ~TokenConstraint() = default;
  // logits[0 .. n) for ids 0 .. n - 1: each id the grammar does not allow next becomes -inf
  // (ids beyond the vocabulary's bytes too). Eos ids are allowed only when complete(); when
  // done(), only they are. Never leaves every id at -inf while eos ids exist.
  virtual void mask(float* logits, int64_t n) = 0;
  void mask(std::vector<float>& logits) { mask(logits.data(), int64_t(logits.size())); }
  // Advances by a sampled token (not an eos id). Throws std::invalid_argument for a token the
  // last mask disallowed.
  virtual void accept(int64_t token) = 0;
  // A full valid value has been produced (eos may come now).
  virtual bool complete() const = 0;
  // Complete and closed: no further byte is allowed (true after an object's final '}'). The
  // engine ends the sequence here with finish_reason "stop" without waiting for eos.
  virtual bool done() const = 0;
  // The text accepted so far (the bytes of the accepted tokens).
  virtual const std::string& text() const = 0;
  // A copy in the same state, for `n` > 1: build once, clone per choice before any accept.
  virtual std::shared_ptr<TokenConstraint> clone() const = 0;
};

// A schema this library cannot honour: `keyword` ("pattern"), `pointer` its JSON pointer in the
// schema ("/properties/name/pattern"); what() says both. HTTP maps it to a 400 naming them.
class SchemaError : public std::invalid_argument {
 public:
  SchemaError(std::string keyword, std::string pointer, const std::string& message)
      : std::invalid_argument(message), keyword(std::move(keyword)), pointer(std::move(pointer)) {}
  std::string keyword, pointer;
};

// response_format json_schema (strict or not: the output always validates). Properties come in
// the order the schema object holds them: nlohmann::json sorts keys, nlohmann::ordered_json
// keeps the request's order (parse the body with ordered_json to keep it).
std::shared_ptr<TokenConstraint> json_schema_constraint(const nlohmann::json& schema,
                                                        std::shared_ptr<const TokenBytes> vocab,
                                                        std::vector<int64_t> eos_ids);
std::shared_ptr<TokenConstraint> json_schema_constraint(const nlohmann::ordered_json& schema,
                                                        std::shared_ptr<const TokenBytes> vocab,
                                                        std::vector<int64_t> eos_ids);
// response_format json_object: any JSON object.
std::shared_ptr<TokenConstraint> json_object_constraint(std::shared_ptr<const TokenBytes> vocab,
                                                        std::vector<int64_t> eos_ids);

// A tool the request offers: its function's name and `parameters` schema (null or absent: an
// object with no properties). Ordered: the arguments' keys come in the schema's order.
struct FunctionSpec {
  std::string name;
  nlohmann::ordered_json parameters;
};

// tool_choice "required" or a named function ({"type":"function","function":{"name":N}} -> N);
// "auto" and "none" are not constrained. The output, which the HTTP layer turns into one of
// OpenAI's tool_calls:
//   - a named function: the arguments object itself, e.g. {"city":"Paris"};
//   - "required": {"name":"<function>","arguments":{...}} with the name first, so a streaming
//     layer can emit the name once the text passes tool_call_prefix(name) and stream the
//     arguments after it, holding back the final '}'.
// Throws SchemaError (keyword "tool_choice") for a name not among `functions`, and for a
// parameters schema outside the subset (pointer "/tools/<i>/function/parameters/...").
std::shared_ptr<TokenConstraint> tool_call_constraint(const std::vector<FunctionSpec>& functions,
                                                      const std::string& choice,
                                                      std::shared_ptr<const TokenBytes> vocab,
                                                      std::vector<int64_t> eos_ids);
// The text "required" outputs start with for `name`: {"name":"<name>","arguments":
std::string tool_call_prefix(const std::string& name);
// Splits a finished "required" output into name and arguments text; throws naming what is wrong.
struct ToolCallText {
  std::string name, arguments;
};
ToolCallText parse_tool_call_output(const std::string& output);

}  // namespace zenith::serve::llm
