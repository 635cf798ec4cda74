"""Training steps under the measurement front end equal eager PyTorch's, and fuse.

A training step (forward, loss, backward, optimizer step) runs once eagerly and once under
``fusionrt.lazy``, from identical models and fresh random inputs; losses, gradients, updated
parameters and batch-norm running statistics must be eager's, under the reference executor and
the generated Triton kernels (``interpret``), with identical counts.
"""
from __future__ import annotations

import copy
from collections import Counter
from typing import Callable

import pytest
import torch
import torch.nn.functional as F

import fusionrt

EXECUTORS = ("reference", "interpret")
OPTIMIZERS: dict[str, Callable] = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, foreach=False),
    "sgd-foreach": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, foreach=True),
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.01, foreach=False),
    "adam-foreach": lambda ps: torch.optim.Adam(ps, lr=0.01, foreach=True),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1, foreach=False),
    "adamw-foreach": lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1, foreach=True),
}


def mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 16),
                               torch.nn.Tanh(), torch.nn.Linear(16, 4))


def conv_bn() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3, padding=1), torch.nn.BatchNorm2d(6), torch.nn.ReLU(),
                               torch.nn.Conv2d(6, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 4, 5))


def tiny_gpt2() -> torch.nn.Module:
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(vocab_size=50, n_positions=16, n_embd=16, n_layer=2, n_head=2,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                     bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(config)


def _pair(make: Callable[[], torch.nn.Module], optimizer: str):
    model = make()
    twin = copy.deepcopy(model)
    return (model, OPTIMIZERS[optimizer](model.parameters())), (twin, OPTIMIZERS[optimizer](twin.parameters()))


def _step(model: torch.nn.Module, opt: torch.optim.Optimizer, loss_of: Callable) -> torch.Tensor:
    loss = loss_of(model)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def _assert_equal_models(lazy_model: torch.nn.Module, eager_model: torch.nn.Module, atol: float = 1e-5) -> None:
    for (name, p), q in zip(lazy_model.named_parameters(), eager_model.parameters()):
        torch.testing.assert_close(p, q, atol=atol, rtol=1e-4, msg=lambda m: f"{name}: {m}")
        assert p.grad is not None and q.grad is not None
        torch.testing.assert_close(p.grad, q.grad, atol=atol, rtol=1e-4, msg=lambda m: f"{name}.grad: {m}")
        assert "_fusionrt" not in p.grad.__dict__  # a concrete tensor after the block
    for (name, b), c in zip(lazy_model.named_buffers(), eager_model.buffers()):
        torch.testing.assert_close(b, c, atol=atol, rtol=1e-4, msg=lambda m: f"{name}: {m}")


def _train(make, optimizer: str, loss_of: Callable, executor: str, steps: int = 2):
    """Runs ``steps`` training steps eagerly and lazily; returns the last step's report."""
    (model, opt), (twin, twin_opt) = _pair(make, optimizer)
    model.train(), twin.train()
    report = None
    for _ in range(steps):
        expected = _step(twin, twin_opt, loss_of)
        with fusionrt.lazy(executor=executor) as session:
            loss = _step(model, opt, loss_of)
        torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-4)
        _assert_equal_models(model, twin)
        report = session.report
    return report


def _counts(report) -> tuple:
    return (len(report.kernel_records), report.writes, report.bytes_written, report.eager_kernels,
            tuple(sorted(Counter(w.reason for w in report.materialized).items())))


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_mlp_training_step_equals_eager(optimizer):
    x, y = torch.randn(5, 8), torch.randn(5, 4)
    report = _train(mlp, optimizer, lambda m: F.mse_loss(m(x), y), "reference")
    assert not [f for f in report.fallbacks if f.reason == "requires grad"]


def test_fused_optimizer_falls_back_cleanly():
    """``fused=True`` kernels are one op the capture cannot split: they run eagerly, with eager's values."""
    x, y = torch.randn(5, 8), torch.randn(5, 4)
    make = mlp
    model = make()
    twin = copy.deepcopy(model)
    try:
        opt, twin_opt = (torch.optim.Adam(m.parameters(), lr=0.01, fused=True) for m in (model, twin))
        expected = _step(twin, twin_opt, lambda m: F.mse_loss(m(x), y))
    except RuntimeError as exc:  # no fused kernel on this device
        pytest.skip(str(exc))
    with fusionrt.lazy(executor="reference") as session:
        loss = _step(model, opt, lambda m: F.mse_loss(m(x), y))
    torch.testing.assert_close(loss, expected)
    _assert_equal_models(model, twin)
    assert any("fused" in f.op for f in session.report.fallbacks)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_mlp_forward_and_backward_fuse(executor):
    """Forward and backward in one block: fewer kernels than eager, gradients equal."""
    torch.manual_seed(0)
    model = mlp()
    twin = copy.deepcopy(model)
    x, y = torch.randn(5, 8), torch.randn(5, 4)
    F.mse_loss(twin(x), y).backward()
    with fusionrt.lazy(executor=executor) as session:
        loss = F.mse_loss(model(x), y)
        loss.backward()
    torch.testing.assert_close(loss, F.mse_loss(twin(x), y))
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4)
    report = session.report
    assert len(report.kernel_records) < report.eager_kernels
    assert any(k.kind == "matmul" and len(k.ops) > 1 for k in report.kernel_records)  # epilogues fused
    assert not report.fallbacks


def test_counts_identical_across_executors():
    torch.manual_seed(0)
    x, y = torch.randn(5, 8), torch.randn(5, 4)
    counts = []
    for executor in EXECUTORS:
        torch.manual_seed(1)
        counts.append(_counts(_train(mlp, "sgd-foreach", lambda m: F.mse_loss(m(x), y), executor, steps=1)))
    assert counts[0] == counts[1]


def test_saved_for_backward_writes_name_their_lines():
    """A forward measured alone writes what autograd keeps for backward, at the line that made it."""
    w = torch.randn(6, 7, requires_grad=True)
    x = torch.randn(6, 7)

    def forward(w):
        h = torch.tanh(x * w)  # tanh saves its result
        return (torch.exp(h) * w).sum()  # exp saves its result, mul saves exp's and w

    loss, report = fusionrt.measure(forward, w, executor="reference")
    saved = [wr for wr in report.materialized if wr.reason == "saved-for-backward"]
    assert sorted(wr.op for wr in saved) == ["exp", "tanh"]
    assert all(wr.source.endswith(f":{forward.__code__.co_firstlineno + 1 + (wr.op == 'exp')}") for wr in saved)
    loss.backward()  # after the block: the saved tensors were written
    w2 = w.detach().clone().requires_grad_()
    (torch.exp(torch.tanh(x * w2)) * w2).sum().backward()
    torch.testing.assert_close(w.grad, w2.grad)


def test_freed_graph_writes_nothing_for_backward():
    """Once backward has freed what it saved, those tensors are dead temporaries: never written."""
    w = torch.randn(6, 7, requires_grad=True)
    x = torch.randn(6, 7)
    with fusionrt.lazy(executor="reference") as session:
        (torch.exp(torch.tanh(x * w)) * w).sum().backward()
    assert not [wr for wr in session.report.materialized if wr.reason == "saved-for-backward"]
    w2 = w.detach().clone().requires_grad_()
    (torch.exp(torch.tanh(x * w2)) * w2).sum().backward()
    torch.testing.assert_close(w.grad, w2.grad)


def test_in_place_change_of_a_saved_tensor_raises_as_eager():
    w = torch.randn(5, requires_grad=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        with fusionrt.lazy(executor="reference"):
            e = torch.exp(w)
            loss = e.sum()
            e.mul_(2)
            loss.backward()


def test_grad_accumulates_into_the_real_grad_tensor():
    w = torch.randn(4, 3, requires_grad=True)
    x = torch.randn(2, 4)
    (x @ w).sum().backward()
    grad = w.grad
    first = grad.clone()
    with fusionrt.lazy(executor="reference"):
        (torch.sigmoid(x @ w) * 3).sum().backward()
    assert w.grad is grad  # accumulated in place, as eager does
    w2 = w.detach().clone().requires_grad_()
    (torch.sigmoid(x @ w2) * 3).sum().backward()
    torch.testing.assert_close(w.grad, first + w2.grad)


def test_conv_batch_norm_training_step_equals_eager():
    """Batch norm in train mode: its decomposition updates the running statistics in place."""
    x, y = torch.randn(2, 3, 6, 6), torch.randint(0, 5, (2,))
    counts = []
    for executor in EXECUTORS:
        torch.manual_seed(0)  # the same model for both executors
        report = _train(conv_bn, "sgd", lambda m: F.cross_entropy(m(x), y), executor, steps=1)
        assert len(report.kernel_records) < report.eager_kernels
        counts.append(_counts(report))
    assert counts[0] == counts[1]


def test_tiny_gpt2_training_step_equals_eager():
    ids = torch.randint(0, 50, (2, 8))
    report = _train(tiny_gpt2, "sgd-foreach", lambda m: m(ids, labels=ids).loss, "reference", steps=1)
    assert "saved-for-backward" in {w.reason for w in report.materialized}
    fused = [k for k in report.kernel_records if len(k.ops) > 1]
    assert fused


def _random_program(rng: torch.Generator):
    """Element-wise ops, a reduction and a matmul over tensors that require grad."""
    ops = [torch.tanh, torch.sigmoid, torch.exp, F.gelu, F.silu, torch.relu, lambda t: t * t, lambda t: t / 3 + 1]
    picks = torch.randint(0, len(ops), (4,), generator=rng).tolist()

    def program(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = ops[picks[0]](a * b + 0.5)
        h = ops[picks[1]](h) @ w
        h = torch.softmax(ops[picks[2]](h), dim=-1) + ops[picks[3]](h)
        return (h.sum(-1) ** 2).mean()

    return program


@pytest.mark.parametrize("seed", range(4))
def test_random_programs_gradients_equal_eager(seed):
    rng = torch.Generator().manual_seed(seed)
    program = _random_program(rng)
    inputs = [torch.randn(6, 5, generator=rng), torch.randn(6, 5, generator=rng), torch.randn(5, 4, generator=rng)]
    eager = [t.clone().requires_grad_() for t in inputs]
    lazy = [t.clone().requires_grad_() for t in inputs]
    expected = program(*eager)
    expected.backward()
    reports = []
    for executor in EXECUTORS:
        for t in lazy:
            t.grad = None
        with fusionrt.lazy(executor=executor) as session:
            loss = program(*lazy)
            loss.backward()
        torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-4)
        for t, e in zip(lazy, eager):
            torch.testing.assert_close(t.grad, e.grad, atol=1e-5, rtol=1e-4)
        reports.append(session.report)
    assert _counts(reports[0]) == _counts(reports[1])
    assert len(reports[0].kernel_records) < reports[0].eager_kernels


def test_dropout_in_training_draws_eager_random_numbers():
    w = torch.randn(64, requires_grad=True)
    dropout = torch.nn.Dropout(0.5)
    torch.manual_seed(3)
    expected = dropout(w * 2)
    torch.manual_seed(3)
    with fusionrt.lazy(executor="reference"):
        got = dropout(w * 2)
    assert torch.equal(got, expected)


def test_jit_does_not_replay_calls_autograd_records():
    """A replay runs plans without autograd, so a call that builds a graph is recorded every time."""
    fast = fusionrt.jit(lambda x, w: torch.tanh(x * w).sum())
    x = torch.randn(4)
    w = torch.randn(4, requires_grad=True)
    for _ in range(2):
        w.grad = None
        fast(x, w).backward()
        torch.testing.assert_close(w.grad, x * (1 - torch.tanh(x * w.detach()) ** 2))
    assert fast.stats.replays == 0


def test_foreach_ops_without_an_element_wise_form_fall_back_once():
    grads = [torch.randn(3), torch.randn(4, 2)]
    params = [torch.randn(3), torch.randn(4, 2)]
    expected = [p + 0.5 * g for p, g in zip(params, grads)]
    with fusionrt.lazy(executor="reference") as session:
        torch._foreach_add_(params, grads, alpha=0.5)
        torch._foreach_zero_(grads)  # what zero_grad(set_to_none=False) runs
    assert [f.op for f in session.report.fallbacks] == ["_foreach_zero_"]
    assert all(torch.equal(g, torch.zeros_like(g)) for g in grads)
    for p, e in zip(params, expected):
        torch.testing.assert_close(p, e)
