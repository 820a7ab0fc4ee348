// GGUF files zenith wrote, read by independent readers (tests/npm): @huggingface/gguf parses the
// header and metadata, llama.cpp itself (node-llama-cpp 3.21.1, its prebuilt CPU library)
// loads each file, tokenizes text as zenith does, and decodes greedily from zenith's prompt.
//   node gguf_llama_cpp.mjs SPEC.json
// SPEC: {"files": [{"path", "dtype", "tensors", "expect_tokens", "min_agree"}],
//        "config": {block_count, ...}, "text", "text_ids" (zenith's ids of text, no bos/eos),
//        "prompt_ids", "lora": {"base", "adapter", "expect_tokens"},
//        "vocab_checks": [{"path", "tokenizer", "text", "text_ids"}]}. Each file's greedy tokens (up to eos or expect_tokens' length) must agree
// with expect_tokens (zenith's on that file) for at least min_agree leading tokens (default:
// all of them). With "lora", llama.cpp runs the base with the GGUF adapter file and must give
// expect_tokens exactly (zenith's with the PEFT adapter). Each vocab check's file must have
// tokenizer.ggml.model `tokenizer` and llama.cpp must tokenize `text` to `text_ids`. Exits 1
// naming each disagreement.
import {readFileSync} from "node:fs";
import {createRequire} from "node:module";

const npm = new URL("../npm/", import.meta.url);
const require = createRequire(new URL("package.json", npm));
const {gguf} = require("@huggingface/gguf");
const {getLlama, LlamaLogLevel} = await import(
  new URL("node_modules/node-llama-cpp/dist/index.js", npm).href);

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
let failures = 0;
function check(ok, message) {
  if (!ok) {
    failures += 1;
    console.error(`FAIL ${message}`);
  }
}
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

const llama = await getLlama({
  gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
  logLevel: LlamaLogLevel.error, progressLogs: false,
});
for (const file of spec.files) {
  const name = `${file.path} (${file.dtype})`;
  // @huggingface/gguf: the container and the llama.* keys.
  const parsed = await gguf(file.path, {allowLocalFile: true});
  const md = parsed.metadata;
  check(md.version === 3, `${name}: GGUF version ${md.version}, expected 3`);
  check(md["general.architecture"] === "llama",
        `${name}: general.architecture ${md["general.architecture"]}`);
  check(parsed.tensorInfos.length === file.tensors,
        `${name}: ${parsed.tensorInfos.length} tensors, expected ${file.tensors}`);
  for (const [key, value] of Object.entries(spec.config))
    check(Number(md[`llama.${key}`]) === value, `${name}: llama.${key} ${md[`llama.${key}`]}, expected ${value}`);
  check(md["tokenizer.ggml.model"] === "llama", `${name}: tokenizer.ggml.model`);

  // llama.cpp: load, tokenize, greedy decode.
  const model = await llama.loadModel({modelPath: file.path});
  const tokens = Array.from(model.tokenize(spec.text, false));
  check(same(tokens, spec.text_ids),
        `${name}: llama.cpp tokenizes the text as ${JSON.stringify(tokens.slice(0, 20))}..., ` +
        `zenith as ${JSON.stringify(spec.text_ids.slice(0, 20))}...`);
  const context = await model.createContext({contextSize: 256, threads: 1});
  const sequence = context.getSequence();
  const out = [];
  // zenith's tokens include the eos that stopped it; llama.cpp's generator ends before it.
  const expect = file.expect_tokens.filter((t, i) => !(i === file.expect_tokens.length - 1 &&
                                                       t === model.tokens.eos));
  for await (const token of sequence.evaluate(spec.prompt_ids, {temperature: 0})) {
    out.push(token);
    if (out.length >= expect.length) break;
  }
  let agree = 0;
  while (agree < out.length && out[agree] === expect[agree]) agree += 1;
  console.log(`${name}: llama.cpp loaded it; ${parsed.tensorInfos.length} tensors; tokenizer ` +
              `${same(tokens, spec.text_ids) ? "agrees" : "differs"}; greedy tokens agree with ` +
              `zenith's for ${agree} of ${expect.length}`);
  const need = file.min_agree ?? expect.length;
  check(agree >= need && out.length >= need,
        `${name}: llama.cpp's greedy tokens ${JSON.stringify(out)} agree with zenith's ` +
        `${JSON.stringify(expect)} for ${agree}, expected at least ${need}`);
  await context.dispose();
  await model.dispose();
}
for (const {path, tokenizer, text, text_ids: expect} of spec.vocab_checks ?? []) {
  const parsed = await gguf(path, {allowLocalFile: true});
  check(parsed.metadata["tokenizer.ggml.model"] === tokenizer,
        `${path}: tokenizer.ggml.model ${parsed.metadata["tokenizer.ggml.model"]}, expected ${tokenizer}`);
  const model = await llama.loadModel({modelPath: path});
  const tokens = Array.from(model.tokenize(text, false));
  console.log(`${path} (${tokenizer}, ${parsed.metadata["tokenizer.ggml.pre"]}): llama.cpp ` +
              `tokenizes as zenith does: ${same(tokens, expect)}`);
  check(same(tokens, expect), `${path}: llama.cpp's ids ${JSON.stringify(tokens)}, zenith's ` +
        `${JSON.stringify(expect)}`);
  await model.dispose();
}
if (spec.lora) {
  const {base, adapter, expect_tokens: expect} = spec.lora;
  const model = await llama.loadModel({modelPath: base});
  const context = await model.createContext({contextSize: 256, threads: 1,
                                             lora: {adapters: [{filePath: adapter}]}});
  const sequence = context.getSequence();
  const out = [];
  for await (const token of sequence.evaluate(spec.prompt_ids, {temperature: 0})) {
    out.push(token);
    if (out.length >= expect.length) break;
  }
  console.log(`${adapter}: llama.cpp applied the LoRA adapter to ${base}; greedy tokens ` +
              `${same(out, expect) ? "equal" : "differ from"} zenith's with the PEFT adapter`);
  check(same(out, expect), `${adapter}: llama.cpp's tokens ${JSON.stringify(out)}, zenith's ` +
        `${JSON.stringify(expect)}`);
  await context.dispose();
  await model.dispose();
}
await llama.dispose();
process.exit(failures ? 1 : 0);
