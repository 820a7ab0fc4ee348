// Loading a LLaMA model with its linear layers quantized as their weights are read
// (src/models/llama_quant.cpp): QLoRA's base never exists whole in float.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "zenith/llama.h"
#include "zenith/quant.h"

namespace zenith::models {

// Llama::from_pretrained(dir, dtype) with every linear layer Llama::quantize(format) would take
// held as blocks: each weight is read, quantized and dropped before the next is read, so the
// peak is the blocks plus one float weight (the embedding and norms in `dtype`, or the file's).
// A GGUF file loads whole and is quantized after. An empty `format` is from_pretrained.
std::shared_ptr<Llama> load_quantizing(const std::string& dir, const std::string& format,
                                       std::optional<DType> dtype = std::nullopt);

// The allocator's cached blocks and glibc's free pages back to the system (after a load).
void release_free_memory();

}  // namespace zenith::models
