"""phasor.nn (a Module of the library's layers, parameters(), state_dict) and
phasor.optim (the library's AdamW and SGD) against torch.optim on the same problem."""
import numpy as np
import pytest

import phasor

W0 = np.array([[0.5, -1.0], [2.0, 0.25], [-0.75, 1.5]])
Z0 = np.array([1 + 2j, -0.5 + 0.1j, 0.3 - 1.2j])
C = np.array([[1.0, -2.0], [0.5, 3.0], [2.0, 1.0]])
T = np.array([0.2 - 1j, 1.0 + 0.5j, -2.0 + 0j])


def loss_of(w, z, lib):
    """sum((w c)^2 + w^3) + sum |z - t|^2: real, with complex z (lib: phasor or torch)."""
    c, t = lib.tensor(C), lib.tensor(T)
    return ((w * c) * (w * c) + w * w * w).sum() + (abs(z - t) * abs(z - t)).sum()


def run(w, z, opt, steps):
    """`steps` optimizer steps on loss_of(w, z)."""
    for _ in range(steps):
        opt.zero_grad()
        loss_of(w, z, phasor).backward()
        opt.step()


@pytest.mark.parametrize("make", [
    lambda lib, ps: lib.optim.AdamW(ps, lr=0.05),
    lambda lib, ps: lib.optim.AdamW(ps, lr=0.1, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
    lambda lib, ps: lib.optim.SGD(ps, lr=0.01),
    lambda lib, ps: lib.optim.SGD(ps, lr=0.01, momentum=0.9, weight_decay=0.05),
    lambda lib, ps: lib.optim.SGD(ps, lr=0.01, momentum=0.8, dampening=0.3),
    lambda lib, ps: lib.optim.SGD(ps, lr=0.01, momentum=0.9, nesterov=True, weight_decay=0.01),
    lambda lib, ps: lib.optim.SGD(ps, lr=0.001, momentum=0.5, maximize=True),
], ids=["adamw", "adamw-options", "sgd", "sgd-momentum", "sgd-dampening", "sgd-nesterov", "sgd-maximize"])
def test_optimizers_take_the_steps_torch_takes(make, torch):
    w, z = phasor.tensor(W0).requires_grad_(), phasor.tensor(Z0).requires_grad_()
    wt, zt = torch.tensor(W0, requires_grad=True), torch.tensor(Z0, requires_grad=True)
    ours, theirs = make(phasor, [w, z]), make(torch, [wt, zt])
    for _ in range(6):
        ours.zero_grad()
        loss_of(w, z, phasor).backward()
        ours.step()
        theirs.zero_grad()
        loss_of(wt, zt, torch).backward()
        theirs.step()
    assert not np.allclose(w.detach().numpy(), W0)  # it moved
    np.testing.assert_allclose(w.detach().numpy(), wt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(z.detach().numpy(), zt.detach().numpy(), rtol=1e-12)


def test_adamw_parameter_groups_and_lr():
    a, b = phasor.ones([2], dtype=phasor.float64).requires_grad_(), phasor.ones([2], dtype=phasor.float64).requires_grad_()
    opt = phasor.optim.AdamW([{"params": [a], "weight_decay": 0.0}, {"params": [b]}], lr=0.1, weight_decay=0.5)
    assert opt.lr == 0.1
    assert a.grad is None
    (a.sum() * 0.0 + b.sum() * 0.0).backward()  # zero gradients: only weight decay moves a parameter
    opt.step()
    assert a.tolist() == [1.0, 1.0]
    np.testing.assert_allclose(b.tolist(), [1.0 - 0.1 * 0.5] * 2, rtol=1e-15)
    opt.lr = 0.01
    assert opt.lr == 0.01 and opt.steps == 1


def test_adamw_state_dict_resumes_the_same_steps():
    w, z = phasor.tensor(W0).requires_grad_(), phasor.tensor(Z0).requires_grad_()
    straight = phasor.optim.AdamW([w, z], lr=0.05)
    run(w, z, straight, 3)
    saved = straight.state_dict()
    w2, z2 = w.detach().clone().requires_grad_(), z.detach().clone().requires_grad_()
    resumed = phasor.optim.AdamW([w2, z2], lr=0.5)
    resumed.load_state_dict(saved)
    assert resumed.steps == 3 and resumed.lr == 0.05
    run(w, z, straight, 2)
    run(w2, z2, resumed, 2)
    np.testing.assert_array_equal(w2.detach().numpy(), w.detach().numpy())
    np.testing.assert_array_equal(z2.detach().numpy(), z.detach().numpy())
    with pytest.raises(ValueError, match="lacks 'exp_avg.p.0'"):  # as torch's load_state_dict refuses a state not its own
        resumed.load_state_dict({"state": {}, "steps": 1})


class Net(phasor.nn.Module):
    def __init__(self):
        super().__init__()
        self.encode = phasor.nn.Linear(4, 8, seed=1)
        self.rotate = phasor.nn.Linear(8, 3, bias=False, dtype=phasor.complex64, seed=2)
        self.norms = [phasor.nn.RMSNorm(8), phasor.nn.LayerNorm(8)]
        self.drop = phasor.nn.Dropout(0.5, seed=3)
        self.gain = phasor.ones([3]).requires_grad_()
        self.constant = phasor.ones([3])  # requires no grad: not a parameter

    def forward(self, x):
        h = self.drop(self.norms[1](self.norms[0](phasor.tanh(self.encode(x)))))
        return abs(self.rotate(h.to(phasor.complex64))) * self.gain


def test_a_python_module_finds_its_parameters():
    net = Net()
    names = [name for name, _ in net.named_parameters()]
    assert names == ["encode.weight", "encode.bias", "rotate.weight", "norms.0.weight", "norms.1.weight", "norms.1.bias", "gain"]
    assert [p.shape for p in net.parameters()] == [(8, 4), (8,), (3, 8), (8,), (8,), (8,), (3,)]
    assert net.rotate.weight.dtype == phasor.complex64 and net.rotate.bias is None
    assert net(phasor.randn([5, 4], seed=0)).shape == (5, 3)


def test_train_and_eval_reach_the_layers():
    net = Net()
    x = phasor.randn([5, 4], seed=0)
    assert net.training and net.drop.training
    net.eval()
    assert not net.drop.training
    np.testing.assert_array_equal(net(x).detach().numpy(), net(x).detach().numpy())  # no dropout
    net.train()
    assert net.drop.training


def test_state_dict_round_trip():
    a, b = Net(), Net()
    with phasor.no_grad():
        for p in b.parameters():
            p.mul_(0.5)
    b.load_state_dict(a.state_dict())
    a.eval(), b.eval()
    x = phasor.randn([2, 4], seed=4)
    np.testing.assert_array_equal(a(x).detach().numpy(), b(x).detach().numpy())
    state = a.state_dict()
    state["gain"] = phasor.ones([4])
    del state["encode.bias"]
    state["extra"] = phasor.ones([1])
    with pytest.raises(phasor.Error, match="load_state_dict: .*missing encode.bias.*gain has shape.*unexpected extra") as info:
        b.load_state_dict(state)
    assert "\n" not in str(info.value)


def test_losses_and_bad_optimizer_input():
    p = phasor.tensor([1.0, 3.0])
    assert phasor.nn.mse_loss(p, phasor.tensor([0.0, 1.0])).item() == pytest.approx(2.5, rel=1e-15)
    logits = phasor.tensor(np.log([[0.25, 0.75], [0.5, 0.5]]))
    expected = -(np.log(0.75) + np.log(0.5)) / 2
    assert phasor.nn.cross_entropy(logits, phasor.tensor([1, 0])).item() == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="empty parameter list"):  # torch.optim raises ValueError for both
        phasor.optim.AdamW([])
    with pytest.raises(ValueError, match="not a leaf"):
        phasor.optim.SGD([phasor.ones([2]).requires_grad_() * 2.0], lr=0.1)


def test_sgd_state_dict_resumes_the_same_steps():
    def fresh():
        return phasor.tensor(W0).requires_grad_(), phasor.tensor(Z0).requires_grad_()

    w, z = fresh()
    straight = phasor.optim.SGD([w, z], lr=0.01, momentum=0.9, nesterov=True)
    run(w, z, straight, 5)
    w2, z2 = fresh()
    first = phasor.optim.SGD([w2, z2], lr=0.01, momentum=0.9, nesterov=True)
    run(w2, z2, first, 2)
    saved = first.state_dict()
    assert sorted(saved["state"]) == ["momentum_buffer.p.0", "momentum_buffer.p.1"] and saved["lr"] == 0.01
    second = phasor.optim.SGD([w2, z2], lr=0.5, momentum=0.9, nesterov=True)
    second.load_state_dict(saved)
    assert second.lr == 0.01
    run(w2, z2, second, 3)
    np.testing.assert_array_equal(w2.detach().numpy(), w.detach().numpy())
    np.testing.assert_array_equal(z2.detach().numpy(), z.detach().numpy())


@pytest.mark.parametrize("kwargs, message", [
    (dict(lr=0.1, nesterov=True), "Nesterov momentum needs momentum > 0 and dampening 0"),
    (dict(lr=0.1, momentum=0.9, dampening=0.1, nesterov=True), "Nesterov momentum needs momentum > 0 and dampening 0"),
    (dict(lr=-0.1), "lr, momentum and weight_decay must be >= 0"),
])
def test_sgd_refuses_what_torch_refuses(kwargs, message):
    with pytest.raises(ValueError, match=message):
        phasor.optim.SGD([phasor.ones([2]).requires_grad_()], **kwargs)


@pytest.mark.parametrize("kwargs", [
    dict(lr=float("nan")), dict(lr=-1.0), dict(lr=float("inf")), dict(betas=(1.0, 0.999)), dict(betas=(0.9, -0.5)),
    dict(eps=-1.0), dict(weight_decay=-0.1),
], ids=["lr-nan", "lr-negative", "lr-inf", "beta1-one", "beta2-negative", "eps-negative", "weight-decay-negative"])
def test_adamw_refuses_a_bad_hyper_parameter_with_value_error(kwargs):
    with pytest.raises(ValueError) as info:
        phasor.optim.AdamW([phasor.ones([2]).requires_grad_()], **kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("make", [
    lambda ps: phasor.optim.AdamW(ps, lr=0.1),
    lambda ps: phasor.optim.SGD(ps, lr=0.1, momentum=0.9),
], ids=["adamw", "sgd"])
def test_the_lr_setter_refuses_what_the_constructor_refuses(make):
    opt = make([phasor.ones([2]).requires_grad_()])
    for bad in (float("nan"), -1.0, float("inf")):
        with pytest.raises(ValueError, match="invalid learning rate"):
            opt.lr = bad
    assert opt.lr == 0.1


@pytest.mark.parametrize("make", [
    lambda ps: phasor.optim.AdamW(ps, lr=0.1),
    lambda ps: phasor.optim.SGD(ps, lr=0.1),
    lambda ps: phasor.optim.AdamW([{"params": ps[:1]}, {"params": ps[1:]}], lr=0.1),
], ids=["adamw", "sgd", "adamw-groups"])
def test_a_parameter_listed_twice_is_refused_never_updated_twice(make):
    w = phasor.ones([2], dtype=phasor.float64).requires_grad_()
    with pytest.raises(ValueError, match="list each parameter once"):
        make([w, w])


def _trained_adamw():
    w, z = phasor.tensor(W0).requires_grad_(), phasor.tensor(Z0).requires_grad_()
    opt = phasor.optim.AdamW([w, z], lr=0.05)
    run(w, z, opt, 2)
    return opt


def _snapshot(opt):
    d = opt.state_dict()
    return {k: t.detach().clone().numpy() for k, t in d["state"].items()}, opt.steps, opt.lr


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(steps=-5), "step count -5"),
    (lambda d: d.update(lr=float("inf")), "invalid learning rate"),
    (lambda d: d.update(lr=float("nan")), "invalid learning rate"),
    (lambda d: d["state"].update({"exp_avg.stranger": phasor.ones([1], dtype=phasor.float64)}), "unexpected entr"),
    (lambda d: d.update(extra=1), "unexpected key 'extra'"),
    # exp_avg.p.0 is good and comes first: it must not be copied in before exp_avg.p.1 is refused.
    (lambda d: d["state"].update({"exp_avg.p.0": phasor.full([3, 2], 7.0, dtype=phasor.float64),
                                  "exp_avg.p.1": phasor.ones([5], dtype=phasor.complex128)}), "'exp_avg.p.1' has shape"),
], ids=["negative-steps", "inf-lr", "nan-lr", "extra-entry", "extra-key", "bad-shape-after-a-good-one"])
def test_adamw_load_state_dict_refuses_before_it_changes_anything(change, message):
    opt = _trained_adamw()
    before = _snapshot(opt)
    fresh = opt.state_dict()
    state = {"state": {k: t.detach().clone() for k, t in fresh["state"].items()}, "steps": fresh["steps"], "lr": fresh["lr"]}
    change(state)
    with pytest.raises(ValueError, match=message):
        opt.load_state_dict(state)
    after = _snapshot(opt)
    assert after[1:] == before[1:]
    assert sorted(after[0]) == sorted(before[0])
    for k in before[0]:
        np.testing.assert_array_equal(after[0][k], before[0][k])


def test_sgd_load_state_dict_refuses_before_it_changes_anything():
    w, z = phasor.tensor(W0).requires_grad_(), phasor.tensor(Z0).requires_grad_()
    opt = phasor.optim.SGD([w, z], lr=0.01, momentum=0.9)
    run(w, z, opt, 2)
    before = {k: t.detach().clone().numpy() for k, t in opt.state_dict()["state"].items()}
    for state, message in [
        ({"state": {"momentum_buffer.p.0": phasor.full([3, 2], 9.0, dtype=phasor.float64),
                    "momentum_buffer.p.1": phasor.ones([7], dtype=phasor.complex128)}, "lr": 0.5}, "'momentum_buffer.p.1' has shape"),
        ({"state": {"momentum_buffer.p.0": phasor.full([3, 2], 9.0, dtype=phasor.float64), "stranger": phasor.ones([1])}}, "unexpected entry"),
        ({"state": {}, "lr": float("inf")}, "invalid learning rate"),
    ]:
        with pytest.raises(ValueError, match=message):
            opt.load_state_dict(state)
        assert opt.lr == 0.01
        after = {k: t.detach().numpy() for k, t in opt.state_dict()["state"].items()}
        assert sorted(after) == sorted(before)
        for k in before:
            np.testing.assert_array_equal(after[k], before[k])
