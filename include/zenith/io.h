// Files: safetensors (checkpoints, fixtures) and the TensorBoard event writer.
#pragma once

#include <map>
#include <string>

#include "zenith/tensor.h"

namespace zenith::io {

using Metadata = std::map<std::string, std::string>;

// safetensors: 8-byte little-endian header size, JSON header, raw little-endian data.
// Written to a temporary file, fsynced, then renamed: never half-written.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const Metadata& metadata = {});
// Errors name the file and what is wrong (bad header, truncated data, offsets out of range).
std::map<std::string, Tensor> load_safetensors(const std::string& path,
                                               Metadata* metadata = nullptr);

}  // namespace zenith::io
