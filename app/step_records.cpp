#include "app/step_records.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "tensor/ops.h"

namespace phasor {

bool StepReport::skipped() const { return !std::isfinite(loss) || !std::isfinite(grad_norm); }

Tensor StepRecords::record(int64_t step, const Tensor& loss, const Tensor& grad_norm, double lr, int64_t tokens) {
  const Tensor values = values_of(loss, grad_norm);
  add(step, values, lr, tokens);
  return finite(values);
}

Tensor StepRecords::values_of(const Tensor& loss, const Tensor& grad_norm) {
  NoGradGuard no_grad;
  return ops::stack({ops::reshape(ops::to(loss.detach(), DType::Float64), {}), ops::reshape(grad_norm, {})}, 0);
}

Tensor StepRecords::finite(const Tensor& values) {
  NoGradGuard no_grad;
  // x - x is 0 for a finite x and NaN otherwise, so the sum is 0 exactly when both are finite.
  const Tensor residue = ops::sum(ops::binary(ops::Binary::Sub, values, values));
  return ops::compare(ops::Compare::Eq, residue, scalar_tensor(0.0, DType::Float64, values.device()));
}

void StepRecords::add(int64_t step, const Tensor& values, double lr, int64_t tokens) { pending_.push_back({step, values, lr, tokens}); }

std::vector<StepReport> StepRecords::read() {
  if (pending_.empty()) return {};
  std::vector<Tensor> rows;
  rows.reserve(pending_.size());
  for (const Pending& p : pending_) rows.push_back(p.values);
  const std::vector<double> values = ops::stack(rows, 0).to_vector<double>();
  std::vector<StepReport> reports;
  reports.reserve(pending_.size());
  for (size_t i = 0; i < pending_.size(); ++i)
    reports.push_back({pending_[i].step, values[2 * i], values[2 * i + 1], pending_[i].lr, pending_[i].tokens});
  pending_.clear();
  return reports;
}

}  // namespace phasor
