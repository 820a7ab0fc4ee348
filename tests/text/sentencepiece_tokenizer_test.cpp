// tokenizer.model tokenizers against SentencePiece itself: expected_sp.json comes from Debian's
// python3-sentencepiece (make_sp_fixtures.py).
#include <gtest/gtest.h>

#include "text/fixture.h"

namespace zenith::text {
namespace {

using testing::ids_of;
using testing::kSpTokenizers;
using testing::load_text_fixture;
using testing::text_fixture;

class SentencePieceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    static const nlohmann::json expected = load_text_fixture("expected_sp.json");
    tokenizer_ = Tokenizer::from_dir(text_fixture(GetParam()));
    fixture_ = expected[GetParam()];
  }
  std::shared_ptr<Tokenizer> tokenizer_;
  nlohmann::json fixture_;
};

TEST_P(SentencePieceTest, SpecialIdsAndVocabulary) {
  EXPECT_EQ(tokenizer_->kind(), "tokenizer.model (SentencePiece)");
  EXPECT_EQ(tokenizer_->vocab_size(), fixture_["vocab_size"].get<int32_t>());
  EXPECT_EQ(tokenizer_->bos_id(), fixture_["bos_id"].get<int32_t>());
  EXPECT_EQ(tokenizer_->eos_id(), fixture_["eos_id"].get<int32_t>());
  EXPECT_EQ(tokenizer_->unk_id(), fixture_["unk_id"].get<int32_t>());
  EXPECT_EQ(tokenizer_->pad_id(), -1);
  EXPECT_EQ(tokenizer_->eos_ids(), std::vector<int32_t>{tokenizer_->eos_id()});
  EXPECT_TRUE(tokenizer_->is_special(tokenizer_->bos_id()));
  EXPECT_EQ(tokenizer_->id_to_piece(tokenizer_->bos_id()), "<s>");
  EXPECT_EQ(tokenizer_->piece_to_id("</s>"), tokenizer_->eos_id());
  EXPECT_EQ(tokenizer_->piece_to_id("no such piece"), std::nullopt);
}

TEST_P(SentencePieceTest, EncodesAsSentencePiece) {
  ASSERT_GE(fixture_["cases"].size(), 25u);
  for (const auto& c : fixture_["cases"]) {
    std::string text = c["text"];
    SCOPED_TRACE("text: \"" + text + "\"");
    EXPECT_EQ(tokenizer_->encode(text), ids_of(c["ids"]));
    std::vector<int32_t> raw =
        tokenizer_->encode(text, {.add_special = false, .parse_special = false});
    EXPECT_EQ(raw, ids_of(c["ids_raw"]));
    std::vector<std::string> pieces;
    for (int32_t id : raw) pieces.push_back(tokenizer_->id_to_piece(id));
    EXPECT_EQ(pieces, c["pieces"].get<std::vector<std::string>>());
  }
}

TEST_P(SentencePieceTest, DecodesAsSentencePiece) {
  for (const auto& c : fixture_["cases"]) {
    SCOPED_TRACE("text: \"" + c["text"].get<std::string>() + "\"");
    EXPECT_EQ(tokenizer_->decode(ids_of(c["ids"])), c["decoded"].get<std::string>());
  }
  // Random ids: byte pieces that are not UTF-8, control pieces, <unk>, leading "▁" pieces.
  ASSERT_EQ(fixture_["random_decode"].size(), 30u);
  for (const auto& r : fixture_["random_decode"])
    EXPECT_EQ(tokenizer_->decode(ids_of(r["ids"])), r["text"].get<std::string>())
        << r["ids"].dump();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SentencePieceTest, ::testing::ValuesIn(kSpTokenizers));

}  // namespace
}  // namespace zenith::text
