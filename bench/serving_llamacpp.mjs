// llama.cpp's side of bench/serving.py, through node-llama-cpp 3.21.1's prebuilt CPU library
// (tests/npm), on a GGUF export of the weights zenith serves, the KV cache in float32 as zenith
// keeps it, greedy decoding:
//   decode   one sequence: NEW tokens after the prompt, timed from the first generated token
//            to the last (prompt processing excluded), as tests/e2e/gguf_decode_speed.mjs
//   streams  STREAMS sequences of one context (`sequences: STREAMS`), each generating NEW
//            tokens after its own prompt, all at once: output tokens / wall time from the
//            start to the last token (prompt processing included, as for zenith's streams)
// The end-of-generation token does not stop a sequence: each makes NEW decode steps.
//   node bench/serving_llamacpp.mjs MODEL.gguf --threads T [--new 64] [--runs 3]
//        [--streams 8] [--prompt 1,358]
// Prints one JSON object: {"decode": {"tokens_s", "best_tokens_s"},
// "streams": {"streams", "tokens_s", "best_tokens_s"}} (medians and bests over the runs).
import {createRequire} from "node:module";

const require = createRequire(new URL("../tests/npm/package.json", import.meta.url));
const {getLlama, LlamaLogLevel} = await import(require.resolve("node-llama-cpp"));

const args = process.argv.slice(2);
let file = "", threads = 1, wanted = 64, runs = 3, streams = 8, prompt = [1, 358];
for (let i = 0; i < args.length; ++i) {
  if (args[i] === "--threads") threads = Number(args[++i]);
  else if (args[i] === "--new") wanted = Number(args[++i]);
  else if (args[i] === "--runs") runs = Number(args[++i]);
  else if (args[i] === "--streams") streams = Number(args[++i]);
  else if (args[i] === "--prompt") prompt = args[++i].split(",").map(Number);
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
console.log(JSON.stringify(out));
await model.dispose();
await llama.dispose();
