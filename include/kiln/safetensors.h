// Reading safetensors files (Hugging Face's checkpoint format) without a copy.
#pragma once

#include <map>
#include <string>

#include "kiln/tensor.h"

namespace kiln {

// A safetensors file mapped into memory (copy-on-write: writing to a tensor never
// touches the file). The tensors are CPU views of the mapping, which stays alive
// while any of them does; a tensor whose bytes are not aligned for its dtype is
// copied instead. Every offset, size, dtype and shape in the header is checked
// against the file before any tensor is made; errors name the file and tensor.
struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__"
};

SafetensorsFile load_safetensors(const std::string& path);

// The weights of a Hugging Face model folder: model.safetensors, or the shards
// named by model.safetensors.index.json (each shard read once; every name of the
// index's weight_map must be in the shard it names, and no name in two shards).
SafetensorsFile load_checkpoint(const std::string& folder);

}  // namespace kiln
