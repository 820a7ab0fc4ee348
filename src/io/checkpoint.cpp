// Checkpoints: parameters and buffers by dotted name, optimizer state under "optimizer.",
// run metadata in __metadata__; one atomic safetensors write.
#include <sstream>

#include "zenith/io.h"
#include "zenith/optim.h"

namespace zenith::io {

namespace {

constexpr const char* kOptimizerPrefix = "optimizer.";

void list(std::ostringstream& os, const char* title, const std::vector<std::string>& items) {
  if (items.empty()) return;
  os << "\n  " << title << " (" << items.size() << "):";
  for (const auto& i : items) os << "\n    " << i;
}

}  // namespace

void save_checkpoint(const std::string& path, const nn::Cell& net, const nn::Optimizer* optimizer,
                     Metadata metadata) {
  std::map<std::string, Tensor> tensors;
  for (auto& [name, t] : net.state_dict()) tensors.emplace(name, t);
  if (optimizer)
    for (auto& [name, t] : optimizer->state_dict()) tensors.emplace(kOptimizerPrefix + name, t);
  metadata["format"] = "zenith-checkpoint";
  if (optimizer) metadata["optimizer"] = optimizer->type_name();
  save_safetensors(path, tensors, metadata);
}

Metadata load_checkpoint(const std::string& path, nn::Cell& net, nn::Optimizer* optimizer) {
  Metadata meta;
  auto tensors = load_safetensors(path, &meta);
  nn::StateDict model_state, optimizer_state;
  for (auto& [name, t] : tensors) {
    if (name.rfind(kOptimizerPrefix, 0) == 0)
      optimizer_state.emplace(name.substr(std::string(kOptimizerPrefix).size()), t);
    else
      model_state.emplace(name, t);
  }

  // Check everything before touching the model: a failed load leaves it as it was.
  std::vector<std::string> missing, unexpected, mismatched;
  auto own = net.state_dict();
  for (const auto& [name, t] : own) {
    auto it = model_state.find(name);
    if (it == model_state.end())
      missing.push_back(name + " " + shape_str(t.shape()));
    else if (it->second.shape() != t.shape())
      mismatched.push_back(name + ": checkpoint " + shape_str(it->second.shape()) + ", model " +
                           shape_str(t.shape()));
  }
  for (const auto& [name, t] : model_state)
    if (!own.count(name)) unexpected.push_back(name + " " + shape_str(t.shape()));
  if (!missing.empty() || !unexpected.empty() || !mismatched.empty()) {
    std::ostringstream os;
    os << "[checkpoint] " << path << " does not fit the model";
    if (meta.count("architecture")) os << " (the checkpoint is a '" << meta["architecture"] << "')";
    list(os, "missing from the checkpoint", missing);
    list(os, "not in the model", unexpected);
    list(os, "different shapes", mismatched);
    throw Error(os.str());
  }
  if (optimizer) {
    ZENITH_CHECK(!optimizer_state.empty(), "[checkpoint] ", path,
                 " holds no optimizer state (saved without an optimizer?)");
    try {
      optimizer->load_state_dict(optimizer_state);
    } catch (const Error& e) {
      ZENITH_FAIL("[checkpoint] ", path, ": ", e.what());
    }
  }
  net.load_state_dict(model_state);
  return meta;
}

}  // namespace zenith::io
