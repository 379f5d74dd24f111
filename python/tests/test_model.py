"""The model level against the `phasor` CLI on the same checkpoint and text:
the loss of `phasor eval --json`, the gradients of `phasor grad`, the text of
`phasor generate`, and the same one-line error messages.

Where OpenBLAS does not recognise the CPU, the `phasor` command restarts itself
on OpenBLAS's best kernels (tensor/cpu/openblas_core.h) while this Python
process keeps the ones OpenBLAS chose when it loaded: the GEMMs then round
differently, so losses are compared to 1e-6, not to the last bit."""
import json

import numpy as np
import pytest

import phasor


def test_loss_equals_phasor_eval(run_cli, checkpoint, text_file):
    status, out, err = run_cli("eval", "--checkpoint", checkpoint, "--data", text_file, "--seq-len", 32, "--max-windows", 400,
                               "--json")
    assert status == 0, err
    want = json.loads(out)
    got = phasor.load(str(checkpoint)).evaluate(text_file.read_bytes(), seq_len=32, max_windows=400)
    assert got["windows"] == want["windows"] > 1 and got["tokens"] == want["tokens"]
    assert got["loss"] == pytest.approx(want["loss"], rel=1e-6)
    assert got["ppl"] == pytest.approx(want["ppl"], rel=1e-6)


def test_gradients_equal_phasor_grad(run_cli, checkpoint, text_file, tmp_path):
    status, out, err = run_cli("grad", "--checkpoint", checkpoint, "--data", text_file, "--seq-len", 32, "--window", 1,
                               "--activations", "--json", "--out", tmp_path / "g.safetensors")
    assert status == 0, err
    want = json.loads(out)
    model = phasor.load(str(checkpoint))
    got = model.gradients(text_file.read_bytes(), seq_len=32, window=1, activations=True)
    assert got["loss"] == pytest.approx(want["loss"], rel=1e-6)
    params = model.parameters()
    assert sorted(got["parameters"]) == sorted(want["grad_norms"]) == sorted(params)
    # Small gradients (phase_bias: 1e-5) come from cancelling sums: they are held
    # to 1e-5 of the largest gradient norm, the others to 1e-5 of their own.
    largest = max(want["grad_norms"].values())
    for name, g in got["parameters"].items():
        assert g.shape == params[name].shape
        assert np.linalg.norm(g.numpy()) == pytest.approx(want["grad_norms"][name], rel=1e-5, abs=1e-5 * largest), name
    assert sorted(got["activations"]) == sorted(want["activation_norms"])
    assert all(p.grad is None for p in params.values())  # the model is left without gradients, as the CLI leaves it


def test_generate_equals_phasor_generate(run_cli, checkpoint):
    status, out, err = run_cli("generate", "--checkpoint", checkpoint, "--prompt", "7+8=", "--tokens", 16,
                               "--temperature", 0)
    assert status == 0, err
    got = phasor.load(str(checkpoint)).generate("7+8=", tokens=16, temperature=0)
    assert out == "7+8=" + got.decode() + "\n"


def test_errors_carry_the_cli_message(run_cli, checkpoint, text_file, tmp_path):
    status, _, err = run_cli("grad", "--checkpoint", checkpoint, "--data", text_file, "--seq-len", 32, "--window",
                             100000, "--out", tmp_path / "g.safetensors")
    assert status == 1 and err.startswith("phasor: ") and err.count("\n") == 1
    with pytest.raises(phasor.Error) as e:
        phasor.load(str(checkpoint)).gradients(text_file.read_bytes(), seq_len=32, window=100000)
    # the CLI's words, the argument named as Python names it
    assert str(e.value) == err[len("phasor: "):].rstrip("\n").replace("grad: --window", "Model.gradients: window")

    missing = tmp_path / "missing.safetensors"
    status, _, err = run_cli("eval", "--checkpoint", missing, "--data", text_file)
    assert status == 1
    with pytest.raises(phasor.Error) as e:
        phasor.load(str(missing))
    assert str(e.value) == err[len("phasor: "):].rstrip("\n")


def test_a_refused_argument_is_named_as_python_calls_it(checkpoint, text_file):
    """The CLI's message would say `eval: --seq-len`; Python has no such flag."""
    with pytest.raises(phasor.Error) as e:
        phasor.load(str(checkpoint)).evaluate(text_file.read_bytes(), seq_len=(1 << 20) + 1)
    assert str(e.value) == "Model.evaluate: seq_len 1048577 exceeds the 1048576 positions Phasor supports"


def test_gradients_name_their_arguments_as_python_calls_them(checkpoint, text_file):
    """window_gradients' own words are the CLI's (`grad: --seq-len`, `--window`)."""
    model = phasor.load(str(checkpoint))
    with pytest.raises(phasor.Error) as e:
        model.gradients(text_file.read_bytes(), seq_len=(1 << 20) + 1)
    assert str(e.value) == "Model.gradients: seq_len 1048577 exceeds the 1048576 positions Phasor supports"
    with pytest.raises(phasor.Error) as e:
        model.gradients(text_file.read_bytes(), seq_len=16, window=-1)
    assert str(e.value) == "Model.gradients: window must be non-negative, got -1"


def test_curvature_equals_phasor_curvature_at_both_ends(run_cli, checkpoint, text_file):
    status, out, err = run_cli("curvature", "--checkpoint", checkpoint, "--data", text_file, "--seq-len", 16, "--window", 1,
                               "--top", 2, "--which", "both", "--json")
    assert status == 0, err
    want = json.loads(out)
    text = text_file.read_bytes()
    got = phasor.curvature(phasor.load(str(checkpoint)), text, 16, window=1, top=2, which="both")
    assert got["converged"] and got["dimension"] == want["dimension"] and got["hvps"] == want["hvps"]
    values = np.asarray(got["eigenvalues"])
    np.testing.assert_allclose(values, want["eigenvalues"], rtol=1e-6)
    assert values[0] >= values[1] > values[3] >= values[2]  # the largest first, then the smallest first
    # Each eigenvector is a unit vector with H y = lambda y: checked against the exact Hessian's spectrum.
    vectors = np.asarray(got["eigenvectors"])
    assert vectors.shape == (4, got["dimension"])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-9)
    exact = phasor.curvature(str(checkpoint), text, 16, window=1, top=None)
    assert exact["method"] == "exact"
    spectrum = np.asarray(exact["eigenvalues"])
    scale = np.abs(spectrum).max()
    np.testing.assert_allclose(values[:2], spectrum[:2], rtol=0, atol=1e-7 * scale)
    np.testing.assert_allclose(values[2:], spectrum[::-1][:2], rtol=0, atol=1e-7 * scale)
    with pytest.raises(ValueError, match="which must be 'largest', 'smallest' or 'both', got 'middle'"):
        phasor.curvature(str(checkpoint), text, 16, which="middle")


def test_evaluate_task_equals_phasor_eval(run_cli, checkpoint, tmp_path):
    """Model.evaluate_task scores the same examples as `phasor eval --data TASK`,
    and its `scored` list holds what --dump-examples writes."""
    dump = tmp_path / "examples.jsonl"
    status, out, err = run_cli("eval", "--checkpoint", checkpoint, "--data", "passkey", "--seq-len", 120, "--examples", 10,
                               "--depths", "0,100", "--json", "--dump-examples", dump)
    assert status == 0, err
    want = json.loads(out)
    got = phasor.load(str(checkpoint)).evaluate_task("passkey", seq_len=120, examples=10, depths=[0, 100])
    for key in ("examples", "correct", "accuracy", "wilson_low", "wilson_high", "seq_len", "seed", "task"):
        assert got[key] == want[key], key
    assert got["answer_log_loss"] == pytest.approx(want["answer_log_loss"], rel=1e-6)
    assert sorted(got["depths"]) == ["0", "100"] and got["depths"]["0"]["examples"] == 5
    dumped = [json.loads(line) for line in dump.read_text().splitlines()]
    assert [d["prompt"].encode("latin-1") for d in dumped] == [e["prompt"] for e in got["scored"]]
    assert [d["answer"] for d in dumped] == [e["answer"].decode() for e in got["scored"]]
    assert [d["depth"] for d in dumped] == [0, 100] * 5
    assert all(len(e["prompt"]) + len(e["answer"]) == 120 for e in got["scored"])


def test_evaluate_task_refuses_a_length_it_cannot_fill(checkpoint):
    with pytest.raises(phasor.Error) as e:
        phasor.load(str(checkpoint)).evaluate_task("copy", seq_len=3)
    assert str(e.value) == "Model.evaluate_task: seq_len 3: a copy example needs from 4 to 1048576 bytes"
    assert len(phasor.load_text("recall", length=70)) % 70 == 0
