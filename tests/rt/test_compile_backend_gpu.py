"""``torch.compile(backend="fusionrt")`` on a CUDA GPU (run through the device tool): inference and
training graphs replayed through CUDA graphs give eager's values on fresh inputs every call, a
result still held is never overwritten by a later launch, and graphs that must not be graphed
are not."""
from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from fusionrt.compile_backend import _LIVE, compiled_graphs, cuda_graphed
from tests.rt.test_compile_backend import Block, conv_net, fresh_dynamo, new_graphs, randomized  # noqa: F401

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.mark.parametrize("make", [Block, lambda: randomized(conv_net())])
def test_graphed_inference_equals_eager_and_never_overwrites_a_held_result(make):
    """Every result is kept: the first two graph launches hand out one graph's memory each,
    then the layout moves to one graph that copies its results out."""
    model = make().cuda().eval()
    compiled = torch.compile(model, backend="fusionrt")
    before = len(compiled_graphs())
    shape = (4, 16, 32) if isinstance(model, Block) else (2, 3, 16, 16)
    outs, refs = [], []
    with torch.no_grad():
        for _ in range(6):
            x = torch.randn(shape, device="cuda")
            outs.append(compiled(x))
            refs.append(model(x))
    for out, ref in zip(outs, refs):
        torch.testing.assert_close(out, ref, rtol=1e-3, atol=1e-3)
    (graph,) = new_graphs(before)
    graphed = cuda_graphed(graph)
    assert graphed is not None and graphed.launches == 4
    (copier,) = graphed._layouts[next(iter(graphed._layouts))]
    assert all(copier.copy_out)


@pytest.mark.parametrize("held", [0, 1])
def test_a_loop_that_holds_its_last_result_launches_a_graph_every_call(held):
    """``y = model(x)`` in a loop holds one result during the next call: two graphs alternate.
    A loop that drops its result reuses one graph's memory."""
    model = Block().cuda().eval()
    compiled = torch.compile(model, backend="fusionrt")
    before = len(compiled_graphs())
    kept = []
    with torch.no_grad():
        for _ in range(8):
            x = torch.randn(4, 16, 32, device="cuda")
            y = compiled(x)
            torch.testing.assert_close(y, model(x), rtol=1e-3, atol=1e-3)
            kept = [y.view(-1)[:7]][:held]  # a view keeps the memory too
            del y
    (graph,) = new_graphs(before)
    graphed = cuda_graphed(graph)
    assert graphed.launches == 6  # after the recorded call and the warm-up replay
    assert len(graphed._layouts[next(iter(graphed._layouts))]) == 1 + held
    assert len(kept) == held


def test_a_moved_parameter_is_read_where_it_now_lives():
    model = Block().cuda().eval()
    compiled = torch.compile(model, backend="fusionrt")
    with torch.no_grad():
        for _ in range(4):
            compiled(torch.randn(2, 8, 32, device="cuda"))
        model.up.weight.data = model.up.weight.data * 2 + 1  # new memory, same layout
        x = torch.randn(2, 8, 32, device="cuda")
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-3)
        model.up.weight.mul_(0.5)  # same memory: the graph reads the new values
        x = torch.randn(2, 8, 32, device="cuda")
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-3)


def test_a_graph_that_writes_an_input_is_not_graphed():
    def fn(x, acc):
        acc.add_(x)
        return torch.sigmoid(acc) * 3

    compiled = torch.compile(fn, backend="fusionrt")
    before = len(compiled_graphs())
    for _ in range(5):
        x, acc = torch.randn(128, device="cuda"), torch.randn(128, device="cuda")
        acc2 = acc.clone()
        torch.testing.assert_close(compiled(x, acc), fn(x, acc2))
        torch.testing.assert_close(acc, acc2)
    assert all(cuda_graphed(g) is None for g in new_graphs(before))


def _graphed_launches(before: int) -> list[int]:
    return [cuda_graphed(g).launches for g in new_graphs(before) if cuda_graphed(g) is not None]


@pytest.mark.parametrize("make", [Block, conv_net])
def test_graphed_training_steps_equal_eager(make):
    """Forward and backward both launch CUDA graphs after their warm-up; the SGD step moves the
    weights in place, so every launch must read the new values; batch norm's running statistics
    are written where they live; gradients, weights and statistics stay equal to a twin's."""
    torch.manual_seed(0)
    model = make().cuda().train()
    twin = copy.deepcopy(model)
    compiled = torch.compile(model, backend="fusionrt")
    before = len(compiled_graphs())
    shape = (4, 16, 32) if make is Block else (4, 3, 8, 8)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (model, twin)]
    for _ in range(7):
        x = torch.randn(shape, device="cuda")
        outs, grads = [], []
        for call, module, opt in ((compiled, model, opts[0]), (twin, twin, opts[1])):
            out = call(x)
            out.square().mean().backward()
            outs.append(out.detach())
            grads.append([p.grad.clone() for p in module.parameters()])
            opt.step()
            opt.zero_grad(set_to_none=True)
        torch.testing.assert_close(outs[0], outs[1], rtol=1e-3, atol=1e-4)
        for g, h in zip(*grads):
            torch.testing.assert_close(g, h, rtol=1e-3, atol=1e-4)
    for a, b in zip(model.state_dict().values(), twin.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)
    launches = _graphed_launches(before)
    assert len(launches) == 2 and min(launches) >= 4  # forward and backward, from the third step


def _captured(graph):
    return [c for state in cuda_graphed(graph)._layouts.values() if isinstance(state, list) for c in state]


class _SavesItsOutput(nn.Module):
    """exp's result is both the forward's output and what its backward reads."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(32, 32)

    def forward(self, x):
        return torch.exp(self.lin(x) * 0.1)


@pytest.mark.parametrize("make", [Block, _SavesItsOutput])
def test_a_backward_copies_its_output_gradient_into_the_forwards_output_buffer(make):
    """The forward's output is copied out at every launch, so its buffer is free between
    launches: the backward copies the output's gradient there instead of a buffer of its own.
    Where the forward also saves the output for its backward (exp's), the buffer is not free:
    the saved value is the output's copy, the very object the caller gets, as in the jitted
    graph (so the backward's guards match and it is graphed too), and gradients that stay
    eager's say the buffer was not written."""
    torch.manual_seed(0)
    model = make().cuda().train()
    twin = copy.deepcopy(model)
    compiled = torch.compile(model, backend="fusionrt")
    before = len(compiled_graphs())
    for _ in range(6):
        x = torch.randn(4, 16, 32, device="cuda")
        weight = torch.randn(4, 16, 32, device="cuda")  # a gradient that is not a function of the output
        for call in (compiled, twin):
            (call(x) * weight).sum().backward()
        for p, q in zip(model.parameters(), twin.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4)
            p.grad = q.grad = None
    forward, backward = (_captured(g) for g in new_graphs(before))
    assert len(forward) == 1 and len(backward) == 1
    if make is Block:  # (the buffer may be another live forward's of the same layout)
        scratch = {b.untyped_storage().data_ptr() for graph in _LIVE for b in graph.scratch}
        assert scratch & {backward[0].inputs[i].untyped_storage().data_ptr() for i in backward[0].copied}
    else:
        assert not forward[0].scratch


def test_graphed_training_never_overwrites_what_a_pending_backward_reads():
    """Two forwards before their backwards: the second finds the first's saved activations
    held and runs the jitted replay, and a backward reads in place only what the forward's
    graph handed out. Gradients accumulate (no zero_grad) and stay equal to eager's."""
    torch.manual_seed(0)
    model = Block().cuda().train()
    twin = copy.deepcopy(model)
    compiled = torch.compile(model, backend="fusionrt")
    before = len(compiled_graphs())
    for step in range(6):
        xs = [torch.randn(4, 16, 32, device="cuda") for _ in range(2)]
        outs = [compiled(x) for x in xs]
        refs = [twin(x) for x in xs]
        for out, ref in zip(outs, refs):
            torch.testing.assert_close(out, ref, rtol=1e-3, atol=1e-4)
        for out, ref in zip(reversed(outs), reversed(refs)):
            out.square().mean().backward()
            ref.square().mean().backward()
        for p, q in zip(model.parameters(), twin.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4)
    forward = cuda_graphed(new_graphs(before)[0])
    assert forward.launches > 0 and forward.held_calls > 0


def test_bf16_whole_block_in_a_loop():
    model = nn.Sequential(*[Block(64) for _ in range(3)]).cuda().to(torch.bfloat16).eval()
    compiled = torch.compile(model, backend="fusionrt")
    with torch.no_grad():
        for _ in range(5):
            x = torch.randn(8, 64, 64, device="cuda", dtype=torch.bfloat16)
            torch.testing.assert_close(compiled(x), model(x), rtol=5e-2, atol=5e-2)

