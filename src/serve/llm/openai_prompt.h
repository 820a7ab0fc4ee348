// A request's prompt as token ids: chat messages through the model's chat template (tool
// results and calls written as text the template accepts), or a completion's text or ids; and
// the number of new tokens it may have within the model's context.
#pragma once

#include <cstdint>
#include <vector>

#include "serve/llm/openai_request.h"
#include "zenith/text.h"

namespace zenith::serve::llm {

// The prompts' ids: chat, the one conversation (chat_template: the model's, null when it has
// none); completions, one per prompt. Throws ApiError naming the field: a message or prompt made
// only of special tokens, a token id outside the vocabulary, a conversation the template cannot
// write.
std::vector<std::vector<int64_t>> prompt_ids(const Request& request,
                                             const text::Tokenizer& tokenizer,
                                             const text::ChatTemplate* chat_template,
                                             int64_t vocab_size);

// The new tokens the request gets: max_tokens, or (when not given) what the context leaves.
// Throws ApiError 400 naming both numbers when prompt + max_tokens exceeds `context`.
int64_t completion_budget(const Request& request, int64_t prompt_tokens, int64_t context);

}  // namespace zenith::serve::llm
