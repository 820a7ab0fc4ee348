// Embedding: a lookup table [vocab, dim], initialised N(0, 1) as in PyTorch.
#include <sstream>

#include "zenith/nn.h"

namespace zenith::nn {
namespace {

class EmbeddingCell : public Cell {
 public:
  EmbeddingCell(int64_t vocab, int64_t dim) : vocab_(vocab), dim_(dim) {
    ZENITH_CHECK(vocab > 0 && dim > 0,
                 "[Embedding] vocab_size and embedding_size must be "
                 "positive, got ",
                 vocab, " and ", dim);
    weight_ = register_parameter("weight", Tensor::empty({vocab, dim}));
    init::normal_(weight_, 0.0, 1.0);
  }
  Tensor forward(const Tensor& ids) override {
    ZENITH_CHECK(!is_floating(ids.dtype()), "[Embedding] expected integer indices, got ",
                 dtype_name(ids.dtype()));
    return ops::embedding(weight_, ids);
  }
  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override {
    std::ostringstream os;
    os << "vocab_size=" << vocab_ << ", embedding_size=" << dim_;
    return os.str();
  }

 private:
  int64_t vocab_, dim_;
  Tensor weight_;
};

}  // namespace

std::shared_ptr<Cell> Embedding(int64_t vocab_size, int64_t embedding_size) {
  return std::make_shared<EmbeddingCell>(vocab_size, embedding_size);
}

}  // namespace zenith::nn
