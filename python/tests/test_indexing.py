"""t[index] and t[index] = value against NumPy on the same inputs: views for
basic indices, copies for integer and boolean arrays, gradients through both."""
import re

import numpy as np
import pytest

import phasor

A = np.arange(60, dtype=np.float64).reshape(3, 4, 5) * 0.5 - 7.0

BASIC = [
    1, -1, (0, 2), (-2, -1, -5),
    slice(1, None), slice(None, None, 2), slice(None, None, -1), slice(-1, 0, -2), slice(5, 1), slice(None, None, 3),
    (slice(None), slice(1, 4, 2)), (Ellipsis, -1), (1, Ellipsis, slice(None, None, 2)), (None,), (slice(None), None, 2),
    (Ellipsis, None), (slice(None, None, 2), Ellipsis, slice(4, None, -3)), (), Ellipsis, np.int64(2), (None, 1, None),
    slice(-10, None, -1), slice(10, None), (slice(None), slice(10, None, -1)), (slice(1, 1), slice(None, None, -1)),
]
ADVANCED = [
    [2, 0], np.array([[0, 1], [-1, 0]]), (slice(None), [3, 3, 0]), (1, slice(None), [-1, 2]), (Ellipsis, np.array([4, 0])),
    (0, slice(None), [1, 3]), (np.int64(-1), None, 2, [0]), (slice(None), 1, [[2], [3]]),
    A[:, 0, 0] > -5, A > 0, (slice(None), A[0, :, 0] > -6), (A[..., 0] > -6, slice(None, None, 2)), [],
]
# Several arrays in one index: broadcast together, in place when adjacent, first when apart.
SEVERAL = [
    ([0, 2], [1, 3]), ([[0], [2]], [1, 3, 0]), (slice(None), [0, -1], [4, 2]), ([1, 0], slice(None), [2, 2]),
    ([2, 1], 3, [0, 4]), (0, [1, 2], [3, 0]), ([[1]], slice(1, None, 2), np.array([[0, 4], [1, 2]])),
    (A[:, 0, 0] > -5, [1, 3]), (slice(None, None, -1), A[0, :, 0] > -6, [4, 0, 1]), ([0, 2], A[0, :, 0] > -3), ([[0], [1]], A[0] > 1.5),
    (None, [2, 0], Ellipsis, [1, 1]), ([], []), (np.array([[0, 1]]), np.array([[2], [1]]), slice(None, None, -2)),
]


@pytest.mark.parametrize("index", BASIC + ADVANCED + SEVERAL, ids=repr)
def test_getitem_matches_numpy(index):
    t = phasor.Tensor(A)
    got = t[index]
    np.testing.assert_array_equal(got.numpy(), A[index])
    assert got.shape == A[index].shape


@pytest.mark.parametrize("index", [1, slice(1, 3), (Ellipsis, slice(None, None, 2)), (None, 0), (slice(None), 2, slice(1, None, 3))], ids=repr)
def test_basic_indices_are_views(index):
    a = A.copy()
    t = phasor.Tensor(a)
    view = t[index]
    view.fill_(123.0)  # a write through the view lands in t's (and a's) memory
    expected = A.copy()
    expected[index] = 123.0
    np.testing.assert_array_equal(a, expected)


def test_array_indices_copy_as_in_numpy():
    a = A.copy()
    t = phasor.Tensor(a)
    picked = t[[0, 2]]
    picked.fill_(0.0)
    np.testing.assert_array_equal(a, A)


def test_complex_tensors_index_too():
    z = (np.arange(12) + 1j * np.arange(12, 24)).reshape(3, 4).astype(np.complex64)
    t = phasor.Tensor(z)
    np.testing.assert_array_equal(t[::-1, 1::2].numpy(), z[::-1, 1::2])
    np.testing.assert_array_equal(t[z.real > 4].numpy(), z[z.real > 4])


@pytest.mark.parametrize("index", [slice(1, None, 2), (Ellipsis, slice(None, None, -2)), (1, [2, 0, 2]), (slice(None), A[0] > -6), (None, slice(None), -1),
                                   ([0, 2, 0], slice(None), [1, 4, 1]), ([[1], [2]], [0, 3])], ids=repr)
def test_gradient_flows_back_through_indexing(index):
    w = np.random.default_rng(0).standard_normal(A[index].shape)
    x = phasor.tensor(A).requires_grad_()
    (x[index] * phasor.tensor(w)).sum().backward()
    expected = np.zeros_like(A)
    np.add.at(expected, index, w)  # each picked element gets its weight (twice where picked twice)
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_a_strided_slice_is_twice_differentiable():
    x = phasor.randn([7], dtype=phasor.float64, seed=3).requires_grad_()
    assert phasor.gradcheck(lambda v: (v[1::3] * v[1::3] * v[1::3]).sum(), [x])
    assert phasor.gradgradcheck(lambda v: (v[::2] * v[::2] * v[::2]).sum(), [x])


@pytest.mark.parametrize("index, value", [
    (1, 9.0), ((Ellipsis, 0), -1.0), (slice(None, None, 2), np.arange(20.0).reshape(4, 5)), ((slice(None), slice(None, None, -2)), np.arange(5.0)),
    ((0, slice(1, 3)), np.array([[1.0], [2.0]])), ((1, slice(None), [4, 0]), np.arange(8.0).reshape(2, 4)), ([2, 0], 4.0), ((slice(None), [1, 1, 3]), np.arange(45.0).reshape(3, 3, 5)),
    (A > 3, 0.0), ((A[:, 0, 0] > -5,), np.arange(5.0)), (Ellipsis, 2.5), ((None, 1), np.arange(20.0).reshape(4, 5)),
    (([0, 2], [1, 3]), np.array([[-1.0], [-2.0]]).repeat(5, 1)), ((slice(None), [0, -1], [4, 2]), np.arange(6.0).reshape(3, 2)),
    (([1, 0], slice(None, None, -1), [2, 2]), np.arange(8.0).reshape(2, 4)), (([2, 1], 3, [0, 4]), 7.0),
    (([[1], [2]], slice(None, None, -2), [0, 3]), np.arange(8.0).reshape(2, 2, 2)), ((A[:, 0, 0] > -5, [1, 3]), np.arange(10.0).reshape(2, 5)),
], ids=repr)
def test_setitem_matches_numpy(index, value):
    a, expected = A.copy(), A.copy()
    t = phasor.Tensor(a)
    t[index] = phasor.tensor(value) if isinstance(value, np.ndarray) else value
    expected[index] = value
    np.testing.assert_array_equal(a, expected)


def test_setitem_follows_autograd_rules():
    x = phasor.zeros([3]).requires_grad_()
    with pytest.raises(phasor.Error, match="leaf tensor that requires grad"):
        x[0] = 1.0
    with phasor.no_grad():
        x[0] = 1.0  # a parameter updated by hand
    assert x.tolist() == [1.0, 0.0, 0.0]
    y = x * 2.0
    with pytest.raises(phasor.Error, match="not recorded"):
        y[1] = 0.0


@pytest.mark.parametrize("index, error, message", [
    (3, IndexError, "index 3 is out of bounds for dimension 0 with size 3"),
    ((0, -5), IndexError, "index -5 is out of bounds for dimension 1 with size 4"),
    ((0, 0, 0, 0), IndexError, "too many indices for tensor: tensor is 3-dimensional, but 4 were indexed"),
    ((Ellipsis, Ellipsis), IndexError, "single ellipsis"),
    ([0, 3], IndexError, "index 3 is out of bounds"),
    (np.array([True, False]), IndexError, "boolean index did not match indexed tensor along dimension 0; dimension is 3"),
    (1.5, IndexError, "only integers, slices"),
    ("a", IndexError, "only integers, slices"),
    (np.array([0.5]), IndexError, "must be of integer or boolean type"),
    (([0, 1], [1, 2, 0]), IndexError, "shape mismatch: indexing arrays could not be broadcast together with shapes (2,) (3,)"),
    (slice(None, None, 0), ValueError, "slice step cannot be zero"),
    (True, IndexError, "a Python bool is not an index"),
], ids=repr)
def test_bad_indices_raise_one_line(index, error, message):
    t = phasor.Tensor(A)
    with pytest.raises(error, match=re.escape(message)) as info:
        t[index]
    assert "\n" not in str(info.value)
    if error is IndexError and index is not True and (not isinstance(index, tuple) or "shape mismatch" in message):
        with pytest.raises(IndexError):
            np.asarray(A)[index]  # NumPy refuses the same index


def test_setitem_shape_mismatch_is_one_line():
    t = phasor.Tensor(A.copy())
    with pytest.raises(TypeError, match="cannot write complex values into a float64 tensor"):
        t[0, 0, 0] = 1 + 2j
    with pytest.raises(phasor.Error) as info:
        t[0] = phasor.tensor(np.zeros(3))
    assert "\n" not in str(info.value)
