// The LLM service under load (tests/e2e/llm_soak_slow.sh starts `zenith serve` on an LLM
// directory over plain HTTP on loopback): CLIENTS concurrent streaming clients with random aborts
// for SECONDS, raw HTTP (node:http) so that every status and every frame is seen.
//   node llm_soak.mjs URL TOKEN MODEL PID SECONDS [CLIENTS]
// Checks: no answer is a 5xx and no stream that was not aborted breaks; every completed stream's
// text equals the same prompt's solo run (temperature 0); the server's RSS (/proc/PID/status)
// after warm-up stays within RSS_BOUND_MIB of its value at the end of warm-up; afterwards no
// request is left running or waiting and the abort count in /metrics is at least the aborts sent.
import http from 'node:http';
import { readFileSync } from 'node:fs';

const [url, token, model, pid, secondsArg, clientsArg] = process.argv.slice(2);
const SECONDS = Number(secondsArg);
const CLIENTS = Number(clientsArg || 32);
const WARMUP_S = Math.min(60, Math.max(20, SECONDS * 0.2));
const RSS_BOUND_MIB = 16;
const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS + 4 });

function fail(message) {
  console.log(`FAIL: ${message}`);
  process.exit(1);
}

// Chat prompts of different lengths and answer lengths (max_tokens 8..48).
const PROMPTS = [];
const topics = ['the sea', 'a cat', 'money', 'friends', 'the moon', 'work', 'rain', 'old age',
                'luck', 'a journey', 'bread', 'silence'];
for (let i = 0; i < topics.length; i++) {
  const words = `Tell me a fortune about ${topics[i]}.` + ' Please be brief.'.repeat(i % 4);
  PROMPTS.push({ messages: [{ role: 'user', content: words }], max_tokens: 8 + 4 * (i % 11) });
}

function post(path, body, { onResponse } = {}) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = http.request(url + path, {
      method: 'POST', agent,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`,
                 'content-length': Buffer.byteLength(data) },
    }, (res) => {
      onResponse?.(req, res);
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { text += c; res.emit('text', c); });
      res.on('end', () => resolve({ status: res.statusCode, text, headers: res.headers }));
      res.on('error', reject);
      res.on('aborted', () => reject(new Error('response aborted')));
      res.on('close', () => { if (!res.complete) reject(new Error('connection closed mid-answer')); });
    });
    req.on('error', reject);
    req.end(data);
  });
}

// A stream's content: the deltas of its `data:` frames; throws when it lacks [DONE].
function streamText(body) {
  let text = '', done = false;
  for (const frame of body.split('\n\n')) {
    if (!frame.startsWith('data: ')) continue;
    const payload = frame.slice(6);
    if (payload === '[DONE]') { done = true; continue; }
    const chunk = JSON.parse(payload);
    if (chunk.error) throw new Error(`error frame: ${payload}`);
    for (const c of chunk.choices || []) text += c.delta?.content ?? '';
  }
  if (!done) throw new Error(`no [DONE]: ...${body.slice(-200)}`);
  return text;
}

const request = (p) => ({ model, messages: p.messages, max_tokens: p.max_tokens, temperature: 0,
                          stream: true });

async function metrics() {
  return new Promise((resolve, reject) => {
    http.get(url + '/metrics', { agent, headers: { authorization: `Bearer ${token}` } }, (res) => {
      let t = '';
      res.on('data', (c) => (t += c));
      res.on('end', () => resolve(t));
    }).on('error', reject);
  });
}
const metric = (text, name) => {
  const line = text.split('\n').find((l) => l.startsWith(name + '{') || l.startsWith(name + ' '));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : NaN;
};

const rssMiB = () => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m[1]) / 1024;
};

// 1. Each prompt alone: the reference texts.
const solo = [];
for (const p of PROMPTS) {
  const r = await post('/v1/chat/completions', request(p));
  if (r.status !== 200) fail(`solo run: ${r.status} ${r.text}`);
  solo.push(streamText(r.text));
}
console.log(`solo runs: ${solo.length} prompts, e.g. ${JSON.stringify(solo[0])}`);

// 2. The load.
const started = Date.now();
const end = started + SECONDS * 1000;
const stats = { completed: 0, aborted: 0, status: {}, mismatches: 0, breaks: 0, tokens: 0 };
const rss = [];  // [seconds since start, MiB]
const sampler = setInterval(() => rss.push([(Date.now() - started) / 1000, rssMiB()]), 1000);
let seed = 12345;
const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);

async function client(id) {
  while (Date.now() < end) {
    const k = Math.floor(random() * PROMPTS.length);
    const abortAfter = random() < 0.3 ? Math.floor(random() * 6) : -1;  // chunks, then abort
    let aborted = false;
    try {
      const r = await post('/v1/chat/completions', request(PROMPTS[k]), {
        onResponse: (req, res) => {
          if (abortAfter < 0 || res.statusCode !== 200) return;
          let chunks = 0;
          res.on('text', (c) => {
            chunks += (c.match(/\n\n/g) || []).length;
            if (!aborted && chunks > abortAfter) {
              aborted = true;
              req.destroy();
            }
          });
        },
      });
      stats.status[r.status] = (stats.status[r.status] || 0) + 1;
      if (r.status >= 500) fail(`client ${id}: ${r.status} ${r.text.slice(0, 300)}`);
      if (r.status !== 200) continue;
      if (aborted) { stats.aborted++; continue; }  // the whole answer came before the abort
      const text = streamText(r.text);
      stats.completed++;
      if (text !== solo[k]) {
        stats.mismatches++;
        fail(`prompt ${k}: ${JSON.stringify(text)} under load, ${JSON.stringify(solo[k])} alone`);
      }
    } catch (e) {
      if (aborted) { stats.aborted++; continue; }
      stats.breaks++;
      fail(`client ${id}: a stream that was not aborted broke: ${e.message}`);
    }
  }
}
await Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i)));
clearInterval(sampler);
const elapsed = (Date.now() - started) / 1000;

// 3. RSS: flat after warm-up.
const after = rss.filter(([t]) => t >= WARMUP_S);
if (after.length < 5) fail(`only ${after.length} RSS samples after the ${WARMUP_S} s warm-up`);
const base = after[0][1];
const peak = Math.max(...after.map(([, m]) => m));
const last = after[after.length - 1][1];
const quarters = [0, 1, 2, 3, 4].map((q) => after[Math.min(after.length - 1,
                                                           Math.floor(q * after.length / 4))][1].toFixed(1));
console.log(`RSS after warm-up at 0, 1/4, 1/2, 3/4 and the end of the load: ${quarters.join(', ')} MiB`);
console.log(`RSS: ${rss[0][1].toFixed(1)} MiB at start, ${base.toFixed(1)} MiB after ${WARMUP_S} s ` +
            `warm-up, peak ${peak.toFixed(1)}, last ${last.toFixed(1)} (bound +${RSS_BOUND_MIB} MiB)`);
if (peak - base > RSS_BOUND_MIB)
  fail(`RSS grew ${(peak - base).toFixed(1)} MiB after warm-up (bound ${RSS_BOUND_MIB} MiB)`);

// 4. Nothing left behind: the engine is idle and counted the aborts.
let m = '';
for (let i = 0; i < 50; i++) {
  m = await metrics();
  if (metric(m, 'zenith:num_requests_running') === 0 && metric(m, 'zenith:num_requests_waiting') === 0)
    break;
  await new Promise((r) => setTimeout(r, 100));
}
const running = metric(m, 'zenith:num_requests_running'), waiting = metric(m, 'zenith:num_requests_waiting');
if (running !== 0 || waiting !== 0) fail(`after the load: ${running} running, ${waiting} waiting`);
const abortLine = m.split('\n').find((l) => l.startsWith('zenith:request_success_total') &&
                                            l.includes('finished_reason="abort"'));
const abortsCounted = abortLine ? Number(abortLine.slice(abortLine.lastIndexOf(' ') + 1)) : 0;
console.log(`soak: ${elapsed.toFixed(0)} s, ${CLIENTS} clients: ${stats.completed} streams completed ` +
            `and equal to their solo runs, ${stats.aborted} aborted (the engine counted ` +
            `${abortsCounted} aborts), statuses of the answers read to the end ${JSON.stringify(stats.status)}, 0 server errors`);
if (stats.completed < CLIENTS) fail(`only ${stats.completed} streams completed`);
agent.destroy();
console.log('llm_soak: all checks passed');
