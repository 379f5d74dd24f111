"""Peak memory of causal attention, forward and backward, in PyTorch: through
phasor.torch.causal_attention (Phasor's fused kernel, O(N d) memory) against
the materialised attention (every score and probability held, [B, H, N, N]).
Each runs in a process of its own; the figure is its peak RSS (ru_maxrss)
above what it held once q, k, v and the output's gradient were made.

    PYTHONPATH=build/python python3 bench/torch_bridge_memory.py [--n 16384] [--heads 4] [--dim 32]

A benchmark, not a test: at N = 16384 the materialised attention needs about
12 GiB and a minute of the CPUs.
"""
import argparse
import json
import resource
import subprocess
import sys
import time


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def materialised(q, k, v):
    import torch
    n = q.shape[1]
    scores = torch.einsum("bihd,bjhd->bhij", q, k) * q.shape[-1] ** -0.5
    scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return torch.einsum("bhij,bjhd->bihd", scores.softmax(-1), v)


def measure(which, n, heads, dim):
    import torch
    import phasor.torch as pt
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, n, heads, dim).requires_grad_() for _ in range(3))
    grad = torch.randn(1, n, heads, dim)
    before = peak_mib()
    start = time.perf_counter()
    out = (pt.causal_attention if which == "phasor.torch" else materialised)(q, k, v)
    out.backward(grad)
    seconds = time.perf_counter() - start
    return {"which": which, "peak_above_inputs_mib": peak_mib() - before, "seconds": seconds}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16384)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--only", choices=["phasor.torch", "materialised"], help=argparse.SUPPRESS)  # one child's run
    a = parser.parse_args()
    if a.only:
        print(json.dumps(measure(a.only, a.n, a.heads, a.dim)))
        return
    results = {}
    for which in ("phasor.torch", "materialised"):
        done = subprocess.run([sys.executable, __file__, "--only", which, "--n", str(a.n), "--heads", str(a.heads), "--dim", str(a.dim)],
                              capture_output=True, text=True, check=True)
        results[which] = json.loads(done.stdout)
        r = results[which]
        print(f"{which:13s} peak {r['peak_above_inputs_mib']:9.1f} MiB above the inputs, {r['seconds']:6.1f} s forward + backward")
    ratio = results["phasor.torch"]["peak_above_inputs_mib"] / results["materialised"]["peak_above_inputs_mib"]
    print(f"B 1, N {a.n}, H {a.heads}, d {a.dim}, float32: phasor.torch peaks at {ratio:.4f} of the materialised attention's memory")


if __name__ == "__main__":
    main()
