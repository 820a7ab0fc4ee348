// Cells (modules) with MindSpore names: parameters with dotted names, train/eval mode,
// state_dict / load_state_dict. Layers are made by factory functions returning shared pointers,
// so the seed's program reads the same:
//   auto net = nn::SequentialCell({nn::Conv2d(3, 32, 3, 1, "valid"), nn::ReLU(), ...});
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zenith/ops.h"
#include "zenith/tensor.h"

namespace zenith::nn {

class Cell;
using CellPtr = std::shared_ptr<Cell>;
using StateDict = std::map<std::string, Tensor>;

class Cell {
 public:
  virtual ~Cell() = default;
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }

  // Dotted names in registration order: "0.weight", "layer1.0.bn1.running_mean".
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  const std::vector<std::pair<std::string, CellPtr>>& named_children() const { return children_; }
  std::vector<Tensor> trainable_params() const;  // parameters with requires_grad
  std::vector<Tensor> parameters() const;
  int64_t num_parameters(bool trainable_only = false) const;  // total element count
  // Converts every floating parameter and buffer to `dtype` in place: tensor handles already
  // given out (e.g. to an optimizer) see the new data.
  void to(DType dtype);

  // Parameters and buffers by dotted name (tensors share storage with the cell).
  StateDict state_dict() const;
  // Copies values in; throws one error listing every missing, unexpected and mis-shaped name.
  void load_state_dict(const StateDict& state, bool strict = true);

  void set_train(bool mode = true);  // MindSpore's name; train()/eval() are the PyTorch ones
  void train(bool mode = true) { set_train(mode); }
  void eval() { set_train(false); }
  bool training() const { return training_; }

  virtual std::string type_name() const = 0;  // "Conv2d"
  virtual std::string extra_repr() const { return ""; }
  std::string repr(int indent = 0) const;  // PyTorch-like tree

 protected:
  Tensor register_parameter(const std::string& name, Tensor value, bool trainable = true);
  Tensor register_buffer(const std::string& name, Tensor value);
  template <typename C>
  std::shared_ptr<C> register_cell(const std::string& name, std::shared_ptr<C> cell) {
    children_.emplace_back(name, cell);
    return cell;
  }
  // Removes the child registered as `name` (a LoRA adapter merged away); fails if there is none.
  void unregister_cell(const std::string& name);
  Tensor& param(const std::string& name);   // this cell's own parameter
  Tensor& buffer(const std::string& name);  // this cell's own buffer
  // Attribute-style registration for cells assembled at run time (the Python front end's
  // `self.name = value`): registers `name`, or replaces what it holds in place (its position in
  // the dotted names is kept). remove_entry() forgets a parameter, buffer or child of that name
  // and returns false when there is none.
  Tensor set_parameter(const std::string& name, Tensor value, bool trainable = true);
  void set_cell(const std::string& name, CellPtr cell);
  bool remove_entry(const std::string& name);

 private:
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, CellPtr>> children_;
  bool training_ = true;
};

// ---- containers
class SequentialCellImpl : public Cell {
 public:
  explicit SequentialCellImpl(std::vector<CellPtr> cells);
  Tensor forward(const Tensor& x) override;
  void append(CellPtr cell);
  size_t size() const { return named_children().size(); }
  CellPtr operator[](size_t i) const { return named_children().at(i).second; }
  std::string type_name() const override { return "SequentialCell"; }
};
std::shared_ptr<SequentialCellImpl> SequentialCell(std::vector<CellPtr> cells);

// ---- layers (PyTorch's default initialisers: kaiming_uniform(a=sqrt(5)) weights, uniform
// (+-1/sqrt(fan_in)) biases; norms start at weight 1, bias 0)
// MindSpore defaults: pad_mode "same", has_bias false. Weight [out, in/group, k, k].
std::shared_ptr<Cell> Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                             int64_t stride = 1, const std::string& pad_mode = "same",
                             int64_t padding = 0, int64_t dilation = 1, int64_t group = 1,
                             bool has_bias = false);
// Weight [out, in], bias [out].
std::shared_ptr<Cell> Dense(int64_t in_channels, int64_t out_channels, bool has_bias = true);
std::shared_ptr<Cell> ReLU();
std::shared_ptr<Cell> GELU(bool approximate = false);
std::shared_ptr<Cell> SiLU();
std::shared_ptr<Cell> Sigmoid();
std::shared_ptr<Cell> Tanh();
std::shared_ptr<Cell> Flatten();  // [N, ...] -> [N, prod(...)]
// Stride defaults to the kernel size (as in PyTorch; the seed's shapes need it).
std::shared_ptr<Cell> MaxPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0);
std::shared_ptr<Cell> AvgPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0);
std::shared_ptr<Cell> AdaptiveAvgPool2d(int64_t output_size);
// MindSpore's momentum convention: running = momentum * running + (1 - momentum) * batch.
// Parameters/buffers: weight, bias, running_mean, running_var (PyTorch names).
std::shared_ptr<Cell> BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.9,
                                  bool affine = true);
std::shared_ptr<Cell> Dropout(double p = 0.5);
std::shared_ptr<Cell> Embedding(int64_t vocab_size, int64_t embedding_size);  // weight ~ N(0, 1)
std::shared_ptr<Cell> LayerNorm(const Shape& normalized_shape, double eps = 1e-5);
std::shared_ptr<Cell> RMSNorm(int64_t dim, double eps = 1e-6);

// ---- losses
class LossCell {
 public:
  virtual ~LossCell() = default;
  virtual Tensor forward(const Tensor& logits, const Tensor& labels) = 0;
  Tensor operator()(const Tensor& logits, const Tensor& labels) { return forward(logits, labels); }
  virtual std::string type_name() const = 0;
};
using LossPtr = std::shared_ptr<LossCell>;
// sparse: labels are int class indices [N]; otherwise dense probabilities [N, C].
// reduction "mean" (default here; MindSpore's default is "none"), "sum" or "none".
LossPtr SoftmaxCrossEntropyWithLogits(bool sparse = false, const std::string& reduction = "mean",
                                      double label_smoothing = 0.0, int64_t ignore_index = -100);
LossPtr MSELoss(const std::string& reduction = "mean");

// ---- initialisers (in place, under no_grad; use the global generator)
namespace init {
void kaiming_uniform_(Tensor& w, double a = 0.0);  // PyTorch's, fan_in mode, leaky_relu gain
void kaiming_normal_(Tensor& w);                   // fan_out, relu (torchvision ResNet)
void xavier_uniform_(Tensor& w);
void uniform_(Tensor& w, double low, double high);
void normal_(Tensor& w, double mean = 0.0, double std = 1.0);
void constant_(Tensor& w, double value);
int64_t fan_in(const Tensor& w);
int64_t fan_out(const Tensor& w);
}  // namespace init

}  // namespace zenith::nn
