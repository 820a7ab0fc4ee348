// The built-in chat templates render what the well-known Jinja templates render (Jinja2's output
// in expected_chat.json, from make_chat_fixtures.py), and split answers from prompts.
#include <gtest/gtest.h>

#include "text/fixture.h"
#include "zenith/error.h"

namespace zenith::text {
namespace {

using testing::error_of;
using testing::load_text_fixture;
using testing::text_fixture;

std::vector<ChatMessage> messages_of(const nlohmann::json& j) {
  std::vector<ChatMessage> messages;
  for (const auto& m : j) messages.push_back({m["role"], m["content"]});
  return messages;
}

TEST(ChatTemplate, RendersAsJinja) {
  nlohmann::json fixture = load_text_fixture("expected_chat.json");
  ASSERT_EQ(fixture["cases"].size(), 32u);
  for (const auto& c : fixture["cases"]) {
    std::string name = c["template"];
    const auto& t = fixture["templates"][name];
    ChatTemplate chat = ChatTemplate::recognise(t["jinja"], t["bos_token"], t["eos_token"]);
    EXPECT_EQ(chat.name(), name);
    EXPECT_EQ(chat.render(messages_of(c["messages"]), c["add_generation_prompt"]),
              c["text"].get<std::string>())
        << name << " " << c["messages"].dump();
  }
}

TEST(ChatTemplate, NamesAndErrors) {
  EXPECT_EQ(ChatTemplate::names(),
            (std::vector<std::string>{"llama-2", "llama-3", "chatml", "alpaca"}));
  EXPECT_EQ(ChatTemplate::by_name("chatml", "", "<|im_end|>").name(), "chatml");
  EXPECT_EQ(error_of([] { ChatTemplate::by_name("vicuna", "<s>", "</s>"); }),
            "[chat] unknown chat template \"vicuna\" (known: llama-2, llama-3, chatml, alpaca)");
  EXPECT_NE(error_of([] {
              ChatTemplate::recognise("{{ messages }}", "", "");
            }).find("none of the known formats (llama-2, llama-3, chatml, alpaca"),
            std::string::npos);
  std::vector<ChatMessage> bad = {{"user", "a"}, {"user", "b"}};
  EXPECT_NE(error_of([&] {
              ChatTemplate::by_name("llama-2", "<s>", "</s>").render(bad, false);
            }).find("roles must alternate user/assistant"),
            std::string::npos);
  std::vector<ChatMessage> tool = {{"tool", "x"}};
  EXPECT_EQ(error_of([&] { ChatTemplate::by_name("alpaca", "", "</s>").render(tool, false); }),
            "[chat] alpaca: message 0 has role \"tool\" (expected system, user or assistant)");
}

TEST(ChatTemplate, FromTokenizerConfig) {
  for (auto [dir, name] : {std::pair{"llama3_bpe", "llama-3"},
                           {"qwen2_bpe", "chatml"},
                           {"llama2_hf", "llama-2"},
                           {"sp_bpe", "alpaca"}}) {
    auto tokenizer = Tokenizer::from_dir(text_fixture(dir));
    EXPECT_EQ(ChatTemplate::for_tokenizer(*tokenizer).name(), name) << dir;
    EXPECT_EQ(ChatTemplate::for_tokenizer(*tokenizer, "chatml").name(), "chatml");
  }
  auto gpt2 = Tokenizer::from_dir(text_fixture("gpt2_bpe"));
  EXPECT_EQ(error_of([&] { ChatTemplate::for_tokenizer(*gpt2); }),
            "[chat] " + text_fixture("gpt2_bpe") +
                " has no chat_template in tokenizer_config.json; pass a template name (llama-2, "
                "llama-3, chatml, alpaca)");
}

const std::vector<ChatMessage> kConversation = {{"system", "Be kind."},
                                                {"user", "Hi"},
                                                {"assistant", "Hello! How can I help?"},
                                                {"user", "Tell me a joke."},
                                                {"assistant", "Why did the chicken cross?"}};

TEST(ChatTemplate, AnswerSegments) {
  auto llama3 = ChatTemplate::by_name("llama-3", "<|begin_of_text|>", "<|eot_id|>");
  std::vector<std::string> answers;
  for (const ChatSegment& s : llama3.render_segments(kConversation, false))
    if (s.answer) answers.push_back(s.text);
  EXPECT_EQ(answers, (std::vector<std::string>{"Hello! How can I help?<|eot_id|>",
                                               "Why did the chicken cross?<|eot_id|>"}));
  auto llama2 = ChatTemplate::by_name("llama-2", "<s>", "</s>");
  std::vector<ChatSegment> segments = llama2.render_segments(kConversation, false);
  ASSERT_EQ(segments.size(), 4u);
  EXPECT_EQ(segments[0].text, "<s>[INST] <<SYS>>\nBe kind.\n<</SYS>>\n\nHi [/INST]");
  EXPECT_EQ(segments[1].text, " Hello! How can I help? </s>");
  EXPECT_TRUE(segments[1].answer);
  EXPECT_FALSE(segments[2].answer);
}

// encode_chat: the whole conversation encoded once; answer tokens decode to the answers.
TEST(ChatTemplate, EncodeChat) {
  for (const std::string dir : {"llama3_bpe", "qwen2_bpe", "llama2_hf", "sp_bpe"}) {
    auto tokenizer = Tokenizer::from_dir(text_fixture(dir));
    ChatTemplate chat = ChatTemplate::for_tokenizer(*tokenizer);
    ChatEncoding e = encode_chat(*tokenizer, chat, kConversation, false);
    EXPECT_EQ(e.ids, tokenizer->encode(chat.render(kConversation, false), false)) << dir;
    ASSERT_EQ(e.answer.size(), e.ids.size());
    std::vector<int32_t> answer_ids;
    for (size_t i = 0; i < e.ids.size(); ++i)
      if (e.answer[i]) answer_ids.push_back(e.ids[i]);
    std::string answers = tokenizer->decode(answer_ids);
    EXPECT_NE(answers.find("Hello! How can I help?"), std::string::npos) << dir << ": " << answers;
    EXPECT_NE(answers.find("Why did the chicken cross?"), std::string::npos) << dir;
    EXPECT_EQ(answers.find("Tell me a joke"), std::string::npos) << dir;
    EXPECT_EQ(answers.find("Be kind"), std::string::npos) << dir;
    if (dir == "llama3_bpe") {
      EXPECT_EQ(answers, "Hello! How can I help?<|eot_id|>Why did the chicken cross?<|eot_id|>");
    }
    // Each answer ends with the end-of-turn token (eos), which is trained on.
    EXPECT_EQ(std::count_if(answer_ids.begin(), answer_ids.end(),
                            [&](int32_t id) { return tokenizer->is_eos(id); }),
              2)
        << dir;
    EXPECT_TRUE(tokenizer->is_eos(answer_ids.back())) << dir;
  }
}

}  // namespace
}  // namespace zenith::text
