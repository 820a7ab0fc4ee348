// What the LLM commands (generate, perplexity, merge-adapter) share: token-id lists on the
// command line, a model directory with an optional adapter, its tokenizer where it has one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "zenith/llama.h"
#include "zenith/text.h"

namespace zenith::cli {

// "1,2,3" (spaces allowed) -> ids; errors name `flag` and the bad item.
std::vector<int64_t> parse_id_list(const std::string& text, const std::string& flag);

// The model of an HF directory, with the PEFT adapter of `adapter_dir` applied unmerged when
// given.
std::shared_ptr<models::Llama> load_llama(const std::string& model_dir,
                                          const std::string& adapter_dir);

std::vector<int64_t> to_int64(const std::vector<int32_t>& ids);

}  // namespace zenith::cli
