// Fine-tuning data: JSONL records (Alpaca, chat, plain text, pre-tokenized) rendered with the
// model's tokenizer and chat template into ids and the labels the loss learns. The training loop
// is zenith/finetune.h (zenith::finetune::run); this part needs the tokenizer (zenith_text).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "zenith/text.h"

namespace zenith::finetune {

// One training sequence: ids and the labels the loss learns (-100: not learned), same length.
// Labels are not shifted: causal_lm_loss predicts labels[t + 1] from position t, as HF's.
struct Example {
  std::vector<int64_t> ids;
  std::vector<int64_t> labels;
};

struct DataOptions {
  int64_t max_seq_len = 512;     // longer sequences are truncated (and counted)
  bool train_on_prompt = false;  // learn the prompt tokens too, not only the answers
  // Chat records: this template, else the tokenizer's; Alpaca records: this, else "alpaca".
  std::string chat_template;
  int64_t vocab_size = 0;  // ids must be below it (0: unchecked)
};

struct Data {
  std::vector<Example> examples;
  int64_t lines = 0;      // non-blank lines read
  int64_t truncated = 0;  // examples cut to max_seq_len
  int64_t skipped = 0;    // examples without a learned token within max_seq_len (dropped)
  // "alpaca", "chat", "prompt_completion", "text", "tokenized": count
  std::map<std::string, int64_t> formats;
};

// FILE.jsonl, one record a line, each in one of the formats
//   {"instruction", "input"?, "output"}          Alpaca (the alpaca template: ### Instruction: ...)
//   {"messages": [{"role", "content"}, ...]}     chat, rendered with the chat template
//   {"prompt", "completion"}                     TRL's: strings encoded as one text, the
//                                                completion learned; message lists as chat
//   {"text"}                                     plain text: bos + text + eos, all learned
//   {"input_ids": [..], "labels"?: [..]}         pre-tokenized (labels -100 = not learned)
// Prompt tokens are masked out of the labels unless train_on_prompt; templated records end with
// an eos that is learned (appended where the template writes none). Every malformed line is
// reported with its number in one error; an empty file or one without a trainable example is an
// error. `tokenizer` may be null when every record is pre-tokenized.
Data load_data(const std::string& path, const text::Tokenizer* tokenizer,
               const DataOptions& options);

}  // namespace zenith::finetune
