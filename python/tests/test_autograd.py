"""requires_grad / backward / grad, no_grad and gradcheck; the complex gradient
convention checked against PyTorch on the same function."""
import numpy as np
import pytest

import phasor


def test_complex_gradient_matches_torch(torch):
    rng = np.random.default_rng(1)
    z0 = rng.standard_normal(5) + 1j * rng.standard_normal(5)
    w0 = rng.standard_normal(5) + 1j * rng.standard_normal(5)

    # L = sum(|z w + conj(z)|^2 sin(Re z)) + Im(sum(z^2)): neither holomorphic nor real-linear.
    def loss(lib, z, w):
        u = lib.abs(z * w + lib.conj(z))
        return lib.sum(u * u * lib.sin(lib.real(z))) + lib.imag(lib.sum(z * z))

    z, w = phasor.tensor(z0).requires_grad_(), phasor.tensor(w0).requires_grad_()
    loss(phasor, z, w).backward()
    tz = torch.tensor(z0, requires_grad=True)
    tw = torch.tensor(w0, requires_grad=True)
    loss(torch, tz, tw).backward()
    np.testing.assert_allclose(z.grad.numpy(), tz.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12)
    # The convention itself: dL/dx + i dL/dy, here for L = |z|^2 (2z).
    v = phasor.tensor([3 + 4j]).requires_grad_()
    phasor.sum(phasor.square(phasor.abs(v))).backward()
    assert v.grad.item() == 6 + 8j


def test_requires_grad_backward_and_no_grad():
    x = phasor.tensor([1.0, 2.0, 3.0])
    assert not x.requires_grad and x.grad is None
    x.requires_grad = True
    y = phasor.sum(x * x)
    assert y.requires_grad and not y.is_leaf
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])
    with phasor.no_grad():
        assert not phasor.is_grad_enabled()
        assert not (x * 2).requires_grad
    assert phasor.is_grad_enabled()
    z = phasor.tensor([1 + 1j, 2 - 1j]).requires_grad_()
    (z * z).backward(phasor.tensor([1 + 0j, 1 + 0j]))  # a seed: G_z = conj(f'(z)) G = 2 conj(z)
    np.testing.assert_allclose(z.grad.numpy(), 2 * np.conj([1 + 1j, 2 - 1j]), rtol=1e-12)
    with pytest.raises(phasor.Error, match="requires grad"):
        z.fill_(0)


def test_gradcheck_passes_and_can_fail():
    z = phasor.tensor([1 + 2j, -0.5 + 0.25j]).requires_grad_()
    ok = phasor.gradcheck(lambda x: phasor.sum(phasor.square(phasor.abs(phasor.exp(x) * x))), [z])
    assert ok, ok.message
    wrong = phasor.gradcheck(lambda x: phasor.sum(x * x.detach()), [phasor.tensor([1.0, 2.0]).requires_grad_()])
    assert not wrong and "analytic" in wrong.message
