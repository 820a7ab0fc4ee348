// Writes tests/fixtures/text/expected_hf.json: what Hugging Face's tokenizers (the pure-JS
// @huggingface/tokenizers, pinned in package.json) make of test_strings.json with each
// tokenizer.json fixture: ids with and without special tokens, token strings, the decoded text,
// and the decoding of random id sequences (byte-level tokenizers: invalid UTF-8 included).
// Run by regenerate.sh after `npm ci` in this directory; the C++ tests only read the output.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Tokenizer } from "@huggingface/tokenizers";

const here = dirname(fileURLToPath(import.meta.url));
const fixtures = join(here, "..", "..", "tests", "fixtures", "text");
const strings = JSON.parse(readFileSync(join(here, "test_strings.json"), "utf8"));
const names = ["llama3_bpe", "qwen2_bpe", "gpt2_bpe", "llama2_hf", "metaspace_hf"];
const byteLevel = new Set(["llama3_bpe", "qwen2_bpe", "gpt2_bpe"]);

// mulberry32: a small seeded generator, so the random id sequences are reproducible.
function random(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// A missing file (gpt2_bpe has no tokenizer_config.json) reads as {}.
const readJson = (dir, file) => {
  const path = join(fixtures, dir, file);
  return existsSync(path) ? JSON.parse(readFileSync(path, "utf8")) : {};
};
const decodeOptions = { clean_up_tokenization_spaces: false };
const out = { generator: "@huggingface/tokenizers 0.2.0 (scripts/tokenizer_fixtures)" };
for (const name of names) {
  const json = readJson(name, "tokenizer.json");
  const tokenizer = new Tokenizer(json, readJson(name, "tokenizer_config.json"));
  const cases = strings.map((text) => {
    const full = tokenizer.encode(text);
    const plain = tokenizer.encode(text, { add_special_tokens: false });
    const ids = full.ids;
    return {
      text,
      ids,
      ids_plain: plain.ids,
      tokens: plain.tokens,
      decoded: ids.length ? tokenizer.decode(ids, decodeOptions) : "",
      decoded_skip: ids.length
        ? tokenizer.decode(ids, { ...decodeOptions, skip_special_tokens: true })
        : "",
    };
  });
  const entry = { vocab_size: tokenizer.get_vocab().size, cases };
  if (byteLevel.has(name)) {
    // Random ids from the model's vocabulary (not the added tokens).
    const next = random(1234);
    const vocab = Object.keys(json.model.vocab).length;
    entry.random_decode = Array.from({ length: 20 }, () => {
      const ids = Array.from({ length: 1 + Math.floor(next() * 12) }, () =>
        Math.floor(next() * vocab),
      );
      return { ids, text: tokenizer.decode(ids, decodeOptions) };
    });
  }
  out[name] = entry;
}
writeFileSync(join(fixtures, "expected_hf.json"), JSON.stringify(out) + "\n");
console.log(`wrote ${join(fixtures, "expected_hf.json")}`);
