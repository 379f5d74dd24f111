"""phasor.torch: Phasor's ops inside PyTorch's autograd.

wrap(fn) turns a function of Phasor tensors into a function of torch tensors
that PyTorch's autograd differentiates: the tensors cross through DLPack
without copies, and the backward runs Phasor's backward. causal_attention,
cmha_rotate, polar_rotate and rotary are the fused Phasor ops so wrapped, with torch's
signatures. torch is imported on first use, so `import phasor` works without it.

The source of this submodule is compiled into the module (python/CMakeLists.txt)
and run by it at import (python/module.cpp), so the module stays a single file.
_phasor, the module itself, is set before this runs: `import phasor` would not
find it yet, as Python registers an extension module once its init returns.
"""
import functools as _functools


def _torch():
    import torch
    return torch


def _to_phasor(x):
    """A Phasor tensor over x's memory; torch tensors that need grad become Phasor leaves that need grad."""
    p = _phasor.from_dlpack(x.detach())
    if x.requires_grad:
        p.requires_grad_(True)
    return p


def _to_torch(p):
    return _torch().from_dlpack(p.detach())


def _is_tensor(x):
    return isinstance(x, _torch().Tensor)


_SAVED = object()  # in ctx.args, the place of a tensor argument (kept by save_for_backward)


def wrap(fn):
    """fn(*args) of Phasor tensors (and any other arguments) -> a function of torch tensors,
    differentiable by torch.autograd through Phasor's backward. fn returns a tensor or a tuple of them.
    The Phasor graph lives as long as torch's (backward may run more than once, as gradcheck does).
    Under create_graph=True the backward is itself a wrapped function (fn's vector-Jacobian product,
    recomputed with Phasor's create_graph), so torch differentiates it again: double backward and
    gradgradcheck work to any order Phasor's ops have."""
    torch = _torch()

    class _Function(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            inputs = [_to_phasor(a) if _is_tensor(a) else a for a in args]
            out = fn(*inputs)
            ctx.single = not isinstance(out, (tuple, list))
            outs = [out] if ctx.single else list(out)
            ctx.outputs = outs
            ctx.needs = [i for i, a in enumerate(inputs) if isinstance(a, _phasor.Tensor) and a.requires_grad]
            ctx.inputs = [inputs[i] for i in ctx.needs]
            ctx.args = [_SAVED if _is_tensor(a) else a for a in args]  # the tensors are saved below
            results = tuple(_to_torch(o) for o in outs)
            # Phasor's graph reads the inputs' and outputs' memory at backward, where torch's version
            # counters never reach it: saving them too makes torch check, when backward reads
            # ctx.saved_tensors, that none was changed in place since (_check_unchanged).
            ctx.n_inputs = sum(1 for a in args if _is_tensor(a))
            ctx.save_for_backward(*[a for a in args if _is_tensor(a)], *results)
            return results[0] if ctx.single else results

        @staticmethod
        def backward(ctx, *grads):
            _check_unchanged(ctx)
            if torch.is_grad_enabled():  # create_graph=True: a backward torch can differentiate
                return _differentiable_backward(fn, ctx, grads)
            grads_in = [None] * len(ctx.needs_input_grad)
            used = [(o, g) for o, g in zip(ctx.outputs, grads) if g is not None and o.requires_grad]
            if used and ctx.inputs:
                found = _phasor.grad([o for o, _ in used], ctx.inputs,
                                     [_phasor.from_dlpack(g.contiguous()) for _, g in used], retain_graph=True,
                                     allow_unused=True)
                for i, g in zip(ctx.needs, found):
                    grads_in[i] = None if g is None else _to_torch(g).clone()
            return tuple(grads_in)

    @_functools.wraps(fn)
    def wrapped(*args):
        return _Function.apply(*args)

    return wrapped


def _check_unchanged(ctx):
    """Raises torch's own RuntimeError ("... modified by an inplace operation ...") when an input or an
    output of the forward was changed in place since: reading ctx.saved_tensors compares versions."""
    ctx.saved_tensors


def _differentiable_backward(fn, ctx, grads):
    """The vector-Jacobian product of fn at ctx's inputs, as a wrapped function of the inputs and the
    output gradients: Phasor recomputes fn and differentiates it with create_graph, and torch records it."""
    saved = list(ctx.saved_tensors)[:ctx.n_inputs]  # the inputs; the outputs follow them
    positions = [i for i, a in enumerate(ctx.args) if a is _SAVED]  # where the saved tensors go in fn's arguments
    needs = [k for k, i in enumerate(positions) if i in ctx.needs]  # which of the saved tensors get gradients
    used = [j for j, g in enumerate(grads) if g is not None]
    grads_in = [None] * len(ctx.needs_input_grad)
    if not needs or not used:
        return tuple(grads_in)

    def vjp(*xs_and_gs):
        xs, gs = xs_and_gs[:len(saved)], xs_and_gs[len(saved):]
        args = list(ctx.args)
        for i, x in zip(positions, xs):
            args[i] = x
        out = fn(*args)
        outs = [out] if ctx.single else list(out)
        targets = [xs[k] for k in needs]
        found = _phasor.grad([outs[j] for j in used], targets, list(gs), create_graph=True, allow_unused=True)
        return tuple(_phasor.zeros(t.shape, dtype=t.dtype) if g is None else g for t, g in zip(targets, found))

    found = wrap(vjp)(*saved, *[grads[j].contiguous() for j in used])
    for k, g in zip(needs, found if isinstance(found, tuple) else (found,)):
        grads_in[positions[k]] = g
    return tuple(grads_in)


@_functools.lru_cache(maxsize=None)
def _wrapped(name):
    return wrap(getattr(_phasor, name))


def causal_attention(q, k, v, scale=None, alibi_slopes=None, distance_bias=None):
    """softmax(scale q k^T - ALiBi + distance bias, causal) v for torch tensors q [B, Nq, H, d], k [B, Nk, H, d],
    v [B, Nk, H, dv] (real; dv may differ from d), through Phasor's fused kernel: O(N d) memory, no [Nq, Nk]
    matrix. scale defaults to 1/sqrt(d); distance_bias [H, R + 1] adds distance_bias[h, min(m - n, R)] to each
    score, and gets its gradient."""
    return _wrapped("causal_attention")(q, k, v, scale, alibi_slopes, 0, distance_bias)


def cmha_rotate(z, delta, phase_bias, beta, offset=0, rope_base=10000.0):
    """ComplexFormer's Euler transform and adaptive rotation (phasor.cmha_rotate) of a complex torch tensor
    z [B, N, H, P]; delta, phase_bias [H, P] (phase_bias None for keys), beta [H]."""
    return _wrapped("cmha_rotate")(z, delta, phase_bias, beta, offset, rope_base)


def polar_rotate(z, angle, gain=None, magnitude="identity", angle_map="identity"):
    """gain_h m(z) exp(i f(angle)) (phasor.polar_rotate: pope, carope, complexformer-seed's rotation) for torch
    tensors: z [B, N, H, W] complex, or real with m = "identity" or "softplus"; angle real, broadcast to z's
    shape, with f = "identity" or "tanh"; gain [H] or None. Returns a complex tensor."""
    return _wrapped("polar_rotate")(z, angle, gain, magnitude, angle_map)


def rotary(z, table):
    """z [B, N, H, P] complex times a rotary table [N, P] (phasor.rotary_table, or a torch tensor): RoPE."""
    return _wrapped("rotary")(z, table)
