// llama.cpp's perplexity of token ids under a GGUF model, counted as `zenith perplexity` counts it
// (windows of MAX_SEQ_LEN tokens overlapping by one, so each id but the first is predicted once,
// with at most MAX_SEQ_LEN - 1 tokens of context), through node-llama-cpp 3.21.1 (tests/npm).
//   node gguf_perplexity.mjs MODEL.gguf IDS.json MAX_SEQ_LEN [THREADS]
// IDS.json: [1, 358, ...] (e.g. `zenith tokenize --json`'s "ids"). Prints
// {"nll", "perplexity", "tokens"} as `zenith perplexity --json` does.
import {readFileSync} from "node:fs";

const npm = new URL("../npm/", import.meta.url);
const {getLlama, LlamaLogLevel} = await import(
  new URL("node_modules/node-llama-cpp/dist/index.js", npm).href);

const [modelPath, idsPath, maxSeqLenText, threadsText] = process.argv.slice(2);
const ids = JSON.parse(readFileSync(idsPath, "utf8"));
const maxSeqLen = Number(maxSeqLenText);
const threads = Number(threadsText ?? 1);
if (!(ids.length >= 2 && maxSeqLen >= 2)) {
  console.error("usage: gguf_perplexity.mjs MODEL.gguf IDS.json MAX_SEQ_LEN [THREADS]: need at " +
                "least 2 ids and MAX_SEQ_LEN >= 2");
  process.exit(2);
}
const llama = await getLlama({
  gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
  logLevel: LlamaLogLevel.error, progressLogs: false,
});
const model = await llama.loadModel({modelPath});
const context = await model.createContext({contextSize: maxSeqLen, batchSize: maxSeqLen, threads});
const sequence = context.getSequence();
let nll = 0, count = 0;
for (let start = 0; start + 1 < ids.length; start += maxSeqLen - 1) {
  const window = ids.slice(start, start + maxSeqLen);
  await sequence.clearHistory();
  // Every position but the last asks for the next token's probabilities.
  const input = window.map((t, i) => i + 1 < window.length ? [t, {generateNext: {probabilities: true}}] : t);
  const results = await sequence.controlledEvaluate(input);
  for (let i = 0; i + 1 < window.length; i += 1) {
    const p = results[i]?.next?.probabilities?.get(window[i + 1]) ?? 0;
    nll -= Math.log(p);
    count += 1;
  }
}
console.log(JSON.stringify({nll: nll / count, perplexity: Math.exp(nll / count), tokens: count}));
await context.dispose();
await model.dispose();
await llama.dispose();
