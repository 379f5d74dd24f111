"""Zero-copy exchange with NumPy: the same memory, writes seen both ways, lifetimes held."""
import gc

import numpy as np
import pytest

import phasor

DTYPES = [
    (np.float32, phasor.float32),
    (np.float64, phasor.float64),
    (np.complex64, phasor.complex64),
    (np.complex128, phasor.complex128),
]


def sample(np_dtype, shape=(3, 4)):
    a = np.arange(np.prod(shape), dtype=np_dtype).reshape(shape)
    if np.issubdtype(np_dtype, np.complexfloating):
        a = a + 1j * a[::-1].copy()  # distinct imaginary parts
    return np.ascontiguousarray(a, dtype=np_dtype)


@pytest.mark.parametrize("np_dtype,dtype", DTYPES)
def test_numpy_to_tensor_shares_memory(np_dtype, dtype):
    a = sample(np_dtype)
    t = phasor.Tensor(a)
    assert t.dtype == dtype and t.shape == a.shape
    assert t.data_ptr == a.ctypes.data
    a[1, 2] = 7  # a NumPy write is seen by the tensor
    assert t.tolist()[1][2] == 7
    with phasor.no_grad():
        t.select(0, 2).fill_(-1.5)  # a tensor write is seen by the array
    assert np.all(a[2] == -1.5)


@pytest.mark.parametrize("np_dtype,dtype", DTYPES)
def test_tensor_to_numpy_shares_memory(np_dtype, dtype):
    t = phasor.tensor(sample(np_dtype))
    for view in (t.numpy(), np.asarray(t), np.array(memoryview(t), copy=False)):
        assert view.dtype == np_dtype and view.shape == t.shape
        assert view.ctypes.data == t.data_ptr
    a = t.numpy()
    a[0, 0] = 5  # a NumPy write is seen by the tensor
    assert t.tolist()[0][0] == 5
    t.copy_(phasor.tensor(np.full((3, 4), 2, dtype=np_dtype)))  # and the other way
    assert np.all(a == 2)


def test_views_keep_memory_alive():
    a = sample(np.complex128)
    address, expected = a.ctypes.data, a.copy()
    t = phasor.Tensor(a)
    del a
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), expected)  # the tensor holds the array
    assert t.data_ptr == address

    view = phasor.tensor(expected).numpy()  # the only reference to the tensor is the array's base
    gc.collect()
    np.testing.assert_array_equal(view, expected)
    assert isinstance(view.base, phasor.Tensor)


def test_strided_views_share_and_odd_arrays_are_refused():
    a = sample(np.float64, (4, 6))
    t = phasor.Tensor(a[:, ::2])  # a strided NumPy view: shared, with element strides
    assert t.shape == (4, 3) and t.data_ptr == a.ctypes.data
    np.testing.assert_array_equal(t.numpy(), a[:, ::2])
    t2 = phasor.Tensor(a).transpose(0, 1)  # and a strided tensor view goes back as one
    assert np.shares_memory(t2.numpy(), a)
    np.testing.assert_array_equal(t2.numpy(), a.T)

    with pytest.raises(phasor.Error, match="negative or not a multiple"):
        phasor.Tensor(a[::-1])
    ro = a.copy()
    ro.flags.writeable = False
    with pytest.raises(phasor.Error, match="read-only"):
        phasor.Tensor(ro)
    with pytest.raises(phasor.Error, match="not supported"):
        phasor.Tensor(np.zeros(3, dtype=np.float16))
    np.testing.assert_array_equal(phasor.tensor(a[::-1]).numpy(), a[::-1])  # phasor.tensor copies any of them


def test_ops_match_numpy():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    b = rng.standard_normal((4, 2)) + 1j * rng.standard_normal((4, 2))
    x, y = phasor.Tensor(a), phasor.Tensor(b)
    np.testing.assert_allclose((x @ y).numpy(), a @ b, rtol=1e-12)
    np.testing.assert_allclose((2 * x + 1 - x / 4).numpy(), 2 * a + 1 - a / 4, rtol=1e-12)
    np.testing.assert_allclose(phasor.exp(phasor.conj(x)).numpy(), np.exp(np.conj(a)), rtol=1e-12)
    np.testing.assert_allclose(phasor.abs(x).numpy(), np.abs(a), rtol=1e-12)
    np.testing.assert_allclose(x.sum([1]).numpy(), a.sum(1), rtol=1e-12)
    np.testing.assert_allclose(phasor.mul(a, np.conj(a)).numpy(), a * np.conj(a), rtol=1e-12)  # arrays where tensors go
    assert phasor.sum(x).item() == pytest.approx(a.sum(), rel=1e-12)


def test_errors_are_one_line_phasor_errors():
    with pytest.raises(phasor.Error) as err:
        phasor.matmul(phasor.zeros([2, 3]), phasor.zeros([2, 3]))
    assert isinstance(err.value, RuntimeError)
    assert str(err.value) == "matmul: inner dimensions differ: [2, 3] x [2, 3] (3 vs 2)"
