"""Python's protocols on a tensor (iteration, indexing, truth, numbers), no_grad
as a context manager, and what phasor.tensor() converts, as PyTorch has them."""
import operator

import numpy as np
import pytest

import phasor


def test_iteration_and_indexing_over_dim_0():
    t = phasor.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    assert len(t) == 3
    assert [row.tolist() for row in t] == t.tolist()
    assert [row.tolist() for row in list(t)] == t.tolist()
    assert t[-1].tolist() == [5.0, 6.0]
    for i in (3, -4, 2**40):
        with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 3"):
            t[i]
    assert list(phasor.zeros([0, 2])) == []


def test_a_0d_tensor_has_no_rows():
    s = phasor.tensor(2.0)
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(s)
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(s)
    with pytest.raises(IndexError, match="tensor is 0-dimensional, but 1 were indexed"):
        s[0]
    with pytest.raises(IndexError, match="tensor is 0-dimensional"):
        phasor.tensor([1.0, 2.0, 3.0])[0][0]


def test_truth_of_a_tensor_is_its_one_value(torch):
    for value in (5.0, 0.0, -0.0, float("nan"), 1j, 0j, 3, 0, True, False):
        assert bool(phasor.tensor(value)) is bool(torch.tensor(value)), value
    assert bool(phasor.tensor([[2.0]])) is True and bool(phasor.tensor([0.0])) is False
    with pytest.raises(phasor.Error, match="Boolean value of a tensor with more than one value is ambiguous"):
        bool(phasor.tensor([1.0, 2.0]))
    with pytest.raises(phasor.Error, match="Boolean value of a tensor with no values is ambiguous"):
        bool(phasor.zeros([0]))


def test_number_protocols():
    assert float(phasor.tensor(2.5)) == 2.5 and isinstance(float(phasor.tensor(3)), float)
    assert int(phasor.tensor(2.7)) == 2 and int(phasor.tensor(-2.7)) == -2
    assert complex(phasor.tensor(1 + 2j)) == 1 + 2j
    assert [10, 20, 30][phasor.tensor(1)] == 20 and operator.index(phasor.tensor([2])) == 2
    with pytest.raises(TypeError, match="only integer tensors"):
        operator.index(phasor.tensor(2.0))
    with pytest.raises(TypeError):
        float(phasor.tensor(1j))  # as float(1j)
    with pytest.raises(ValueError):
        int(phasor.tensor(float("nan")))
    with pytest.raises(phasor.Error, match="not 1"):
        float(phasor.tensor([1.0, 2.0]))


def test_one_no_grad_object_entered_twice():
    ng = phasor.no_grad()
    assert phasor.is_grad_enabled()
    with ng:
        with ng:
            assert not phasor.is_grad_enabled()
        assert not phasor.is_grad_enabled()  # the inner exit restores the outer block's mode
        x = phasor.ones([2], dtype=phasor.float64).requires_grad_()
        assert not (x * x).requires_grad
    assert phasor.is_grad_enabled()
    with ng:  # and it can be used again afterwards
        assert not phasor.is_grad_enabled()
    assert phasor.is_grad_enabled()


@pytest.mark.parametrize("np_dtype,dtype", [
    (">f8", phasor.float64), (">f4", phasor.float32), (">c16", phasor.complex128), (">i8", phasor.int64),
    (">i4", phasor.int64), ("<f2", phasor.float32), (">f2", phasor.float32), ("u1", phasor.int64), ("?", phasor.bool),
])
def test_tensor_copies_any_byte_order_and_float16(np_dtype, dtype):
    a = np.array([0, 1, 0.5 if np.dtype(np_dtype).kind in "fc" else 1, 2], dtype=np_dtype)
    t = phasor.tensor(a)
    assert t.dtype == dtype
    np.testing.assert_array_equal(np.asarray(t), a.astype(np.asarray(t).dtype))
    assert not np.shares_memory(np.asarray(t), a)
    if np.dtype(np_dtype).byteorder == ">":
        with pytest.raises(phasor.Error, match=r"not supported.*phasor.tensor\(\)"):
            phasor.Tensor(a)  # sharing needs the machine's order: refused, with the way out


def test_unsigned_values_past_int64_are_refused():
    largest = 2**63 - 1
    assert phasor.tensor(np.uint64(largest)).item() == largest
    assert phasor.tensor(np.array([0, largest], dtype=np.uint64)).tolist() == [0, largest]
    for data in (np.uint64(2**63), np.array([1, 2**64 - 1], dtype=np.uint64), 2**63):
        with pytest.raises(OverflowError, match="does not fit in int64"):
            phasor.tensor(data)
    with pytest.raises(phasor.Error, match="has no Phasor dtype"):
        phasor.tensor(np.array(["a", "b"]))
