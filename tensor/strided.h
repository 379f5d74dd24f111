#pragma once
// The geometry of a strided elementwise op, shared by every backend: N
// operands share one (broadcast) shape, each with its own byte strides, and
// dimensions that are contiguous in every operand are merged (coalesce), so a
// kernel on row-major inputs sees one long run. The CPU loop
// (tensor/cpu/loop.h) and the CUDA launch geometry (cuda/backend.cpp) are both
// built from it.
#include <array>
#include <cstdint>

#include "tensor/tensor.h"

namespace phasor {

template <size_t N>
struct StridedPlan {
  Dims shape;
  std::array<Dims, N> strides;  // bytes
  std::array<char*, N> base;
};

// Describes `t` (already broadcast to `shape`, stride 0 on broadcast dims) as operand `k`.
template <size_t N>
void set_operand(StridedPlan<N>& plan, size_t k, const Tensor& t) {
  const Dims& shape = plan.shape;
  const int lead = shape.size() - t.dim();
  const auto item = static_cast<int64_t>(itemsize(t.dtype()));
  plan.strides[k] = Dims::filled(shape.size(), 0);
  for (int i = 0; i < t.dim(); ++i) plan.strides[k][lead + i] = t.size(i) == 1 ? 0 : t.stride(i) * item;
  plan.base[k] = static_cast<char*>(t.raw_data());
}

template <size_t N>
void coalesce(StridedPlan<N>& plan) {
  Dims shape;
  std::array<Dims, N> strides;
  for (int i = 0; i < plan.shape.size(); ++i) {
    if (plan.shape[i] == 1) continue;
    bool merge = !shape.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = strides[k].back() == plan.strides[k][i] * plan.shape[i];
    if (merge) {
      shape[shape.size() - 1] *= plan.shape[i];
      for (size_t k = 0; k < N; ++k) strides[k][strides[k].size() - 1] = plan.strides[k][i];
    } else {
      shape.push_back(plan.shape[i]);
      for (size_t k = 0; k < N; ++k) strides[k].push_back(plan.strides[k][i]);
    }
  }
  if (shape.empty()) {
    shape.push_back(1);
    for (size_t k = 0; k < N; ++k) strides[k].push_back(0);
  }
  plan.shape = shape;
  plan.strides = strides;
}

// The plan of `out` and its inputs (each already broadcast to out's shape), coalesced.
template <size_t N>
StridedPlan<N> strided_plan(const Tensor& out, const std::array<Tensor, N - 1>& ins) {
  StridedPlan<N> plan;
  plan.shape = out.shape();
  set_operand(plan, 0, out);
  for (size_t k = 0; k + 1 < N; ++k) set_operand(plan, k + 1, ins[k]);
  coalesce(plan);
  return plan;
}

}  // namespace phasor
