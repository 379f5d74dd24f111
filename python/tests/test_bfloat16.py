"""bfloat16, which NumPy lacks: .to() both ways, the uint16 view (bits / from_bits), and PyTorch's bits."""
import numpy as np
import pytest

import phasor


def float_patterns():
    """Every high half with the low halves that decide rounding (ties included), as float32."""
    high = np.arange(0x10000, dtype=np.uint32) << 16
    lows = np.array([0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF], dtype=np.uint32)
    return (high[:, None] | lows[None, :]).ravel().view(np.float32)


def test_to_bfloat16_matches_torch_bits(torch):
    a = float_patterns()
    got = phasor.Tensor(a).to(phasor.bfloat16).bits()
    want = torch.from_numpy(a).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    nan = np.isnan(a)
    assert np.array_equal(got[~nan], want[~nan])
    # A NaN stays a quiet NaN with its sign (PyTorch writes one NaN pattern for all, signless).
    assert np.all((got[nan] & 0x7F80) == 0x7F80) and np.all((got[nan] & 0x0040) != 0)
    assert np.array_equal(got[nan] >> 15, (a[nan].view(np.uint32) >> 31).astype(np.uint16))
    # Back to float32 exactly, as torch does.
    back = phasor.from_bits(got).to(phasor.float32).numpy()
    want_back = torch.from_numpy(want.view(np.int16)).view(torch.bfloat16).float().numpy()
    assert np.array_equal(back[~nan].view(np.uint32), want_back[~nan].view(np.uint32))


def test_bits_and_from_bits_share_memory():
    t = phasor.tensor([1.0, -2.5, 3.0]).to(phasor.bfloat16)
    assert t.dtype == phasor.bfloat16
    b = t.bits()
    assert b.dtype == np.uint16 and b.shape == (3,)
    assert b.tolist() == [0x3F80, 0xC020, 0x4040]
    b[0] = 0x4000  # 2.0, seen by the tensor
    assert t.tolist() == [2.0, -2.5, 3.0]
    raw = np.array([[0x3F80, 0x7F81], [0x8000, 0xFF80]], dtype=np.uint16)
    u = phasor.from_bits(raw)
    assert u.dtype == phasor.bfloat16 and u.shape == (2, 2) and u.data_ptr == raw.ctypes.data
    raw[0, 0] = 0x4040  # 3.0, seen by the tensor
    assert u.to(phasor.float32).numpy()[0, 0] == 3.0
    assert np.array_equal(u.bits(), raw)  # bits, a signalling NaN's included
    assert np.array_equal(u.transpose(0, 1).bits(), raw.T)  # strided views too


def test_numpy_export_is_refused_with_the_ways_out():
    t = phasor.tensor([1.0, 2.0]).to(phasor.bfloat16)
    ways_out = r"no NumPy view \(NumPy has no bfloat16\): use t.bits\(\).*to\(phasor.float32\)"
    for export in (np.asarray, lambda x: x.numpy()):
        with pytest.raises(phasor.Error, match=ways_out):
            export(t)
    with pytest.raises(BufferError, match=ways_out):  # the buffer protocol's own error type, not an abort
        memoryview(t)
    with pytest.raises(phasor.Error, match="bits\\(\\): the tensor is float64, not bfloat16"):
        phasor.tensor([1.0]).bits()
    with pytest.raises(phasor.Error, match="expected an array of uint16"):
        phasor.from_bits(np.zeros(2, dtype=np.int32))
    with pytest.raises(phasor.Error, match="add: not defined for dtype bfloat16 \\(convert with to\\(float32\\)\\)"):
        t + t
