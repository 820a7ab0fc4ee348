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

// The model of an HF directory (or one `zenith quantize` wrote), with the PEFT adapter of
// `adapter_dir` applied unmerged when given. `dtype` (--dtype): "" keeps the file's types;
// f32, bf16, f16 convert the weights; q8_0, q4_0, q4_k quantize the linear layers' weights.
std::shared_ptr<models::Llama> load_llama(const std::string& model_dir,
                                          const std::string& adapter_dir,
                                          const std::string& dtype = "");
// What arithmetic load_llama's `dtype` runs in, for the commands' stderr ("" but for bf16):
// with --dtype bf16 on an AVX512_BF16 CPU the linear layers take bf16 products for more than 8
// rows (prefill, perplexity) and float32 arithmetic on the bf16 weights for decode.
std::string precision_note(const std::string& dtype);
// --dtype's help text, shared by the commands that take it.
extern const char* const kLoadDtypeHelp;

std::vector<int64_t> to_int64(const std::vector<int32_t>& ids);

}  // namespace zenith::cli
