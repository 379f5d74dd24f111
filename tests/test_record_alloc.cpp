// record() costs nothing when nothing is recorded (issue #29): with grad mode
// off, or with no input that requires grad, it allocates no memory. This
// binary replaces the global operator new with one that counts the
// allocations of the test's own thread while a counter is armed.
#include <doctest/doctest.h>

#include <cstdlib>
#include <new>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "phasor.h"

namespace {
thread_local bool counting = false;
thread_local long allocations = 0;

void* counted_alloc(std::size_t size) {
  if (counting) ++allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t size) { return counted_alloc(size); }
void* operator new[](std::size_t size) { return counted_alloc(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

using namespace phasor;

namespace {
using Grads = std::vector<Tensor>;

// The allocations made on this thread by f().
template <class F>
long allocations_of(F&& f) {
  allocations = 0;
  counting = true;
  f();
  counting = false;
  return allocations;
}

// A closure too large for std::function's small buffer, as most derivative
// formulas are (shapes and saved tensors): turning it into one allocates.
struct BigClosure {
  Dims a, b;
  Grads operator()(const Tensor& g) const { return {g, g}; }
};
}  // namespace

TEST_CASE("record allocates nothing when grad mode is off") {
  const Tensor x = ones({4}, DType::Float64).requires_grad_(), y = ones({4}, DType::Float64);
  const Tensor out = ops::binary(ops::Binary::Add, x, y);
  NoGradGuard no_grad;
  Tensor result;
  CHECK(allocations_of([&] { result = record("add", out, {x, y}, BigClosure{}); }) == 0);
  CHECK(result.impl() == out.impl());
  CHECK_FALSE(result.requires_grad());
  const std::vector<Tensor> inputs{x, y};
  CHECK(allocations_of([&] { result = record("cat", out, inputs, BigClosure{}); }) == 0);
  CHECK_FALSE(result.requires_grad());
}

TEST_CASE("record allocates nothing when no input requires grad") {
  const Tensor x = ones({4}, DType::Float64), y = ones({4}, DType::Float64);
  const Tensor out = ops::binary(ops::Binary::Add, x, y);
  REQUIRE(GradMode::enabled());
  Tensor result;
  CHECK(allocations_of([&] { result = record("add", out, {x, y}, BigClosure{}); }) == 0);
  CHECK_FALSE(result.requires_grad());
}

TEST_CASE("record still records when grad mode is on and an input requires grad") {
  const Tensor x = ones({4}, DType::Float64).requires_grad_(), y = ones({4}, DType::Float64);
  const Tensor out = record("add", ops::binary(ops::Binary::Add, x, y), {x, y}, BigClosure{});
  REQUIRE(out.requires_grad());
  CHECK(out.grad_fn()->name() == "add");
}

// Around whole ops: with grad off a differentiable op allocates exactly what its
// raw kernel does, so neither its recording step nor the tensors its closure
// would save (SavedTensor) add anything.
TEST_CASE("differentiable ops with grad off allocate what their raw kernels do") {
  Generator gen(7);
  const Tensor a = randn({3, 4}, DType::Float32, &gen).requires_grad_(), b = randn({4, 5}, DType::Float32, &gen).requires_grad_();
  const Tensor c = randn({3, 4}, DType::Float32, &gen).requires_grad_();
  NoGradGuard no_grad;
  const auto same = [](auto op, auto raw) {
    op();  // first calls may fill caches (thread pools, workspaces): not counted
    raw();
    const long with_record = allocations_of(op), without = allocations_of(raw);
    CHECK(with_record == without);
  };
  same([&] { return add(a, c); }, [&] { return ops::binary(ops::Binary::Add, a, c); });
  same([&] { return mul(a, c); }, [&] { return ops::binary(ops::Binary::Mul, a, c); });
  same([&] { return reshape(a, {12}); }, [&] { return ops::reshape(a, {12}); });
  same([&] { return sum(a, {1}, false); }, [&] { return ops::sum(a, {1}, false); });
  same([&] { return matmul(a, b); }, [&] { return ops::matmul(a, b, MatOp::None, MatOp::None); });
  same([&] { return transpose(a, 0, 1); }, [&] { return ops::transpose(a, 0, 1); });
  same([&] { return div(a, c); }, [&] { return ops::binary(ops::Binary::Div, a, c); });
  same([&] { return exp(a); }, [&] { return ops::unary(ops::Unary::Exp, a); });
}
