#include "serve/llm/constraint.h"

#include <algorithm>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "serve/llm/json_grammar.h"
#include "serve/llm/json_schema_compile.h"

namespace zenith::serve::llm {

namespace {

// What the sequences of one request (its `n` choices) share: the grammar, the vocabulary and
// the masks already computed, by state (inside a free string the state repeats: one walk).
struct Shared {
  Grammar grammar;
  std::shared_ptr<const TokenBytes> vocab;
  std::vector<int64_t> eos_ids;
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const std::vector<uint64_t>>> masks;
};

// At most 4 MiB of cached masks per request: 512 masks of a 32k vocabulary, 256 of a 128k one.
size_t max_cached_masks(int64_t vocab_size) {
  size_t bytes = size_t(vocab_size + 63) / 64 * 8;
  return std::clamp<size_t>((size_t(4) << 20) / bytes, 16, 512);
}

class JsonConstraint : public TokenConstraint {
 public:
  explicit JsonConstraint(std::shared_ptr<Shared> shared)
      : shared_(std::move(shared)), state_(JsonState::start(shared_->grammar)) {}

  void mask(float* logits, int64_t n) override {
    std::shared_ptr<const std::vector<uint64_t>> bits = allowed();
    const std::vector<uint64_t>& b = *bits;
    std::vector<float> eos_logits;
    for (int64_t id : shared_->eos_ids) eos_logits.push_back(id >= 0 && id < n ? logits[id] : 0.0f);
    constexpr float kOff = -std::numeric_limits<float>::infinity();
    bool any = false;
    int64_t known = std::min<int64_t>(n, shared_->vocab->size());
    for (int64_t base = 0; base < known; base += 64) {  // 64 ids per word of the mask
      uint64_t word = b[size_t(base >> 6)];
      int64_t end = std::min<int64_t>(base + 64, known);
      any = any || word != 0;
      if (word == ~uint64_t(0)) continue;
      if (word == 0) {
        std::fill(logits + base, logits + end, kOff);
        continue;
      }
      for (int64_t id = base; id < end; ++id)
        if (!((word >> (id - base)) & 1)) logits[id] = kOff;
    }
    std::fill(logits + known, logits + std::max(known, n), kOff);
    // Eos when complete; also when no token fits (a vocabulary without some byte), rather
    // than an empty mask.
    if (complete() || !any)
      for (size_t i = 0; i < shared_->eos_ids.size(); ++i) {
        int64_t id = shared_->eos_ids[i];
        if (id >= 0 && id < n) logits[id] = eos_logits[i];
      }
  }

  void accept(int64_t token) override {
    const TokenBytes& vocab = *shared_->vocab;
    if (!vocab.usable(token))
      throw std::invalid_argument("[constraint] token " + std::to_string(token) +
                                  " has no bytes the grammar can take (special or eos)");
    JsonState next;
    next.copy_from(state_);
    for (char c : vocab.bytes(token))
      if (!next.step(shared_->grammar, uint8_t(c)))
        throw std::invalid_argument(
            "[constraint] token " + std::to_string(token) + " (" +
            nlohmann::json(vocab.bytes(token))
                .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
            ") does not continue " + text_);
    state_.copy_from(next);
    text_ += vocab.bytes(token);
  }

  bool complete() const override { return state_.complete(shared_->grammar); }
  bool done() const override { return state_.closed(); }
  const std::string& text() const override { return text_; }
  std::shared_ptr<TokenConstraint> clone() const override {
    auto copy = std::make_shared<JsonConstraint>(shared_);
    copy->state_.copy_from(state_);
    copy->text_ = text_;
    return copy;
  }

 private:
  std::shared_ptr<const std::vector<uint64_t>> allowed() {
    std::string key = state_.key(shared_->grammar, shared_->vocab->max_token_bytes());
    {
      std::lock_guard lock(shared_->mutex);
      auto it = shared_->masks.find(key);
      if (it != shared_->masks.end()) return it->second;
    }
    auto bits = std::make_shared<std::vector<uint64_t>>();
    allowed_tokens(shared_->grammar, *shared_->vocab, state_, scratch_, *bits);
    std::lock_guard lock(shared_->mutex);
    if (shared_->masks.size() >= max_cached_masks(shared_->vocab->size())) shared_->masks.clear();
    shared_->masks.emplace(std::move(key), bits);
    return bits;
  }

  std::shared_ptr<Shared> shared_;
  JsonState state_;
  std::string text_;
  std::vector<JsonState> scratch_;
};

std::shared_ptr<TokenConstraint> make(Grammar grammar, std::shared_ptr<const TokenBytes> vocab,
                                      std::vector<int64_t> eos_ids) {
  auto shared = std::make_shared<Shared>();
  shared->grammar = std::move(grammar);
  shared->vocab = std::move(vocab);
  shared->eos_ids = std::move(eos_ids);
  return std::make_shared<JsonConstraint>(std::move(shared));
}

}  // namespace

std::shared_ptr<TokenConstraint> json_schema_constraint(const nlohmann::ordered_json& schema,
                                                        std::shared_ptr<const TokenBytes> vocab,
                                                        std::vector<int64_t> eos_ids) {
  return make(compile_json_schema(schema), std::move(vocab), std::move(eos_ids));
}

std::shared_ptr<TokenConstraint> json_schema_constraint(const nlohmann::json& schema,
                                                        std::shared_ptr<const TokenBytes> vocab,
                                                        std::vector<int64_t> eos_ids) {
  nlohmann::ordered_json ordered;
  try {
    ordered = nlohmann::ordered_json::parse(schema.dump());
  } catch (const nlohmann::json::exception& e) {  // a string that is not UTF-8
    throw SchemaError("", "", std::string("[json_schema] ") + e.what());
  }
  return json_schema_constraint(ordered, std::move(vocab), std::move(eos_ids));
}

std::shared_ptr<TokenConstraint> json_object_constraint(std::shared_ptr<const TokenBytes> vocab,
                                                        std::vector<int64_t> eos_ids) {
  return make(any_object_grammar(), std::move(vocab), std::move(eos_ids));
}

std::shared_ptr<TokenConstraint> tool_call_constraint(const std::vector<FunctionSpec>& functions,
                                                      const std::string& choice,
                                                      std::shared_ptr<const TokenBytes> vocab,
                                                      std::vector<int64_t> eos_ids) {
  return make(tool_call_grammar(functions, choice), std::move(vocab), std::move(eos_ids));
}

std::string tool_call_prefix(const std::string& name) {
  return "{\"name\":" + nlohmann::json(name).dump() + ",\"arguments\":";
}

ToolCallText parse_tool_call_output(const std::string& output) {
  nlohmann::json parsed = nlohmann::json::parse(output, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object() || !parsed.contains("name") ||
      !parsed["name"].is_string() || !parsed.contains("arguments") ||
      !parsed["arguments"].is_object())
    throw std::invalid_argument("[tools] the output is not {\"name\":...,\"arguments\":{...}}: " +
                                output);
  ToolCallText call;
  call.name = parsed["name"].get<std::string>();
  std::string prefix = tool_call_prefix(call.name);
  if (output.rfind(prefix, 0) != 0 || output.back() != '}')
    throw std::invalid_argument("[tools] the output does not start with " + prefix);
  call.arguments = output.substr(prefix.size(), output.size() - prefix.size() - 1);
  return call;
}

}  // namespace zenith::serve::llm
