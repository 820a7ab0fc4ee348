// Constrained decoding over real vocabularies: random tokens drawn from each mask always end in
// JSON that parses and validates; tools; a greedy run of the fortunes model; the mask's cost.
#include "serve/llm/constraint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <set>

#include "serve/llm/json_grammar.h"
#include "serve/llm/json_schema.h"
#include "serve/llm/json_schema_compile.h"
#include "zenith/autograd.h"
#include "zenith/llama.h"
#include "zenith/text.h"

namespace zenith::serve::llm {
namespace {

using json = nlohmann::json;
const std::string kFortunes = std::string(ZENITH_SOURCE_DIR) + "/examples/llm/fortunes-llama";
const std::string kGpt2 = std::string(ZENITH_SOURCE_DIR) + "/tests/fixtures/text/gpt2_bpe";

struct Vocab {
  std::shared_ptr<const TokenBytes> bytes;
  std::vector<int64_t> eos;
};

const Vocab& fortunes() {
  static Vocab v = [] {
    auto tok = text::Tokenizer::from_dir(kFortunes);
    return Vocab{TokenBytes::from_tokenizer(*tok), {tok->eos_id()}};
  }();
  return v;
}

const Vocab& gpt2() {  // byte-level BPE; its eos is an id past the bytes, as a model's may be
  static Vocab v = [] {
    auto tok = text::Tokenizer::from_dir(kGpt2);
    return Vocab{TokenBytes::from_tokenizer(*tok), {tok->vocab_size()}};
  }();
  return v;
}

// Draws tokens uniformly from each mask until the constraint is done or eos is drawn. After
// `budget` steps it prefers tokens that close something, so free strings end.
std::string sample(TokenConstraint& c, const Vocab& v, uint64_t seed, int budget = 24) {
  std::mt19937_64 rng(seed);
  int64_t n = v.bytes->size() + 3;  // a model's vocabulary may be larger than the tokenizer's
  for (int step = 0; step < 2000; ++step) {
    std::vector<float> logits(size_t(n), 0.0f);
    c.mask(logits);
    std::vector<int64_t> allowed, closing;
    for (int64_t id = 0; id < n; ++id) {
      if (std::isinf(logits[size_t(id)])) continue;
      allowed.push_back(id);
      bool eos = std::count(v.eos.begin(), v.eos.end(), id) > 0;
      if (eos || v.bytes->bytes(id).find_first_of("\"]},") != std::string::npos)
        closing.push_back(id);
    }
    EXPECT_FALSE(allowed.empty()) << "empty mask after " << c.text();
    if (allowed.empty()) return c.text();
    const std::vector<int64_t>& from = step >= budget && !closing.empty() ? closing : allowed;
    int64_t t = from[size_t(rng() % from.size())];
    if (std::count(v.eos.begin(), v.eos.end(), t)) {
      EXPECT_TRUE(c.complete()) << c.text();
      return c.text();
    }
    c.accept(t);
    if (c.done()) return c.text();
  }
  ADD_FAILURE() << "no end after 2000 tokens: " << c.text();
  return c.text();
}

const char* kSchemas[] = {
    R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0},
        "ok":{"type":"boolean"}},"required":["name","age","ok"],"additionalProperties":false})",
    R"({"type":"object","properties":{"tags":{"type":"array","items":{"type":"string",
        "maxLength":5},"minItems":1,"maxItems":3},"score":{"type":"number"},
        "kind":{"enum":["koan","joke","quote"]},"month":{"type":"integer","minimum":1,
        "maximum":12}},"required":["kind","tags","month"]})",
    R"({"type":"object","properties":{"p":{"type":"object","properties":{"x":{"type":"number"},
        "y":{"type":["integer","null"]}},"required":["x","y"]},"q":{"type":"array","items":
        {"type":"array","items":{"type":"integer"}}},"c":{"const":"fixed \u00e9"}},
        "required":["p","q","c"]})",
    R"({"type":"object","properties":{"any":{},"o":{"type":"object"}},"required":["any","o"]})",
    R"({"type":"object","properties":{"s":{"type":"string","minLength":2,"maxLength":40},
        "n":{"type":"array","items":{"type":"integer"},"maxItems":30}},"required":["s","n"]})",
};

void expect_valid(const std::string& out, const json& schema) {
  json parsed = json::parse(out, nullptr, false);
  ASSERT_FALSE(parsed.is_discarded()) << out;
  EXPECT_EQ(validate_json(parsed, schema), std::nullopt) << out;
}

TEST(Constraint, TokenBytesMapSpacesAndByteTokens) {
  auto tok = text::Tokenizer::from_dir(kFortunes);
  const TokenBytes& v = *fortunes().bytes;
  EXPECT_FALSE(v.usable(tok->eos_id()));
  EXPECT_FALSE(v.usable(tok->bos_id()));
  EXPECT_EQ(v.bytes(*tok->piece_to_id("<0x0A>")), "\n");
  auto the = tok->piece_to_id("\xe2\x96\x81the");
  ASSERT_TRUE(the);
  EXPECT_EQ(v.bytes(*the), " the");
  auto g = text::Tokenizer::from_dir(kGpt2);
  auto world = g->piece_to_id("\xc4\xa0world");
  ASSERT_TRUE(world);
  EXPECT_EQ(gpt2().bytes->bytes(*world), " world");
  // A SentencePiece tokenizer.model, and Llama 3's byte-level BPE with added tokens.
  auto sp =
      text::Tokenizer::from_dir(std::string(ZENITH_SOURCE_DIR) + "/tests/fixtures/text/sp_bpe");
  auto sp_bytes = TokenBytes::from_tokenizer(*sp);
  EXPECT_EQ(sp_bytes->bytes(*sp->piece_to_id("<0x0A>")), "\n");
  EXPECT_EQ(sp_bytes->bytes(*sp->piece_to_id("\xe2\x96\x81g")), " g");
  EXPECT_FALSE(sp_bytes->usable(sp->eos_id()));
  auto l3 =
      text::Tokenizer::from_dir(std::string(ZENITH_SOURCE_DIR) + "/tests/fixtures/text/llama3_bpe");
  auto l3_bytes = TokenBytes::from_tokenizer(*l3);
  EXPECT_FALSE(l3_bytes->usable(*l3->piece_to_id("<|eot_id|>")));
  int32_t zenith = *l3->piece_to_id("zenith");
  EXPECT_EQ(l3_bytes->usable(zenith), !l3->is_special(zenith));
}

TEST(Constraint, RandomTokensAlwaysGiveValidJson) {
  for (const Vocab* v : {&fortunes(), &gpt2()}) {
    for (const char* text : kSchemas) {
      json schema = json::parse(text);
      auto start = json_schema_constraint(schema, v->bytes, v->eos);
      for (uint64_t seed = 0; seed < 12; ++seed)
        expect_valid(sample(*start->clone(), *v, seed * 7 + 1), schema);
    }
    auto object = json_object_constraint(v->bytes, v->eos);
    for (uint64_t seed = 0; seed < 12; ++seed) {
      std::string out = sample(*object->clone(), *v, seed, 12);
      expect_valid(out, json{{"type", "object"}});
    }
  }
}

// The masks the constraint gives (cached by state, from a trie walk with a fast path for free
// strings) equal each token's bytes stepped one by one through a copy of the state.
TEST(Constraint, MasksEqualTokenByTokenChecks) {
  for (const Vocab* vocab : {&fortunes(), &gpt2()}) {
    const Vocab& v = *vocab;
    for (const char* text : kSchemas) {
      Grammar g = compile_json_schema(nlohmann::ordered_json::parse(text));
      auto c = json_schema_constraint(nlohmann::ordered_json::parse(text), v.bytes, v.eos);
      JsonState state = JsonState::start(g);
      std::vector<JsonState> scratch;
      std::vector<uint64_t> bits;
      std::mt19937_64 rng(3);
      for (int step = 0; step < 80 && !c->done(); ++step) {
        std::vector<float> logits(size_t(v.bytes->size()), 0.0f);
        c->mask(logits);
        allowed_tokens(g, *v.bytes, state, scratch, bits);
        std::vector<int64_t> allowed;
        for (int64_t id = 0; id < v.bytes->size(); ++id) {
          bool walked = (bits[size_t(id) >> 6] >> (id & 63)) & 1;
          bool stepped = v.bytes->usable(id);
          JsonState copy = state;
          for (size_t k = 0; stepped && k < v.bytes->bytes(id).size(); ++k)
            stepped = copy.step(g, uint8_t(v.bytes->bytes(id)[k]));
          ASSERT_EQ(walked, stepped) << id << " after " << c->text();
          ASSERT_EQ(walked, !std::isinf(logits[size_t(id)])) << id << " after " << c->text();
          if (walked) allowed.push_back(id);
        }
        if (allowed.empty()) break;
        // Mostly short tokens, so that strings end and the walk sees every part of the schema.
        int64_t t = allowed[size_t(rng() % allowed.size())];
        for (int tries = 0; tries < 4 && v.bytes->bytes(t).size() > 2; ++tries)
          t = allowed[size_t(rng() % allowed.size())];
        c->accept(t);
        for (char ch : v.bytes->bytes(t)) ASSERT_TRUE(state.step(g, uint8_t(ch)));
      }
    }
  }
}

TEST(Constraint, OnlyEosOnceClosedAndAcceptRefusesWhatTheMaskRefused) {
  const Vocab& v = fortunes();
  auto c =
      json_schema_constraint(json::parse(R"({"type":"object","properties":{}})"), v.bytes, v.eos);
  std::vector<float> logits(size_t(v.bytes->size()), 1.0f);
  c->mask(logits);
  int64_t open = -1;
  for (int64_t id = 0; id < v.bytes->size(); ++id)
    if (!std::isinf(logits[size_t(id)])) {
      EXPECT_EQ(v.bytes->bytes(id)[0], '{');
      if (v.bytes->bytes(id) == "{}") open = id;
    }
  EXPECT_TRUE(std::isinf(logits[size_t(v.eos[0])]));
  int64_t quote = *text::Tokenizer::from_dir(kFortunes)->piece_to_id("\"");
  EXPECT_THROW(c->accept(quote), std::invalid_argument);
  if (open < 0) {  // "{" then "}" where the vocabulary has no "{}"
    for (int64_t id = 0; id < v.bytes->size(); ++id)
      if (v.bytes->usable(id) && v.bytes->bytes(id) == "{") c->accept(id);
    for (int64_t id = 0; id < v.bytes->size(); ++id)
      if (v.bytes->usable(id) && v.bytes->bytes(id) == "}") open = id;
  }
  c->accept(open);
  EXPECT_TRUE(c->done());
  EXPECT_EQ(c->text(), "{}");
  std::fill(logits.begin(), logits.end(), 1.0f);
  c->mask(logits);
  for (int64_t id = 0; id < v.bytes->size(); ++id)
    EXPECT_EQ(std::isinf(logits[size_t(id)]), id != v.eos[0]) << id;
}

TEST(Constraint, ToolCallsNamedAndRequired) {
  std::vector<FunctionSpec> functions = {
      {"get_weather", json::parse(R"({"type":"object","properties":{"city":{"type":"string",
          "maxLength":12},"unit":{"enum":["c","f"]}},"required":["city","unit"]})")},
      {"get_time", json::parse(R"({"type":"object","properties":{"zone":{"type":"string"}},
          "required":["zone"]})")},
      {"ping", nullptr}};
  const Vocab& v = gpt2();
  auto named = tool_call_constraint(functions, "get_weather", v.bytes, v.eos);
  for (uint64_t seed = 0; seed < 6; ++seed)
    expect_valid(sample(*named->clone(), v, seed), functions[0].parameters);
  auto required = tool_call_constraint(functions, "required", v.bytes, v.eos);
  std::set<std::string> names;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    std::string out = sample(*required->clone(), v, seed);
    ToolCallText call = parse_tool_call_output(out);
    EXPECT_EQ(out.rfind(tool_call_prefix(call.name), 0), 0u);
    names.insert(call.name);
    size_t i = call.name == "get_weather" ? 0 : call.name == "get_time" ? 1 : 2;
    ASSERT_EQ(functions[i].name, call.name);
    json schema = i == 2 ? json::parse(R"({"type":"object","additionalProperties":false})")
                         : json(functions[i].parameters);
    expect_valid(call.arguments, schema);
  }
  EXPECT_GE(names.size(), 2u);
  EXPECT_THROW(tool_call_constraint(functions, "nope", v.bytes, v.eos), SchemaError);
  functions[1].parameters = json::parse(R"({"type":"object","properties":{"z":{"format":"x"}}})");
  try {
    tool_call_constraint(functions, "required", v.bytes, v.eos);
    ADD_FAILURE() << "no SchemaError";
  } catch (const SchemaError& e) {
    EXPECT_EQ(e.pointer, "/tools/1/function/parameters/properties/z/format");
  }
}

// A function's arguments come in its schema's property order (not sorted), named or required.
TEST(Constraint, ToolArgumentsInTheSchemasOrder) {
  const std::vector<FunctionSpec> functions = {
      {"f", nlohmann::ordered_json::parse(R"({"type":"object","properties":{"z":{"type":
          "integer"},"a":{"type":"boolean"}},"required":["z","a"]})")}};
  const Vocab& v = gpt2();
  for (const std::string choice : {"f", "required"}) {
    auto c = tool_call_constraint(functions, choice, v.bytes, v.eos);
    for (uint64_t seed = 0; seed < 4; ++seed) {
      std::string out = sample(*c->clone(), v, seed);
      if (choice == "required") out = parse_tool_call_output(out).arguments;
      const auto args = nlohmann::ordered_json::parse(out);
      ASSERT_EQ(args.size(), 2u) << out;
      EXPECT_EQ(args.begin().key(), "z") << out;
    }
  }
}

// The fortunes model under a schema, greedy (temperature 0) and sampled at temperature 1.
std::string run_fortunes_model(TokenConstraint& c, double temperature, uint64_t seed) {
  static auto model = models::Llama::from_pretrained(kFortunes);
  auto tok = text::Tokenizer::from_dir(kFortunes);
  NoGradGuard no_grad;
  std::mt19937_64 rng(seed);
  std::vector<int32_t> prompt = tok->encode("A novice asked the Master: ");
  models::KVCache cache(model->config(), 1);
  models::LlamaInput in;
  in.cache = &cache;
  in.last_position_only = true;
  in.input_ids = Tensor::from_vector(std::vector<int64_t>(prompt.begin(), prompt.end()),
                                     {1, int64_t(prompt.size())});
  for (int step = 0; step < 200 && !c.done(); ++step) {
    std::vector<float> logits = model->forward(in).to_float_vector();
    c.mask(logits);
    int64_t next = std::max_element(logits.begin(), logits.end()) - logits.begin();
    if (temperature > 0) {
      std::vector<double> weights;
      for (float l : logits) weights.push_back(std::exp((l - logits[size_t(next)]) / temperature));
      next = std::discrete_distribution<int64_t>(weights.begin(), weights.end())(rng);
    }
    if (next == tok->eos_id()) break;
    c.accept(next);
    in.input_ids = Tensor::from_vector(std::vector<int64_t>{next}, {1, 1});
  }
  return c.text();
}

TEST(Constraint, FortunesModelGivesValidJsonGreedyAndAtTemperatureOne) {
  json schema = json::parse(R"({"type":"object","properties":{"title":{"type":"string",
      "maxLength":30},"year":{"type":"integer"},"kind":{"enum":["koan","joke"]},
      "funny":{"type":"boolean"},"tags":{"type":"array","items":{"type":"string",
      "maxLength":8},"maxItems":3}},"required":["title","year","kind","funny","tags"]})");
  auto start = json_schema_constraint(schema, fortunes().bytes, fortunes().eos);
  std::string greedy = run_fortunes_model(*start->clone(), 0, 0);
  std::printf("[greedy] %s\n", greedy.c_str());
  expect_valid(greedy, schema);
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    std::string sampled = run_fortunes_model(*start->clone(), 1.0, seed);
    std::printf("[temperature 1] %s\n", sampled.c_str());
    expect_valid(sampled, schema);
  }
}

// The walk's cost with no cached masks: the first mask of each state.
double mask_micros(const Vocab& v, const char* schema, const std::string& prefix) {
  Grammar g = compile_json_schema(nlohmann::ordered_json::parse(schema));
  JsonState s = JsonState::start(g);
  for (char ch : prefix) EXPECT_TRUE(s.step(g, uint8_t(ch)));
  std::vector<JsonState> scratch;
  std::vector<uint64_t> bits;
  allowed_tokens(g, *v.bytes, s, scratch, bits);
  int reps = 20;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) allowed_tokens(g, *v.bytes, s, scratch, bits);
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / reps;
}

TEST(Constraint, MaskCost) {
  // A synthetic 32k vocabulary: every byte, then random 2..8-byte printable strings.
  std::mt19937_64 rng(7);
  std::vector<std::optional<std::string>> words;
  for (int b = 0; b < 256; ++b) words.push_back(std::string(1, char(b)));
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyz  ,.:\"{}[]0123456789-_ETAOIN";
  while (words.size() < 32000) {
    std::string w;
    for (size_t k = 2 + rng() % 7; k > 0; --k) w += alphabet[rng() % alphabet.size()];
    words.push_back(w);
  }
  Vocab synthetic{std::make_shared<const TokenBytes>(words), {32000}};
  const char* schema = kSchemas[0];
  for (const auto& [name, v] : {std::pair{"fortunes 2048", &fortunes()},
                                {"gpt2 fixture", &gpt2()},
                                {"synthetic 32000", &synthetic}}) {
    double in_string = mask_micros(*v, schema, "{\"name\":\"ab");
    double after_key = mask_micros(*v, schema, "{\"name\":\"ab\",\"age\":1");
    // Near a maxLength no token may cross: the walk copies the state at every byte.
    double bounded = mask_micros(*v, R"({"type":"array","items":{"type":"string","maxLength":12}})",
                                 "[\"abcdef");
    // A cache hit: the state's key, the lookup and -inf written over the logits.
    auto c = json_schema_constraint(nlohmann::ordered_json::parse(schema), v->bytes, v->eos);
    std::vector<float> logits(size_t(v->bytes->size()), 0.0f);
    c->mask(logits);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) c->mask(logits);
    double cached =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        20;
    std::printf(
        "[mask] %s (%lld tokens): walk in a string %.1f us, in an integer %.1f us, near a "
        "maxLength %.1f us; cached %.1f us\n",
        name, static_cast<long long>(v->bytes->size()), in_string, after_key, bounded, cached);
    EXPECT_LT(in_string, 200000.0);
  }
}

}  // namespace
}  // namespace zenith::serve::llm
