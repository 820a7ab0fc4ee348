// llama.cpp's decode speed on a GGUF file at batch 1, through node-llama-cpp 3.21.1 (tests/npm),
// for benches beside `zenith generate` on the same file: greedy decoding of NEW tokens after the
// prompt, timed from the first generated token to the last (prompt processing excluded), the KV
// cache in float32 (as zenith keeps it).
//   node gguf_decode_speed.mjs MODEL.gguf [THREADS] [NEW_TOKENS] [PROMPT_IDS]
// THREADS default 1, NEW_TOKENS 64, PROMPT_IDS "1" (comma-separated). Prints one JSON line:
// {"model", "threads", "prompt_tokens", "new_tokens", "seconds", "tokens_per_second"}.
const npm = new URL("../npm/", import.meta.url);
const {getLlama, LlamaLogLevel} = await import(
  new URL("node_modules/node-llama-cpp/dist/index.js", npm).href);

const [modelPath, threadsText = "1", newText = "64", promptText = "1"] = process.argv.slice(2);
const threads = Number(threadsText), wanted = Number(newText);
const prompt = promptText.split(",").map(Number);
if (!modelPath || !(threads >= 1) || !(wanted >= 2) || prompt.some(Number.isNaN)) {
  console.error("usage: gguf_decode_speed.mjs MODEL.gguf [THREADS] [NEW_TOKENS >= 2] [PROMPT_IDS]");
  process.exit(2);
}
const llama = await getLlama({
  gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
  logLevel: LlamaLogLevel.error, progressLogs: false,
});
const model = await llama.loadModel({modelPath});
const context = await model.createContext({
  contextSize: Math.min(model.trainContextSize, prompt.length + wanted + 8), threads,
  experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
});
const sequence = context.getSequence();
let count = 0, first = 0, last = 0;
// The end-of-generation token does not stop the count: the bench wants NEW_TOKENS decode steps.
for await (const token of sequence.evaluate(prompt, {temperature: 0, yieldEogToken: true})) {
  void token;
  last = performance.now();
  if (count === 0) first = last;
  count += 1;
  if (count >= wanted) break;
}
const seconds = (last - first) / 1000;
console.log(JSON.stringify({model: modelPath, threads, prompt_tokens: prompt.length,
                            new_tokens: count, seconds,
                            tokens_per_second: seconds > 0 ? (count - 1) / seconds : 0}));
await context.dispose();
await model.dispose();
await llama.dispose();
