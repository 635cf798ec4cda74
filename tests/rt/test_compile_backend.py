"""``torch.compile(model, backend="fusionrt")``: Dynamo and AOTAutograd hand fusionrt aten graphs,
which it records once and replays; results, gradients and updated parameters equal eager's on
fresh random inputs, under the executors that run here."""
from __future__ import annotations

import copy
import gc
import importlib.util
import weakref

import pytest
import torch
from torch import nn

import fusionrt
from fusionrt.compile_backend import HeldResults, compiled_graphs, cuda_graphed, decompositions
from tests.rt.test_models_bench import load_bench

EXECUTORS = ["reference", "interpret"]
aten = torch.ops.aten


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def compile_(model, executor: str = "reference"):
    return torch.compile(model, backend="fusionrt", options={"executor": executor})


def new_graphs(before: int) -> list[fusionrt.Jitted]:
    return compiled_graphs()[before:]


class Block(nn.Module):
    """Attention-free transformer-ish block: matmuls, a norm, an activation, a residual."""

    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x)))) * 0.5


def conv_net() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.SiLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))


def randomized(model: nn.Module) -> nn.Module:
    """Batch norm statistics that are not the identity, so an eval-mode norm is really tested."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
    return model


def test_the_backend_is_registered_through_its_entry_point():
    assert "fusionrt" in torch._dynamo.list_backends(exclude_tags=())


@pytest.mark.parametrize("executor", EXECUTORS)
def test_inference_equals_eager_and_replays(executor):
    model = Block().eval()
    compiled = compile_(model, executor)
    before = len(compiled_graphs())
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(4, 8, 32)
            torch.testing.assert_close(compiled(x), model(x))
    (graph,) = new_graphs(before)
    assert graph.stats.recordings == 1 and graph.stats.replays == 2
    report = graph.report
    assert report.kernels < report.eager_kernels and report.writes < report.eager_writes


@pytest.mark.parametrize("executor", EXECUTORS)
def test_eval_convnet_with_batch_and_group_norm_fuses_without_fallbacks(executor):
    model = randomized(conv_net()).eval()
    compiled = compile_(model, executor)
    before = len(compiled_graphs())
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 3, 12, 12)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    (graph,) = new_graphs(before)
    assert graph.stats.replays == 1
    assert not graph.report.fallbacks  # group norm decomposed; eval batch norm fused
    assert graph.report.writes < graph.report.eager_writes


@pytest.mark.parametrize("executor", EXECUTORS)
def test_training_steps_give_eager_gradients_and_parameters(executor):
    """Forward and backward graphs both run through fusionrt; an SGD step after each backward
    keeps the two copies of the model equal, running statistics of batch norm included."""
    torch.manual_seed(0)
    model = conv_net().train()
    twin = copy.deepcopy(model)
    compiled = compile_(model, executor)
    opt, twin_opt = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, twin))
    before = len(compiled_graphs())
    for _ in range(3):
        x = torch.randn(4, 3, 8, 8)
        for m, o, fn in ((model, opt, compiled), (twin, twin_opt, twin)):
            o.zero_grad()
            fn(x).square().mean().backward()
            o.step()
        for (name, p), q in zip(model.named_parameters(), twin.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)
        for b, c in zip(model.buffers(), twin.buffers()):
            torch.testing.assert_close(b, c, rtol=1e-4, atol=1e-5)
    graphs = new_graphs(before)
    assert len(graphs) == 2  # forward, backward
    assert all(g.stats.replays == 2 for g in graphs)
    backward = graphs[1].report
    assert backward.kernels < backward.eager_kernels


class DropoutBlock(Block):
    """``Block`` with dropout, and the ``*_like`` factories whose argument is read for its layout."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = super().forward(x)  # saved for backward (by sin): its memory outlives the call
        noise = torch.rand_like(h) + torch.randn_like(h) * 0.1 + torch.full_like(h, 0.5) + torch.zeros_like(h)
        noise = noise + torch.randint_like(h, 3) + torch.randint_like(h, 2, 5) + torch.ones_like(h)
        return torch.nn.functional.dropout(h, p=0.3, training=self.training) * noise + h.sin()


@pytest.mark.parametrize("executor", EXECUTORS)
def test_training_with_dropout_replays_and_draws_eager_random_numbers(executor):
    """Dropout's mask comes from ``rand_like`` of a value the graph has not computed yet: a
    replay allocates it in the recorded layout and fills it as ATen does, drawing the same
    numbers as the same aten graph run eagerly (AOTAutograd's decomposed dropout draws other
    numbers than eager's fused kernel), seed for seed."""
    from torch._dynamo.backends.common import aot_autograd

    torch.manual_seed(0)
    model = DropoutBlock().train()
    same_graph = aot_autograd(fw_compiler=lambda gm, _: gm, decompositions=decompositions())
    twin = torch.compile(copy.deepcopy(model), backend=same_graph)
    compiled = compile_(model, executor)
    before = len(compiled_graphs())
    for step in range(3):
        x = torch.randn(4, 8, 32)
        losses = []
        for fn in (compiled, twin):
            torch.manual_seed(100 + step)
            loss = fn(x).square().mean()
            loss.backward()
            losses.append(loss)
        torch.testing.assert_close(losses[0], losses[1])
        for (name, p), q in zip(model.named_parameters(), twin.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)
            p.grad = q.grad = None
    forward = new_graphs(before)[0]
    assert forward.stats.replays == 2, forward.stats.last_recording


class Attention(nn.Module):
    """Self-attention through ``scaled_dot_product_attention``, with what real models pass it."""

    def __init__(self, dim: int = 32, heads: int = 4, **sdpa) -> None:
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, mask=None) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, **self.sdpa)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case", ["bool-mask", "float-mask", "expanded-mask", "causal-scale"])
def test_inference_attention_runs_the_kernel_chosen_at_run_time(executor, case):
    """Each call's kernel is chosen on the real tensors, as in eager (the traced choice can be
    the math form, which writes the score matrix): the graph holds one opaque attention op."""
    model = Attention(is_causal=True, scale=0.3) if case == "causal-scale" else Attention()
    model.eval()
    compiled = compile_(model, executor)
    before = len(compiled_graphs())
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 8, 32)
            mask = None
            if case == "bool-mask":
                mask = torch.rand(2, 1, 8, 8) > 0.3
                mask[..., 0] = True  # no row fully masked
            elif case == "float-mask":
                mask = torch.randn(2, 1, 1, 8)
            elif case == "expanded-mask":  # rows not contiguous, as transformers builds BERT's
                mask = (torch.rand(2, 1, 8, 1) > 0.2).expand(2, 1, 8, 8)
            torch.testing.assert_close(compiled(x, mask), model(x, mask), rtol=1e-4, atol=1e-5)
    (graph,) = new_graphs(before)
    assert graph.stats.replays == 1
    ops = [str(n.target) for n in graph.fn.graph.nodes if n.op == "call_function"]
    assert ops.count("fusionrt.attention.default") == 1
    assert not any("softmax" in op or "bmm" in op for op in ops)


def test_training_attention_keeps_its_backward():
    model = Attention()
    reference = copy.deepcopy(model)
    compiled = compile_(model)
    x = torch.randn(2, 8, 32, requires_grad=True)
    compiled(x).square().mean().backward()
    reference(x.detach().requires_grad_()).square().mean().backward()
    for mine, theirs in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-4, atol=1e-5)


def test_results_handed_out_in_graph_memory_count_as_held_until_every_alias_is_dropped():
    """What decides whether a CUDA graph may overwrite the results it handed out last time."""
    outputs = [torch.randn(4, 4), torch.randn(3), 7]
    results = HeldResults(outputs)
    assert not results.held()
    handed = outputs[0].detach()
    assert results.held()
    del handed
    assert not results.held()
    row = outputs[1].detach()[1:]
    assert results.held()
    del row
    copy = outputs[0].clone()
    assert not results.held() and copy.shape == (4, 4)


def test_reports_name_the_user_lines_the_graph_was_traced_from():
    """Not the aten graph's generated code: the model's own lines."""
    model = Block().eval()
    compiled = compile_(model)
    before = len(compiled_graphs())
    with torch.no_grad():
        compiled(torch.randn(2, 4, 32))
    (graph,) = new_graphs(before)
    forward_line = Block.forward.__code__.co_firstlineno + 1
    sources = {w.source for w in graph.report.materialized}
    assert sources and all(":" in src and "eval_with_key" not in src for src in sources)
    assert any(src.endswith(f"test_compile_backend.py:{forward_line}") for src in sources), sources


@pytest.mark.parametrize("grad", [False, True])
def test_a_recorded_call_keeps_none_of_its_tensors(grad):
    """Neither the input nor, in training, the activations saved for backward outlive the step."""
    model = Block()
    compiled = compile_(model)
    x = torch.randn(2, 4, 32, requires_grad=grad)
    alive = weakref.ref(x)
    with torch.set_grad_enabled(grad):
        out = compiled(x)
        if grad:
            out.square().mean().backward()
    held = weakref.ref(out)
    del x, out
    gc.collect()
    assert alive() is None and held() is None


def test_a_graph_break_gives_two_graphs_and_eager_values():
    def fn(x):
        y = torch.relu(x * 2)
        if y.sum().item() > 0:  # a host sync: Dynamo breaks the graph here
            return torch.sigmoid(y) + 1
        return y - 1

    compiled = compile_(fn)
    before = len(compiled_graphs())
    for _ in range(2):
        x = torch.randn(64)
        torch.testing.assert_close(compiled(x), fn(x))
    assert len(new_graphs(before)) >= 2


def test_a_new_shape_compiles_again_and_stays_right():
    model = Block().eval()
    compiled = compile_(model)
    with torch.no_grad():
        for shape in [(2, 4, 32), (3, 5, 32), (6, 7, 32), (3, 5, 32)]:
            x = torch.randn(shape)
            torch.testing.assert_close(compiled(x), model(x))


def test_an_input_mutated_in_place_is_written_back_and_never_cuda_graphed():
    """A CUDA graph reads copies of its inputs: a graph that writes an input must not be one."""
    def fn(x, acc):
        acc.add_(x * 3)
        return torch.tanh(acc) * 2

    compiled = compile_(fn)
    before = len(compiled_graphs())
    for _ in range(2):
        x, acc = torch.randn(16), torch.randn(16)
        acc2 = acc.clone()
        torch.testing.assert_close(compiled(x, acc), fn(x, acc2))
        torch.testing.assert_close(acc, acc2)
    (graph,) = new_graphs(before)
    assert cuda_graphed(graph) is None
    pure = compile_(lambda x: torch.tanh(x) * 2)
    pure(torch.randn(16))
    (graph,) = new_graphs(before + 1)
    assert cuda_graphed(graph) is not None and cuda_graphed(graph).launches == 0  # CPU tensors: never launched


def test_unknown_options_are_named():
    compiled = torch.compile(Block(), backend="fusionrt", options={"executr": "reference"})
    with pytest.raises(Exception, match="unknown option.*executr"):
        compiled(torch.randn(2, 32))


def test_decompositions_keep_what_fusionrt_records_whole():
    table = decompositions()
    assert aten.native_group_norm.default in table  # decomposed into reductions it fuses
    assert aten._native_batch_norm_legit_functional.default in table
    for kept in (aten.addmm.default, aten.convolution.default, aten._softmax.default, aten.gelu.default,
                 aten.native_layer_norm.default, aten._scaled_dot_product_flash_attention_for_cpu.default):
        assert kept not in table, kept


bench = load_bench()


def _hf_vision(name: str):
    """transformers' own ViT, ResNet and ConvNeXt stand in for the zoo's timm and torchvision
    models on CPU, where the registry's torchvision (a CUDA build, needed by timm) cannot load."""
    import transformers as tf

    config, model = {
        "hf_vit": (dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                        image_size=32, patch_size=8), "ViT"),
        "hf_resnet": (dict(embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                           layer_type="bottleneck"), "ResNet"),
        "hf_convnext": (dict(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1]), "ConvNext"),
    }[name]
    built = getattr(tf, f"{model}Model")(getattr(tf, f"{model}Config")(**config))
    return built, torch.randn(2, 3, 32, 32)


MODELS = {name: (spec.build, spec.kwargs) for name, spec in bench.ZOO.items()
          if spec.library == "builtin" or importlib.util.find_spec(spec.library)}
if importlib.util.find_spec("transformers"):
    MODELS.update({name: (lambda tiny, name=name: _hf_vision(name), {}) for name in ("hf_vit", "hf_resnet", "hf_convnext")})


@pytest.mark.slow
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_whole_models_at_small_sizes(name, executor):
    """Whole models (the benchmark's zoo where its library loads here), built small: eager's
    outputs on fresh inputs, every graph replayed on the second call, fewer writes than eager."""
    build, kwargs = MODELS[name]
    torch.manual_seed(0)
    model, x = build(True)
    model.eval()
    bench.randomize_batch_norm(model)
    compiled = compile_(model, executor)
    before = len(compiled_graphs())
    with torch.no_grad():
        for _ in range(2):
            expected = bench.main_output(model(x, **kwargs))
            torch.testing.assert_close(bench.main_output(compiled(x, **kwargs)), expected, rtol=1e-4, atol=1e-4)
            x = torch.randn_like(x) if x.is_floating_point() else torch.randint_like(x, 0, 1000)
    graphs = new_graphs(before)
    assert graphs and all(g.stats.replays >= 1 for g in graphs), [g.stats for g in graphs]
    assert sum(g.report.writes for g in graphs) < sum(g.report.eager_writes for g in graphs)


class Mlp(nn.Module):
    """A transformer MLP on (batch, tokens, dim): AOTAutograd gives ``view -> addmm -> view``."""

    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.gelu(self.up(x), approximate="tanh")
        return (self.down(h * 0.5 + h.sigmoid()) + residual).square()


@pytest.mark.parametrize("executor", EXECUTORS)
def test_the_activation_between_two_linear_layers_joins_the_first_matmul(executor):
    """The activation between two 3-d linear layers runs in the first matmul's epilogue: no
    kernel of its own, and the hidden tensor is written once, not twice; the residual add that
    a returned value reads stays in the viewed form. The results are eager's."""
    model = Mlp().eval()
    compiled = compile_(model, executor)
    before = len(compiled_graphs())
    with torch.no_grad():
        for _ in range(2):
            x, residual = torch.randn(4, 8, 32), torch.randn(4, 8, 32)
            torch.testing.assert_close(compiled(x, residual), model(x, residual), rtol=1e-4, atol=1e-5)
    (graph,) = new_graphs(before)
    names = [k.name for k in graph.report.kernel_records]
    assert any(name.startswith("addmm") and "gelu" in name and "sigmoid" in name for name in names), names
    assert graph.report.kernels == 3, names


def _traced(f, *args):
    return torch.fx.experimental.proxy_tensor.make_fx(f, tracing_mode="fake")(*args)


def test_only_work_that_goes_back_to_rows_moves():
    """Element-wise work between two linear layers moves onto the rows (a bias of the last dim's
    size and a second rows value included); the same work also read in the viewed form by a
    reduction, or returned, stays where it is."""
    from fusionrt.sink_views import sink_views

    def between(x, w1, b1, w2, w3):
        h = torch.nn.functional.linear(x, w1) + b1
        g = h.relu() * torch.nn.functional.linear(x, w3)
        return torch.nn.functional.linear(g, w2)

    def also_read_whole(x, w1, b1, w2, w3):
        h = (torch.nn.functional.linear(x, w1) + b1).relu()
        return torch.nn.functional.linear(h, w2), h.sum(-1)

    args = (torch.randn(2, 3, 4), torch.randn(5, 4), torch.randn(5), torch.randn(6, 5), torch.randn(5, 4))
    for f, moved in ((between, 3), (also_read_whole, 0)):
        gm = _traced(f, *args)
        assert sink_views(gm) == moved, f.__name__
        torch.testing.assert_close(gm(*args), f(*args))
