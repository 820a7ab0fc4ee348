// llama.cpp's side of bench/serving.py, through node-llama-cpp 3.21.1's prebuilt CPU library
// (tests/npm), on a GGUF export of the weights zenith serves, the KV cache in float32 as zenith
// keeps it, greedy decoding:
//   decode   one sequence: NEW tokens after the prompt, timed from the first generated token
//            to the last (prompt processing excluded), as tests/e2e/gguf_decode_speed.mjs
//   streams  STREAMS sequences of one context (`sequences: STREAMS`), each generating NEW
//            tokens after its own prompt, all at once: output tokens / wall time from the
//            start to the last token (prompt processing included, as for zenith's streams)
//   latency  with --latency B1,B2 (token budgets: llama.cpp's batch size) and --vocab V, the two
//            ratios bench/serving.py times on zenith, with the same prompt lengths:
//            prefix   TTFT of a request whose system prompt is already in a reused context
//                     sequence (the tokens after it erased, only the new question evaluated)
//                     against a fresh system prompt on a cleared sequence, at the first budget
//            long     the largest gap of a stream (a second sequence of the same context)
//                     while a prompt of 8x the batch size is evaluated beside it, over the
//                     stream's median gap; and that prompt's TTFT
// The end-of-generation token does not stop a sequence: each makes NEW decode steps.
//   node bench/serving_llamacpp.mjs MODEL.gguf --threads T [--new 64] [--runs 3]
//        [--streams 8] [--prompt 1,358] [--latency 64,16 --vocab 2048]
// Prints one JSON object: {"decode": {"tokens_s", "best_tokens_s"},
// "streams": {"streams", "tokens_s", "best_tokens_s"}} (medians and bests over the runs), with
// --latency {"prefix_cache": {...}, "long_prompt": [{...}, ...]} (bench/serving.py's fields).
import {createRequire} from "node:module";

const require = createRequire(new URL("../tests/npm/package.json", import.meta.url));
const {getLlama, LlamaLogLevel} = await import(require.resolve("node-llama-cpp"));

const args = process.argv.slice(2);
let file = "", threads = 1, wanted = 64, runs = 3, streams = 8, prompt = [1, 358];
let budgets = [], vocab = 0;
for (let i = 0; i < args.length; ++i) {
  if (args[i] === "--threads") threads = Number(args[++i]);
  else if (args[i] === "--new") wanted = Number(args[++i]);
  else if (args[i] === "--runs") runs = Number(args[++i]);
  else if (args[i] === "--streams") streams = Number(args[++i]);
  else if (args[i] === "--prompt") prompt = args[++i].split(",").map(Number);
  else if (args[i] === "--latency") budgets = args[++i].split(",").map(Number);
  else if (args[i] === "--vocab") vocab = Number(args[++i]);
  else file = args[i];
}
if (!file || !(threads >= 1) || !(wanted >= 2) || !(runs >= 1) || !(streams >= 0)) {
  console.error("usage: serving_llamacpp.mjs MODEL.gguf --threads T [--new N>=2] [--runs R] " +
                "[--streams S] [--prompt IDS]");
  process.exit(2);
}
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const llama = await getLlama({
  gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
  logLevel: LlamaLogLevel.error, progressLogs: false,
});
const model = await llama.loadModel({modelPath: file});
const contextOptions = (sequences) => ({
  contextSize: Math.min(model.trainContextSize, prompt.length + wanted + 16), sequences, threads,
  batchSize: 64, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
});

// Greedy tokens after `ids` on `sequence`, `limit` at most; resolves to [count, time of first,
// time of last].
async function generate(sequence, ids, limit = wanted) {
  let count = 0, first = 0, last = 0;
  for await (const token of sequence.evaluate(ids, {temperature: 0, yieldEogToken: true})) {
    void token;
    last = performance.now();
    if (count === 0) first = last;
    if (++count >= limit) break;
  }
  return [count, first, last];
}

const out = {};
const rates = [];
// The first run of each (4 tokens) warms up: at 2 threads on a busy host llama.cpp's spinning
// threads can fall to a few tokens/s, and a full warm-up run would double the bench's time.
for (let r = 0; r < runs + 1; ++r) {
  const context = await model.createContext(contextOptions(1));
  const [count, first, last] = await generate(context.getSequence(), prompt, r ? wanted : 4);
  if (r > 0) rates.push((count - 1) / ((last - first) / 1e3));
  await context.dispose();
}
out.decode = {tokens_s: median(rates), best_tokens_s: Math.max(...rates)};
if (streams > 0) {
  const agg = [];
  for (let r = 0; r < runs + 1; ++r) {
    const context = await model.createContext(contextOptions(streams));
    const sequences = Array.from({length: streams}, () => context.getSequence());
    const t0 = performance.now();
    // Each stream its own prompt (the first id changed), as zenith's streams get.
    const done = await Promise.all(sequences.map(
        (s, i) => generate(s, [prompt[0], ...prompt.slice(1).map((id) => id + i)],
                           r ? wanted : 4)));
    const seconds = (performance.now() - t0) / 1e3;
    if (r > 0) agg.push(done.reduce((sum, [count]) => sum + count, 0) / seconds);
    await context.dispose();
  }
  out.streams = {streams, tokens_s: median(agg), best_tokens_s: Math.max(...agg)};
}
if (budgets.length > 0 && vocab > 3) Object.assign(out, await latency());
console.log(JSON.stringify(out));
await model.dispose();
await llama.dispose();

// A deterministic stream of ids in [3, vocab) (bench/serving.py's prompts are random too).
function ids(seed, n) {
  let x = seed >>> 0 || 1;
  return Array.from({length: n}, () => {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    return 3 + (x % (vocab - 3));
  });
}

async function latency() {
  const context = model.trainContextSize;
  const lengths = (batchSize, sequences, size) => ({
    contextSize: size, sequences, threads, batchSize,
    experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
  });
  const firstToken = async (sequence, tokens) => {
    const t0 = performance.now();
    const [, first] = await generate(sequence, tokens, 1);
    return first - t0;
  };
  // prefix cache, at the first budget
  const length = Math.min(512, Math.floor((context - 48) / 16) * 16);
  const uncached = [], cached = [];
  {
    const ctx = await model.createContext(lengths(budgets[0], 1, Math.min(context, length + 40)));
    const seq = ctx.getSequence();
    for (let r = 0; r < Math.max(3, runs); ++r) {
      const system = [1, ...ids(100 + r, length - 1)];
      await seq.clearHistory();
      uncached.push(await firstToken(seq, [...system, ...ids(200 + r, 16)]));
      await seq.eraseContextTokenRanges([{start: length, end: seq.nextTokenIndex}]);
      cached.push(await firstToken(seq, ids(300 + r, 16)));
    }
    await ctx.dispose();
  }
  const u = median(uncached), c = median(cached);
  const result = {
    prefix_cache: {system_prompt_tokens: length, runs: cached.length, uncached_ttft_ms: u,
                   cached_ttft_ms: c, uncached_over_cached: u / c},
    long_prompt: [],
  };
  for (const budget of budgets) {
    const longLength = Math.min(8 * budget, context - 16), streamNew = Math.min(96, context - 17);
    const ratios = [], medians = [], worst = [], ttft = [];
    for (let r = 0; r < Math.max(3, runs); ++r) {
      const ctx = await model.createContext(
          lengths(budget, 2, Math.min(context, 2 * Math.max(longLength + 2, 16 + streamNew))));
      const [stream, other] = [ctx.getSequence(), ctx.getSequence()];
      const times = [];
      let arrive = 0, firstOfLong = 0;
      const streaming = (async () => {
        for await (const token of stream.evaluate([1, ...ids(400 + r, 15)],
                                                  {temperature: 0, yieldEogToken: true})) {
          void token;
          times.push(performance.now());
          if (times.length >= streamNew) break;
        }
      })();
      while (times.length < 12) await new Promise((resolve) => setTimeout(resolve, 1));
      arrive = performance.now();
      firstOfLong = arrive + await firstToken(other, [1, ...ids(500 + r, longLength - 1)]);
      await streaming;
      await ctx.dispose();
      const gaps = times.slice(1).map((t, i) => [t, t - times[i]]);
      if (gaps.length < 4) continue;
      let until = gaps.findIndex(([t]) => t > firstOfLong);
      if (until < 0) until = gaps.length;
      const during = gaps.slice(0, until + 1).filter(([t]) => t >= arrive).map(([, g]) => g);
      if (during.length === 0) continue;
      const m = median(gaps.map(([, g]) => g));
      medians.push(m);
      worst.push(Math.max(...during));
      ratios.push(Math.max(...during) / m);
      ttft.push(firstOfLong - arrive);
    }
    if (ratios.length === 0) continue;
    result.long_prompt.push({
      budget, prompt_tokens: longLength, stream_tokens: streamNew, runs: ratios.length,
      median_itl_ms: median(medians), max_itl_during_ms: median(worst),
      max_over_median: median(ratios), worst_max_over_median: Math.max(...ratios),
      long_prompt_ttft_ms: median(ttft),
    });
  }
  return result;
}
