"""The plan cache and ``fusionrt.jit``: replayed calls compute eager's values on fresh inputs and
report exactly what a planned call reports; anything the guards cannot vouch for records again."""
from __future__ import annotations

import contextlib
import gc
import io
import weakref
from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F

import fusionrt
from fusionrt.graph import Leaf
from fusionrt.plan_cache import PLANS

from .differential import LOW_PRECISION, assert_same, clone_tree, rand
from .test_differential import COMPOSITES, _exec, random_program


def _fresh(x: torch.Tensor, seed: int) -> torch.Tensor:
    """Same metadata as ``x`` (shape, strides, dtype), new random values."""
    base = rand(x.untyped_storage().nbytes() // x.element_size(), dtype=x.dtype,
                generator=torch.Generator().manual_seed(seed))
    return base.as_strided(x.shape, x.stride(), x.storage_offset())


def clone_pattern(x, y):
    a = x * 2
    b = y + 1
    t3 = a.clone().sum(-1, keepdim=True)
    return t3 + a * b


def in_place_on_input(x, y):
    x.mul_(0.5)
    y.copy_(x * 2)
    return (x + y).t()


def matmul_bias(t1, t2, t3):
    return t1.unsqueeze(0).matmul(t2) + t3.unsqueeze(0)


def conv_relu(img, w):
    y = F.conv2d(img, w, padding=1).relu()  # returned: torch's result is its home
    h = F.conv2d(img * 0.5, w, padding=1).relu()  # scratch, read by the next kernel
    return y, h * 2 + y


def several_results(x, y):
    h = F.layer_norm(x + y, (x.shape[-1],))
    return torch.relu(h), h.sum(-1), h[:, :3], x, 3


PROGRAMS = {
    "chain": (lambda x: torch.sigmoid(torch.relu(x * 2 + 1)) * x, lambda: (rand(1024),)),
    "clone_pattern": (clone_pattern, lambda: (rand(16, 32), rand(16, 32))),
    "in_place_on_input": (in_place_on_input, lambda: (rand(6, 5), rand(6, 5))),
    "matmul_bias": (matmul_bias, lambda: (rand(8, 16), rand(3, 16, 12), rand(8, 12))),
    "conv_relu": (conv_relu, lambda: (rand(2, 3, 8, 8), rand(3, 3, 3, 3))),
    "softmax_transposed": (lambda s: F.softmax(s.t() * 0.125, -1), lambda: (rand(12, 7),)),
    "several_results": (several_results, lambda: (rand(5, 9), rand(5, 9))),
}


def _fresh_args(args: tuple, seed: int) -> tuple:
    return tuple(_fresh(a, seed + i) for i, a in enumerate(args))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_repeated_stream_replays_its_plan_with_the_same_report(name):
    fn, make = PROGRAMS[name]
    PLANS.clear()
    args = make()
    fresh = _fresh_args(args, 7)
    reports, hits = [], []
    for call_args in (clone_tree(args), clone_tree(fresh)):  # one call site: the same lines
        got, report = fusionrt.measure(fn, *call_args)
        reports.append(report)
        hits.append(PLANS.stats.hits)
    assert hits[0] == 0 and hits[1] >= 1
    assert_same(got, fn(*clone_tree(fresh)))
    assert_same(call_args, fn_inputs_after(fn, fresh))
    assert reports[1].to_dict() == reports[0].to_dict()


def fn_inputs_after(fn, args: tuple) -> tuple:
    eager = clone_tree(args)
    fn(*eager)
    return eager


def test_scalars_liveness_and_layouts_are_part_of_the_key():
    x = rand(64)
    PLANS.clear()
    zero, _ = fusionrt.measure(lambda t: t.abs() * 0.0, x)
    negative_zero, _ = fusionrt.measure(lambda t: t.abs() * -0.0, x)
    assert not zero.signbit().any() and negative_zero.signbit().all()
    assert PLANS.stats.hits == 0

    def kept(keep: bool):
        with fusionrt.lazy() as session:
            a = x * 2
            b = a + 1
            if not keep:
                del a
        return session.report, b

    (dead, b1), (alive, b2) = kept(False), kept(True)
    assert PLANS.stats.hits == 0  # same ops, different liveness
    assert (dead.writes, alive.writes) == (1, 2)
    torch.testing.assert_close(b1, x * 2 + 1)
    torch.testing.assert_close(b2, x * 2 + 1)
    fusionrt.measure(lambda t: t * 2 + 1, rand(8, 8).t())
    fusionrt.measure(lambda t: t * 2 + 1, rand(8, 8))
    assert PLANS.stats.hits == 0  # strides differ


def test_random_programs_replayed_from_the_plan_cache():
    """The differential suite's random programs, each run on a second, fresh input: the cached
    plan computes eager's values and reports what planning reported."""
    PLANS.clear()
    for seed in range(60):
        x, lines, _ = random_program(seed)
        y = _fresh(x, seed + 1000)
        expected = _exec(lines, y.clone())
        reports, hits = [], []
        for inp in (x.clone(), y.clone()):  # one call site: the same source lines
            hits.append(PLANS.stats.hits)
            with fusionrt.lazy() as session:
                got = _exec(lines, inp)
            reports.append(session.report)
        program = "\n".join(lines)
        assert PLANS.stats.hits > hits[1] or not any(f.ops for f in reports[0].flushes), program
        for key, value in expected.items():
            assert_same(got[key], value, low_precision_inside=x.dtype in LOW_PRECISION, what=f"{program}\n{key}")
        assert reports[1].to_dict() == reports[0].to_dict(), program


# -- fusionrt.jit ------------------------------------------------------------------------------

@pytest.mark.parametrize("executor", ["reference", "interpret"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_jit_replays_with_eager_values_and_the_recorded_report(name, executor):
    """From the second replay on, a generated kernel is relaunched over the call's tensors,
    straight into their homes (arguments updated in place included)."""
    fn, make = PROGRAMS[name]
    fast = fusionrt.jit(fn, executor=executor)
    reports = []
    for seed in (0, 1, 2):  # one call site: the same source lines
        fresh = _fresh_args(make(), 100 * seed)
        lazy_args = clone_tree(fresh)
        got = fast(*lazy_args)
        reports.append(fast.report)
        assert_same(got, fn(*clone_tree(fresh)))
        assert_same(lazy_args, fn_inputs_after(fn, fresh))
    assert reports[2].to_dict() == reports[1].to_dict() == reports[0].to_dict()
    assert (fast.stats.recordings, fast.stats.replays) == (1, 2)


def test_jit_results_are_fresh_tensors_and_views_keep_their_layout():
    fast = fusionrt.jit(lambda x, y: dict(zip(("out", "rows", "view", "same", "n"), several_results(x, y))))
    x, y = rand(5, 9), rand(5, 9)
    fast(x, y)
    a, b = fast(x, y), fast(x, y)
    assert fast.stats.replays == 2 and list(a) == ["out", "rows", "view", "same", "n"]
    assert a["out"].data_ptr() != b["out"].data_ptr() and a["same"] is x and a["n"] == 3
    assert a["view"].stride() == (9, 1) and a["view"].shape == (5, 3)
    assert a["view"].untyped_storage().data_ptr() != a["out"].untyped_storage().data_ptr()
    torch.testing.assert_close(a["view"], F.layer_norm(x + y, (9,))[:, :3])


def test_jit_guards_record_again_when_metadata_changes():
    fast = fusionrt.jit(lambda x, s: x * s + 1)
    x = rand(4, 6)
    fast(x, 2.0)
    fast(x, 2.0)
    assert (fast.stats.recordings, fast.stats.replays) == (1, 1)
    for args in ((x, 3.0), (x.t(), 2.0), (x.double(), 2.0), (rand(5, 6), 2.0), (x, -0.0),
                 (x.clone().requires_grad_(), 2.0)):
        recordings = fast.stats.recordings
        expected = args[0] * args[1] + 1
        got = fast(*args)
        torch.testing.assert_close(got, expected)
        assert fast.stats.recordings == recordings + 1, args[1]
    assert fast(x, -0.0).signbit().any() == (x * -0.0 + 1).signbit().any()


@pytest.mark.parametrize("fn, why", [
    (lambda x: x * (x.sum() > 0).item(), "host syncs (item)"),
    (lambda x: x * 2 if x.sum() > 0 else x * 3, "host syncs (bool)"),  # value-dependent control flow
    (lambda x: x.mul_(2)[0].add_(x[1]) and x, "host syncs (bool)"),
    (lambda x: x * 2 + _CLOSURE, "not one of its arguments"),
    (lambda x: _STASH.append(x * 2) or x + 1, "alive"),
    (lambda x: _STASH.append(torch.cumsum(x, 0)) or x + 1, "alive"),  # a fallback's result kept
    (lambda x: torch.cumsum(x + _CLOSURE, 0), "not one of its arguments"),
    (lambda x: x.t_().mul_(2) + 1 if x.dim() == 2 else x.unsqueeze_(0) * 2, "changes an argument's shape"),
])
def test_calls_the_guards_cannot_vouch_for_record_every_time(fn, why):
    fast = fusionrt.jit(fn)
    for seed in range(3):
        x = rand(8, generator=torch.Generator().manual_seed(seed))
        expected = fn(x.clone())
        _STASH.clear()
        torch.testing.assert_close(fast(x.clone()), expected)
    assert (fast.stats.recordings, fast.stats.replays) == (3, 0)
    assert why in fast.stats.last_recording


_CLOSURE = rand(8)
_STASH: list = []


@pytest.mark.parametrize("fn", [
    lambda x: torch.cumsum(x * 2, 0) + 1,                        # a fallback between two plans
    lambda x: (x.mul_(2)[0].add_(x[1]), x)[1] * 3,              # reads what it wrote: alias flushes
    lambda x: (x[x > 0].mul_(0), x.index_put_((x < 0,), x.new_tensor(1.0)))[1] + 1,  # in-place fallback
    lambda x: torch.zeros(3) + x[:3],                            # a factory
    lambda x: x[torch.arange(0, 8, 2)] * torch.tensor(3.0) + 1,  # factory, constant, index fallback
    lambda x: torch.sort(torch.cumsum(x, 0) * 2)[0].flip(0)[1:] - x[:-1],  # fallbacks in a row, views
    lambda x: (torch.cumsum(x, 0), x.cummax(0)[1]),              # several fallback results returned
])
def test_calls_with_fallbacks_and_factories_replay_each_step(fn):
    fast = fusionrt.jit(fn)
    for seed in range(4):
        x = rand(8, generator=torch.Generator().manual_seed(seed))
        expected_x = x.clone()
        expected = fn(expected_x)
        assert_same(fast(x), expected, what=f"call {seed}")
        assert_same(x, expected_x, what="argument after the call")
    assert (fast.stats.recordings, fast.stats.replays) == (1, 3), fast.stats.last_recording


def test_empty_tensor_arguments_reads_and_results_replay():
    """An empty tensor holds no data (a model's empty key/value cache before the first step):
    reading, concatenating and returning one replay like any other argument."""
    def step(cache, x):
        kv = torch.cat([cache, x * 2], dim=0)
        return kv.sum(0) + 1, kv, cache[:0] * 3

    fast = fusionrt.jit(step)
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        cache, x = torch.empty(0, 4), rand(3, 4, generator=g)
        got = fast(cache, x)
        assert_same(got, step(cache, x), what=f"call {seed}")
        got[2].resize_(5)  # a caller's change to a returned empty tensor reaches no later call
    assert (fast.stats.recordings, fast.stats.replays) == (1, 2), fast.stats.last_recording


def test_jit_inside_a_lazy_block_joins_the_block():
    fast = fusionrt.jit(lambda x: x * 2)
    x = rand(16)
    with fusionrt.lazy() as session:
        y = fast(x) + 1
    torch.testing.assert_close(y, x * 2 + 1)
    assert session.report.kernels == 1 and fast.stats.recordings == fast.stats.replays == 0


def test_jit_decorator_takes_options_and_validates_them():
    @fusionrt.jit(executor="reference")
    def scaled(x, *, scale):
        return x * scale

    x = rand(3)
    torch.testing.assert_close(scaled(x, scale=2.0), x * 2)
    torch.testing.assert_close(scaled(x, scale=2.0), x * 2)
    assert scaled.stats.replays == 1 and scaled.__name__ == "scaled"
    with pytest.raises(ValueError, match="executor"):
        fusionrt.jit(lambda x: x, executor="cuda")


def test_jit_under_the_interpreter_counts_like_the_reference():
    """Generated Triton kernels (TRITON_INTERPRET=1) replayed: eager's values, same report."""
    fn, make = PROGRAMS["clone_pattern"]
    fast = fusionrt.jit(fn, executor="interpret")
    fast(*make())
    fresh = _fresh_args(make(), 5)
    got = fast(*fresh)
    assert fast.stats.replays == 1
    torch.testing.assert_close(got, fn(*fresh))
    _, reference = fusionrt.measure(fn, *fresh, executor="reference", policy=fast.policy)
    counts = lambda r: (r.kernels, r.writes, r.bytes_written, r.bytes_read,  # noqa: E731
                        [(w.reason, w.shape, w.source) for w in r.materialized])
    assert counts(fast.report) == counts(reference) and fast.report.executor == "interpret"


def _random_function(seed: int) -> tuple[torch.Tensor, str, Callable[[torch.Tensor], Any]]:
    """The differential suite's random program ``seed`` as a function of its input."""
    x, lines, last = random_program(seed)
    source = "def program(x):\n" + "".join(f"    {line}\n" for line in lines) + f"    return {last}\n"
    env = {"torch": torch, "F": F, "fusionrt": fusionrt}
    exec(source, env)
    return x, source, env["program"]


def test_random_programs_through_jit():
    """The differential suite's random programs as functions: a second call on fresh inputs
    replays when the first was replayable, and always matches eager and the recorded report."""
    replayed = 0
    for seed in range(60):
        x, source, program = _random_function(seed)
        fast = fusionrt.jit(program)
        y = _fresh(x, seed + 2000)
        reports = []
        with contextlib.redirect_stdout(io.StringIO()):
            expected = program(y.clone())
            for inp in (x.clone(), y.clone()):  # one call site: the same source lines
                got = fast(inp)
                reports.append(fast.report)
        assert_same(got, expected, low_precision_inside=x.dtype in LOW_PRECISION, what=source)
        assert reports[1].to_dict() == reports[0].to_dict(), source
        replayed += fast.stats.replays
    assert replayed >= 10


class _Block(torch.nn.Module):
    """An embedding, a norm, an MLP and an index: parameters, buffers, fallbacks and factories."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 16))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[-1], device=ids.device)
        h = self.embed(ids) + self.embed(positions)
        h = h + self.down(F.gelu(self.up(self.norm(h)))) * self.scale
        return torch.cumsum(h, -1)[..., -1]


def test_jit_of_a_module_replays_and_reads_its_current_parameters():
    torch.manual_seed(0)
    block = _Block().eval()
    fast = fusionrt.jit(block)
    with torch.no_grad():
        for seed in range(3):
            ids = torch.randint(0, 50, (2, 7), generator=torch.Generator().manual_seed(seed))
            assert_same(fast(ids), block(ids), what=f"call {seed}")
        assert (fast.stats.recordings, fast.stats.replays) == (1, 2), fast.stats.last_recording
        block.up.weight.mul_(0.5)            # an optimizer step: in place
        block.norm.weight = torch.nn.Parameter(torch.randn(16))  # a new parameter object
        ids = torch.randint(0, 50, (2, 7))
        assert_same(fast(ids), block(ids), what="after the parameters changed")
        assert fast.stats.replays == 3
        block.down.weight.data = torch.randn(16, 32, dtype=torch.float64)  # another dtype: records
        block.double()
        assert_same(fast(ids), block(ids), what="after a dtype change")
        assert fast.stats.recordings == 2
        block.train()
        fast(ids)
        assert fast.stats.recordings == 3  # the mode is guarded


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_jit_of_a_module_with_fallbacks_on_the_gpu():
    torch.manual_seed(0)
    block = _Block().eval().cuda()
    fast = fusionrt.jit(block)
    with torch.no_grad():
        for seed in range(3):
            ids = torch.randint(0, 50, (4, 33), generator=torch.Generator().manual_seed(seed)).cuda()
            assert_same(fast(ids), block(ids), what=f"call {seed}")
    assert (fast.stats.recordings, fast.stats.replays) == (1, 2), fast.stats.last_recording


def test_a_tensor_held_only_by_a_reference_cycle_does_not_stop_replay():
    """Hooks and closures (transformers' output capturing) leave frames in cycles: what they
    hold is garbage, not kept alive, once the collector runs."""
    def with_cycle(x):
        h = x * 2
        box: dict = {"h": h}
        box["self"] = box
        return h.sum(-1) + 1

    fast = fusionrt.jit(with_cycle)
    gc.disable()
    try:
        for seed in range(3):
            x = rand(4, 8, generator=torch.Generator().manual_seed(seed))
            assert_same(fast(x), with_cycle(x))
    finally:
        gc.enable()
    assert (fast.stats.recordings, fast.stats.replays) == (1, 2), fast.stats.last_recording


def test_the_refusal_names_what_is_kept_alive():
    fast = fusionrt.jit(lambda x: _STASH.append(x * 2) or x + 1)
    fast(rand(8))
    fast(rand(8))  # the second call says why the first one could not be replayed
    _STASH.clear()
    assert "(8,) float32, made by mul at" in fast.stats.last_recording


def test_a_replay_frees_each_intermediate_after_its_last_reader():
    """Peak memory: eager frees an intermediate once Python drops it; a replay must too."""
    def chain(x):
        a = torch.cumsum(x * 2, 0)
        b = torch.cumsum(a + 1, 0)
        c = torch.cumsum(b * 3, 0)
        return c - 1, x[:2]

    fast = fusionrt.jit(chain)
    x = rand(64)
    fast(x)
    program = next(iter(fast._programs.values()))
    freed = [i for done in program.frees for i in done]
    assert len(freed) == len(set(freed)) and len(freed) == len(program.fresh) - 1  # all but the result
    assert sum(map(len, program.frees[:-1])) >= 3  # a, b, c and their inputs go before the end
    for seed in range(3):
        y = rand(64, generator=torch.Generator().manual_seed(seed))
        assert_same(fast(y), chain(y))
    assert fast.stats.replays == 3


def test_a_replayed_plan_drops_each_scratch_buffer_after_its_last_reader():
    """Inside one plan too: a kernel's scratch result goes once no later kernel reads it."""
    from fusionrt.plan import FusedLaunch
    from fusionrt.replay import _FlushStep, _last_readers

    checked = 0
    for seed in range(40):
        x, source, program = _random_function(seed)
        fast = fusionrt.jit(program)
        with contextlib.redirect_stdout(io.StringIO()):
            fast(x.clone())
        program = next(iter(fast._programs.values()))
        if isinstance(program, str):
            continue
        for step in program.steps:
            if not isinstance(step, _FlushStep):
                continue
            dropped_at = {node: k for k, nodes in enumerate(_last_readers(step.plan)) for node in nodes}
            for k, planned in enumerate(step.plan.kernels):
                for node in planned.outputs:
                    assert dropped_at[node] >= k
                for inp in planned.inputs if isinstance(planned, FusedLaunch) else ():
                    src = (inp.view.root if inp.view is not None else inp.src)
                    if not isinstance(src, Leaf):
                        assert dropped_at[src] >= k, source
                checked += 1
    assert checked > 50


def test_a_boxed_call_frees_each_argument_after_its_last_reader():
    """AOTAutograd hands a backward graph its saved activations in a list it lets the callee
    empty: a replay then drops each one after the step that last reads it, as eager frees
    activations layer by layer, instead of holding every one until the graph returns."""

    def staged(first, second):
        early = (first * 2).sum(dim=0)
        late = torch.nn.functional.embedding(torch.tensor([0, 1]), early.unsqueeze(-1).expand(-1, 3))
        return (late * second.sum()).sum()

    f = fusionrt.jit(staged)
    make = lambda: [torch.randn(64, 8), torch.randn(5)]  # noqa: E731
    f(*make())  # records
    first, second = make()
    expected = staged(first, second)
    alive_after_first_flush = []
    program = next(iter(f._programs.values()))
    original = program.steps[1].run

    def spy(*args):
        alive_after_first_flush.append(first_storage() is not None)
        return original(*args)

    program.steps[1].run = spy
    first_storage = weakref.ref(first.untyped_storage())
    args = [first, second]
    del first, second
    torch.testing.assert_close(f.call_boxed(args), expected)
    assert args == [] and f.stats.replays == 1
    assert alive_after_first_flush == [False]
