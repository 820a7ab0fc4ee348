// llama.cpp's batch-1 decode speed on GGUF files, through node-llama-cpp's prebuilt CPU library
// (tests/npm): the same measurement as bench/llm_quant --model (a 16-token prompt, then greedy
// tokens timed from the first to the last), to set beside zenith's on the same files.
//   node bench/llm_quant_llamacpp.mjs --threads 1,2 [--gen-tokens 64] [--runs 5] FILE.gguf ...
// Prints one JSON object: {"results": [{"file", "threads", "tokens_s", "best_tokens_s"}]}.
import {getLlama, LlamaLogLevel} from "../tests/npm/node_modules/node-llama-cpp/dist/index.js";

const args = process.argv.slice(2);
let threads = [1, 2], genTokens = 64, runs = 5;
const files = [];
for (let i = 0; i < args.length; ++i) {
  if (args[i] === "--threads") threads = args[++i].split(",").map(Number);
  else if (args[i] === "--gen-tokens") genTokens = Number(args[++i]);
  else if (args[i] === "--runs") runs = Number(args[++i]);
  else files.push(args[i]);
}
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const results = [];
for (const file of files) {
  const model = await llama.loadModel({modelPath: file});
  for (const t of threads) {
    const times = [];
    for (let r = 0; r < runs + 1; ++r) {  // the first run warms up
      const context = await model.createContext({contextSize: 256, threads: t, batchSize: 64});
      const seq = context.getSequence();
      const prompt = [1];
      for (let i = 1; i < 16; ++i) prompt.push(3 + ((i * 97) % 2000));
      let n = 0, t0 = 0;
      for await (const token of seq.evaluate(prompt, {temperature: 0})) {
        if (n === 0) t0 = performance.now();
        if (++n > genTokens) break;
      }
      if (r > 0) times.push((performance.now() - t0) / 1e3);
      await context.dispose();
    }
    results.push({file, threads: t, tokens_s: genTokens / median(times),
                  best_tokens_s: genTokens / Math.min(...times)});
  }
  await model.dispose();
}
console.log(JSON.stringify({engine: "llama.cpp (node-llama-cpp 3.21.1)", results}, null, 2));
