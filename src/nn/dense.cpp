// Dense (PyTorch's Linear): y = x W^T + b, W [out, in].
#include <cmath>
#include <sstream>

#include "zenith/nn.h"

namespace zenith::nn {
namespace {

class DenseCell : public Cell {
 public:
  DenseCell(int64_t in, int64_t out, bool has_bias) : in_(in), out_(out) {
    ZENITH_CHECK(in > 0 && out > 0, "[Dense] in_channels and out_channels must be positive, got ",
                 in, " and ", out);
    weight_ = register_parameter("weight", Tensor::empty({out, in}));
    init::kaiming_uniform_(weight_, std::sqrt(5.0));
    if (has_bias) {
      double bound = 1.0 / std::sqrt(double(in));
      bias_ = register_parameter("bias", Tensor::empty({out}));
      init::uniform_(bias_, -bound, bound);
    }
  }

  Tensor forward(const Tensor& x) override {
    ZENITH_CHECK(x.dim() >= 1 && x.size(-1) == in_, "[Dense] expected input [..., ", in_, "], got ",
                 shape_str(x.shape()));
    return ops::linear(x, weight_, bias_);
  }
  std::string type_name() const override { return "Dense"; }
  std::string extra_repr() const override {
    std::ostringstream os;
    os << "in_channels=" << in_ << ", out_channels=" << out_
       << ", has_bias=" << (bias_.defined() ? "true" : "false");
    return os.str();
  }

 private:
  int64_t in_, out_;
  Tensor weight_, bias_;
};

}  // namespace

std::shared_ptr<Cell> Dense(int64_t in_channels, int64_t out_channels, bool has_bias) {
  return std::make_shared<DenseCell>(in_channels, out_channels, has_bias);
}

}  // namespace zenith::nn
