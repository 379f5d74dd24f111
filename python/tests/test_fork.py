"""A process that used a parallel op and then forks (multiprocessing's 'fork'
start method): the child's parallel ops must run, not hang in libgomp's pool,
which does not survive fork (tensor/cpu/fork.h)."""
import multiprocessing
import os
import subprocess
import sys

import pytest

import phasor

N = 1 << 18  # well above the threading grain: the op is split across threads


def _parallel_ops(queue):
    x = phasor.arange(0, N, 1, dtype=phasor.float64)
    a = phasor.ones([256, 256], dtype=phasor.float64)
    queue.put((phasor.sum(x + x).item(), phasor.matmul(a, a).numpy()[0, 0]))


def test_a_forked_child_runs_parallel_ops():
    _parallel_ops(multiprocessing.Queue())  # the parent's thread pool starts
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_parallel_ops, args=(queue,))
    child.start()
    child.join(timeout=60)
    if child.is_alive():  # a regression fails here instead of hanging the suite
        child.kill()
        child.join()
        raise AssertionError("the forked child hung in a parallel op")
    assert child.exitcode == 0
    total, product = queue.get(timeout=5)
    assert total == float(N) * (N - 1)
    assert product == 256.0


_BATCHED_SCRIPT = """
import multiprocessing, sys
import phasor

def products(queue):
    a = phasor.ones([8, 64, 64], dtype=phasor.float32)
    queue.put([phasor.sum(phasor.matmul(a, a)).item(), phasor.sum(phasor.matmul(a.to(phasor.bfloat16), a.to(phasor.bfloat16)).to(phasor.float32)).item()])

if __name__ == "__main__":
    queue = multiprocessing.Queue()
    products(queue)
    want = queue.get(timeout=5)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=products, args=(queue,))
    child.start()
    child.join(timeout=45)
    if child.is_alive():
        child.kill()
        child.join()
        sys.exit("the forked child hung in a batched product")
    assert child.exitcode == 0 and queue.get(timeout=5) == want
"""


@pytest.mark.parametrize("max_isa", ["", "AVX2"], ids=["native", "avx2"])
def test_a_forked_child_runs_batched_products_on_every_onednn_kernel(max_isa, tmp_path):
    """Batched float32 and bfloat16 products (oneDNN) before and after fork. Below
    AVX-512 (DNNL_MAX_CPU_ISA=AVX2, as on an AMD EPYC) oneDNN's batched matmul
    sized its team when the primitive was made, on a thread that read libgomp's
    default count: the child hung. A process of its own, as oneDNN reads its ISA once."""
    script = tmp_path / "batched.py"
    script.write_text(_BATCHED_SCRIPT)
    env = dict(os.environ, DNNL_MAX_CPU_ISA=max_isa) if max_isa else dict(os.environ)
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
