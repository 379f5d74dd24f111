"""Python threads run Phasor's compute in parallel: ops, backward, optimizer
steps and the model's forward, evaluate and generate release the GIL while
they compute (python/gil.h)."""
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import phasor

# Two threads of float64 matmuls ([768, 768]: OpenBLAS, about 20 ms each on one
# core), each op on one thread (OMP_NUM_THREADS=1, set before the import: every
# Python thread starts from that count) so that the two Python threads are
# what fills the two cores. The solo time is taken before and after the pair,
# the shorter kept, so that a disturbed solo run cannot pass a serialised pair.
# NumPy's matmul, which releases the GIL, is timed the same way in each try: the
# parallelism the machine gives this process right now. Where other sessions
# hold the cores (the kernel shares them between sessions, not threads), no
# library shows two threads beating one, and neither need Phasor; the overlap
# test below still proves the release there.
_MATMUL_SCRIPT = """
import json, threading, time
import numpy as np
import phasor

rng = np.random.default_rng(0)
a, b = rng.standard_normal((768, 768)), rng.standard_normal((768, 768))
ta, tb = phasor.Tensor(a), phasor.Tensor(b)
want = a @ b
REPS = 8
results = [None, None]

def phasor_work(slot):
    for _ in range(REPS):
        out = phasor.matmul(ta, tb)
    results[slot] = out.numpy()

def numpy_work(slot):
    for _ in range(REPS):
        a @ b

def timed(work, n):
    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start

def ratio(work):  # the pair's time over one thread's
    before = timed(work, 1)
    pair = timed(work, 2)
    return pair / min(before, timed(work, 1))

phasor_work(0), numpy_work(0)  # warm-up: OpenBLAS's buffers, the first-touch pages
tries = []
for _ in range(3):  # the best of three: other work on the machine only slows a try down
    tries.append({"phasor": ratio(phasor_work), "numpy": ratio(numpy_work)})
    if tries[-1]["phasor"] < 1.7:
        break
errors = [float(np.max(np.abs(r - want))) for r in results]
print(json.dumps({"tries": tries, "errors": errors}))
"""


def test_two_threads_of_matmuls_take_well_under_twice_one():
    if (os.cpu_count() or 1) < 2:
        pytest.skip(f"one CPU (os.cpu_count() = {os.cpu_count()}): two threads cannot run in parallel")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", _MATMUL_SCRIPT], capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert max(report["errors"]) < 1e-9, report  # both threads' products are right
    # Serialised by the GIL the pair takes twice one thread's time (2.0x); in
    # parallel about 1.0x, or as much as NumPy's pair where the machine is busy.
    ok = [t for t in report["tries"] if t["phasor"] < 1.7 or (t["numpy"] >= 1.7 and t["phasor"] < 1.1 * t["numpy"])]
    assert ok, f"two threads take this many times one thread's time: {report['tries']}: the GIL is held"


def _python_ran_during(call):
    """The share of the middle of `call`'s time (the middle 60%, in ten bins
    of its span: 6 bins) during which another Python thread ran bytecode,
    best of three calls. A call that holds the GIL lets no other thread run:
    0, whatever the load (the GIL changes hands only at the call's two ends,
    within the 1 ms switch interval set here). A call that releases it lets
    the other thread run throughout, unless the machine starves it."""
    best = 0.0
    saved = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    try:
        for _ in range(3):
            stamps, stop = [], threading.Event()

            def other():  # mostly asleep: it needs the GIL, not a core
                while not stop.is_set():
                    stamps.append(time.perf_counter())
                    time.sleep(0.0005)

            thread = threading.Thread(target=other)
            thread.start()
            time.sleep(0.01)
            t0 = time.perf_counter()
            call()
            t1 = time.perf_counter()
            stop.set()
            thread.join()
            bins = {int(10 * (s - t0) / (t1 - t0)) for s in stamps if t0 <= s < t1}
            best = max(best, len(bins & set(range(2, 8))) / 6)
    finally:
        sys.setswitchinterval(saved)
    return best


def _model_calls(checkpoint, text_file):
    model = phasor.load(str(checkpoint))
    text = text_file.read_bytes()[:4096]
    tokens = phasor.Tensor(np.frombuffer(text[:16 * 128], dtype=np.uint8).astype(np.int64).reshape(16, 128))
    return {
        "Model.forward": lambda: model.forward(tokens),
        "Model.evaluate": lambda: model.evaluate(text, seq_len=128, batch=16),
        "Model.generate": lambda: model.generate("The ", tokens=200, seed=1),
    }


def _training_calls():
    rng = np.random.default_rng(1)
    layer = phasor.nn.Linear(1024, 1024, bias=False, seed=1)
    x = phasor.Tensor(rng.standard_normal((1024, 1024)).astype(np.float32))
    loss = phasor.sum(phasor.square(layer(x)))
    weights = phasor.zeros([4096, 2048])  # 8M parameters: a step long enough to sample (about 30 ms)
    weights.requires_grad = True
    phasor.sum(weights).backward()
    opt = phasor.optim.AdamW([weights], lr=1e-3)
    return {
        "Tensor.backward": lambda: loss.backward(retain_graph=True),
        "matmul": lambda: phasor.matmul(x, x),
        "AdamW.step": opt.step,
    }


def test_compute_lets_other_python_threads_run(checkpoint, text_file):
    calls = {**_model_calls(checkpoint, text_file), **_training_calls()}
    for name, call in calls.items():
        call()  # warm-up (and the gradients AdamW.step reads)
        share = _python_ran_during(call)
        assert share >= 0.5, f"{name}: another Python thread ran during only {share:.0%} of it: the GIL is held"


def test_threads_compute_what_one_thread_computes():
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal((96, 96)) + 1j * rng.standard_normal((96, 96)) for _ in range(4)]
    want = [np.abs(np.exp(0.1 * z) @ z).sum() for z in inputs]
    got = [None] * len(inputs)

    def run(i):
        z = phasor.Tensor(inputs[i])
        got[i] = phasor.sum(phasor.abs(phasor.matmul(phasor.exp(z * 0.1), z))).item()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_allclose(got, want, rtol=1e-10)
