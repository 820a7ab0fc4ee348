// What Tokenizer::from_dir reads from a model directory: which file, special ids from the
// config files, added tokens, and the encode options.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/temp_dir.h"
#include "text/fixture.h"
#include "zenith/error.h"

namespace zenith::text {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::text_fixture;

// A copy of fixture `name` with `file` replaced by `json`.
struct EditedFixture {
  TempDir dir{"text_tokenizer"};
  EditedFixture(const std::string& name, const std::string& file, const nlohmann::json& json) {
    fs::copy(text_fixture(name), dir.path(), fs::copy_options::recursive);
    std::ofstream(dir.path() / file) << json.dump();
  }
};

TEST(Tokenizer, PrefersTokenizerJson) {
  // llama2_hf holds both files; sp_bpe the same model as tokenizer.model only.
  auto hf = Tokenizer::from_dir(text_fixture("llama2_hf"));
  auto sp = Tokenizer::from_dir(text_fixture("sp_bpe"));
  EXPECT_EQ(hf->kind(), "tokenizer.json (BPE)");
  EXPECT_EQ(sp->kind(), "tokenizer.model (SentencePiece)");
  EXPECT_EQ(hf->vocab_size(), sp->vocab_size());
  for (int32_t id = 0; id < hf->vocab_size(); ++id)
    ASSERT_EQ(hf->id_to_piece(id), sp->id_to_piece(id)) << id;
  // The converted tokenizer.json encodes plain text as SentencePiece does.
  std::string text = "A classic is something that everyone wants to have read.";
  EXPECT_EQ(hf->encode(text, false), sp->encode(text, false));
}

TEST(Tokenizer, Llama3SpecialIds) {
  auto t = Tokenizer::from_dir(text_fixture("llama3_bpe"));
  EXPECT_EQ(t->bos_id(), 956);
  EXPECT_EQ(t->bos_token(), "<|begin_of_text|>");
  EXPECT_EQ(t->eos_id(), 960);  // tokenizer_config.json: <|eot_id|>
  EXPECT_EQ(t->eos_token(), "<|eot_id|>");
  EXPECT_EQ(t->eos_ids(), (std::vector<int32_t>{960, 957}));  // + generation_config.json
  EXPECT_TRUE(t->is_eos(957));
  EXPECT_FALSE(t->is_eos(956));
  EXPECT_EQ(t->pad_id(), -1);
  EXPECT_EQ(t->unk_id(), -1);
  ASSERT_EQ(t->added_tokens().size(), 7u);
  EXPECT_EQ(t->added_tokens()[6].content, "zenith");
  EXPECT_FALSE(t->added_tokens()[6].special);
  EXPECT_TRUE(t->is_special(960));
  EXPECT_FALSE(t->is_special(962));
  EXPECT_FALSE(t->is_special(100));
  EXPECT_NE(t->chat_template().find("<|start_header_id|>"), std::string::npos);
}

TEST(Tokenizer, Qwen2AndGpt2SpecialIds) {
  auto qwen = Tokenizer::from_dir(text_fixture("qwen2_bpe"));
  EXPECT_EQ(qwen->bos_id(), -1);  // "bos_token": null
  EXPECT_EQ(qwen->eos_id(), 958);
  EXPECT_EQ(qwen->pad_id(), 956);
  EXPECT_EQ(qwen->encode("hi"), qwen->encode("hi", false));   // no template
  auto gpt2 = Tokenizer::from_dir(text_fixture("gpt2_bpe"));  // no config files
  EXPECT_EQ(gpt2->bos_id(), -1);
  EXPECT_EQ(gpt2->eos_id(), -1);
  EXPECT_TRUE(gpt2->eos_ids().empty());
  EXPECT_EQ(gpt2->chat_template(), "");
}

TEST(Tokenizer, Llama2SpecialIds) {
  for (const std::string name : {"llama2_hf", "sp_bpe", "sp_unigram"}) {
    auto t = Tokenizer::from_dir(text_fixture(name));
    EXPECT_EQ(t->bos_id(), 1) << name;
    EXPECT_EQ(t->eos_id(), 2) << name;
    EXPECT_EQ(t->unk_id(), 0) << name;
    EXPECT_EQ(t->encode("x").front(), 1) << name;
  }
  // sp_bpe's tokenizer_config.json sets add_eos_token.
  EXPECT_EQ(Tokenizer::from_dir(text_fixture("sp_bpe"))->encode("x").back(), 2);
  EXPECT_NE(Tokenizer::from_dir(text_fixture("sp_unigram"))->encode("x").back(), 2);
}

// transformers' LlamaTokenizerFast builds the template from add_bos_token/add_eos_token.
TEST(Tokenizer, AddBosAndEosFromConfig) {
  EditedFixture f("llama2_hf", "tokenizer_config.json",
                  {{"add_bos_token", false}, {"add_eos_token", true}, {"eos_token", "</s>"}});
  auto t = Tokenizer::from_dir(f.dir.str());
  std::vector<int32_t> ids = t->encode("Hello");
  EXPECT_NE(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.end() - 1), t->encode("Hello", false));
}

// tokenizer_config.json's added_tokens_decoder can extend a SentencePiece vocabulary.
TEST(Tokenizer, SentencePieceAddedTokens) {
  nlohmann::json config = {{"pad_token", "<pad>"},
                           {"added_tokens_decoder",
                            {{"2000", {{"content", "<pad>"}, {"special", true}}},
                             {"2001", {{"content", "<tool>"}, {"special", false}}},
                             {"1", {{"content", "<s>"}, {"special", true}}}}}};
  EditedFixture f("sp_unigram", "tokenizer_config.json", config);
  auto t = Tokenizer::from_dir(f.dir.str());
  EXPECT_EQ(t->vocab_size(), 2002);
  EXPECT_EQ(t->pad_id(), 2000);
  EXPECT_EQ(t->piece_to_id("<tool>"), 2001);
  std::vector<int32_t> ids = t->encode("a<pad>b<tool>", false);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2000), 1);
  EXPECT_EQ(ids.back(), 2001);
  EXPECT_EQ(t->decode(ids), "a<pad> b<tool>");  // "b" is a new piece of text: "▁b"
  EXPECT_EQ(t->decode(ids, /*skip_special=*/true), "a b<tool>");
  EXPECT_TRUE(t->is_special(2000));
  EXPECT_FALSE(t->is_special(2001));

  config["added_tokens_decoder"]["5"] = {{"content", "<wrong>"}};
  EditedFixture bad("sp_unigram", "tokenizer_config.json", config);
  std::string e = testing::error_of([&] { Tokenizer::from_dir(bad.dir.str()); });
  EXPECT_NE(e.find("added_tokens_decoder.5 is \"<wrong>\" but the model's piece 5 is"),
            std::string::npos)
      << e;
}

TEST(Tokenizer, ParseSpecialOff) {
  for (const std::string name : {"llama3_bpe", "llama2_hf", "sp_bpe"}) {
    auto t = Tokenizer::from_dir(text_fixture(name));
    std::string text = "<s>x<|eot_id|>";
    std::vector<int32_t> ids = t->encode(text, {.add_special = false, .parse_special = false});
    for (int32_t id : ids) EXPECT_FALSE(t->is_special(id)) << name << " " << id;
    EXPECT_EQ(t->decode(ids), text) << name;
    std::vector<int32_t> parsed = t->encode(text, false);
    EXPECT_NE(parsed, ids) << name;
  }
}

TEST(Tokenizer, SingleWordAddedToken) {
  nlohmann::json j;
  std::ifstream(text_fixture("llama3_bpe/tokenizer.json")) >> j;
  ASSERT_EQ(j["added_tokens"][6]["content"], "zenith");
  auto plain = Tokenizer::from_dir(text_fixture("llama3_bpe"));
  std::string text = "zenithal zenith_x zenith.";
  auto count = [](const std::vector<int32_t>& ids) {
    return std::count(ids.begin(), ids.end(), 962);
  };
  EXPECT_EQ(count(plain->encode(text)), 3);
  j["added_tokens"][6]["single_word"] = true;
  EditedFixture f("llama3_bpe", "tokenizer.json", j);
  auto single = Tokenizer::from_dir(f.dir.str());
  EXPECT_EQ(count(single->encode(text)), 1);  // only the whole word before "."
  EXPECT_EQ(single->decode(single->encode(text, false)), text);
}

}  // namespace
}  // namespace zenith::text
