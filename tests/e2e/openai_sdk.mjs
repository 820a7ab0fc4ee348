// The official openai npm SDK (tests/npm: openai 6.x) against a `zenith serve` LLM service
// (tests/e2e/openai_sdk.sh starts it). Each check throws on failure; the script prints one line
// per check and exits 1 at the first that fails.
//   node openai_sdk.mjs URL TOKEN MODEL ADAPTER
import OpenAI from 'openai';

const [url, token, model, adapter] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: token, maxRetries: 0, timeout: 30000 });
let passed = 0;
function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}
async function step(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok ${name}`);
  } catch (e) {
    console.log(`FAIL ${name}: ${e.stack || e}`);
    process.exit(1);
  }
}
const user = (content) => [{ role: 'user', content }];
const greedy = { model, temperature: 0, max_tokens: 8 };

await step('models list: the base and the adapter with its parent', async () => {
  const ids = {};
  for await (const m of client.models.list()) ids[m.id] = m;
  check(ids[model] && ids[model].parent === null, `base ${JSON.stringify(ids)}`);
  check(ids[adapter] && ids[adapter].parent === model, `adapter ${JSON.stringify(ids)}`);
  check((await client.models.retrieve(adapter)).parent === model, 'retrieve');
});

let reference;
await step('chat, non-streaming', async () => {
  const r = await client.chat.completions.create({ ...greedy, messages: user('A fortune') });
  check(r.object === 'chat.completion', r.object);
  check(r.choices[0].message.role === 'assistant', 'role');
  check(typeof r.choices[0].message.content === 'string', 'content');
  check(['stop', 'length'].includes(r.choices[0].finish_reason), r.choices[0].finish_reason);
  check(r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens, 'usage');
  check(Number.isInteger(r.usage.prompt_tokens_details.cached_tokens), 'cached_tokens');
  reference = r.choices[0].message.content;
});

await step('chat, streaming with include_usage, equals non-streaming', async () => {
  const stream = await client.chat.completions.create({
    ...greedy, messages: user('A fortune'), stream: true, stream_options: { include_usage: true },
  });
  let text = '', first = true, usage = null, finish = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (first) check(chunk.choices[0].delta.role === 'assistant', 'first delta has the role');
    first = false;
    if (chunk.choices.length === 0) {
      usage = chunk.usage;
      continue;
    }
    check(chunk.usage === null, 'usage null before the last chunk');
    text += chunk.choices[0].delta.content ?? '';
    finish = chunk.choices[0].finish_reason ?? finish;
  }
  check(chunks >= 3, `${chunks} chunks`);
  check(text === reference, `${JSON.stringify(text)} vs ${JSON.stringify(reference)}`);
  check(usage && usage.completion_tokens > 0, 'final usage chunk');
  check(finish !== null, 'finish_reason');
});

await step('completions with logprobs', async () => {
  const r = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 5, temperature: 0, logprobs: 2,
  });
  const lp = r.choices[0].logprobs;
  check(lp.tokens.length === r.usage.completion_tokens, `${lp.tokens.length} tokens`);
  check(lp.tokens.join('') === r.choices[0].text, 'tokens spell the text');
  lp.token_logprobs.forEach((v, i) => {
    check(v <= 0, 'a log-probability');
    const top = Object.values(lp.top_logprobs[i]);
    check(top.length === 2, 'two alternatives');
    check(Math.abs(Math.max(...top) - v) < 1e-6, 'greedy picks the most likely');
  });
});

await step('chat logprobs and top_logprobs', async () => {
  const r = await client.chat.completions.create({
    ...greedy, messages: user('A fortune'), logprobs: true, top_logprobs: 3,
  });
  const content = r.choices[0].logprobs.content;
  check(content.length === r.usage.completion_tokens, 'one entry per token');
  for (const t of content) {
    check(t.top_logprobs.length === 3, 'three alternatives');
    check(t.top_logprobs[0].logprob === t.logprob, 'greedy picks the most likely');
    check(Array.isArray(t.bytes), 'bytes');
  }
});

await step('a stop string spanning tokens is never in the text, streamed or not', async () => {
  const base = { model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0 };
  const free = (await client.completions.create(base)).choices[0].text;
  const at = free.indexOf(' ', 2);  // a stop string across the first two words' tokens
  check(at > 2, JSON.stringify(free));
  const stop = free.slice(at - 1, at + 2);
  const r = await client.completions.create({ ...base, stop: [stop] });
  check(r.choices[0].text === free.slice(0, at - 1), `${JSON.stringify(r.choices[0].text)}`);
  check(r.choices[0].finish_reason === 'stop', r.choices[0].finish_reason);
  let streamed = '';
  for await (const chunk of await client.completions.create({ ...base, stop: [stop], stream: true }))
    streamed += chunk.choices[0]?.text ?? '';
  check(streamed === r.choices[0].text, JSON.stringify(streamed));
});

await step('a repeated long prompt reports cached tokens', async () => {
  const system = 'You are a teller of fortunes. '.repeat(12);
  const req = { ...greedy, max_tokens: 2,
    messages: [{ role: 'system', content: system }, ...user('One more')] };
  await client.chat.completions.create(req);
  const r = await client.chat.completions.create(req);
  check(r.usage.prompt_tokens_details.cached_tokens >= 16,
    `${r.usage.prompt_tokens_details.cached_tokens} of ${r.usage.prompt_tokens}`);
});

await step('an adapter is a model', async () => {
  const r = await client.chat.completions.create({ ...greedy, model: adapter, messages: user('Hi') });
  check(r.model === adapter, r.model);
});

await step('seeded sampling repeats; n choices', async () => {
  const req = { model, messages: user('A fortune'), temperature: 1, seed: 7, max_tokens: 8, n: 2 };
  const a = await client.chat.completions.create(req);
  const b = await client.chat.completions.create(req);
  check(a.choices.length === 2 && a.choices[1].index === 1, 'two choices');
  check(a.choices[0].message.content === b.choices[0].message.content, 'same seed, same text');
});

await step('json_schema output parses and validates', async () => {
  const schema = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 12 }, lucky: { type: 'integer' } },
    required: ['name', 'lucky'],
  };
  const r = await client.chat.completions.create({
    model, messages: user('A name and a lucky number'), temperature: 1, max_tokens: 60,
    response_format: { type: 'json_schema', json_schema: { name: 'p', schema, strict: true } },
  });
  const v = JSON.parse(r.choices[0].message.content);
  check(typeof v.name === 'string' && Number.isInteger(v.lucky), JSON.stringify(v));
});

await step('a named tool call, streamed, reassembles', async () => {
  const tools = [{
    type: 'function',
    function: {
      name: 'get_weather',
      parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 10 } },
        required: ['city'] },
    },
  }];
  const tool_choice = { type: 'function', function: { name: 'get_weather' } };
  const whole = await client.chat.completions.create({
    ...greedy, max_tokens: 40, messages: user('Weather in Oslo?'), tools, tool_choice,
  });
  check(whole.choices[0].finish_reason === 'tool_calls', whole.choices[0].finish_reason);
  const call = whole.choices[0].message.tool_calls[0];
  check(call.function.name === 'get_weather', call.function.name);
  check(typeof JSON.parse(call.function.arguments).city === 'string', call.function.arguments);
  const stream = await client.chat.completions.create({
    ...greedy, max_tokens: 40, messages: user('Weather in Oslo?'), tools, tool_choice, stream: true,
  });
  let args = '', name = '';
  for await (const chunk of stream)
    for (const c of chunk.choices[0]?.delta?.tool_calls ?? []) {
      name += c.function?.name ?? '';
      args += c.function?.arguments ?? '';
    }
  check(name === 'get_weather' && args === call.function.arguments, `${name} ${args}`);
  // The tool's answer continues the chat.
  const next = await client.chat.completions.create({
    ...greedy,
    messages: [...user('Weather in Oslo?'), whole.choices[0].message,
      { role: 'tool', tool_call_id: call.id, content: 'sunny' }],
  });
  check(typeof next.choices[0].message.content === 'string', 'an answer after the tool');
});

await step('tool_choice required picks one of the tools, streamed alike', async () => {
  const fn = (name, key) => ({ type: 'function', function: { name,
    parameters: { type: 'object', properties: { [key]: { type: 'string', maxLength: 8 } },
      required: [key] } } });
  const req = { ...greedy, max_tokens: 60, messages: user('Weather or time?'),
    tools: [fn('get_weather', 'city'), fn('get_time', 'zone')], tool_choice: 'required' };
  const whole = await client.chat.completions.create(req);
  check(whole.choices[0].finish_reason === 'tool_calls', whole.choices[0].finish_reason);
  const call = whole.choices[0].message.tool_calls[0];
  const key = { get_weather: 'city', get_time: 'zone' }[call.function.name];
  check(key && typeof JSON.parse(call.function.arguments)[key] === 'string',
    JSON.stringify(call.function));
  let name = '', args = '';
  for await (const chunk of await client.chat.completions.create({ ...req, stream: true }))
    for (const c of chunk.choices[0]?.delta?.tool_calls ?? []) {
      name += c.function?.name ?? '';
      args += c.function?.arguments ?? '';
    }
  check(name === call.function.name && args === call.function.arguments, `${name} ${args}`);
});

await step('tool_choice auto: a call when the output is one, else content', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  // The tiny model writes no calls by itself: a schema makes its output one, which auto reads.
  const schema = { type: 'object', required: ['name', 'arguments'], properties: {
    name: { const: 'get_weather' },
    arguments: { type: 'object', properties: { city: { enum: ['Oslo'] } }, required: ['city'] } } };
  const req = { ...greedy, max_tokens: 60, messages: user('Weather in Oslo?'), tools,
    response_format: { type: 'json_schema', json_schema: { name: 'call', schema } } };
  const whole = await client.chat.completions.create(req);  // tool_choice defaults to auto
  check(whole.choices[0].finish_reason === 'tool_calls', whole.choices[0].finish_reason);
  const call = whole.choices[0].message.tool_calls[0];
  check(call.id.startsWith('call_') && call.function.name === 'get_weather' &&
    JSON.parse(call.function.arguments).city === 'Oslo', JSON.stringify(call));
  let args = '', content = '';
  for await (const chunk of await client.chat.completions.create({ ...req, stream: true })) {
    content += chunk.choices[0]?.delta?.content ?? '';
    for (const c of chunk.choices[0]?.delta?.tool_calls ?? []) args += c.function?.arguments ?? '';
  }
  check(args === call.function.arguments && content === '', `${args} / ${content}`);
  const text = await client.chat.completions.create({ ...greedy, messages: user('Hi'), tools });
  check(typeof text.choices[0].message.content === 'string' &&
    text.choices[0].finish_reason !== 'tool_calls', JSON.stringify(text.choices[0]));
});

await step('completions: several prompts times n, echo, the engine in models', async () => {
  const r = await client.completions.create({ ...greedy, max_tokens: 3,
    prompt: ['Once upon a time', 'The cat'], n: 2 });
  check(r.choices.map((c) => c.index).join() === '0,1,2,3', 'indices');
  check(r.choices[0].text === r.choices[1].text, 'n greedy choices agree');
  const one = await client.completions.create({ ...greedy, max_tokens: 3, prompt: 'The cat' });
  check(r.choices[2].text === one.choices[0].text, `${r.choices[2].text} / ${one.choices[0].text}`);
  const echo = await client.completions.create({ ...greedy, max_tokens: 3, prompt: 'The cat',
    echo: true, logprobs: 1 });
  check(echo.choices[0].text === 'The cat' + one.choices[0].text, echo.choices[0].text);
  const elp = echo.choices[0].logprobs;
  check(elp.token_logprobs[0] === null, 'the first prompt token has none');
  elp.tokens.forEach((t, i) => {  // each position's own token is in its top_logprobs (k + 1 at most)
    if (i === 0) return;
    const top = elp.top_logprobs[i];
    check(top[t] === elp.token_logprobs[i] && Object.keys(top).length <= 2, JSON.stringify(top));
  });
  const m = await client.models.retrieve(model);
  check(m.max_model_len > 0 && m.zenith.max_batched_tokens > 0 && m.zenith.threads === 1,
    JSON.stringify(m));
});

await step('errors surface as APIError with status, param and request id', async () => {
  const expect = async (promise, Type, status, param) => {
    try {
      await promise;
    } catch (e) {
      check(e instanceof Type, `${e.constructor.name} is not ${Type.name}: ${e.message}`);
      check(e.status === status, `status ${e.status}`);
      check(e.param === param, `param ${e.param}`);
      check(typeof e.requestID === 'string' && e.requestID.length > 0, 'request id');
      check(e.headers.get('x-should-retry') === 'false', 'x-should-retry');
      return;
    }
    throw new Error('no error');
  };
  await expect(client.chat.completions.create({ ...greedy, model: 'gpt-4o', messages: user('x') }),
    OpenAI.NotFoundError, 404, 'model');
  await expect(client.chat.completions.create({ ...greedy, temperature: 5, messages: user('x') }),
    OpenAI.BadRequestError, 400, 'temperature');
  await expect(client.chat.completions.create({ ...greedy, max_tokens: 1e9, messages: user('x') }),
    OpenAI.BadRequestError, 400, 'max_tokens');
  const stranger = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'zt_wrong', maxRetries: 0 });
  await expect(stranger.models.list(), OpenAI.AuthenticationError, 401, null);
});

await step('an aborted stream leaves nothing running', async () => {
  const controller = new AbortController();
  const stream = await client.chat.completions.create(
    // Greedy, this prompt repeats itself to the end of max_tokens: the abort comes first.
    { model, messages: user('Tell me a fortune'), max_tokens: 200, temperature: 0, stream: true },
    { signal: controller.signal });
  try {
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta?.content) controller.abort();
    }
  } catch (e) {
    check(e.name === 'AbortError' || e instanceof OpenAI.APIUserAbortError, e.name);
  }
  let running = -1;
  for (let i = 0; i < 50 && running !== 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    const headers = { authorization: `Bearer ${token}` };  // /metrics needs the token too
    const text = await (await fetch(`${url}/metrics`, { headers })).text();
    running = Number(/^zenith:num_requests_running\{[^}]*\} (\S+)$/m.exec(text)[1]);
  }
  check(running === 0, `${running} still running`);
  // (That it ended as "abort", not after all its tokens, tests/serve/openai_server_test.cpp
  // checks where the timing is under control.)
});

console.log(`PASS ${passed} checks`);
