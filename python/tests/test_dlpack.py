"""DLPack both ways with torch and NumPy: the values, and the memory shared
(a write on one side is seen on the other)."""
import ctypes
import gc
import subprocess
import sys

import numpy as np
import pytest

import phasor

DTYPES = [np.float32, np.float64, np.complex64, np.complex128, np.int64]


def sample(dtype, shape=(3, 4)):
    a = np.arange(np.prod(shape)).reshape(shape) - 5
    return (a * (1.5 + 0.5j) if np.dtype(dtype).kind == "c" else a * (0.5 if np.dtype(dtype).kind == "f" else 1)).astype(dtype)


def write_one(x):
    """Writes 42 into the first element through x (torch, NumPy or Phasor)."""
    x[(0,) * x.ndim] = 42


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_torch_reads_phasor_without_a_copy(dtype, torch):
    t = phasor.tensor(sample(dtype))
    for consume in (torch.from_dlpack, lambda x: torch.utils.dlpack.from_dlpack(x.__dlpack__())):
        u = consume(t)
        np.testing.assert_array_equal(u.numpy(), sample(dtype))
        assert u.data_ptr() == t.data_ptr
        write_one(u)
        assert t[0, 0].item() == 42
        t.fill_(0)
        assert (u == 0).all()
        t.copy_(phasor.tensor(sample(dtype)))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_phasor_reads_torch_without_a_copy(dtype, torch):
    u = torch.tensor(sample(dtype))
    for t in (phasor.from_dlpack(u), phasor.from_dlpack(torch.utils.dlpack.to_dlpack(u))):
        assert t.dtype == getattr(phasor, np.dtype(dtype).name)
        np.testing.assert_array_equal(t.numpy(), sample(dtype))
        assert t.data_ptr == u.data_ptr()
        t[0, 0] = 42
        assert u[0, 0].item() == 42
        u.fill_(0)
        assert (t.numpy() == 0).all()
        u.copy_(torch.tensor(sample(dtype)))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_both_ways(dtype):
    t = phasor.tensor(sample(dtype))
    a = np.from_dlpack(t)  # read-only in NumPy 1.24: the write goes through t
    np.testing.assert_array_equal(a, sample(dtype))
    write_one(t)
    assert a[0, 0] == 42
    b = sample(dtype)
    s = phasor.from_dlpack(b)
    s[1, 2] = 7
    assert b[1, 2] == 7


def test_strided_and_0d_tensors(torch):
    base = torch.arange(24, dtype=torch.float64).reshape(4, 6)
    view = base[1:, ::2].t()  # non-contiguous, offset
    t = phasor.from_dlpack(view)
    np.testing.assert_array_equal(t.numpy(), view.numpy())
    t[0, 0] = -1.0
    assert base[1, 0].item() == -1.0
    p = phasor.tensor(np.arange(24.0).reshape(4, 6))
    u = torch.from_dlpack(p[1:, ::2].T)
    np.testing.assert_array_equal(u.numpy(), np.arange(24.0).reshape(4, 6)[1:, ::2].T)
    assert u.stride() == (2, 6)
    zero_d = torch.from_dlpack(phasor.tensor(3.5))
    assert zero_d.shape == () and zero_d.item() == 3.5
    assert phasor.from_dlpack(torch.tensor(2.0 + 1j)).item() == 2.0 + 1j


def test_bool_and_bfloat16_round_trip_through_phasor():
    for t in (phasor.tensor([True, False, True]), phasor.tensor([1.5, -2.0]).to(phasor.bfloat16)):
        back = phasor.from_dlpack(t.__dlpack__())
        assert back.dtype == t.dtype and back.tolist() == t.tolist()
        assert back.data_ptr == t.data_ptr


def test_the_capsule_keeps_the_tensor_alive(torch):
    capsule = phasor.tensor(sample(np.float64)).__dlpack__()
    gc.collect()  # the Python tensor is gone: the capsule holds its memory
    np.testing.assert_array_equal(torch.utils.dlpack.from_dlpack(capsule).numpy(), sample(np.float64))
    u = torch.from_dlpack(phasor.tensor(sample(np.complex64)))
    gc.collect()
    np.testing.assert_array_equal(u.numpy(), sample(np.complex64))
    unconsumed = phasor.tensor([1.0]).__dlpack__()
    del unconsumed  # an unconsumed capsule frees its export itself (no crash, no double free under ASan)


def test_the_producer_stays_alive_while_phasor_holds_its_memory(torch):
    t = phasor.from_dlpack(np.arange(5.0) * 2)  # the array has no other reference
    s = phasor.from_dlpack(torch.arange(4, dtype=torch.float32))
    gc.collect()
    assert t.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0] and s.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_a_capsule_is_consumed_once(torch):
    capsule = phasor.tensor([1.0, 2.0]).__dlpack__()
    phasor.from_dlpack(capsule)
    with pytest.raises(ValueError, match="not an unconsumed DLPack tensor"):
        phasor.from_dlpack(capsule)


def test_the_array_api_arguments():
    t = phasor.tensor([1.0, 2.0])
    assert t.__dlpack_device__() == (1, 0)  # kDLCPU
    copied = phasor.from_dlpack(t.__dlpack__(copy=True))
    copied.fill_(0.0)
    assert t.tolist() == [1.0, 2.0]
    assert phasor.from_dlpack(t, copy=True).data_ptr != t.data_ptr
    versioned = t.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(versioned)
    assert phasor.from_dlpack(versioned).data_ptr == t.data_ptr
    with pytest.raises(BufferError, match="stream must be None"):
        t.__dlpack__(stream=1)
    with pytest.raises(BufferError, match="dl_device"):
        t.__dlpack__(dl_device=(2, 0))


def test_a_tensor_that_requires_grad_is_refused_or_read_only(torch):
    w = phasor.tensor([1.0, 2.0]).requires_grad_()
    with pytest.raises(BufferError, match="requires grad.*t.detach"):
        torch.from_dlpack(w)
    read_only = phasor.from_dlpack(w.__dlpack__(max_version=(1, 0)))  # DLPack 1.0 flags it read-only: Phasor copies
    assert read_only.tolist() == [1.0, 2.0] and read_only.data_ptr != w.data_ptr
    assert torch.from_dlpack(w.detach()).data_ptr() == w.data_ptr


def test_bad_input_is_one_line(torch):
    with pytest.raises(TypeError, match="expected an object with __dlpack__ or a DLPack capsule, got list"):
        phasor.from_dlpack([1.0])
    with pytest.raises(BufferError, match="negative strides"):
        phasor.from_dlpack(np.arange(4.0)[::-1])
    with pytest.raises(BufferError, match="not one of float32"):
        phasor.from_dlpack(np.arange(4, dtype=np.int32))


class _Producer:
    """An object with __dlpack__ that returns `returned` (or raises it)."""

    def __init__(self, returned):
        self.returned = returned

    def __dlpack__(self, **kwargs):
        if isinstance(self.returned, Exception):
            raise self.returned
        return self.returned


def test_a_producer_that_returns_no_capsule_is_a_type_error():
    with pytest.raises(TypeError, match=r"_Producer.__dlpack__\(\) returned int, not a DLPack capsule"):
        phasor.from_dlpack(_Producer(5))
    with pytest.raises(TypeError, match=r"returned Tensor, not a DLPack capsule"):  # a producer is not followed
        phasor.from_dlpack(_Producer(phasor.tensor([1.0])))
    with pytest.raises(TypeError, match="returned _Producer, not a DLPack capsule"):
        phasor.from_dlpack(_Producer(_Producer(phasor.tensor([1.0]))))


def test_producers_that_return_each_other_end_in_a_type_error_not_a_crash():
    """Each one's __dlpack__ returns the other: followed, the chain never ends
    (it overflowed the stack: exit 139). In a process of its own, so that a
    crash fails this test alone."""
    script = (
        "import phasor\n"
        "class P:\n"
        "    def __dlpack__(self, **kwargs): return self.other\n"
        "a, b = P(), P()\n"
        "a.other, b.other = b, a\n"
        "try:\n"
        "    phasor.from_dlpack(a)\n"
        "except TypeError as e:\n"
        "    print(e)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "P.__dlpack__() returned P, not a DLPack capsule" in run.stdout


def test_a_producer_that_returns_a_used_capsule_is_a_value_error():
    capsule = phasor.tensor([1.0, 2.0]).__dlpack__()
    phasor.from_dlpack(capsule)
    with pytest.raises(ValueError, match="not an unconsumed DLPack tensor"):
        phasor.from_dlpack(_Producer(capsule))


def test_a_producers_own_exception_propagates():
    with pytest.raises(KeyError, match="the producer's own"):
        phasor.from_dlpack(_Producer(KeyError("the producer's own")))
    with pytest.raises(BufferError, match="cannot export"):
        phasor.from_dlpack(_Producer(BufferError("cannot export")))


def test_a_producer_whose_device_is_no_pair_is_a_type_error():
    class OddDevice(_Producer):
        def __dlpack_device__(self):
            return "cpu"

    with pytest.raises(TypeError, match=r"__dlpack_device__\(\) returned str, not a \(device type, index\) pair"):
        phasor.from_dlpack(OddDevice(phasor.tensor([1.0]).__dlpack__()))


def test_a_malformed_dltensor_is_a_buffer_error():
    """A capsule whose DLTensor has dimensions but no shape: refused before it is read."""

    class Device(ctypes.Structure):
        _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]

    class DataType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]

    class ManagedTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device", Device), ("ndim", ctypes.c_int32), ("dtype", DataType),
                    ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                    ("byte_offset", ctypes.c_uint64), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]

    data = (ctypes.c_float * 4)()
    managed = ManagedTensor(ctypes.cast(data, ctypes.c_void_p), Device(1, 0), 2, DataType(2, 32, 1), None, None, 0, None, None)
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    capsule = new_capsule(ctypes.addressof(managed), b"dltensor", None)
    with pytest.raises(BufferError, match=r"malformed DLTensor \(ndim 2, no shape\)"):
        phasor.from_dlpack(capsule)
