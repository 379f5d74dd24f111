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


def test_hessian_vector_product_matches_torch(torch):
    """The second order of a complex function: phasor.hvp and grad(create_graph)
    against torch.autograd.grad with create_graph, on the same loss and direction."""
    rng = np.random.default_rng(2)
    z0 = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    r0 = rng.standard_normal(4)
    v0 = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    u0 = rng.standard_normal(4)

    def loss(lib, z, r):
        u = lib.abs(z * z + lib.conj(z) * r)
        return lib.sum(u * u * lib.cos(r)) + lib.real(lib.sum(lib.exp(z * 0.5)))

    z, r = phasor.tensor(z0).requires_grad_(), phasor.tensor(r0).requires_grad_()
    hz, hr = phasor.hvp(loss(phasor, z, r), [z, r], [phasor.tensor(v0), phasor.tensor(u0)])

    tz = torch.tensor(z0, requires_grad=True)
    tr = torch.tensor(r0, requires_grad=True)
    gz, gr = torch.autograd.grad(loss(torch, tz, tr), [tz, tr], create_graph=True)
    # <g, v> as real vectors: Re sum(conj(g) v), the inner product under which z.grad is the gradient.
    inner = torch.real(torch.sum(torch.conj(gz) * torch.tensor(v0))) + torch.sum(gr * torch.tensor(u0))
    want_z, want_r = torch.autograd.grad(inner, [tz, tr], retain_graph=True)
    np.testing.assert_allclose(hz.numpy(), want_z.numpy(), rtol=1e-10)
    np.testing.assert_allclose(hr.numpy(), want_r.numpy(), rtol=1e-10)

    # The same through grad() and backward(create_graph=True).
    (g,) = phasor.grad([loss(phasor, z, r)], [z], create_graph=True)
    assert g.requires_grad
    np.testing.assert_allclose(g.detach().numpy(), gz.detach().numpy(), rtol=1e-12)
    (hv_z,) = phasor.grad([phasor.real(phasor.sum(phasor.conj(g) * phasor.tensor(v0)))], [z])
    # Only the z part of the direction: the z-z block of the Hessian, against torch's.
    (want_zz,) = torch.autograd.grad(torch.real(torch.sum(torch.conj(gz) * torch.tensor(v0))), [tz])
    np.testing.assert_allclose(hv_z.numpy(), want_zz.numpy(), rtol=1e-10)
    assert phasor.grad([phasor.real(phasor.sum(z * z))], [r], allow_unused=True) == [None]


def test_jvp_and_gradgradcheck():
    z = phasor.tensor([1 + 2j]).requires_grad_()
    out, tangent = phasor.jvp(lambda x: x * x, [z], [phasor.tensor([1 + 1j])])  # d(z^2) = 2 z dz
    assert out.item() == pytest.approx(-3 + 4j, rel=1e-12)
    assert tangent.item() == pytest.approx(2 * (1 + 2j) * (1 + 1j), rel=1e-12)
    ok = phasor.gradgradcheck(lambda x: phasor.sum(phasor.square(phasor.abs(phasor.exp(x) * x))), [z])
    assert ok, ok.message
    # detach() hides a dependence from the derivatives: the check must fail.
    wrong = phasor.gradgradcheck(lambda x: phasor.sum(x * x.detach() * x), [phasor.tensor([1.0, 2.0]).requires_grad_()])
    assert not wrong
