// Conv2d with MindSpore's arguments (pad_mode "same" / "valid" / "pad") and PyTorch's init.
#include <cmath>
#include <sstream>

#include "zenith/nn.h"

namespace zenith::nn {
namespace {

class Conv2dCell : public Cell {
 public:
  Conv2dCell(int64_t in, int64_t out, int64_t k, int64_t stride, const std::string& pad_mode,
             int64_t padding, int64_t dilation, int64_t group, bool has_bias)
      : in_(in),
        out_(out),
        k_(k),
        stride_(stride),
        pad_mode_(pad_mode),
        padding_(padding),
        dilation_(dilation),
        group_(group) {
    ZENITH_CHECK(in > 0 && out > 0 && k > 0 && stride > 0 && dilation > 0 && group > 0,
                 "[Conv2d] channels, kernel_size, stride, dilation and group must be positive, "
                 "got in ",
                 in, ", out ", out, ", kernel ", k, ", stride ", stride, ", dilation ", dilation,
                 ", group ", group);
    ZENITH_CHECK(in % group == 0 && out % group == 0, "[Conv2d] in_channels ", in,
                 " and out_channels ", out, " must be divisible by group ", group);
    ZENITH_CHECK(pad_mode == "same" || pad_mode == "valid" || pad_mode == "pad",
                 "[Conv2d] pad_mode must be 'same', 'valid' or 'pad', got '", pad_mode, "'");
    ZENITH_CHECK(padding >= 0, "[Conv2d] padding must be >= 0, got ", padding);
    ZENITH_CHECK(pad_mode == "pad" || padding == 0, "[Conv2d] padding ", padding,
                 " needs pad_mode 'pad' (got '", pad_mode, "')");
    opts_.stride = {stride, stride};
    opts_.dilation = {dilation, dilation};
    opts_.groups = group;
    opts_.padding = {padding, padding};
    opts_.padding_mode = pad_mode == "pad" ? "explicit" : pad_mode;

    weight_ = register_parameter("weight", Tensor::empty({out, in / group, k, k}));
    init::kaiming_uniform_(weight_, std::sqrt(5.0));
    if (has_bias) {
      double bound = 1.0 / std::sqrt(double(init::fan_in(weight_)));
      bias_ = register_parameter("bias", Tensor::empty({out}));
      init::uniform_(bias_, -bound, bound);
    }
  }

  Tensor forward(const Tensor& x) override { return ops::conv2d(x, weight_, bias_, opts_); }
  std::string type_name() const override { return "Conv2d"; }
  std::string extra_repr() const override {
    std::ostringstream os;
    os << in_ << ", " << out_ << ", kernel_size=" << k_ << ", stride=" << stride_
       << ", pad_mode=" << pad_mode_;
    if (pad_mode_ == "pad") os << ", padding=" << padding_;
    if (dilation_ != 1) os << ", dilation=" << dilation_;
    if (group_ != 1) os << ", group=" << group_;
    os << ", has_bias=" << (bias_.defined() ? "true" : "false");
    return os.str();
  }

 private:
  int64_t in_, out_, k_, stride_;
  std::string pad_mode_;
  int64_t padding_, dilation_, group_;
  ops::Conv2dOptions opts_;
  Tensor weight_, bias_;
};

}  // namespace

std::shared_ptr<Cell> Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                             int64_t stride, const std::string& pad_mode, int64_t padding,
                             int64_t dilation, int64_t group, bool has_bias) {
  return std::make_shared<Conv2dCell>(in_channels, out_channels, kernel_size, stride, pad_mode,
                                      padding, dilation, group, has_bias);
}

}  // namespace zenith::nn
