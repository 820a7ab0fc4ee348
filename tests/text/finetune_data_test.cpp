// Fine-tuning data (zenith/finetune_data.h) with the demo model's SentencePiece tokenizer:
// each JSONL format (TRL's prompt/completion too), prompt masking, the learned eos, truncation, and
// the errors.
#include "zenith/finetune_data.h"

#include <gtest/gtest.h>

#include <fstream>

#include "support/temp_dir.h"
#include "zenith/finetune.h"

namespace zenith::testing {
namespace {

using finetune::Data;
using finetune::DataOptions;

const text::Tokenizer& demo_tokenizer() {
  static auto tokenizer =
      text::Tokenizer::from_dir(std::string(ZENITH_SOURCE_DIR) + "/examples/llm/demo-llama");
  return *tokenizer;
}

class FinetuneData : public ::testing::Test {
 protected:
  Data load(const std::string& lines, DataOptions options = {}) {
    std::ofstream(dir_ / "data.jsonl") << lines;
    return finetune::load_data(dir_ / "data.jsonl", &demo_tokenizer(), options);
  }
  std::string error(const std::string& lines, DataOptions options = {}) {
    try {
      load(lines, options);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }
  TempDir dir_{"finetune_data"};
};

DataOptions with(int64_t max_seq_len, int64_t vocab_size = 0, bool train_on_prompt = false) {
  DataOptions o;
  o.max_seq_len = max_seq_len;
  o.vocab_size = vocab_size;
  o.train_on_prompt = train_on_prompt;
  return o;
}

// The ids' positions whose label is learned.
std::vector<size_t> learned(const finetune::Example& e) {
  std::vector<size_t> out;
  for (size_t i = 0; i < e.labels.size(); ++i)
    if (e.labels[i] != -100) out.push_back(i);
  return out;
}

TEST_F(FinetuneData, AlpacaLearnsTheAnswerAndItsEos) {
  const auto& tok = demo_tokenizer();
  Data d = load(R"({"instruction": "Name a colour.", "input": "", "output": "Blue sky"})"
                "\n");
  ASSERT_EQ(d.examples.size(), 1u);
  EXPECT_EQ(d.formats.at("alpaca"), 1);
  const finetune::Example& e = d.examples[0];
  ASSERT_EQ(e.ids.size(), e.labels.size());
  // The prompt is the alpaca rendering; the learned tokens are the answer and the eos ending it.
  EXPECT_EQ(e.ids.back(), tok.eos_id());
  EXPECT_EQ(e.labels.back(), tok.eos_id());
  std::vector<size_t> on = learned(e);
  ASSERT_FALSE(on.empty());
  std::vector<int32_t> answer(e.ids.begin() + int64_t(on.front()), e.ids.end());
  EXPECT_EQ(tok.decode(answer, true), "Blue sky");
  for (size_t i = on.front(); i < e.ids.size(); ++i) EXPECT_EQ(e.labels[i], e.ids[i]) << i;
  std::vector<int32_t> prompt(e.ids.begin(), e.ids.begin() + int64_t(on.front()));
  EXPECT_NE(tok.decode(prompt, true).find("### Instruction:\nName a colour."), std::string::npos);
  EXPECT_NE(tok.decode(prompt, true).find("### Response:"), std::string::npos);

  // --train-on-prompt learns every token.
  Data all = load(R"({"instruction": "Name a colour.", "output": "Blue sky"})"
                  "\n",
                  with(512, 0, true));
  EXPECT_EQ(all.examples[0].labels, all.examples[0].ids);
}

TEST_F(FinetuneData, AlpacaInputIsItsOwnSection) {
  Data d = load(R"({"instruction": "Translate.", "input": "chat", "output": "cat"})"
                "\n");
  const auto& e = d.examples[0];
  std::vector<int32_t> ids(e.ids.begin(), e.ids.end());
  EXPECT_NE(demo_tokenizer().decode(ids, true).find("Translate.\n\n### Input:\nchat"),
            std::string::npos);
}

TEST_F(FinetuneData, ChatLearnsTheAssistantTurns) {
  const auto& tok = demo_tokenizer();
  Data d = load(
      R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello there"}]})"
      "\n",
      DataOptions{.chat_template = "chatml", .vocab_size = 0});
  EXPECT_EQ(d.formats.at("chat"), 1);
  const auto& e = d.examples[0];
  std::vector<size_t> on = learned(e);
  ASSERT_FALSE(on.empty());
  std::vector<int32_t> answer, prompt;
  for (size_t i = 0; i < e.ids.size(); ++i)
    (e.labels[i] != -100 ? answer : prompt).push_back(int32_t(e.ids[i]));
  EXPECT_NE(tok.decode(answer).find("Hello there"), std::string::npos);
  EXPECT_EQ(tok.decode(prompt).find("Hello there"), std::string::npos);
  EXPECT_NE(tok.decode(prompt).find("Hi"), std::string::npos);
  EXPECT_EQ(e.labels.back(), tok.eos_id()) << "the answer ends with a learned eos";
}

TEST_F(FinetuneData, TextIsBosTextEosAllLearned) {
  const auto& tok = demo_tokenizer();
  Data d = load(R"({"text": "Once upon a time"})"
                "\n");
  const auto& e = d.examples[0];
  EXPECT_EQ(e.ids.front(), tok.bos_id());
  EXPECT_EQ(e.ids.back(), tok.eos_id());
  EXPECT_EQ(e.labels, e.ids);
}

TEST_F(FinetuneData, PromptCompletionLearnsOnlyTheCompletionAndItsEos) {
  const auto& tok = demo_tokenizer();
  Data d = load(R"({"prompt": "The capital of France is", "completion": " Paris."})"
                "\n");
  EXPECT_EQ(d.formats.at("prompt_completion"), 1);
  const auto& e = d.examples[0];
  ASSERT_EQ(e.ids.size(), e.labels.size());
  // TRL's SFTTrainer: prompt + completion encoded as one text, the prompt's tokens masked.
  std::vector<int64_t> whole = {};
  for (int32_t id : tok.encode("The capital of France is Paris.")) whole.push_back(id);
  whole.push_back(tok.eos_id());
  EXPECT_EQ(e.ids, whole);
  const size_t prompt_len = tok.encode("The capital of France is").size();
  for (size_t i = 0; i < e.ids.size(); ++i)
    EXPECT_EQ(e.labels[i], i < prompt_len ? -100 : e.ids[i]) << i;
  std::vector<int32_t> completion(e.ids.begin() + int64_t(prompt_len), e.ids.end());
  EXPECT_EQ(tok.decode(completion, true), "Paris.");
  EXPECT_EQ(e.labels.back(), tok.eos_id());

  // --train-on-prompt learns the prompt too; a conversational record goes through the template.
  Data all = load(R"({"prompt": "The capital of France is", "completion": " Paris."})"
                  "\n",
                  with(512, 0, true));
  EXPECT_EQ(all.examples[0].labels, all.examples[0].ids);
  Data chat = load(
      R"({"prompt": [{"role": "user", "content": "Hi"}], "completion": [{"role": "assistant", "content": "Hello there"}]})"
      "\n",
      DataOptions{.chat_template = "chatml", .vocab_size = 0});
  std::vector<int32_t> answer, prompt;
  for (size_t i = 0; i < chat.examples[0].ids.size(); ++i)
    (chat.examples[0].labels[i] != -100 ? answer : prompt)
        .push_back(int32_t(chat.examples[0].ids[i]));
  EXPECT_NE(tok.decode(answer).find("Hello there"), std::string::npos);
  EXPECT_EQ(tok.decode(prompt).find("Hello there"), std::string::npos);
  EXPECT_NE(tok.decode(prompt).find("Hi"), std::string::npos);
  EXPECT_NE(error(R"({"prompt": "x", "completion": ""})"
                  "\n")
                .find("data.jsonl:1: \"completion\" is empty"),
            std::string::npos);
}

TEST_F(FinetuneData, PreTokenizedKeepsItsLabels) {
  Data d = load(
      "{\"input_ids\": [1, 5, 6, 7], \"labels\": [-100, -100, 6, 7]}\n"
      "{\"input_ids\": [1, 9, 10]}\n",
      with(512, 2000));
  ASSERT_EQ(d.examples.size(), 2u);
  EXPECT_EQ(d.formats.at("tokenized"), 2);
  EXPECT_EQ(d.examples[0].labels, (std::vector<int64_t>{-100, -100, 6, 7}));
  EXPECT_EQ(d.examples[1].labels, (std::vector<int64_t>{1, 9, 10}));
  // Pre-tokenized data needs no tokenizer.
  std::ofstream(dir_ / "ids.jsonl") << "{\"input_ids\": [1, 2, 3]}\n";
  EXPECT_EQ(finetune::load_data(dir_ / "ids.jsonl", nullptr, {}).examples.size(), 1u);
}

TEST_F(FinetuneData, LongSequencesAreTruncatedAndCounted) {
  Data d = load(
      "{\"input_ids\": [1, 2, 3, 4, 5, 6, 7, 8]}\n"
      "{\"input_ids\": [1, 2, 3]}\n"
      "{\"input_ids\": [1, 2, 3, 4, 5, 6], \"labels\": [-100, -100, -100, -100, 5, 6]}\n",
      with(4));
  EXPECT_EQ(d.truncated, 2);
  EXPECT_EQ(d.skipped, 1) << "the third has no learned token left";
  ASSERT_EQ(d.examples.size(), 2u);
  EXPECT_EQ(d.examples[0].ids, (std::vector<int64_t>{1, 2, 3, 4}));
}

TEST_F(FinetuneData, EveryMalformedLineIsReportedWithItsNumber) {
  const std::string e = error(
      "{\"text\": \"fine\"}\n"
      "{\"input_ids\": [1, 2], \"labels\": [1]}\n"
      "\n"
      "not json\n"
      "{\"prompt\": \"x\"}\n"
      "{\"instruction\": \"x\"}\n"
      "{\"input_ids\": [1, 99999]}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"only a question\"}]}\n"
      "{\"question\": \"x\"}\n",
      with(512, 2000));
  EXPECT_NE(e.find("7 malformed lines"), std::string::npos) << e;
  EXPECT_NE(e.find("data.jsonl:2: \"labels\" has 1 entries, \"input_ids\" 2"), std::string::npos)
      << e;
  EXPECT_NE(e.find("data.jsonl:4: not JSON"), std::string::npos) << e;
  EXPECT_NE(e.find("data.jsonl:5: a \"prompt\" record needs a \"completion\""), std::string::npos)
      << e;
  EXPECT_NE(e.find("data.jsonl:6: missing \"output\""), std::string::npos) << e;
  EXPECT_NE(e.find("data.jsonl:7: \"input_ids\"[1] = 99999 is outside the vocabulary [0, 2000)"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("data.jsonl:8: the conversation must end with an assistant message"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("data.jsonl:9: no known format: expected \"instruction\"/\"output\" "
                   "(Alpaca), \"messages\" (chat), \"prompt\"/\"completion\" (TRL)"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find("data.jsonl:1:"), std::string::npos) << e;
}

TEST_F(FinetuneData, EmptyOrAllTooLongDataIsAnError) {
  EXPECT_NE(error("\n\n").find("has no records"), std::string::npos);
  const std::string e =
      error("{\"input_ids\": [1, 2, 3, 4], \"labels\": [-100, -100, -100, 4]}\n", with(3));
  EXPECT_NE(e.find("none of its 1 records has a learned token within --max-seq-len 3"),
            std::string::npos)
      << e;
  EXPECT_NE(error("{\"text\": \"x\"}\n", with(1)).find("at least 2"), std::string::npos);
  EXPECT_NE(error("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": "
                  "\"assistant\", \"content\": \"b\"}]}\n",
                  DataOptions{.chat_template = "vicuna", .vocab_size = 0})
                .find("unknown chat template \"vicuna\""),
            std::string::npos);
}

// Padding: to the longest, ids pad_id, mask 0, labels -100; eos stays learned where pad == eos.
TEST(FinetuneCollate, PadsToTheLongestAndNeverLearnsPadding) {
  const int64_t eos = 2;
  finetune::Example a{{1, 5, eos}, {-100, 5, eos}}, b{{1, 7, 8, 9, eos}, {1, 7, 8, 9, eos}};
  finetune::Batch batch = finetune::collate({&a, &b}, /*pad_id=*/eos);
  EXPECT_EQ(batch.input_ids.shape(), (Shape{2, 5}));
  EXPECT_EQ(batch.input_ids.to_int_vector(),
            (std::vector<int64_t>{1, 5, eos, eos, eos, 1, 7, 8, 9, eos}));
  EXPECT_EQ(batch.attention_mask.to_int_vector(),
            (std::vector<int64_t>{1, 1, 1, 0, 0, 1, 1, 1, 1, 1}));
  EXPECT_EQ(batch.labels.to_int_vector(),
            (std::vector<int64_t>{-100, 5, eos, -100, -100, 1, 7, 8, 9, eos}));
  EXPECT_EQ(batch.tokens, 8);
  EXPECT_EQ(batch.targets, 2 + 4);  // labels at positions >= 1 that are learned
}

// pad_to_multiple_of: the longest rounded up to the multiple, capped at max_len but never below
// the longest; the padding as above, the counts of real tokens and targets unchanged.
TEST(FinetuneCollate, PadsToAMultipleCappedAtTheMaximumLength) {
  const int64_t pad = 0;
  finetune::Example a{{1, 5, 6}, {-100, 5, 6}}, b{{1, 7, 8, 9, 2}, {1, 7, 8, 9, 2}};
  auto shape = [&](int64_t multiple, int64_t max_len) {
    return finetune::collate({&a, &b}, pad, multiple, max_len).input_ids.shape();
  };
  EXPECT_EQ(shape(1, 0), (Shape{2, 5}));
  EXPECT_EQ(shape(4, 0), (Shape{2, 8}));
  EXPECT_EQ(shape(5, 0), (Shape{2, 5}));
  EXPECT_EQ(shape(64, 0), (Shape{2, 64}));
  EXPECT_EQ(shape(4, 6), (Shape{2, 6})) << "capped at max_len";
  EXPECT_EQ(shape(4, 3), (Shape{2, 5})) << "never below the longest";
  finetune::Batch batch = finetune::collate({&a, &b}, pad, 4);
  EXPECT_EQ(batch.input_ids.to_int_vector(),
            (std::vector<int64_t>{1, 5, 6, 0, 0, 0, 0, 0, 1, 7, 8, 9, 2, 0, 0, 0}));
  EXPECT_EQ(batch.attention_mask.to_int_vector(),
            (std::vector<int64_t>{1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(batch.labels.to_int_vector(),
            (std::vector<int64_t>{-100, 5, 6, -100, -100, -100, -100, -100, 1, 7, 8, 9, 2, -100,
                                  -100, -100}));
  EXPECT_EQ(batch.tokens, 8);
  EXPECT_EQ(batch.targets, 2 + 4);
  // Graph mode's default multiple: at most 8 lengths up to max_seq_len, and at least 64.
  EXPECT_EQ(finetune::graph_pad_multiple(100), 64);
  EXPECT_EQ(finetune::graph_pad_multiple(512), 64);
  EXPECT_EQ(finetune::graph_pad_multiple(600), 128);
  EXPECT_EQ(finetune::graph_pad_multiple(2048), 256);
  try {
    finetune::collate({&a}, pad, 0);
    ADD_FAILURE() << "multiple 0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pad_to_multiple_of must be at least 1, got 0"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace zenith::testing
