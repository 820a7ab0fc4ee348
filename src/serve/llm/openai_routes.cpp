// POST /v1/chat/completions and /v1/completions: parse and check the request, submit one engine
// request per choice, answer when all finish or stream their chunks as server-sent events.
#include <chrono>
#include <condition_variable>
#include <deque>
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
  const auto ids = prompt_ids(r, *tokenizer, chat_template ? &*chat_template : nullptr,
                              engine->config().vocab_size);
  SamplingParams p;
  p.max_tokens = completion_budget(r, int64_t(ids.size()), engine->max_model_len());
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
  auto constraint = make_constraint(*this, r);
  std::vector<std::shared_ptr<TokenConstraint>> constraints;
  for (int i = 0; i < r.n && constraint; ++i)
    constraints.push_back(i == 0 ? constraint : constraint->clone());

  auto stream = std::make_shared<Stream>();
  stream->request = std::move(r);
  const Request& q = stream->request;
  stream->head = {(chat ? "chatcmpl-" : "cmpl-") + res.get_header_value("x-request-id"),
                  int64_t(std::time(nullptr)), q.model};
  for (int i = 0; i < q.n; ++i) stream->choices.emplace_back(q, i, *tokenizer, call_id());
  auto pending = stream->pending = std::make_shared<Pending>();
  pending->unfinished = q.n;
  for (int i = 0; i < q.n; ++i) {
    SamplingParams pi = p;
    if (p.seed) pi.seed = *p.seed + uint64_t(i);
    if (constraint) pi.constraint = constraints[size_t(i)];
    try {
      const uint64_t id = engine->submit(ids, pi, [pending, i](const Event& e) {
        std::lock_guard lock(pending->mutex);
        pending->events.emplace_back(i, e);
        if (e.finished) --pending->unfinished;
        pending->ready.notify_all();
      });
      std::lock_guard lock(pending->mutex);
      pending->ids.push_back(id);
    } catch (const QueueFullError& e) {
      for (uint64_t id : pending->ids) engine->cancel(id);
      res.set_header("retry-after", "1");
      throw ApiError{429, std::string("the request queue is full: ") + e.what(), "", "queue_full"};
    } catch (const RequestError& e) {
      for (uint64_t id : pending->ids) engine->cancel(id);
      throw ApiError{e.unknown_adapter ? 404 : 400, e.what(), e.param,
                     e.unknown_adapter ? "model_not_found" : ""};
    }
  }

  if (!q.stream) {
    // Nothing is written until the answer is whole, so the socket itself says when its client
    // went away: then its sequences stop within a step or two, as a stream's do.
    std::unique_lock lock(pending->mutex);
    bool cancelled = false;
    while (!pending->ready.wait_for(lock, std::chrono::milliseconds(10),
                                    [&] { return pending->unfinished == 0; }))
      if (!cancelled && (stopping || platform::client_gone())) {
        cancelled = true;
        const auto ids = pending->ids;
        lock.unlock();
        for (uint64_t id : ids) engine->cancel(id);
        lock.lock();
      }
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
