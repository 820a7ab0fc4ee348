#include "train/ranks.h"

#include <algorithm>

#include "zenith/autograd.h"
#include "zenith/communication.h"
#include "zenith/ops.h"

namespace zenith {

Ranks::Ranks() {
  if (!communication::is_initialized()) return;
  rank_ = communication::get_rank();
  world_ = communication::get_group_size();
  writes_ = rank_ == 0;
}

Ranks::Ranks(communication::Group group, bool writes)
    : rank_(group.is_world() ? communication::get_rank() : group.rank()),
      world_(group.is_world() ? communication::get_group_size() : group.size()),
      writes_(writes),
      group_(std::move(group)) {}

std::pair<int64_t, int64_t> Ranks::share(int64_t first, int64_t batch, int64_t n) const {
  const int64_t begin = std::min(n, first + int64_t(rank_) * batch);
  return {begin, std::min(n, begin + batch)};
}

std::vector<double> Ranks::sum(std::vector<double> values) const {
  if (world_ == 1 || values.empty()) return values;
  Tensor t = Tensor::from_vector(values, {int64_t(values.size())});
  communication::all_reduce(t, communication::ReduceOp::SUM, group_);
  return t.to_double_vector();
}

void Ranks::sum_gradients(const std::vector<Tensor>& params, DType dtype) const {
  NoGradGuard no_grad;
  int64_t total = 0;
  for (const Tensor& p : params) total += p.numel();
  if (world_ == 1) {  // one process: float64 sums rounded to the parameters' dtype
    for (const Tensor& p : params)
      if (p.grad().defined() && p.grad().dtype() != p.dtype())
        Tensor(p).set_grad(p.grad().to(p.dtype()));
    return;
  }
  Tensor flat = Tensor::zeros({total}, dtype);
  int64_t off = 0;
  for (const Tensor& p : params) {
    if (p.grad().defined()) flat.narrow(0, off, p.numel()).view(p.shape()).copy_(p.grad());
    off += p.numel();
  }
  communication::all_reduce(flat, communication::ReduceOp::SUM, group_);
  off = 0;
  for (const Tensor& p : params) {
    Tensor g = flat.narrow(0, off, p.numel()).view(p.shape()).to(p.dtype()).clone();
    Tensor(p).set_grad(g);
    off += p.numel();
  }
}

}  // namespace zenith
