// Cell base: registration of parameters, buffers and children; dotted names; train/eval;
// state_dict / load_state_dict; repr. SequentialCell.
#include <algorithm>
#include <set>
#include <sstream>

#include "nn/state_match.h"
#include "zenith/autograd.h"
#include "zenith/nn.h"

namespace zenith::nn {
namespace {

using Named = std::vector<std::pair<std::string, Tensor>>;

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// Visits (prefix, cell) depth-first in registration order, the cell itself first.
template <typename F>
void walk(const Cell& cell, const std::string& prefix, F&& f) {
  f(prefix, cell);
  for (auto& [name, child] : cell.named_children()) walk(*child, join(prefix, name), f);
}

void check_name(const std::string& name, const char* what) {
  ZENITH_CHECK(!name.empty() && name.find('.') == std::string::npos, "[Cell] ", what, " name '",
               name, "' must be non-empty and contain no '.'");
}

}  // namespace

// ---- registration

Tensor Cell::register_parameter(const std::string& name, Tensor value, bool trainable) {
  check_name(name, "parameter");
  ZENITH_CHECK(value.defined(), "[Cell] parameter '", name, "' is undefined");
  for (auto& [n, _] : params_)
    ZENITH_CHECK(n != name, "[Cell] parameter '", name, "' registered twice");
  // A parameter is a leaf: cut any history the initial value may carry.
  Tensor leaf = value.is_leaf() ? value : value.detach();
  leaf.requires_grad_(trainable);
  params_.emplace_back(name, leaf);
  return leaf;
}

Tensor Cell::register_buffer(const std::string& name, Tensor value) {
  check_name(name, "buffer");
  for (auto& [n, _] : buffers_)
    ZENITH_CHECK(n != name, "[Cell] buffer '", name, "' registered twice");
  buffers_.emplace_back(name, value.detach());
  return buffers_.back().second;
}

void Cell::unregister_cell(const std::string& name) {
  auto it = std::find_if(children_.begin(), children_.end(),
                         [&](const auto& c) { return c.first == name; });
  ZENITH_CHECK(it != children_.end(), "[", type_name(), "] has no child '", name, "'");
  children_.erase(it);
}

Tensor& Cell::param(const std::string& name) {
  for (auto& [n, t] : params_)
    if (n == name) return t;
  ZENITH_FAIL("[", type_name(), "] has no parameter '", name, "'");
}

Tensor& Cell::buffer(const std::string& name) {
  for (auto& [n, t] : buffers_)
    if (n == name) return t;
  ZENITH_FAIL("[", type_name(), "] has no buffer '", name, "'");
}

Tensor Cell::set_parameter(const std::string& name, Tensor value, bool trainable) {
  for (auto& [n, t] : params_) {
    if (n != name) continue;
    ZENITH_CHECK(value.defined(), "[Cell] parameter '", name, "' is undefined");
    t = value.is_leaf() ? value : value.detach();
    t.requires_grad_(trainable);
    return t;
  }
  return register_parameter(name, std::move(value), trainable);
}

void Cell::set_cell(const std::string& name, CellPtr cell) {
  check_name(name, "cell");
  ZENITH_CHECK(cell != nullptr, "[Cell] cell '", name, "' is null");
  ZENITH_CHECK(cell.get() != this, "[Cell] cell '", name, "' is the cell itself");
  for (auto& [n, c] : children_)
    if (n == name) {
      c = std::move(cell);
      return;
    }
  children_.emplace_back(name, std::move(cell));
}

bool Cell::remove_entry(const std::string& name) {
  auto drop = [&](auto& entries) {
    auto it = std::find_if(entries.begin(), entries.end(),
                           [&](const auto& e) { return e.first == name; });
    if (it == entries.end()) return false;
    entries.erase(it);
    return true;
  };
  return drop(params_) || drop(buffers_) || drop(children_);
}

// ---- queries

std::vector<std::pair<std::string, Tensor>> Cell::named_parameters() const {
  Named out;
  walk(*this, "", [&](const std::string& prefix, const Cell& c) {
    for (auto& [n, t] : c.params_) out.emplace_back(join(prefix, n), t);
  });
  return out;
}

std::vector<std::pair<std::string, Tensor>> Cell::named_buffers() const {
  Named out;
  walk(*this, "", [&](const std::string& prefix, const Cell& c) {
    for (auto& [n, t] : c.buffers_) out.emplace_back(join(prefix, n), t);
  });
  return out;
}

std::vector<Tensor> Cell::parameters() const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<Tensor> Cell::trainable_params() const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters())
    if (t.requires_grad()) out.push_back(t);
  return out;
}

int64_t Cell::num_parameters(bool trainable_only) const {
  int64_t n = 0;
  for (auto& [_, t] : named_parameters())
    if (!trainable_only || t.requires_grad()) n += t.numel();
  return n;
}

void Cell::set_train(bool mode) {
  training_ = mode;
  for (auto& [_, child] : children_) child->set_train(mode);
}

void Cell::to(DType dtype) {
  NoGradGuard no_grad;
  auto convert = [dtype](Tensor& t) {
    if (!is_floating(t.dtype()) || t.dtype() == dtype) return;
    Tensor c = t.to(dtype).contiguous();
    // Swap the data under the existing handle so shared handles follow.
    TensorImpl& impl = t.impl();
    impl.storage = c.storage();
    impl.strides = c.strides();
    impl.offset = c.offset();
    impl.dtype = dtype;
    impl.layout = nullptr;
    impl.grad = nullptr;
  };
  for (auto& [_, t] : params_) convert(t);
  for (auto& [_, t] : buffers_) convert(t);
  for (auto& [_, child] : children_) child->to(dtype);
}

// ---- state dicts

StateDict Cell::state_dict() const {
  StateDict out;
  walk(*this, "", [&](const std::string& prefix, const Cell& c) {
    for (auto& [n, t] : c.params_) out.emplace(join(prefix, n), t.detach());
    for (auto& [n, t] : c.buffers_) out.emplace(join(prefix, n), t.detach());
  });
  return out;
}

void Cell::load_state_dict(const StateDict& state, bool strict) {
  Named own = named_parameters();
  Named bufs = named_buffers();
  own.insert(own.end(), bufs.begin(), bufs.end());

  detail::StateMatch match(state, "model");
  for (auto& [name, t] : own) match.expect(name, t.shape());
  match.check("[load_state_dict] " + type_name() + ": state does not match the model", strict);

  NoGradGuard no_grad;
  for (auto& [name, t] : own) {
    auto it = state.find(name);
    if (it == state.end()) continue;
    Tensor dst = t;  // handle copy shares the storage
    dst.copy_(it->second);
  }
}

// ---- repr

std::string Cell::repr(int indent) const {
  std::ostringstream os;
  os << type_name() << "(" << extra_repr();
  if (!children_.empty()) {
    std::string pad(size_t(indent + 2), ' ');
    os << "\n";
    for (auto& [name, child] : children_)
      os << pad << "(" << name << "): " << child->repr(indent + 2) << "\n";
    os << std::string(size_t(indent), ' ');
  }
  os << ")";
  return os.str();
}

// ---- SequentialCell

SequentialCellImpl::SequentialCellImpl(std::vector<CellPtr> cells) {
  for (auto& c : cells) append(std::move(c));
}

void SequentialCellImpl::append(CellPtr cell) {
  ZENITH_CHECK(cell != nullptr, "[SequentialCell] cell ", size(), " is null");
  register_cell(std::to_string(size()), std::move(cell));
}

// ReLU followed by MaxPool2d runs as max pooling then ReLU: relu is monotone, so
// relu(max(window)) == max(relu(window)) and the gradient reaches the same element (a window
// whose maximum is <= 0 gets no gradient either way), while the relu and its backward touch a
// tensor kernel_size^2 times smaller.
Tensor SequentialCellImpl::forward(const Tensor& x) {
  const auto& cells = named_children();
  Tensor y = x;
  for (size_t i = 0; i < cells.size(); ++i) {
    const CellPtr& cell = cells[i].second;
    if (i + 1 < cells.size() && cell->type_name() == "ReLU" &&
        cells[i + 1].second->type_name() == "MaxPool2d") {
      y = cell->forward(cells[i + 1].second->forward(y));
      ++i;
      continue;
    }
    y = cell->forward(y);
  }
  return y;
}

std::shared_ptr<SequentialCellImpl> SequentialCell(std::vector<CellPtr> cells) {
  return std::make_shared<SequentialCellImpl>(std::move(cells));
}

}  // namespace zenith::nn
