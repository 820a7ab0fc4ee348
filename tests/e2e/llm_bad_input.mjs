// Hostile and mistaken requests to an LLM service over raw HTTP (tests/e2e/llm_bad_input.sh
// starts `zenith serve` on an LLM directory over plain HTTP on loopback): each must be a 4xx in
// OpenAI's error envelope ({"error": {"message", "type", "param", "code"}}) naming the field, with
// x-request-id and x-should-retry: false, and after each the service still answers a real
// completion. The same cases as tests/serve/openai_server_test.cpp's in-process server, here
// against the binary, through both endpoints and in streaming mode.
//   node llm_bad_input.mjs URL TOKEN MODEL
import http from 'node:http';

const [url, token, model] = process.argv.slice(2);
let passed = 0;
function fail(message) {
  console.log(`FAIL: ${message}`);
  process.exit(1);
}

function send(method, path, body, contentType = 'application/json') {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(body);
    const req = http.request(url + path, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': contentType,
                 ...(data ? { 'content-length': data.length } : {}) },
    }, (res) => {
      const parts = [];
      res.on('data', (c) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers,
                                    body: Buffer.concat(parts).toString('utf8') }));
    });
    // A server may answer 413 and close before the whole body is written.
    req.on('error', reject);
    req.end(data);
  });
}

const chat = (extra = {}, content = 'Tell me a fortune.') =>
  JSON.stringify({ model, messages: [{ role: 'user', content }], max_tokens: 4, ...extra });
const completion = (extra = {}) => JSON.stringify({ model, prompt: 'Once', max_tokens: 4, ...extra });
// Raw bytes: a JSON body whose string holds `bytes` (not valid UTF-8) where @@ stands.
const withBytes = (json, bytes) => {
  const [a, b] = json.split('@@');
  return Buffer.concat([Buffer.from(a), Buffer.from(bytes), Buffer.from(b)]);
};

async function alive(after) {
  const r = await send('POST', '/v1/completions', completion());
  if (r.status !== 200) fail(`after ${after}: a plain completion got ${r.status} ${r.body}`);
  const text = JSON.parse(r.body).choices[0].text;
  if (typeof text !== 'string') fail(`after ${after}: ${r.body}`);
}

// `param`: the field the error must name (null: none, for a body that is not JSON at all); a
// RegExp matches a path into the field (messages[0].content).
async function expectError(name, path, body, status, param, contentType) {
  const t0 = Date.now();
  const r = await send('POST', path, body, contentType);
  const ms = Date.now() - t0;
  if (r.status !== status) fail(`${name}: status ${r.status}, expected ${status}: ${r.body.slice(0, 300)}`);
  let e;
  try {
    e = JSON.parse(r.body).error;
  } catch {
    fail(`${name}: not JSON: ${r.body.slice(0, 300)}`);
  }
  if (!e || typeof e !== 'object') fail(`${name}: no error object: ${r.body.slice(0, 300)}`);
  for (const k of ['message', 'type', 'param', 'code'])
    if (!(k in e)) fail(`${name}: the envelope lacks ${k}: ${r.body.slice(0, 300)}`);
  if (typeof e.message !== 'string' || !e.message) fail(`${name}: empty message`);
  const ok = param instanceof RegExp ? param.test(e.param ?? '') : e.param === param;
  if (!ok) fail(`${name}: param ${JSON.stringify(e.param)}, expected ${param}: ${e.message}`);
  if (!r.headers['x-request-id']) fail(`${name}: no x-request-id`);
  if (r.headers['x-should-retry'] !== 'false') fail(`${name}: x-should-retry ${r.headers['x-should-retry']}`);
  await alive(name);
  passed++;
  console.log(`ok ${name}: ${r.status} param=${JSON.stringify(e.param)} (${ms} ms): ${e.message.slice(0, 110)}`);
}

await alive('start');
const C = '/v1/chat/completions', P = '/v1/completions';
await expectError('oversized body (9 MiB, limit 8 MiB)', C, Buffer.alloc(9 << 20, 0x61), 413, null);
await expectError('oversized prompt in valid JSON (9 MiB)', P,
                  JSON.stringify({ model, prompt: 'a'.repeat(9 << 20) }), 413, null);
await expectError('malformed JSON', C, '{"model": ', 400, null);
await expectError('body that is not an object', C, '[1, 2, 3]', 400, null);
const deep = (n) => '['.repeat(n) + ']'.repeat(n);
await expectError('deeply nested JSON (100,000 levels) as the body', C, deep(100000), 400, null);
await expectError('deeply nested JSON inside a field', C,
                  chat().replace('"max_tokens":4', `"max_tokens":4,"stop":${deep(100000)}`), 400,
                  /^stop$|^$/);
const stops = Array.from({ length: 10000 }, (_, i) => `x${i}`);
await expectError('10,000 stop strings (chat)', C, chat({ stop: stops }), 400, 'stop');
await expectError('10,000 stop strings (completions)', P, completion({ stop: stops }), 400, 'stop');
await expectError('10,000 stop strings (streaming)', C, chat({ stop: stops, stream: true }), 400, 'stop');
await expectError('n: 1000', C, chat({ n: 1000 }), 400, 'n');
await expectError('n: 1000 (completions, streaming)', P, completion({ n: 1000, stream: true }), 400, 'n');
await expectError('max_tokens: 10^9', C, chat({ max_tokens: 1e9 }), 400, 'max_tokens');
await expectError('max_tokens: 10^9 (completions)', P, completion({ max_tokens: 1e9 }), 400, 'max_tokens');
await expectError('max_completion_tokens: 10^9', C, chat({ max_completion_tokens: 1e9 }), 400,
                  'max_completion_tokens');
await expectError('max_tokens: -1', C, chat({ max_tokens: -1 }), 400, 'max_tokens');
await expectError('invalid UTF-8 in a completion prompt', P,
                  withBytes(completion({ prompt: '@@' }), [0x61, 0xff, 0xfe]), 400, 'prompt');
await expectError('invalid UTF-8 in a chat message', C,
                  withBytes(chat({}, '@@'), [0xc3, 0x28]), 400, /^messages|content/);
await expectError('a lone surrogate escape in a chat message', C, chat({}, '\ud800'), 400, /^messages|^$/);
await expectError('a prompt of only special tokens', P, completion({ prompt: '<s></s><s>' }), 400, 'prompt');
await expectError('a prompt of only special tokens (streaming)', P,
                  completion({ prompt: '</s>', stream: true }), 400, 'prompt');
await expectError('a chat message of only special tokens', C, chat({}, '<s></s><s>'), 400,
                  'messages[0].content');
await expectError('token ids out of the vocabulary', P, completion({ prompt: [1, 99999999] }), 400, 'prompt');
await expectError('an unknown model', C, chat({ model: 'gpt-4' }), 404, 'model');
await expectError('temperature of the wrong type', C, chat({ temperature: 'warm' }), 400, 'temperature');
console.log(`llm_bad_input: all ${passed} cases are 4xx naming the field, the service alive after each`);
