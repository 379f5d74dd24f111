"""Devices from Python: Tensor.to(device), .cpu(), .cuda(), phasor.cuda, and
what DLPack says of a tensor on device cuda. ctest says which device cuda the
build has (PHASOR_BUILT_CUDA: sim, gpu or none); CI's build has the simulator."""
import os

import numpy as np
import pytest

import phasor

BUILT_CUDA = os.environ.get("PHASOR_BUILT_CUDA")


def built_cuda():
    if BUILT_CUDA not in ("sim", "gpu", "none"):
        pytest.fail("PHASOR_BUILT_CUDA is not set: run these tests through ctest (python_tests)")
    return BUILT_CUDA


def test_device_names_are_checked():
    t = phasor.tensor([1.0])
    assert t.to("cpu") is not None and t.to("cpu").device == "cpu"
    for bad in ("gpu", "cuda:", "cuda:x", "cuda:-1", "CPU"):
        with pytest.raises(ValueError, match="device must be 'cpu', 'cuda' or 'cuda:N'"):
            t.to(bad)


def test_what_phasor_cuda_says_matches_the_build():
    kind = built_cuda()
    assert phasor.cuda.is_simulated() == (kind == "sim")
    if kind == "none":
        assert not phasor.cuda.is_available()
        assert "without CUDA" in phasor.cuda.unavailable_reason()
        with pytest.raises(phasor.Error, match="cuda:0 is not available"):
            phasor.tensor([1.0]).cuda()
    elif kind == "sim":
        assert phasor.cuda.is_available(), phasor.cuda.unavailable_reason()
        assert phasor.cuda.unavailable_reason() == ""


def cuda_or_skip():
    if built_cuda() == "none":
        pytest.skip("this build has no CUDA backend")
    if not phasor.cuda.is_available():  # a GPU build on a machine without a GPU
        pytest.skip("device cuda unavailable: " + phasor.cuda.unavailable_reason())


def test_a_round_trip_through_cuda_keeps_values_and_gradients():
    cuda_or_skip()
    x = phasor.tensor(np.array([1 + 2j, -3 + 0.5j], dtype=np.complex128)).requires_grad_()
    on_gpu = x.cuda()
    assert on_gpu.device == "cuda:0" and on_gpu.dtype == phasor.complex128
    assert on_gpu.to("cuda") is not None
    back = (on_gpu * on_gpu).cpu()
    np.testing.assert_allclose(back.detach().numpy(), np.array([1 + 2j, -3 + 0.5j]) ** 2, rtol=1e-15)
    back.abs().sum().backward()  # the gradient through both copies equals the CPU's own
    y = phasor.tensor(np.array([1 + 2j, -3 + 0.5j], dtype=np.complex128)).requires_grad_()
    (y * y).abs().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-14)
    both = phasor.tensor([1.5, 2.5]).to("cuda", phasor.float32)
    assert both.device == "cuda:0" and both.dtype == phasor.float32
    phasor.cuda.synchronize()
    assert phasor.cuda.memory_allocated() >= 0 and phasor.cuda.max_memory_allocated() >= phasor.cuda.memory_allocated()


def test_dlpack_says_what_a_cuda_tensor_is(torch):
    cuda_or_skip()
    t = phasor.tensor([1.0, 2.0, 3.0]).cuda()
    simulated = built_cuda() == "sim"
    # kDLExtDev (12) on the simulator: host memory no consumer may take for a GPU's, or the CPU's.
    assert t.__dlpack_device__() == ((12, 0) if simulated else (2, 0))
    expected = "cuda:0 \\(the CUDA simulator\\)" if simulated else "cuda:0,"
    with pytest.raises(BufferError, match=expected + ".*only CPU memory is exported: t.cpu\\(\\) copies it"):
        t.__dlpack__()
    with pytest.raises(Exception):
        torch.from_dlpack(t)
    with pytest.raises(Exception):
        np.from_dlpack(t)
    # The array API's cross-device export: a CPU copy where the consumer asks for it and allows copies.
    copied = phasor.from_dlpack(t.__dlpack__(dl_device=(1, 0)))
    assert copied.device == "cpu" and copied.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(BufferError, match="only CPU memory is exported"):
        t.__dlpack__(dl_device=(1, 0), copy=False)
