"""The small habits a PyTorch or NumPy user brings: abs(t), the real / imag / T
properties, Tensor(list), readable result objects, and a checkpoint named by
its folder."""
import numpy as np
import pytest

import phasor


def test_abs_is_the_modulus():
    z = phasor.tensor(np.array([3 + 4j, -1j, -2.0], dtype=np.complex128))
    assert abs(z).dtype == phasor.float64
    np.testing.assert_allclose(abs(z).numpy(), [5.0, 1.0, 2.0], rtol=1e-15)
    np.testing.assert_array_equal(abs(phasor.tensor([-1.5, 2.0])).numpy(), [1.5, 2.0])


def test_real_imag_and_T_are_properties_as_in_numpy():
    a = (np.arange(6) + 1j * np.arange(6, 12)).reshape(2, 3).astype(np.complex64)
    z = phasor.Tensor(a)
    np.testing.assert_array_equal(z.real.numpy(), a.real)
    np.testing.assert_array_equal(z.imag.numpy(), a.imag)
    np.testing.assert_array_equal(z.T.numpy(), a.T)
    np.testing.assert_array_equal(phasor.real(z).numpy(), a.real)  # the functions stay
    c = phasor.randn([2, 3, 4], seed=1)
    np.testing.assert_array_equal(c.T.numpy(), c.numpy().T)  # every dimension reversed, as NumPy
    assert c.T.shape == (4, 3, 2)


def test_the_real_part_carries_the_gradient():
    z = phasor.tensor(np.array([1 + 2j, 3 - 1j])).requires_grad_()
    (z.real * z.real).sum().backward()  # d/dz of sum x^2: 2x + 0i
    np.testing.assert_allclose(z.grad.numpy(), [2.0, 6.0], rtol=1e-15)


def test_a_list_or_a_number_makes_a_copy():
    t = phasor.Tensor([1.0, 2.0])
    assert t.tolist() == [1.0, 2.0]
    assert t.dtype == phasor.tensor([1.0, 2.0]).dtype
    assert phasor.Tensor([[1, 2], [3, 4]]).shape == (2, 2)
    assert phasor.Tensor(2.5).item() == 2.5
    a = np.array([1.0, 2.0])
    shared = phasor.Tensor(a)  # an array is still shared, not copied
    a[0] = 7.0
    assert shared.tolist() == [7.0, 2.0]


def test_gradcheck_results_print_what_they_found():
    x = phasor.randn([3], dtype=phasor.float64, seed=2).requires_grad_()
    good = phasor.gradcheck(lambda v: (v * v).sum(), [x])
    assert repr(good).startswith("GradcheckResult(ok=True, worst_error=")
    # A central difference of a cubic with eps 1 is off by eps^2 = 1: refused at zero tolerance.
    wrong = phasor.gradcheck(lambda v: (v * v * v).sum(), [x], eps=1.0, atol=0.0, rtol=0.0)
    assert not wrong
    assert repr(wrong).startswith("GradcheckResult(ok=False, worst_error=")
    assert "message=" in repr(wrong)


def test_load_takes_a_checkpoint_folder_or_a_run_folder(run_dir, checkpoint, text_file, tmp_path):
    text = text_file.read_bytes()
    want = phasor.load(str(checkpoint)).evaluate(text, seq_len=32, max_windows=20)
    assert phasor.load(str(checkpoint.parent)).evaluate(text, seq_len=32, max_windows=20) == want
    assert phasor.load(str(run_dir)).evaluate(text, seq_len=32, max_windows=20) == want
    with pytest.raises(phasor.Error, match="neither a model.safetensors"):
        phasor.load(str(tmp_path))


def test_generate_takes_top_p(checkpoint):
    model = phasor.load(str(checkpoint))
    greedy = model.generate("12+", tokens=16, temperature=0)
    assert model.generate("12+", tokens=16, temperature=1.0, top_p=1e-9, seed=3) == greedy  # only the likeliest token is left
    assert model.generate("12+", tokens=16, temperature=1.0, top_p=1.0, seed=3) == model.generate("12+", tokens=16, temperature=1.0, seed=3)
    with pytest.raises(phasor.Error, match="top-p must be in"):
        model.generate("12+", tokens=4, top_p=0.0)


def test_comparisons_give_bool_tensors_as_numpy():
    a = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    b = np.array([2.0, 2.0, 2.0])
    t, u = phasor.tensor(a), phasor.tensor(b)
    for op in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"):
        got = getattr(t, op)(u)
        assert got.dtype == phasor.bool
        np.testing.assert_array_equal(got.numpy(), getattr(a, op)(b))  # broadcast as NumPy does
        np.testing.assert_array_equal(getattr(t, op)(2.0).numpy(), getattr(a, op)(2.0))  # and with a number
    np.testing.assert_array_equal((2.0 < t).numpy(), 2.0 < a)  # reflected
    x = phasor.tensor([1.0, 2.0]).requires_grad_()
    assert not (x > 1.5).requires_grad  # a comparison has no gradient
    assert {t: 1}[t] == 1  # still hashable, by identity


def test_device_and_no_grad_as_a_decorator():
    assert phasor.zeros([2]).device == "cpu"

    @phasor.no_grad()
    def scaled(v):
        """Twice v."""
        return v * 2.0

    x = phasor.tensor([1.0]).requires_grad_()
    assert not scaled(x).requires_grad
    assert (x * 2.0).requires_grad  # grad mode is back after the call
    assert scaled.__name__ == "scaled" and scaled.__doc__ == "Twice v."
