"""In-place ops as a PyTorch user writes them (add_, sub_, mul_, div_, zero_,
fill_, copy_, +=, ...), with PyTorch's rule for leaves that require grad."""
import numpy as np
import pytest

import phasor

X = np.array([[1.5, -2.0, 3.25], [0.5, 4.0, -1.0]])
Y = np.array([2.0, -0.5, 4.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_in_place_ops_match_torch(dtype, torch):
    x = X.astype(dtype) * (1 + 1j if np.iscomplexobj(np.zeros(1, dtype)) else 1)
    t, tt = phasor.tensor(x), torch.tensor(x)
    y = Y.astype(dtype)
    steps = [
        lambda a, b: a.add_(b), lambda a, b: a.sub_(b, alpha=0.5), lambda a, b: a.mul_(b), lambda a, b: a.div_(b),
        lambda a, b: a.add_(2.0), lambda a, b: a.mul_(-3.0), lambda a, b: a.add_(b, alpha=2.0), lambda a, b: a.sub_(1.0),
    ]
    for step in steps:
        got = step(t, phasor.tensor(y))
        assert got is t  # the same object back, as PyTorch's
        step(tt, torch.tensor(y))
        np.testing.assert_allclose(t.numpy(), tt.numpy(), rtol=1e-6)


def test_augmented_assignment_keeps_the_object_and_its_memory():
    a = X.copy()
    t = phasor.Tensor(a)
    same = t
    t += 1.0
    t -= phasor.tensor(Y)
    t *= 2.0
    t /= 4.0
    assert t is same
    np.testing.assert_allclose(a, ((X + 1.0 - Y) * 2.0) / 4.0, rtol=1e-15)  # written into the array's memory


def test_zero_fill_copy():
    a = X.copy()
    t = phasor.Tensor(a)
    assert t.fill_(7.0) is t and (a == 7.0).all()
    assert t.zero_() is t and (a == 0.0).all()
    assert t.copy_(phasor.tensor(Y)) is t  # broadcast over the rows
    np.testing.assert_array_equal(a, np.broadcast_to(Y, X.shape))


def test_integer_tensors_take_integers_in_place():
    t = phasor.tensor(np.array([1, 2, 3], dtype=np.int64))
    t += 2
    t *= 3
    assert t.dtype == phasor.int64 and t.tolist() == [9, 12, 15]
    with pytest.raises(phasor.Error, match="cannot be stored in place"):
        t += 0.5  # PyTorch refuses it too: the result is a float


def test_a_parameter_is_updated_under_no_grad_the_pytorch_way():
    w = phasor.tensor([1.0, -2.0]).requires_grad_()
    original = w
    (w * w).sum().backward()
    with pytest.raises(phasor.Error, match="leaf tensor that requires grad cannot be changed in place"):
        w -= 0.1 * w.grad
    with phasor.no_grad():
        w -= 0.1 * w.grad
    assert w is original and w.requires_grad
    np.testing.assert_allclose(w.tolist(), [0.8, -1.6], rtol=1e-15)
    w.grad.zero_()
    (w * w).sum().backward()  # the next step still has a graph
    np.testing.assert_allclose(w.grad.tolist(), [1.6, -3.2], rtol=1e-15)


@pytest.mark.parametrize("op", ["add_", "mul_", "zero_", "fill_", "copy_"])
def test_in_place_on_a_leaf_that_requires_grad_is_refused(op):
    w = phasor.tensor([1.0, 2.0]).requires_grad_()
    args = {"add_": (1.0,), "mul_": (2.0,), "zero_": (), "fill_": (3.0,), "copy_": (phasor.tensor([5.0, 6.0]),)}[op]
    with pytest.raises(phasor.Error, match=op + ": a leaf tensor that requires grad") as info:
        getattr(w, op)(*args)
    assert "\n" not in str(info.value)
    assert w.tolist() == [1.0, 2.0]


def test_a_saved_tensor_changed_in_place_is_caught_at_backward():
    x = phasor.tensor([1.0, 2.0]).requires_grad_()
    h = phasor.tensor([3.0, 4.0])
    y = (x * h).sum()  # saves h
    h.mul_(2.0)
    with pytest.raises(phasor.Error, match="modified"):
        y.backward()


def test_data_is_the_memory_without_autograd():
    w = phasor.tensor([1.0, 2.0]).requires_grad_()
    d = w.data
    assert not d.requires_grad
    d.mul_(10.0)  # a plain tensor over w's memory
    assert w.tolist() == [10.0, 20.0] and w.requires_grad
