// Metrics over logits [N, C] and class labels [N]: accuracy, top-k, loss, confusion matrix.
#include <algorithm>
#include <cmath>

#include "zenith/train.h"

namespace zenith::metrics {

namespace {

// Logits as a contiguous float32 [N, C] tensor.
Tensor logits_2d(const Tensor& outputs) {
  ZENITH_CHECK(outputs.dim() == 2, "[metrics] expected logits [N, C], got ",
               shape_str(outputs.shape()));
  return outputs.detach().to(DType::f32).contiguous();
}

void check_batch(const Tensor& logits, const std::vector<int64_t>& labels) {
  ZENITH_CHECK(int64_t(labels.size()) == logits.size(0), "[metrics] ", labels.size(),
               " labels for ", logits.size(0), " outputs");
  for (int64_t l : labels)
    ZENITH_CHECK(l >= 0 && l < logits.size(1), "[metrics] label ", l, " out of range [0, ",
                 logits.size(1), ")");
}

class AccuracyImpl final : public Metric {
 public:
  void clear() override { correct_ = total_ = 0; }
  void update(const Tensor& outputs, const Tensor& labels, double) override {
    auto pred = predicted_classes(outputs);
    auto truth = label_values(labels);
    ZENITH_CHECK(pred.size() == truth.size(), "[Accuracy] ", truth.size(), " labels for ",
                 pred.size(), " outputs");
    for (size_t i = 0; i < pred.size(); ++i) correct_ += pred[i] == truth[i];
    total_ += int64_t(pred.size());
  }
  double eval() const override {
    ZENITH_CHECK(total_ > 0, "[Accuracy] no samples: call update() before eval()");
    return double(correct_) / double(total_);
  }

 private:
  int64_t correct_ = 0, total_ = 0;
};

class TopKImpl final : public Metric {
 public:
  explicit TopKImpl(int64_t k) : k_(k) {
    ZENITH_CHECK(k > 0, "[TopKCategoricalAccuracy] k must be positive, got ", k);
  }
  void clear() override { correct_ = total_ = 0; }
  void update(const Tensor& outputs, const Tensor& labels, double) override {
    Tensor l = logits_2d(outputs);
    auto truth = label_values(labels);
    check_batch(l, truth);
    const int64_t n = l.size(0), c = l.size(1);
    const float* p = l.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      const float* row = p + i * c;
      float target = row[truth[size_t(i)]];
      int64_t above = 0;  // classes strictly ahead of the true one
      for (int64_t j = 0; j < c; ++j) above += row[j] > target;
      correct_ += above < k_;
    }
    total_ += n;
  }
  double eval() const override {
    ZENITH_CHECK(total_ > 0, "[TopKCategoricalAccuracy] no samples");
    return double(correct_) / double(total_);
  }

 private:
  int64_t k_;
  int64_t correct_ = 0, total_ = 0;
};

class LossImpl final : public Metric {
 public:
  void clear() override { sum_ = 0, count_ = 0; }
  void update(const Tensor& outputs, const Tensor&, double loss) override {
    int64_t n = outputs.dim() > 0 ? outputs.size(0) : 1;
    sum_ += loss * double(n);
    count_ += n;
  }
  double eval() const override {
    ZENITH_CHECK(count_ > 0, "[Loss] no samples");
    return sum_ / double(count_);
  }

 private:
  double sum_ = 0;
  int64_t count_ = 0;
};

}  // namespace

std::vector<int64_t> predicted_classes(const Tensor& outputs) {
  Tensor l = logits_2d(outputs);
  const int64_t n = l.size(0), c = l.size(1);
  const float* p = l.data<float>();
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float* row = p + i * c;
    out[size_t(i)] = int64_t(std::max_element(row, row + c) - row);
  }
  return out;
}

std::vector<int64_t> label_values(const Tensor& labels) {
  ZENITH_CHECK(labels.dim() == 1, "[metrics] expected class labels [N], got ",
               shape_str(labels.shape()));
  return labels.detach().to_int_vector();
}

MetricPtr Accuracy() { return std::make_shared<AccuracyImpl>(); }
MetricPtr TopKCategoricalAccuracy(int64_t k) { return std::make_shared<TopKImpl>(k); }
MetricPtr Loss() { return std::make_shared<LossImpl>(); }

ConfusionMatrix::ConfusionMatrix(int64_t num_classes) {
  ZENITH_CHECK(num_classes > 0, "[ConfusionMatrix] num_classes must be positive");
  counts_.assign(size_t(num_classes), std::vector<int64_t>(size_t(num_classes), 0));
}

void ConfusionMatrix::clear() {
  for (auto& row : counts_) std::fill(row.begin(), row.end(), 0);
}

void ConfusionMatrix::update(const Tensor& outputs, const Tensor& labels, double) {
  auto pred = predicted_classes(outputs);
  auto truth = label_values(labels);
  const int64_t n = int64_t(counts_.size());
  for (size_t i = 0; i < pred.size(); ++i) {
    ZENITH_CHECK(truth[i] >= 0 && truth[i] < n && pred[i] < n, "[ConfusionMatrix] class ",
                 std::max(truth[i], pred[i]), " out of range [0, ", n, ")");
    ++counts_[size_t(truth[i])][size_t(pred[i])];
  }
}

double ConfusionMatrix::eval() const {
  int64_t diag = 0, total = 0;
  for (size_t i = 0; i < counts_.size(); ++i)
    for (size_t j = 0; j < counts_.size(); ++j) {
      total += counts_[i][j];
      if (i == j) diag += counts_[i][j];
    }
  ZENITH_CHECK(total > 0, "[ConfusionMatrix] no samples");
  return double(diag) / double(total);
}

}  // namespace zenith::metrics
