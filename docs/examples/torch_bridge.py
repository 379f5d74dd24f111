"""A ComplexFormer attention layer in PyTorch, its rotation and its causal
attention run by Phasor's fused kernels through phasor.torch, trained in an
ordinary PyTorch loop beside the same layer written in plain PyTorch.

Both layers start from the same weights and see the same batches; at every
step their losses must agree, and at the first their gradients (relative
tolerances). The script prints both losses as they fall and exits non-zero
(printing MISMATCH) when they part or the loss does not fall.

    PYTHONPATH=build/python python3 docs/examples/torch_bridge.py
"""
import sys

import torch

import phasor.torch as pt

EULER_EPS = 1e-9  # inside the Euler transform's modulus (tensor/fused_ops.h, kEulerEps)


def reference_cmha_rotate(z, delta, phase_bias, beta, rope_base=10000.0):
    """ComplexFormer's rotation in plain torch: r exp(i (delta phi + phase_bias + beta m w_j))."""
    n, pairs = z.shape[1], z.shape[3]
    r = torch.sqrt(z.real**2 + z.imag**2 + EULER_EPS)
    phi = torch.atan2(z.imag, z.real)
    w = rope_base ** (-torch.arange(pairs, dtype=torch.float64) / pairs)
    angles = (torch.arange(n, dtype=torch.float64)[:, None] * w).to(r.dtype)  # [N, P]
    theta = delta * phi + beta[:, None] * angles[:, None, :]
    if phase_bias is not None:
        theta = theta + phase_bias
    return torch.polar(r, theta)


def reference_causal_attention(q, k, v):
    """softmax(q k^T / sqrt(d), causal) v, every score materialised: [B, H, N, N]."""
    n = q.shape[1]
    scores = torch.einsum("bihd,bjhd->bhij", q, k) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return torch.einsum("bhij,bjhd->bihd", scores.softmax(-1), v)


class ComplexFormerAttention(torch.nn.Module):
    """Projections to complex queries and keys, ComplexFormer's rotation of both
    (queries with a phase bias), causal attention over their real views, and an
    output projection. `rotate` and `attend` run the rotation and the attention."""

    def __init__(self, dim, heads, pairs, rotate, attend):
        super().__init__()
        self.heads, self.pairs, self.rotate, self.attend = heads, pairs, rotate, attend
        width = heads * 2 * pairs
        self.q, self.k, self.v = (torch.nn.Linear(dim, width, dtype=torch.float64) for _ in range(3))
        self.out = torch.nn.Linear(width, dim, dtype=torch.float64)
        self.delta = torch.nn.Parameter(1 + 0.1 * torch.randn(heads, pairs, dtype=torch.float64))
        self.phase_bias = torch.nn.Parameter(0.1 * torch.randn(heads, pairs, dtype=torch.float64))
        self.beta = torch.nn.Parameter(torch.ones(heads, dtype=torch.float64))

    def forward(self, x):
        b, n, _ = x.shape
        complex_view = lambda t: torch.view_as_complex(t.reshape(b, n, self.heads, self.pairs, 2))
        real_view = lambda z: torch.view_as_real(z).reshape(b, n, self.heads, 2 * self.pairs)
        q = self.rotate(complex_view(self.q(x)), self.delta, self.phase_bias, self.beta)
        k = self.rotate(complex_view(self.k(x)), self.delta, None, self.beta)
        v = self.v(x).reshape(b, n, self.heads, 2 * self.pairs)
        return self.out(self.attend(real_view(q), real_view(k), v).reshape(b, n, -1))


def relative_error(a, b):
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def main():
    torch.manual_seed(0)
    dim, heads, pairs, n = 16, 2, 4, 12
    bridged = ComplexFormerAttention(dim, heads, pairs, pt.cmha_rotate, pt.causal_attention)
    reference = ComplexFormerAttention(dim, heads, pairs, reference_cmha_rotate, reference_causal_attention)
    reference.load_state_dict(bridged.state_dict())
    optimizers = [torch.optim.Adam(m.parameters(), lr=1e-2) for m in (bridged, reference)]
    target_layer = torch.nn.Linear(dim, dim, dtype=torch.float64)  # the teacher: a causal running mean through a map
    ok, losses = True, []
    for step in range(40):
        x = torch.randn(4, n, dim, dtype=torch.float64)
        with torch.no_grad():
            target = target_layer(x.cumsum(1) / torch.arange(1, n + 1, dtype=torch.float64)[:, None])
        pair = []
        for model, opt in zip((bridged, reference), optimizers):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), target)
            loss.backward()
            pair.append(loss.item())
        if step == 0:
            for (name, p), q in zip(bridged.named_parameters(), reference.parameters()):
                error = relative_error(p.grad, q.grad)
                if error > 1e-6:
                    print(f"MISMATCH: the gradient of {name} differs by {error:.2e} (relative)")
                    ok = False
        for opt in optimizers:
            opt.step()
        if abs(pair[0] - pair[1]) > 1e-6 * abs(pair[1]):
            print(f"MISMATCH: step {step}: loss {pair[0]:.10f} through phasor.torch, {pair[1]:.10f} in plain torch")
            ok = False
        if step % 5 == 0 or step == 39:
            print(f"step {step:2d}  loss {pair[0]:.6f} (phasor.torch)  {pair[1]:.6f} (plain torch)")
        losses.append(pair[0])
    if not losses[-1] < 0.5 * losses[0]:
        print(f"MISMATCH: the loss fell from {losses[0]:.4f} only to {losses[-1]:.4f}")
        ok = False
    if ok:
        print("losses agree at every step and gradients at the first; the loss fell to "
              f"{losses[-1] / losses[0]:.1%} of the first")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
