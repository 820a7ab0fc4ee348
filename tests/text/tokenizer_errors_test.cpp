// Bad input gives errors that name the file, the JSON key or the id, never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "support/temp_dir.h"
#include "text/fixture.h"
#include "zenith/error.h"

namespace zenith::text {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::TempDir;
using testing::text_fixture;

void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

nlohmann::json read(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// A copy of fixture `name` whose `file` is edited by `edit`; returns the loader's error.
std::string load_edited(const std::string& name, const std::string& file,
                        const std::function<void(nlohmann::json&)>& edit) {
  TempDir dir("text_errors");
  fs::copy(text_fixture(name), dir.path(), fs::copy_options::recursive);
  nlohmann::json j = read(dir.path() / file);
  edit(j);
  write(dir.path() / file, j.dump());
  return error_of([&] { Tokenizer::from_dir(dir.str()); });
}

TEST(TokenizerErrors, MissingFiles) {
  EXPECT_EQ(error_of([] { Tokenizer::from_dir("/nonexistent/model"); }),
            "[tokenizer] /nonexistent/model is not a directory");
  TempDir dir("text_empty");
  EXPECT_EQ(error_of([&] { Tokenizer::from_dir(dir.str()); }),
            "[tokenizer] " + dir.str() + " has neither tokenizer.json nor tokenizer.model");
}

TEST(TokenizerErrors, MalformedFiles) {
  TempDir dir("text_malformed");
  write(dir.path() / "tokenizer.json", "{\"model\": {\"type\": \"BPE\", ");
  std::string e = error_of([&] { Tokenizer::from_dir(dir.str()); });
  EXPECT_NE(e.find("[tokenizer] " + (dir.path() / "tokenizer.json").string() + ": malformed JSON"),
            std::string::npos)
      << e;

  fs::remove(dir.path() / "tokenizer.json");
  write(dir.path() / "tokenizer.model", "not a protobuf");
  e = error_of([&] { Tokenizer::from_dir(dir.str()); });
  EXPECT_NE(e.find((dir.path() / "tokenizer.model").string() + ": not a SentencePiece model"),
            std::string::npos)
      << e;

  fs::copy_file(text_fixture("sp_bpe/tokenizer.model"), dir.path() / "tokenizer.model",
                fs::copy_options::overwrite_existing);
  write(dir.path() / "tokenizer_config.json", "[1, 2");
  e = error_of([&] { Tokenizer::from_dir(dir.str()); });
  EXPECT_NE(e.find("tokenizer_config.json: malformed JSON"), std::string::npos) << e;
}

TEST(TokenizerErrors, UnsupportedComponentsNameTheKey) {
  auto expect = [](const std::string& error, const std::string& key, const std::string& type) {
    EXPECT_NE(error.find("tokenizer.json: " + key), std::string::npos) << error;
    EXPECT_NE(error.find("\"" + type + "\" is not supported"), std::string::npos) << error;
  };
  expect(load_edited("llama3_bpe", "tokenizer.json",
                     [](auto& j) { j["model"]["type"] = "WordPiece"; }),
         "model.type", "WordPiece");
  expect(load_edited(
             "llama3_bpe", "tokenizer.json",
             [](auto& j) { j["pre_tokenizer"]["pretokenizers"][1]["type"] = "BertPreTokenizer"; }),
         "pre_tokenizer.pretokenizers[1].type", "BertPreTokenizer");
  expect(load_edited("llama2_hf", "tokenizer.json",
                     [](auto& j) { j["normalizer"]["normalizers"][0]["type"] = "BertNormalizer"; }),
         "normalizer.normalizers[0].type", "BertNormalizer");
  expect(load_edited("llama3_bpe", "tokenizer.json", [](auto& j) { j["decoder"]["type"] = "CTC"; }),
         "decoder.type", "CTC");
  expect(load_edited("qwen2_bpe", "tokenizer.json",
                     [](auto& j) { j["post_processor"]["type"] = "Other"; }),
         "post_processor.type", "Other");
}

TEST(TokenizerErrors, BrokenModels) {
  std::string e = load_edited("llama3_bpe", "tokenizer.json", [](auto& j) {
    j["model"]["merges"][3] = {"Ġt", "zzz"};
  });
  EXPECT_NE(e.find("tokenizer.json: model.merges[3]: \"Ġt\" + \"zzz\" uses a token that is not in "
                   "the vocabulary"),
            std::string::npos)
      << e;
  e = load_edited("qwen2_bpe", "tokenizer.json", [](auto& j) { j["model"]["merges"][0] = "abc"; });
  EXPECT_NE(e.find("model.merges[0]: expected \"a b\""), std::string::npos) << e;
  e = load_edited("llama3_bpe", "tokenizer.json", [](auto& j) { j.erase("model"); });
  EXPECT_NE(e.find("tokenizer.json: model is missing"), std::string::npos) << e;
  e = load_edited("llama3_bpe", "tokenizer.json", [](auto& j) {
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(\\p{L}";
  });
  EXPECT_NE(e.find("pre_tokenizer.pretokenizers[0].pattern: invalid regex"), std::string::npos)
      << e;
  e = load_edited("llama3_bpe", "tokenizer.json",
                  [](auto& j) { j["model"]["vocab"]["Ġt"] = "seven"; });
  EXPECT_NE(e.find("model.vocab[\"Ġt\"]: expected a non-negative integer id"), std::string::npos)
      << e;
}

TEST(TokenizerErrors, ConfigTokensMustExist) {
  std::string e = load_edited("llama3_bpe", "tokenizer_config.json",
                              [](auto& j) { j["eos_token"] = "<|no_such_token|>"; });
  EXPECT_NE(e.find("tokenizer_config.json: eos_token: \"<|no_such_token|>\" is not in the "
                   "vocabulary"),
            std::string::npos)
      << e;
  e = load_edited("llama3_bpe", "generation_config.json", [](auto& j) {
    j["eos_token_id"] = {957, 100000};
  });
  EXPECT_NE(e.find("generation_config.json: id 100000 is outside the vocabulary (size 963)"),
            std::string::npos)
      << e;
  e = load_edited("llama3_bpe", "generation_config.json",
                  [](auto& j) { j["eos_token_id"] = "eos"; });
  EXPECT_NE(e.find("eos_token_id: expected an integer id or a list of them"), std::string::npos)
      << e;
}

TEST(TokenizerErrors, IdsOutsideTheVocabulary) {
  for (const std::string name : {"llama3_bpe", "sp_bpe"}) {
    auto tokenizer = Tokenizer::from_dir(text_fixture(name));
    int32_t n = tokenizer->vocab_size();
    std::string expected = "[tokenizer] token id " + std::to_string(n) +
                           " is outside the vocabulary (size " + std::to_string(n) + ") of " +
                           tokenizer->kind() + " in " + text_fixture(name);
    std::vector<int32_t> ids = {1, 2, n};
    EXPECT_EQ(error_of([&] { tokenizer->decode(ids); }), expected);
    EXPECT_EQ(error_of([&] { tokenizer->id_to_piece(n); }), expected);
    StreamDecoder stream(*tokenizer);
    EXPECT_EQ(error_of([&] { stream.push(n); }), expected);
    EXPECT_NE(error_of([&] { tokenizer->decode(std::vector<int32_t>{-1}); }).find("token id -1"),
              std::string::npos);
  }
}

TEST(TokenizerErrors, TextMustBeUtf8) {
  for (const std::string name : {"llama3_bpe", "sp_bpe"}) {
    auto tokenizer = Tokenizer::from_dir(text_fixture(name));
    EXPECT_EQ(error_of([&] { tokenizer->encode("abc\xC3(def"); }),
              "[tokenizer] the text is not valid UTF-8 (byte 3 of 8)");
  }
}

}  // namespace
}  // namespace zenith::text
