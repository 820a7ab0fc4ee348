// The LLM engine's public face (first cut: the API; the loop lands in the next commits).
#include "serve/llm/engine.h"

#include "zenith/error.h"

namespace zenith::serve::llm {

struct Engine::State {
  std::shared_ptr<models::Llama> model;
  std::shared_ptr<text::Tokenizer> tokenizer;
  EngineOptions options;
};

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds.size() && value > bounds[i]) ++i;
  if (counts.size() < bounds.size() + 1) counts.resize(bounds.size() + 1);
  ++counts[i];
  sum += value;
  ++count;
}

Engine::Engine(std::shared_ptr<models::Llama> model, std::shared_ptr<text::Tokenizer> tokenizer,
               EngineOptions options)
    : state_(std::make_unique<State>()) {
  ZENITH_CHECK(model, "[llm engine] no model");
  state_->model = std::move(model);
  state_->tokenizer = std::move(tokenizer);
  state_->options = std::move(options);
  state_->options.eos_token_ids = state_->options.eos_token_ids;
}

Engine::~Engine() = default;

uint64_t Engine::submit(std::vector<int64_t>, SamplingParams, std::function<void(const Event&)>) {
  ZENITH_FAIL("[llm engine] not implemented yet");
}
void Engine::cancel(uint64_t) {}
void Engine::add_adapter(const std::string&, const std::string&) {
  ZENITH_FAIL("[llm engine] adapters not implemented yet");
}
bool Engine::remove_adapter(const std::string&) { return false; }
std::vector<std::string> Engine::adapters() const { return {}; }
EngineStats Engine::stats() const { return {}; }
const models::LlamaConfig& Engine::config() const { return state_->model->config(); }
int64_t Engine::max_model_len() const {
  return state_->options.max_model_len > 0 ? state_->options.max_model_len
                                           : config().max_position_embeddings;
}
const std::shared_ptr<text::Tokenizer>& Engine::tokenizer() const { return state_->tokenizer; }
const std::vector<int64_t>& Engine::eos_token_ids() const { return state_->options.eos_token_ids; }

}  // namespace zenith::serve::llm
