// POST /v1/chat/completions and /v1/completions: parse and check the request, submit one engine
// request per choice, answer when all finish or stream their chunks as server-sent events.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <limits>
#include <random>

#include "platform/http/http_guard.h"
#include "platform/http/reply.h"
#include "serve/llm/constraint.h"
#include "serve/llm/http_server_impl.h"
#include "serve/llm/openai_prompt.h"
#include "serve/llm/openai_response.h"

namespace zenith::serve::llm {

using nlohmann::json;

namespace {

// The events of one HTTP request's engine requests (one per choice), filled on the engine thread.
struct Pending {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::pair<int, Event>> events;  // choice index, event
  int unfinished = 0;
  std::vector<uint64_t> ids;
};

// What a stream keeps between calls of its content provider.
struct Stream {
  Request request;
  ResponseHead head;
  std::vector<ChoiceBuilder> choices;
  std::shared_ptr<Pending> pending;
  bool started = false, complete = false;
};

std::string call_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[32];
  std::snprintf(buf, sizeof buf, "call_%016llx", (unsigned long long)rng());
  return buf;
}

}  // namespace

// The grammar a request asks for (response_format, a required tool call); null for free text.
static std::shared_ptr<TokenConstraint> make_constraint(LlmServer::Impl& m, const Request& r) {
  const bool tool = r.tool_choice == "required" || r.tool_choice == "function";
  if (r.response_format == "text" && !tool) return nullptr;
  const auto& eos = m.engine->eos_token_ids();
  try {
    if (tool) {
      std::vector<FunctionSpec> functions;
      for (const auto& t : r.tools) functions.push_back({t.name, t.parameters});
      return tool_call_constraint(functions, r.tool_choice == "function" ? r.tool_name : "required",
                                  m.token_bytes(), eos);
    }
    if (r.response_format == "json_object") return json_object_constraint(m.token_bytes(), eos);
    return json_schema_constraint(r.json_schema, m.token_bytes(), eos);
  } catch (const SchemaError& e) {
    throw ApiError{400, e.what(),
                   tool ? std::string("tools") : std::string("response_format.json_schema.schema"),
                   "unsupported_schema"};
  }
}

// A prompt's own tokens' log-probabilities (echo with logprobs): the engine is fed the first token
// and made to write the rest, one forced token at a time. Logprobs are taken from the raw logits
// before any mask, so each is the model's log-probability of that prompt token after the ones
// before it.
class ForcedTokens : public TokenConstraint {
 public:
  explicit ForcedTokens(std::vector<int64_t> ids) : ids_(std::move(ids)) {}
  void mask(float* logits, int64_t n) override {
    const int64_t keep = next_ < ids_.size() ? ids_[next_] : -1;
    for (int64_t j = 0; j < n; ++j)
      if (j != keep) logits[j] = -std::numeric_limits<float>::infinity();
  }
  void accept(int64_t) override { ++next_; }
  bool complete() const override { return next_ >= ids_.size(); }
  bool done() const override { return complete(); }
  const std::string& text() const override { return text_; }
  std::shared_ptr<TokenConstraint> clone() const override {
    return std::make_shared<ForcedTokens>(*this);
  }

 private:
  std::vector<int64_t> ids_;
  size_t next_ = 0;
  std::string text_;
};

// Submits one engine request per choice of `pending` (429 for a full queue, 400/404 for what the
// engine refuses: then the ones already submitted are cancelled).
static uint64_t submit_one(LlmServer::Impl& m, httplib::Response& res, Pending& pending,
                           std::vector<int64_t> ids, const SamplingParams& p,
                           std::function<void(const Event&)> on_event) {
  try {
    const uint64_t id = m.engine->submit(std::move(ids), p, std::move(on_event));
    std::lock_guard lock(pending.mutex);
    pending.ids.push_back(id);
    return id;
  } catch (const QueueFullError& e) {
    for (uint64_t id : pending.ids) m.engine->cancel(id);
    res.set_header("retry-after", "1");
    throw ApiError{429, std::string("the request queue is full: ") + e.what(), "", "queue_full"};
  } catch (const RequestError& e) {
    for (uint64_t id : pending.ids) m.engine->cancel(id);
    throw ApiError{e.unknown_adapter ? 404 : 400, e.what(), e.param,
                   e.unknown_adapter ? "model_not_found" : ""};
  }
}

// Waits until every request of `pending` finished. Nothing is written until then, so the socket
// itself says when its client went away: then its sequences stop within a step or two, as a
// stream's do.
static void wait_all(LlmServer::Impl& m, Pending& pending) {
  std::unique_lock lock(pending.mutex);
  bool cancelled = false;
  while (!pending.ready.wait_for(lock, std::chrono::milliseconds(10),
                                 [&] { return pending.unfinished == 0; }))
    if (!cancelled && (m.stopping || platform::client_gone())) {
      cancelled = true;
      const auto ids = pending.ids;
      lock.unlock();
      for (uint64_t id : ids) m.engine->cancel(id);
      lock.lock();
    }
}

// Each prompt's logprobs of its tokens 1.. (echo): see ForcedTokens. The prompts run together.
static std::vector<std::vector<TokenLogprob>> prompt_logprobs(
    LlmServer::Impl& m, httplib::Response& res, const std::vector<std::vector<int64_t>>& prompts,
    int top, const std::string& adapter) {
  std::vector<std::vector<TokenLogprob>> out(prompts.size());
  Pending pending;
  for (size_t pi = 0; pi < prompts.size(); ++pi) {
    const auto& ids = prompts[pi];
    if (ids.size() < 2) continue;
    SamplingParams p;
    p.max_tokens = int64_t(ids.size()) - 1;
    p.temperature = 0;
    p.logprobs = true;
    p.top_logprobs = top;
    p.ignore_eos = true;  // an eos inside the prompt is just a token here
    p.adapter = adapter;
    p.constraint = std::make_shared<ForcedTokens>(std::vector<int64_t>(ids.begin() + 1, ids.end()));
    {
      std::lock_guard lock(pending.mutex);
      ++pending.unfinished;
    }
    try {
      submit_one(m, res, pending, {ids[0]}, p, [&pending, &lps = out[pi]](const Event& e) {
        std::lock_guard lock(pending.mutex);
        lps.insert(lps.end(), e.logprobs.begin(), e.logprobs.end());
        if (e.finished) --pending.unfinished;
        pending.ready.notify_all();
      });
    } catch (...) {  // the ones submitted were cancelled: wait for their last events
      {
        std::lock_guard lock(pending.mutex);
        --pending.unfinished;
      }
      wait_all(m, pending);
      throw;
    }
  }
  wait_all(m, pending);
  return out;
}

void LlmServer::Impl::complete(const httplib::Request& req, httplib::Response& res, bool chat) {
  Request r = parse_request(req.body, chat);
  std::string adapter;
  if (r.model != options.name) {
    std::lock_guard lock(adapters_mutex);
    if (!adapter_dirs.count(r.model)) {
      std::string known = "'" + options.name + "'";
      for (const auto& [name, dir] : adapter_dirs) known += ", '" + name + "'";
      throw ApiError{404,
                     "The model '" + r.model + "' does not exist (this service serves " + known +
                         "; GET /v1/models lists them)",
                     "model", "model_not_found"};
    }
    adapter = r.model;
  }
  // One prompt for chat; completions may send several: choice prompt * n + i answers prompt i.
  const auto prompts = prompt_ids(r, *tokenizer, chat_template ? &*chat_template : nullptr,
                                  engine->config().vocab_size);
  std::vector<int64_t> budgets;
  for (const auto& ids : prompts)
    budgets.push_back(completion_budget(r, int64_t(ids.size()), engine->max_model_len()));
  SamplingParams p;
  p.temperature = r.temperature;
  p.top_p = r.top_p;
  p.top_k = r.top_k;
  p.seed = r.seed;
  p.presence_penalty = r.presence_penalty;
  p.frequency_penalty = r.frequency_penalty;
  p.stop = r.stop;
  p.logprobs = r.logprobs;
  p.top_logprobs = r.top_logprobs;
  p.adapter = adapter;
  const int choices = int(prompts.size()) * r.n;
  // Each choice's grammar, cloned before any runs (the engine advances the first at once).
  std::vector<std::shared_ptr<TokenConstraint>> constraints;
  if (auto constraint = make_constraint(*this, r))
    for (int c = 0; c < choices; ++c)
      constraints.push_back(c == 0 ? constraint : constraint->clone());

  auto stream = std::make_shared<Stream>();
  stream->request = std::move(r);
  const Request& q = stream->request;
  stream->head = {(chat ? "chatcmpl-" : "cmpl-") + res.get_header_value("x-request-id"),
                  int64_t(std::time(nullptr)), q.model};
  for (int c = 0; c < choices; ++c) stream->choices.emplace_back(q, c, *tokenizer, call_id());
  if (q.echo) {
    const auto forced = q.logprobs ? prompt_logprobs(*this, res, prompts, q.top_logprobs, adapter)
                                   : std::vector<std::vector<TokenLogprob>>(prompts.size());
    for (size_t pi = 0; pi < prompts.size(); ++pi) {
      const auto& ids = prompts[pi];
      const std::string text = q.prompts[pi].is_ids
                                   ? tokenizer->decode(std::vector<int32_t>(ids.begin(), ids.end()))
                                   : q.prompts[pi].text;
      for (int i = 0; i < q.n; ++i)
        stream->choices[pi * size_t(q.n) + size_t(i)].echo(text, ids, forced[pi]);
    }
  }
  auto pending = stream->pending = std::make_shared<Pending>();
  pending->unfinished = choices;
  for (int c = 0; c < choices; ++c) {
    const size_t pi = size_t(c / q.n);
    const int i = c % q.n;
    SamplingParams pc = p;
    pc.max_tokens = budgets[pi];
    if (p.seed) pc.seed = *p.seed + uint64_t(i);
    if (!constraints.empty()) pc.constraint = constraints[size_t(c)];
    submit_one(*this, res, *pending, prompts[pi], pc, [pending, c](const Event& e) {
      std::lock_guard lock(pending->mutex);
      pending->events.emplace_back(c, e);
      if (e.finished) --pending->unfinished;
      pending->ready.notify_all();
    });
  }

  if (!q.stream) {
    wait_all(*this, *pending);
    std::lock_guard lock(pending->mutex);
    for (const auto& [i, e] : pending->events) {
      if (e.finish_reason == "error") throw ApiError{500, "generation failed: " + e.error, "", ""};
      stream->choices[size_t(i)].add(e);
    }
    platform::reply_json(res, 200, response_json(q, stream->head, stream->choices));
    return;
  }

  res.set_header("Cache-Control", "no-store");
  const auto ping = std::chrono::duration<double>(options.ping_interval_s);
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, stream, ping](size_t, httplib::DataSink& sink) {
        Stream& s = *stream;
        Pending& pd = *s.pending;
        auto send = [&](const std::string& text) { return sink.write(text.data(), text.size()); };
        if (!s.started) {
          s.started = true;
          if (s.request.chat)
            for (auto& c : s.choices)
              if (!send(sse_event(chunk_json(s.request, s.head, json::array({c.role_choice()})))))
                return false;
        }
        std::deque<std::pair<int, Event>> events;
        bool all_done = false;
        std::vector<uint64_t> cancel;
        {
          std::unique_lock lock(pd.mutex);
          pd.ready.wait_for(lock, ping, [&] { return !pd.events.empty() || stopping; });
          if (stopping) cancel = pd.ids;
          events.swap(pd.events);
          all_done = pd.unfinished == 0;
        }
        for (uint64_t id : cancel) engine->cancel(id);
        if (events.empty() && !all_done) return send(kSsePing);
        for (const auto& [i, e] : events) {
          if (e.finish_reason == "error" &&
              !send(sse_event(error_body({500, "generation failed: " + e.error, "", ""}))))
            return false;
          json choice = s.choices[size_t(i)].add(e);
          if (!choice.is_null() &&
              !send(sse_event(chunk_json(s.request, s.head, json::array({choice})))))
            return false;
        }
        if (!all_done) return true;
        if (s.request.include_usage &&
            !send(sse_event(usage_chunk_json(s.request, s.head, total_usage(s.choices)))))
          return false;
        if (!send(kSseDone)) return false;
        s.complete = true;
        sink.done();
        return true;
      },
      [this, stream](bool) {
        // The client went away (or the write failed): its sequences stop within one step.
        if (stream->complete) return;
        std::vector<uint64_t> ids;
        {
          std::lock_guard lock(stream->pending->mutex);
          ids = stream->pending->ids;
        }
        for (uint64_t id : ids) engine->cancel(id);
      });
}

}  // namespace zenith::serve::llm
