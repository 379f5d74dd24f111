// 0-d and empty tensors (issue 27, item 2), without LibTorch: the issue's
// examples with the values PyTorch gives, gradchecks of the ops that take a
// dim on 0-d inputs, and refusals of what has no meaning on a 0-d tensor.
// This suite also runs under ASan + UBSan, where a view of an empty tensor at
// an offset past its storage must read nothing. tests/torch_edge_shapes.cpp
// sweeps every op against LibTorch.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "phasor.h"
#include "tests/helpers.h"

using namespace phasor;
using namespace phasor::test;

namespace {
using V = std::vector<Tensor>;
const DType kBoth[] = {DType::Float64, DType::Complex128};

// The message of the phasor::Error that f throws ("" when it returns).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("reductions over dim 0 or -1 of a 0-d tensor reduce the tensor itself, as in PyTorch") {
  const Tensor x = scalar_tensor(-2.0, DType::Float64);
  for (int64_t d : {0, -1})
    for (bool keep : {false, true}) {
      CAPTURE(d);
      CAPTURE(keep);
      const Tensor s = sum(x, {d}, keep), m = mean(x, {d}, keep), n = norm(x, {d}, keep);
      for (const Tensor& t : {s, m, n}) CHECK(t.dim() == 0);
      CHECK(s.item<double>() == -2.0);
      CHECK(m.item<double>() == -2.0);
      CHECK(n.item<double>() == 2.0);
      const auto mx = max(x, d, keep);
      CHECK(mx.values.dim() == 0);
      CHECK(mx.values.item<double>() == -2.0);
      CHECK(mx.indices.item<int64_t>() == 0);
      CHECK(min(x, d, keep).values.item<double>() == -2.0);
      CHECK(argmax(x, d, keep).item<int64_t>() == 0);
      CHECK(logsumexp(x, d, keep).item<double>() == doctest::Approx(-2.0).epsilon(1e-15));
    }
  CHECK(softmax(x, 0).item<double>() == 1.0);
  CHECK(log_softmax(x, -1).item<double>() == 0.0);
  // out of range, and the same dim twice, are still refused
  CHECK(error_of([&] { sum(x, {1}); }).find("out of range") != std::string::npos);
  CHECK(error_of([&] { sum(x, {0, -1}); }).find("listed twice") != std::string::npos);
}

TEST_CASE("gradcheck: every op that takes a dim, on a 0-d tensor") {
  Generator g(27);
  for (DType dt : kBoth) {
    CAPTURE(dt);
    const Tensor x = leaf(g, {}, dt);
    for (int64_t d : {0, -1}) {
      CAPTURE(d);
      check_grad("sum", [d](const V& in) { return sum(in[0], {d}); }, {x});
      check_grad("sum keepdim", [d](const V& in) { return sum(in[0], {d}, true); }, {x});
      check_grad("mean", [d](const V& in) { return mean(in[0], {d}); }, {x});
      check_grad("norm", [d](const V& in) { return norm(in[0], {d}, true); }, {x});
      check_grad("transpose", [d](const V& in) { return transpose(in[0], d, 0); }, {x});
      check_grad("squeeze", [d](const V& in) { return squeeze(in[0], d); }, {x});
      check_grad("unsqueeze", [d](const V& in) { return unsqueeze(in[0], d); }, {x});
      check_grad("stack", [d](const V& in) { return stack({in[0], in[0]}, d); }, {x});
      check_grad("index_select, 0-d index", [d](const V& in) { return index_select(in[0], d, scalar_tensor(0, DType::Int64)); }, {x});
      check_grad("gather", [d](const V& in) { return gather(in[0], d, scalar_tensor(0, DType::Int64)); }, {x});
      if (dt == DType::Float64) {
        check_grad("max", [d](const V& in) { return max(in[0], d).values; }, {x});
        check_grad("min keepdim", [d](const V& in) { return min(in[0], d, true).values; }, {x});
        check_grad("logsumexp", [d](const V& in) { return logsumexp(in[0], d); }, {x});
        // softmax of one element is 1 whatever x: its gradient is 0, and must be computed, not crash
        check_grad("softmax", [d](const V& in) { return softmax(in[0], d) * in[0]; }, {x});
        check_grad("log_softmax", [d](const V& in) { return log_softmax(in[0], d) + in[0]; }, {x});
      }
    }
  }
}

TEST_CASE("select, narrow, cat, split and size() refuse a 0-d tensor; indexing twice does not run off the view") {
  const Tensor v = from_vector<double>({1, 2, 3, 4, 5});
  const Tensor e = select(v, 0, 0);
  CHECK(e.dim() == 0);
  CHECK(error_of([&] { select(e, 0, 3); }) == "select() cannot be applied to a 0-dim tensor");
  CHECK(error_of([&] { select(e, 0, 0); }) == "select() cannot be applied to a 0-dim tensor");
  CHECK(error_of([&] { narrow(e, 0, 0, 1); }) == "narrow() cannot be applied to a 0-dim tensor");
  CHECK(error_of([&] { cat({e, e}, 0); }) == "cat: zero-dimensional tensor (at position 0) cannot be concatenated");
  CHECK(error_of([&] { split(e, 1, 0); }) == "split() cannot be applied to a 0-dim tensor");
  CHECK(error_of([&] { chunk(e, 1, 0); }) == "chunk() cannot be applied to a 0-dim tensor");
  CHECK(error_of([&] { e.size(0); }) == "size() cannot be applied to a 0-dim tensor");
  CHECK(error_of([&] { e.stride(-1); }) == "stride() cannot be applied to a 0-dim tensor");
  // scatter_add's index may not reach past the output outside `dim` (it wrote past the output's memory)
  CHECK(error_of([&] { scatter_add({2, 2}, 0, zeros({2, 3}, DType::Int64), ones({2, 3})); }).find("exceeds output shape") != std::string::npos);
  CHECK(error_of([&] { scatter_add({2, 2}, 0, zeros({2}, DType::Int64), ones({2})); }).find("differs from output rank") != std::string::npos);
}

TEST_CASE("views with no elements at offsets past their storage, as in PyTorch") {
  const Tensor z = zeros({0, 4}, DType::Float64);
  CHECK(narrow(z, 1, 2, 2).shape() == Dims{0, 2});
  CHECK(select(z, 1, 2).shape() == Dims{0});
  CHECK(as_strided(z, {0, 3}, {4, 1}, 100).numel() == 0);
  CHECK(error_of([&] { as_strided(z, {0, 3}, {4, 1}, -1); }).find("exceeds the storage") != std::string::npos);
  const Tensor c = cat({zeros({0, 2}, DType::Float64), zeros({0, 3}, DType::Float64)}, 1);
  CHECK(c.shape() == Dims{0, 5});
  const Tensor im = imag(zeros({1, 0, 3}, DType::Complex128));
  CHECK(im.shape() == Dims{1, 0, 3});
  CHECK(im.dtype() == DType::Float64);
  const Tensor s = stack({zeros({0, 1, 0}), zeros({0, 1, 0})}, 1);
  CHECK(s.shape() == Dims{0, 2, 1, 0});
  CHECK(contiguous(s).to_vector<float>().empty());
  // the backward of complex(re, im) on empty inputs takes imag of an empty gradient
  Tensor re = zeros({0, 3}, DType::Float64), imv = zeros({0, 3}, DType::Float64);
  re.requires_grad_();
  imv.requires_grad_();
  sum(abs(complex(re, imv))).backward();
  CHECK(re.grad().shape() == Dims{0, 3});
  CHECK(imv.grad().shape() == Dims{0, 3});
}

TEST_CASE("matmul with a zero-sized K, M, N or batch gives PyTorch's zeros, with gradients") {
  Tensor a = ones({5, 5, 0}, DType::Float64), b = ones({0, 5}, DType::Float64);
  a.requires_grad_();
  b.requires_grad_();
  const Tensor c = matmul(a, b);
  CHECK(c.shape() == Dims{5, 5, 5});
  for (double v : c.to_vector<double>()) CHECK(v == 0.0);
  sum(c).backward();
  CHECK(a.grad().shape() == Dims{5, 5, 0});
  CHECK(b.grad().shape() == Dims{0, 5});
  Generator g(5);
  for (DType dt : kBoth) {
    CAPTURE(dt);
    const std::vector<std::pair<Dims, Dims>> shapes = {{{2, 3, 0}, {0, 2}}, {{0, 2, 3}, {3, 2}}, {{2, 0, 3}, {3, 2}}, {{2, 3}, {3, 0}},
                                                       {{0, 3}, {2, 3, 4}}, {{3, 0}, {0}}};
    for (const auto& ab : shapes) {  // (no structured binding: CAPTURE's lambda would capture it, which clang 14 refuses)
      CAPTURE(ab.first);
      CAPTURE(ab.second);
      const Tensor x = leaf(g, ab.first, dt), y = leaf(g, ab.second, dt);
      check_grad("matmul", [](const V& in) { return matmul(in[0], in[1]); }, {x, y});
    }
  }
}
