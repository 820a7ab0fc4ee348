// The LLM engine tests' helpers: the demo model, prompts, and a request's events gathered.
#pragma once

#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "serve/llm/engine.h"
#include "zenith/llama.h"

namespace zenith::serve::llm {

inline std::string demo_dir() {
  return std::string(ZENITH_SOURCE_DIR) + "/examples/llm/demo-llama";
}

inline std::shared_ptr<models::Llama> demo_model() {
  static auto model = models::Llama::from_pretrained(demo_dir(), DType::f32);
  return model;
}

inline std::vector<int64_t> prompt_of(int64_t n, int64_t salt) {
  std::vector<int64_t> p;
  for (int64_t i = 0; i < n; ++i) p.push_back(3 + (i * 37 + salt * 101) % 1900);
  return p;
}

// A request's events, gathered until it finishes.
struct Collected {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  std::string text;
  std::vector<std::string> pieces;  // each event's text
  std::vector<int64_t> tokens;
  std::vector<TokenLogprob> logprobs;
  Event last;

  std::function<void(const Event&)> callback() {
    return [this](const Event& e) {
      std::lock_guard<std::mutex> lock(mutex);
      text += e.text;
      pieces.push_back(e.text);
      tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
      logprobs.insert(logprobs.end(), e.logprobs.begin(), e.logprobs.end());
      if (e.finished) {
        last = e;
        done = true;
        done_cv.notify_all();
      }
    };
  }
  bool finished() {
    std::lock_guard<std::mutex> lock(mutex);
    return done;
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    done_cv.wait(lock, [&] { return done; });
  }
};

inline SamplingParams greedy(int64_t max_tokens) {
  SamplingParams p;
  p.max_tokens = max_tokens;
  p.temperature = 0;
  p.logprobs = true;
  p.top_logprobs = 5;
  return p;
}

// Runs the prompts concurrently on one engine; returns each request's gathered output.
inline std::vector<std::unique_ptr<Collected>> run_all(
    Engine& engine, const std::vector<std::vector<int64_t>>& prompts,
    const SamplingParams& params) {
  std::vector<std::unique_ptr<Collected>> out;
  for (const auto& p : prompts) {
    out.push_back(std::make_unique<Collected>());
    engine.submit(p, params, out.back()->callback());
  }
  for (auto& c : out) c->wait();
  return out;
}

inline bool same_logprobs(const std::vector<TokenLogprob>& a, const std::vector<TokenLogprob>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].token != b[i].token || std::memcmp(&a[i].logprob, &b[i].logprob, 4) != 0 ||
        a[i].top.size() != b[i].top.size())
      return false;
    for (size_t j = 0; j < a[i].top.size(); ++j)
      if (a[i].top[j].first != b[i].top[j].first ||
          std::memcmp(&a[i].top[j].second, &b[i].top[j].second, 4) != 0)
        return false;
  }
  return true;
}

}  // namespace zenith::serve::llm
