"""phasor.torch: Phasor's ops inside PyTorch's autograd. gradcheck through the
bridge on each ready-made op (float64, and complex128 where the op takes
complex), wrap() on a function of several inputs and outputs against the same
maths in torch, double backward (gradgradcheck), no copy on the way in, and
`import phasor` without torch."""
import os
import subprocess
import sys

import numpy
import pytest

import phasor
import phasor.torch as pt

B, N, H, D, P = 1, 5, 2, 4, 3


def randn(torch, *shape, dtype, grad=True):
    return torch.randn(*shape, dtype=dtype).requires_grad_(grad)


def test_causal_attention_gradcheck_with_and_without_alibi(torch):
    torch.manual_seed(0)
    q, k, v = (randn(torch, B, N, H, D, dtype=torch.float64) for _ in range(3))
    slopes = torch.tensor([0.5, 0.25], dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda q, k, v: pt.causal_attention(q, k, v), (q, k, v))
    assert torch.autograd.gradcheck(lambda q, k, v: pt.causal_attention(q, k, v, scale=0.3, alibi_slopes=slopes), (q, k, v))


def test_causal_attention_matches_torch_materialised(torch):
    torch.manual_seed(1)
    q, k, v = (randn(torch, B, N, H, D, dtype=torch.float64) for _ in range(3))
    scores = torch.einsum("bihd,bjhd->bhij", q, k) / D**0.5
    scores = scores.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    expected = torch.einsum("bhij,bjhd->bihd", scores.softmax(-1), v)
    got = pt.causal_attention(q, k, v)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=0)
    g = torch.randn_like(got)
    grads = torch.autograd.grad(got, (q, k, v), g)
    for a, b in zip(grads, torch.autograd.grad(expected, (q, k, v), g)):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


def test_cmha_rotate_gradcheck_complex128(torch):
    torch.manual_seed(2)
    z = randn(torch, B, N, H, P, dtype=torch.complex128)
    delta, bias = (randn(torch, H, P, dtype=torch.float64) for _ in range(2))
    beta = randn(torch, H, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda *a: pt.cmha_rotate(*a, offset=2), (z, delta, bias, beta))
    assert torch.autograd.gradcheck(lambda z, d, b: pt.cmha_rotate(z, d, None, b), (z, delta, beta))  # keys: no phase bias


def test_rotary_gradcheck_complex128_and_values(torch):
    torch.manual_seed(3)
    z = randn(torch, B, N, H, P, dtype=torch.complex128)
    table = torch.from_dlpack(phasor.rotary_table(N, P, offset=1, dtype=phasor.complex128))
    assert torch.autograd.gradcheck(lambda z: pt.rotary(z, table), (z,))
    m = torch.arange(1, N + 1, dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(P, dtype=torch.float64) / P)
    torch.testing.assert_close(table, torch.polar(torch.ones_like(m), m), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(pt.rotary(z, table), z * table[None, :, None, :], rtol=1e-12, atol=0)


def test_wrap_several_inputs_and_outputs_matches_torch(torch):
    torch.manual_seed(4)
    a = randn(torch, 3, 4, dtype=torch.complex128)
    b = randn(torch, 4, 2, dtype=torch.complex128)
    fn = pt.wrap(lambda a, b, c: (phasor.matmul(a, b) * c, (a * a.conj()).real.sum()))
    prod, norm = fn(a, b, 0.5)
    torch.testing.assert_close(prod, (a @ b) * 0.5, rtol=1e-12, atol=0)
    assert torch.autograd.gradcheck(lambda a, b: fn(a, b, 0.5), (a, b))
    # An output that takes no part in the loss leaves no gradient behind.
    (ga,) = torch.autograd.grad(norm, (a,))
    torch.testing.assert_close(ga, 2 * a.detach(), rtol=1e-12, atol=0)


def test_wrap_reads_the_inputs_without_a_copy(torch):
    x = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    seen = []
    pt.wrap(lambda t: seen.append(t) or t * 2)(x)
    assert numpy.asarray(seen[0]).ctypes.data == x.data_ptr()


def test_import_without_torch_then_a_clear_error_on_use():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import phasor, phasor.torch\n"
            "try:\n    phasor.torch.wrap(lambda x: x)\nexcept ImportError as e:\n    print('ImportError', e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ), check=True)
    assert done.stdout.startswith("ImportError"), done.stdout + done.stderr


def test_double_backward_through_wrap(torch):
    """Under create_graph the bridge's backward is itself differentiable: torch's gradgradcheck
    passes, and a Hessian-vector product matches the same maths written in torch."""
    torch.manual_seed(5)
    a = randn(torch, 3, 4, dtype=torch.complex128)
    b = randn(torch, 4, 2, dtype=torch.complex128)
    fn = pt.wrap(lambda a, b, c: (phasor.matmul(a, b) * c, (a * a.conj()).real.sum()))
    assert torch.autograd.gradgradcheck(lambda a, b: fn(a, b, 0.5), (a, b))
    x = randn(torch, 5, dtype=torch.float64)
    v = torch.randn(5, dtype=torch.float64)
    f = pt.wrap(lambda x: (x.sin() * x * x).sum())
    (g,) = torch.autograd.grad(f(x), (x,), create_graph=True)
    (hv,) = torch.autograd.grad(g, (x,), v)
    xd = x.detach()
    hessian_diagonal = -xd.sin() * xd * xd + 4 * xd.cos() * xd + 2 * xd.sin()  # (x^2 sin x)''
    torch.testing.assert_close(hv, hessian_diagonal * v, rtol=1e-12, atol=0)


def test_gradgradcheck_of_the_ready_made_ops(torch):
    torch.manual_seed(6)
    q, k, v = (randn(torch, B, N, H, D, dtype=torch.float64) for _ in range(3))
    slopes = torch.tensor([0.5, 0.25], dtype=torch.float64)
    assert torch.autograd.gradgradcheck(lambda q, k, v: pt.causal_attention(q, k, v, alibi_slopes=slopes), (q, k, v))
    z = randn(torch, B, N, H, P, dtype=torch.complex128)
    delta, bias = (randn(torch, H, P, dtype=torch.float64) for _ in range(2))
    beta = randn(torch, H, dtype=torch.float64)
    assert torch.autograd.gradgradcheck(lambda *a: pt.cmha_rotate(*a, offset=2), (z, delta, bias, beta))
    table = torch.from_dlpack(phasor.rotary_table(N, P, offset=1, dtype=phasor.complex128))
    assert torch.autograd.gradgradcheck(lambda z: pt.rotary(z, table), (z,))


# Phasor's graph reads the memory of the bridge's inputs and outputs at backward,
# which torch's version counters do not guard: a change in place since the
# forward must raise as torch's own ops do, never give wrong gradients.
INPLACE = "modified by an inplace operation"


def test_an_output_changed_in_place_is_refused_at_backward(torch):
    torch.manual_seed(7)
    q, k, v = (randn(torch, B, N, H, D, dtype=torch.float64) for _ in range(3))
    out = pt.causal_attention(q, k, v)
    out.mul_(3)
    with pytest.raises(RuntimeError, match=INPLACE):
        (out * out).sum().backward()
    # The same under create_graph (the differentiable backward).
    out = pt.causal_attention(q, k, v)
    out[0].zero_()  # through a view: it shares the output's version counter
    with pytest.raises(RuntimeError, match=INPLACE):
        torch.autograd.grad((out * out).sum(), (q,), create_graph=True)


def test_an_input_changed_in_place_after_the_forward_is_refused_at_backward(torch):
    torch.manual_seed(8)
    q, k0, v = (randn(torch, B, N, H, D, dtype=torch.float64) for _ in range(3))
    k = k0 * 1  # not a leaf, so torch lets it change in place
    out = pt.causal_attention(q, k, v)
    k.add_(1)
    with pytest.raises(RuntimeError, match=INPLACE):
        out.sum().backward()
    # A rotary table that needs no gradient is read by the backward all the same.
    z = randn(torch, B, N, H, P, dtype=torch.complex128)
    table = torch.from_dlpack(phasor.rotary_table(N, P, dtype=phasor.complex128)).clone()
    out = pt.rotary(z, table)
    table.mul_(10)
    with pytest.raises(RuntimeError, match=INPLACE):
        out.abs().sum().backward()


def test_wrap_refuses_an_input_or_output_changed_in_place(torch):
    torch.manual_seed(9)
    a, b0 = randn(torch, 4, dtype=torch.float64), randn(torch, 4, dtype=torch.float64)
    fn = pt.wrap(lambda a, b: (a * b, a.exp()))
    b = b0 * 1
    prod, _ = fn(a, b)
    b.mul_(2)
    with pytest.raises(RuntimeError, match=INPLACE):
        prod.sum().backward()
    _, e = fn(a, b0)  # exp's backward reads its own output
    e.add_(1)
    with pytest.raises(RuntimeError, match=INPLACE):
        e.sum().backward()
    # Unchanged, the gradients are the right ones.
    prod, e = fn(a, b0)
    (ga,) = torch.autograd.grad((prod + e).sum(), (a,))
    torch.testing.assert_close(ga, b0.detach() + a.detach().exp(), rtol=1e-12, atol=0)


def test_causal_attention_with_a_value_width_and_a_distance_bias_matches_torch(torch):
    """complexformer-seed's and pope's attention: v narrower than q and k, and a bias per head and distance
    (clamped at R), whose gradient reaches torch."""
    torch.manual_seed(2)
    R, DV = 2, 3
    q, k = (randn(torch, B, N, H, D, dtype=torch.float64) for _ in range(2))
    v = randn(torch, B, N, H, DV, dtype=torch.float64)
    bias = randn(torch, H, R + 1, dtype=torch.float64)
    i = torch.arange(N)
    bins = (i[:, None] - i[None, :]).clamp(0, R)
    scores = torch.einsum("bihd,bjhd->bhij", q, k) / D**0.5 + bias[:, bins]
    scores = scores.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    expected = torch.einsum("bhij,bjhd->bihd", scores.softmax(-1), v)
    got = pt.causal_attention(q, k, v, distance_bias=bias)
    assert got.shape == (B, N, H, DV)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=0)
    g = torch.randn_like(got)
    for a, b in zip(torch.autograd.grad(got, (q, k, v, bias), g), torch.autograd.grad(expected, (q, k, v, bias), g)):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
    assert torch.autograd.gradcheck(lambda q, k, v, b: pt.causal_attention(q, k, v, distance_bias=b), (q, k, v, bias))


def test_polar_rotate_gradcheck_and_values_against_torch(torch):
    """pope's (softplus, a shared angle), complexformer-seed's (tanh, a gain) and carope's (complex z) forms."""
    torch.manual_seed(9)
    x = randn(torch, B, N, H, D, dtype=torch.float64)
    table = randn(torch, N, 1, D, dtype=torch.float64)
    angle = randn(torch, B, N, H, D, dtype=torch.float64)
    gain = randn(torch, H, dtype=torch.float64)
    z = randn(torch, B, N, H, P, dtype=torch.complex128)
    phase = randn(torch, B, N, H, P, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda x, t: pt.polar_rotate(x, t, magnitude="softplus"), (x, table))
    assert torch.autograd.gradcheck(lambda x, a, g: pt.polar_rotate(x, a, g, angle_map="tanh"), (x, angle, gain))
    assert torch.autograd.gradcheck(lambda z, a: pt.polar_rotate(z, a), (z, phase))
    turn = lambda a: torch.polar(torch.ones_like(a), a)
    torch.testing.assert_close(pt.polar_rotate(x, table, magnitude="softplus"),
                               torch.nn.functional.softplus(x) * turn(table), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(pt.polar_rotate(x, angle, gain, angle_map="tanh"),
                               x * gain[None, None, :, None] * turn(torch.tanh(angle)), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(pt.polar_rotate(z, phase), z * turn(phase), rtol=1e-12, atol=1e-14)
    with pytest.raises(Exception, match="magnitude must be 'identity' or 'softplus'"):
        pt.polar_rotate(x, table, magnitude="relu")


def test_cumsum_matches_torch(torch):
    torch.manual_seed(10)
    x = torch.randn(3, 5, 2, dtype=torch.float64)
    got = phasor.cumsum(phasor.from_dlpack(x), 1)
    torch.testing.assert_close(torch.from_dlpack(got), torch.cumsum(x, 1), rtol=1e-12, atol=1e-14)
    assert torch.autograd.gradcheck(pt.wrap(lambda t: phasor.cumsum(t * t, 0)), (x.requires_grad_(),))
