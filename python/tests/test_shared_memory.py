"""Memory a tensor shares with another object: the buffer stays pinned while the
tensor lives, and autograd sees (or refuses) writes through any alias of it."""
import array
import gc

import numpy as np
import pytest

import phasor


# ---- the exporter's memory is pinned for the tensor's lifetime ----

def test_array_array_cannot_resize_under_a_tensor():
    a = array.array("d", [1.0, 2.0, 3.0])
    row = phasor.Tensor(a).select(0, 1)  # a view: the storage, and so the buffer, outlive the first tensor
    gc.collect()
    with pytest.raises(BufferError, match="cannot resize"):
        a.extend([4.0] * 10000)  # would move the memory under the tensor
    with pytest.raises(BufferError, match="cannot resize"):
        a.pop()
    a[1] = 7.0
    assert row.item() == 7.0
    del row
    gc.collect()
    a.extend([4.0] * 10000)  # the buffer went with the last view
    assert len(a) == 10003


def test_memoryview_cast_stays_valid_without_its_names():
    buf = bytearray(np.arange(4, dtype=np.float64).tobytes())
    mv = memoryview(buf).cast("d")
    t = phasor.Tensor(mv)
    with pytest.raises(BufferError):
        mv.release()  # the tensor holds an export of it
    with pytest.raises(BufferError):
        buf.extend(b"\0" * 100000)  # nor can the bytearray below it move
    del mv, buf
    gc.collect()
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]  # the tensor alone keeps the memory
    with phasor.no_grad():
        t.fill_(5.0)
    assert t.tolist() == [5.0] * 4


def test_numpy_array_is_pinned_too():
    a = np.arange(3.0)
    t = phasor.Tensor(a)
    with pytest.raises(ValueError):
        a.resize(1000)  # NumPy's reference check sees the held buffer
    del t
    gc.collect()
    a.resize(1000)
    assert a.shape == (1000,)


def test_released_memoryview_is_reported_as_released():
    mv = memoryview(bytearray(16)).cast("d")
    mv.release()
    with pytest.raises(ValueError, match="operation forbidden on released memoryview object"):
        phasor.Tensor(mv)
    with pytest.raises(phasor.Error, match="read-only"):  # a read-only one still says so
        phasor.Tensor(memoryview(bytes(16)).cast("d"))


def test_misaligned_memory_is_refused_and_copied_by_tensor():
    odd = np.frombuffer(bytearray(25), dtype=np.float64, offset=1, count=3)  # a bytearray's memory is 8-aligned
    assert odd.ctypes.data % 8 == 1 and odd.flags.writeable
    odd[:] = [0.0, 1.0, 2.0]
    with pytest.raises(phasor.Error, match="not aligned to 8 bytes"):
        phasor.Tensor(odd)
    assert phasor.tensor(odd).tolist() == [0.0, 1.0, 2.0]


# ---- autograd's version check across every alias of the memory ----

def cube_sum(x):
    return phasor.sum(x * x * x)


def grad_leaf():
    return phasor.tensor([1.0, 2.0, 3.0], dtype=phasor.float64).requires_grad_()


def test_a_tensor_that_requires_grad_exports_read_only_memory():
    x = grad_leaf()
    y = cube_sum(x)
    with pytest.raises(ValueError, match="read-only"):
        np.asarray(x)[:] = 10
    with pytest.raises(TypeError, match="read-only"):
        memoryview(x)[0] = 10.0
    with pytest.raises(phasor.Error, match=r"requires grad.*detach\(\)\.numpy\(\)"):
        x.numpy()
    with pytest.raises(phasor.Error, match="read-only"):
        phasor.Tensor(memoryview(x))
    np.testing.assert_array_equal(np.asarray(x), [1.0, 2.0, 3.0])  # reading is fine
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 12.0, 27.0])


def expect_version_error(y):
    with pytest.raises(phasor.Error, match="modified in place"):
        y.backward()


def test_a_tensor_over_an_export_shares_the_version_counter():
    x = grad_leaf()
    y = cube_sum(x)
    phasor.Tensor(x.detach().numpy()).fill_(10)  # the example, via the allowed export
    expect_version_error(y)

    x = grad_leaf()
    y = cube_sum(x)
    phasor.Tensor(np.asarray(x.detach())[1:]).fill_(10)  # a NumPy view of it, through the buffer protocol
    expect_version_error(y)

    x = grad_leaf()
    y = cube_sum(x)
    phasor.Tensor(memoryview(x.detach())).fill_(10)
    expect_version_error(y)


def test_tensors_over_one_array_share_the_version_counter():
    a = np.array([1.0, 2.0, 3.0])
    x = phasor.Tensor(a).requires_grad_()
    y = cube_sum(x)
    phasor.Tensor(a[1:]).fill_(10)  # another tensor over another view of the same array
    expect_version_error(y)

    w = np.array([1.0, 2.0, 3.0])  # a tensor saved for backward that needs no grad itself
    x = grad_leaf()
    y = phasor.sum(x * phasor.Tensor(w))
    phasor.Tensor(w).copy_(phasor.zeros([3], dtype=phasor.float64))
    expect_version_error(y)

    buf = bytearray(np.arange(3, dtype=np.float64).tobytes())  # any exporter, not only NumPy
    x = phasor.Tensor(memoryview(buf).cast("d")).requires_grad_()
    y = cube_sum(x)
    phasor.Tensor(memoryview(buf).cast("d")).fill_(1)
    expect_version_error(y)


def test_unrelated_arrays_keep_separate_counters():
    x = grad_leaf()
    y = cube_sum(x)
    phasor.Tensor(np.array([1.0, 2.0, 3.0])).fill_(10)  # other memory: no effect on x's graph
    phasor.Tensor(x.detach().clone().numpy()).fill_(10)
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 12.0, 27.0])
