"""A process that used a parallel op and then forks (multiprocessing's 'fork'
start method): the child's parallel ops must run, not hang in libgomp's pool,
which does not survive fork (tensor/cpu/fork.h)."""
import multiprocessing

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
