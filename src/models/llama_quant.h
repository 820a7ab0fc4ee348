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

// Readies a model for inference only (generate, perplexity, serve): each quantized weight whose
// format this CPU's kernels read interleaved (core/quant_x8.h: q4_0, q8_0 and q4_k on AVX2 and
// AVX-512 VNNI) is converted to that layout and its GGML blocks freed, so the process holds the
// weight once (the kernels would otherwise keep an interleaved copy beside the blocks). Exports
// (save_gguf, save_quantized) still write GGML's bytes, unpacked bit for bit. Not for a model
// that will train: the backward pass would unpack the weight at every step. Returns the bytes
// converted.
int64_t pack_for_inference(Llama& model);

}  // namespace zenith::models
