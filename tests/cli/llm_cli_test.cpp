// `zenith generate`, `zenith perplexity` and `zenith merge-adapter` on the LLaMA fixtures and the
// demo model (examples/llm/demo-llama, which has a tokenizer).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/files.h"
#include "support/llama_fixtures.h"
#include "support/run_zenith.h"
#include "support/temp_dir.h"
#include "zenith/llama.h"

namespace zenith::testing {
namespace {

namespace fs = std::filesystem;

std::string demo_model() { return std::string(ZENITH_SOURCE_DIR) + "/examples/llm/demo-llama"; }

std::string id_list(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) {
    if (!s.empty()) s += ',';
    s += std::to_string(id);
  }
  return s;
}

nlohmann::json run_json(const std::string& args) {
  CliResult r = run_zenith(args + " --json");
  EXPECT_EQ(r.code, 0) << args << "\n" << r.output;
  return r.code == 0 ? nlohmann::json::parse(r.output) : nlohmann::json();
}

TEST(GenerateCli, GreedyJsonEqualsTheReference) {
  auto ref = llama_reference("llama_gqa");
  auto j = run_json("generate --model " + llama_fixture("llama_gqa") + " --prompt-ids " +
                    id_list(ref.at("greedy.prompt").to_int_vector()) +
                    " --temperature 0 --max-new-tokens 8");
  EXPECT_EQ(j["tokens"].get<std::vector<int64_t>>(), ref.at("greedy.tokens").to_int_vector());
  EXPECT_TRUE(j["text"].is_null());  // the fixture has no tokenizer
  EXPECT_EQ(j["prompt_tokens"], 5);
  EXPECT_EQ(j["stop_reason"], "max_new_tokens");
  // --threads as in train, eval and finetune: one thread gives the same tokens.
  j = run_json("generate --threads 1 --model " + llama_fixture("llama_gqa") + " --prompt-ids " +
               id_list(ref.at("greedy.prompt").to_int_vector()) +
               " --temperature 0 --max-new-tokens 8");
  EXPECT_EQ(j["tokens"].get<std::vector<int64_t>>(), ref.at("greedy.tokens").to_int_vector());
  CliResult bad = run_zenith("generate --threads -1 --model " + llama_fixture("llama_gqa") +
                             " --prompt-ids 1,2");
  EXPECT_NE(bad.output.find("[generate] --threads must be >= 0"), std::string::npos) << bad.output;
}

// The greedy continuation with the adapter applied, unmerged (--adapter) and merged
// (merge-adapter), is the reference's.
void check_adapter(const std::string& adapter, const std::string& base, bool merged_too) {
  auto ref = llama_reference(adapter);
  const std::string prompt = " --prompt-ids " + id_list(ref.at("greedy.prompt").to_int_vector()) +
                             " --temperature 0 --max-new-tokens 8";
  const auto expected = ref.at("greedy.tokens").to_int_vector();
  auto j = run_json("generate --model " + llama_fixture(base) + " --adapter " +
                    llama_fixture(adapter) + prompt);
  EXPECT_EQ(j["tokens"].get<std::vector<int64_t>>(), expected) << adapter << " unmerged";
  TempDir tmp("merge_cli");
  CliResult r = run_zenith("merge-adapter --model " + llama_fixture(base) + " --adapter " +
                           llama_fixture(adapter) + " --out " + tmp.str());
  ASSERT_EQ(r.code, 0) << r.output;
  const size_t layers = io::load_lora_adapter(llama_fixture(adapter)).modules.size();
  EXPECT_NE(r.output.find("into " + std::to_string(layers) + " layers"), std::string::npos)
      << r.output;
  EXPECT_EQ(read_json(tmp / "config.json")["torch_dtype"],
            read_json(llama_fixture(base) + "/config.json")["torch_dtype"]);
  if (!merged_too) return;
  j = run_json("generate --model " + tmp.str() + prompt);
  EXPECT_EQ(j["tokens"].get<std::vector<int64_t>>(), expected) << adapter << " merged";
}

TEST(GenerateCli, AdapterUnmergedAndMergedGiveTheReference) {
  check_adapter("lora_qv", "llama_gqa", true);
  // A bf16 base merges into bf16 weights: rounding moves the logits past the fixture's greedy
  // margins, so only the unmerged continuation is compared (the library tests bound the merge).
  check_adapter("lora_all_linear_rslora", "llama_bf16", false);
}

// `zenith export --format gguf --adapter` writes llama.cpp's adapter file; `--adapter X.gguf`
// reads it back and decodes the PEFT adapter's tokens. A model GGUF is refused as an adapter.
TEST(GenerateCli, GgufAdapterGivesThePeftAdaptersTokens) {
  auto ref = llama_reference("lora_qv");
  TempDir tmp("gguf_adapter_cli");
  const std::string gguf = tmp / "lora_qv.gguf", model = llama_fixture("llama_gqa");
  CliResult r = run_zenith("export --format gguf --model " + model + " --adapter " +
                           llama_fixture("lora_qv") + " --out " + gguf);
  ASSERT_EQ(r.code, 0) << r.output;
  auto j = run_json("generate --model " + model + " --adapter " + gguf + " --prompt-ids " +
                    id_list(ref.at("greedy.prompt").to_int_vector()) +
                    " --temperature 0 --max-new-tokens 8");
  EXPECT_EQ(j["tokens"].get<std::vector<int64_t>>(), ref.at("greedy.tokens").to_int_vector());
  const std::string model_gguf = tmp / "model.gguf";
  ASSERT_EQ(run_zenith("export --format gguf --model " + model + " --out " + model_gguf).code, 0);
  r = run_zenith("generate --model " + model + " --adapter " + model_gguf + " --prompt-ids 1,2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("not a LoRA adapter"), std::string::npos) << r.output;
}

TEST(GenerateCli, TextPromptStreamsWhatJsonReports) {
  const std::string args = "generate --model " + demo_model() +
                           " --prompt 'Once upon a time' --max-new-tokens 12 --seed 3";
  auto j = run_json(args);
  ASSERT_TRUE(j["text"].is_string());
  EXPECT_EQ(j["tokens"].size(), 12u);
  CliResult plain = run_zenith(args);
  ASSERT_EQ(plain.code, 0) << plain.output;
  // The streamed text, a newline, then the summary on stderr.
  EXPECT_EQ(plain.output.substr(0, plain.output.find("[generate] ")),
            j["text"].get<std::string>() + "\n");
  EXPECT_NE(plain.output.find("12 generated in"), std::string::npos) << plain.output;
  // Chat: the prompt becomes a user turn of the template (tokenizer_config.json: llama-2).
  auto chat = run_json("generate --model " + demo_model() +
                       " --prompt hello --chat --max-new-tokens 4 --temperature 0");
  auto raw = run_json("generate --model " + demo_model() +
                      " --prompt hello --max-new-tokens 4 --temperature 0");
  EXPECT_GT(chat["prompt_tokens"].get<int>(), raw["prompt_tokens"].get<int>() + 4);
}

// Settings not given come from generation_config.json (greedy without one), as transformers.
TEST(GenerateCli, DefaultsFollowTheModelsGenerationConfig) {
  const std::string prompt = " --prompt-ids 1,45,67,89 --max-new-tokens 16";
  auto greedy = run_json("generate --model " + demo_model() + prompt + " --temperature 0");
  auto plain = run_json("generate --model " + demo_model() + prompt);
  EXPECT_EQ(plain["tokens"], greedy["tokens"]) << "no generation_config.json: greedy";
  TempDir tmp("generate_defaults");
  for (const auto& entry : fs::directory_iterator(demo_model()))
    fs::copy_file(entry.path(), tmp / entry.path().filename().string());
  write_bytes(tmp / "generation_config.json",
              R"({"do_sample": true, "temperature": 1.5, "top_k": 0, "max_new_tokens": 9})");
  auto sampled = run_json("generate --model " + tmp.str() + " --prompt-ids 1,45,67,89");
  EXPECT_EQ(sampled["tokens"].size(), 9u) << "max_new_tokens from the file";
  auto explicit_flags = run_json("generate --model " + demo_model() +
                                 " --prompt-ids 1,45,67,89 --max-new-tokens 9 --temperature 1.5 "
                                 "--top-k 0 --top-p 1 --seed 0");
  EXPECT_EQ(sampled["tokens"], explicit_flags["tokens"]);
  EXPECT_NE(sampled["tokens"], run_json("generate --model " + tmp.str() +
                                        " --prompt-ids 1,45,67,89 --temperature 0")["tokens"]);
  // A flag wins over the file.
  auto flagged = run_json("generate --model " + tmp.str() + prompt + " --temperature 0");
  EXPECT_EQ(flagged["tokens"], greedy["tokens"]);
}

// A small model's stray byte tokens (the demo's random weights make many) never reach the
// terminal raw: control characters but newline and tab print as \xNN.
TEST(GenerateCli, ControlCharactersAreEscaped) {
  bool saw_control = false;
  for (int seed = 0; seed < 8 && !saw_control; ++seed) {
    const std::string args = "generate --model " + demo_model() +
                             " --prompt 'Once upon a time' --max-new-tokens 64 --temperature 1 "
                             "--seed " +
                             std::to_string(seed);
    const std::string text = run_json(args)["text"].get<std::string>();
    if (std::none_of(text.begin(), text.end(),
                     [](char c) { return uint8_t(c) < 0x20 && c != '\n' && c != '\t'; }))
      continue;
    saw_control = true;
    CliResult plain = run_zenith(args);
    const std::string shown = plain.output.substr(0, plain.output.find("[generate] "));
    EXPECT_TRUE(std::none_of(shown.begin(), shown.end(), [](char c) {
      return uint8_t(c) < 0x20 && c != '\n' && c != '\t';
    })) << shown;
    EXPECT_NE(shown.find("\\x"), std::string::npos) << shown;
  }
  EXPECT_TRUE(saw_control) << "no seed generated a control character: pick other seeds";
}

TEST(GenerateCli, AHubIdSaysOnlyLocalFoldersAreRead) {
  CliResult r = run_zenith("generate --model TinyLlama/TinyLlama-1.1B-Chat-v1.0 --prompt hi");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("looks like a Hugging Face Hub id, and zenith reads only local model "
                          "folders"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("huggingface-cli download TinyLlama/TinyLlama-1.1B-Chat-v1.0 "
                          "--local-dir DIR"),
            std::string::npos)
      << r.output;
  // A missing path that is no Hub id keeps the plain error.
  r = run_zenith("generate --model ./no/such/dir --prompt hi");
  EXPECT_EQ(r.output.find("Hub id"), std::string::npos) << r.output;
}

TEST(GenerateCli, Errors) {
  CliResult r =
      run_zenith("generate --model " + llama_fixture("llama_gqa") + " --prompt-ids 1,2,500");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("prompt token id 500 at position 2 is outside the model's vocabulary "
                          "[0, 128)"),
            std::string::npos)
      << r.output;
  r = run_zenith("generate --model " + llama_fixture("llama_gqa") + " --prompt-ids 1,x");
  EXPECT_NE(r.output.find("item 2 ('x') is not a token id"), std::string::npos) << r.output;
  r = run_zenith("generate --model " + llama_fixture("llama_gqa") + " --prompt hello");
  EXPECT_NE(r.output.find("has no tokenizer (tokenizer.json or tokenizer.model): give "
                          "--prompt-ids"),
            std::string::npos)
      << r.output;
  r = run_zenith("generate --model " + demo_model() + " --prompt hi --chat-template vicuna");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("llama-2, llama-3, chatml, alpaca"), std::string::npos) << r.output;
  r = run_zenith("generate --model " + llama_fixture("llama_gqa"));
  EXPECT_NE(r.output.find("give --prompt TEXT or --prompt-ids"), std::string::npos) << r.output;
  // A prompt as long as the context.
  TempDir tmp("generate_cli");
  fs::copy_file(llama_fixture("llama_gqa") + "/model.safetensors", tmp / "model.safetensors");
  auto config = read_json(llama_fixture("llama_gqa") + "/config.json");
  config["max_position_embeddings"] = 4;
  write_bytes(tmp / "config.json", config.dump());
  r = run_zenith("generate --model " + tmp.str() + " --prompt-ids 1,2,3,4");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("the prompt has 4 tokens, but the model's context"), std::string::npos)
      << r.output;
}

TEST(PerplexityCli, JsonEqualsTheLibrary) {
  auto ref = llama_reference("llama_gqa");
  const std::vector<int64_t> ids = ref.at("input_ids").to_int_vector();
  auto model = models::Llama::from_pretrained(llama_fixture("llama_gqa"));
  auto expected = models::perplexity(*model, ids, 8);
  auto j = run_json("perplexity --model " + llama_fixture("llama_gqa") + " --ids " + id_list(ids) +
                    " --max-seq-len 8");
  EXPECT_NEAR(j["nll"].get<double>(), expected.nll, 1e-6);
  EXPECT_NEAR(j["perplexity"].get<double>(), expected.perplexity, 1e-6 * expected.perplexity);
  EXPECT_EQ(j["tokens"], 23);
  auto one_thread = run_json("perplexity --threads 1 --model " + llama_fixture("llama_gqa") +
                             " --ids " + id_list(ids) + " --max-seq-len 8");
  EXPECT_NEAR(one_thread["nll"].get<double>(), expected.nll, 1e-6);
  // A text file through the demo model's tokenizer.
  TempDir tmp("perplexity_cli");
  write_bytes(tmp / "story.txt", "Once upon a time there was a little computer.\n");
  j = run_json("perplexity --model " + demo_model() + " --text-file " + (tmp / "story.txt"));
  EXPECT_GT(j["tokens"].get<int>(), 5);
  EXPECT_GT(j["perplexity"].get<double>(), 1.0);
  // --text is a string in `zenith tokenize`; perplexity's old --text FILE names the new flag.
  CliResult old =
      run_zenith("perplexity --model " + demo_model() + " --text " + (tmp / "story.txt"));
  EXPECT_EQ(old.code, 1);
  EXPECT_NE(old.output.find("--text is now --text-file FILE"), std::string::npos) << old.output;
  CliResult r = run_zenith("perplexity --model " + demo_model() + " --ids 5");
  EXPECT_NE(r.output.find("needs at least 2 tokens"), std::string::npos) << r.output;
}

// examples/llm/fortunes-llama is trained (scripts/make_fortunes_llm.py): fortunes it never saw
// score far below a random model's perplexity (about its vocabulary size, 2048), and its greedy
// answer to a chat prompt ends at eos with printable text.
TEST(PerplexityCli, TheTrainedExampleKnowsHeldOutFortunes) {
  const std::string model = std::string(ZENITH_SOURCE_DIR) + "/examples/llm/fortunes-llama";
  auto j = run_json("perplexity --model " + model + " --text-file " + ZENITH_SOURCE_DIR +
                    "/examples/llm/fortunes-heldout.txt");
  EXPECT_GT(j["tokens"].get<int>(), 10000);
  EXPECT_LT(j["perplexity"].get<double>(), 70.0);
  auto g =
      run_json("generate --model " + model + " --prompt 'Define: house' --chat --temperature 0");
  EXPECT_EQ(g["stop_reason"], "eos");
  const std::string text = g["text"].get<std::string>();
  EXPECT_GT(text.size(), 10u);
  EXPECT_TRUE(std::all_of(text.begin(), text.end(), [](char c) { return c >= ' ' || c == '\n'; }))
      << text;
}

TEST(MergeAdapterCli, AdapterForAnotherBaseFails) {
  TempDir tmp("merge_cli");
  CliResult r = run_zenith("merge-adapter --model " + llama_fixture("mistral_head_dim") +
                           " --adapter " + llama_fixture("lora_qv") + " --out " + tmp.str());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("the adapter does not fit the base model"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(tmp / "config.json"));
}

}  // namespace
}  // namespace zenith::testing
