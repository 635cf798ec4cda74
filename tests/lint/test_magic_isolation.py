"""``%%fuse --compare`` runs the cell twice, and the notebook must see one run: the fixed cell
runs on deep copies of what it reads, and a cell whose effects copies cannot hold is run once."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from fusionrt.report import Comparison, Report  # noqa: E402

# The fixed cell has one write less (FL002's fix inside block); the effects come after it.
BURN_FUNCTION = """\
def block(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = y + 1
    t3 = a.clone().sum(-1, keepdim=True)
    return t3 + a * b

out = block(x, y)
"""


def compare(ip, effects: str):
    result = ip.run_cell(f"%%fuse --compare --executor reference -o cmp\n{BURN_FUNCTION}{effects}")
    assert result.error_in_exec is None and result.error_before_exec is None
    return result


def compared(ip) -> bool:
    """Whether both runs happened (a Comparison) rather than one (a Report)."""
    stored = ip.user_ns["cmp"]
    assert isinstance(stored, (Comparison, Report))
    return isinstance(stored, Comparison)


def test_appends_and_in_place_updates_through_containers_happen_once(ip):
    ip.run_cell("log = []\nd = {'w': torch.zeros(3)}\nnested = {'inner': [d]}")
    compare(ip, "log.append(len(log))\nd['w'].add_(1)\nnested['inner'].append(0)\n")
    assert compared(ip) and ip.user_ns["cmp"].outputs_equal is True
    assert ip.user_ns["log"] == [0]
    torch.testing.assert_close(ip.user_ns["d"]["w"], torch.ones(3))
    assert ip.user_ns["nested"]["inner"][0] is ip.user_ns["d"] and len(ip.user_ns["nested"]["inner"]) == 2
    # the notebook keeps the original cell's names: its block still clones, the fixed one's tmp is gone
    assert "clone" in ip.user_ns["block"].__code__.co_names and "tmp" not in ip.user_ns


def test_an_optimizer_steps_once_and_its_copy_steps_its_copied_model(ip):
    ip.run_cell(
        "torch.manual_seed(0)\nmodel = torch.nn.Linear(4, 2)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.5)\nstart = model.weight.detach().clone()"
    )
    compare(ip, "loss = model(torch.ones(1, 4)).sum()\nloss.backward()\nopt.step()\nopt.zero_grad()\n")
    assert compared(ip)
    # d(loss)/d(weight) is all ones: one step of lr 0.5 moves every weight by -0.5, not -1.0
    torch.testing.assert_close(ip.user_ns["model"].weight.detach(), ip.user_ns["start"] - 0.5)
    assert ip.user_ns["cmp"].outputs_equal is True


def test_notebook_functions_see_the_copies(ip):
    """A function from an earlier cell reads the notebook's globals: in the second run it
    must read the copies, and a global it rebinds must be put back."""
    ip.run_cell(
        "calls = []\ncounter = 0\n"
        "def record(value):\n    calls.append(value)\n    return value\n"
        "def bump():\n    global counter\n    counter += 1\n"
        "class Tracker:\n    def __call__(self, value):\n        self.stream = value\n        calls.append(-value)\n"
        "track = Tracker()\n"
        "stream = (i for i in range(3))"  # cannot be copied, and only an attribute of Tracker has its name
    )
    compare(ip, "record(1)\nbump()\ntrack(2)\n")
    assert compared(ip)
    assert ip.user_ns["calls"] == [1, -2] and ip.user_ns["counter"] == 1


def test_a_tensor_computed_with_autograd_is_copied_as_a_leaf(ip):
    ip.run_cell("w = torch.ones(3, requires_grad=True)\nprev = w * 2")
    compare(ip, "(prev * 3).sum().backward()\n")
    assert compared(ip)
    torch.testing.assert_close(ip.user_ns["w"].grad, torch.full((3,), 6.0))  # one backward, not two


def test_output_is_shown_once_and_random_numbers_are_drawn_once(ip, capsys):
    ip.run_cell("import random\nrandom.seed(7)\ntorch.manual_seed(7)")
    capsys.readouterr()
    compare(ip, "print('hello from the cell')\ndraws = (random.random(), torch.rand(1).item())\n")
    assert compared(ip) and ip.user_ns["cmp"].outputs_equal is True
    assert capsys.readouterr().out.count("hello from the cell") == 1
    ip.run_cell("random.seed(7)\ntorch.manual_seed(7)\nexpected = (random.random(), torch.rand(1).item())")
    assert ip.user_ns["draws"] == ip.user_ns["expected"]
    # the generators moved on by one run: the next numbers are the second draws of the seeds
    ip.run_cell("after = (random.random(), torch.rand(1).item())\nrandom.seed(7)\ntorch.manual_seed(7)\n"
                "_ = (random.random(), torch.rand(1))\nsecond = (random.random(), torch.rand(1).item())")
    assert ip.user_ns["after"] == ip.user_ns["second"]


@pytest.mark.parametrize(
    ("setup", "effects", "reason", "once"),
    [
        ("path = 'out.txt'", "open(path, 'a').write('x')\n", "line 9 opens a file for writing",
         "open(path).read() == 'x'"),
        ("items = (i for i in range(5))", "first = next(items)\n",
         "items cannot be copied (TypeError: cannot pickle 'generator' object)", "next(items) == 1"),
        ("import types\ncfg = types.ModuleType('cfg')\ncfg.runs = 0", "cfg.runs += 1\n",
         "line 9 changes cfg.runs, which cfg holds for the whole notebook", "cfg.runs == 1"),
        ("class Seen:\n    items = []", "Seen.items.append(1)\n",
         "line 9 calls Seen.items.append(), on what Seen holds for the whole notebook", "Seen.items == [1]"),
        ("import os", "os.environ['FUSE_RUNS'] = os.environ.get('FUSE_RUNS', '') + 'x'\n",
         "line 9 uses os (from os), which reaches outside the notebook", "os.environ.pop('FUSE_RUNS') == 'x'"),
        ("runs = []", "runs.append(1)\n!echo shell\n",
         "line 10 runs an IPython magic or shell command", "runs == [1]"),
        ("import pathlib\nmarker = pathlib.Path('marker.txt')", "with marker.open('a') as f:\n    f.write('x')\n",
         "line 9 uses marker (from pathlib), which reaches outside the notebook", "marker.read_text() == 'x'"),
        ("saved = []", "torch.save(out, 'out.pt')\nsaved.append(1)\n",
         "line 9 calls .save(), which may write a file", "saved == [1]"),
    ],
)
def test_what_copies_cannot_hold_runs_once_and_says_why(ip, capsys, tmp_path, monkeypatch, setup, effects, reason,
                                                       once):
    monkeypatch.chdir(tmp_path)
    ip.run_cell(setup)
    capsys.readouterr()
    compare(ip, effects)
    assert not compared(ip)  # one run, its report
    shown = " ".join(capsys.readouterr().out.split())  # the note is one line, wrapped to the terminal
    assert shown.count("--compare not run") == 1
    assert f"--compare not run, a second run could not be isolated: {reason}. The cell ran once." in shown
    assert ip.ev(once) is True


def test_reading_a_file_is_not_an_effect(ip, tmp_path):
    (tmp_path / "data.txt").write_text("3")
    ip.user_ns["data_path"] = str(tmp_path / "data.txt")
    compare(ip, "scale = int(open(data_path).read())\nwith open(data_path, 'rb') as f:\n    raw = f.read()\n")
    assert compared(ip) and ip.user_ns["scale"] == 3
