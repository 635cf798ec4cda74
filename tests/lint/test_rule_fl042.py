"""FL042 beyond its own examples: the forms of real code (a decoder's outputs grown per frame after a
first-iteration branch, a sampling loop's probabilities, a join with ``cat`` imported from torch),
the message naming the accumulator, and look-alikes that must stay silent (an accumulator the loop
reads, one augmented, a while test, pieces moved to the host, numpy joins)."""
from __future__ import annotations

from fusionlint.engine import lint_source
from fusionlint.model import LintOptions

OPTIONS = LintOptions(codes=frozenset({"FL042"}))


def findings(source: str) -> list[tuple[int, str]]:
    result = lint_source(source, "m.py", OPTIONS)
    assert not result.errors
    return [(f.line, f.message) for f in result.findings]


def test_a_decoder_growing_outputs_after_a_first_iteration_branch_is_flagged():
    source = """\
import torch
from torch import nn


class Decoder(nn.Module):
    def infer(self, x: torch.Tensor, steps: int):
        first_iter = True
        gate_outputs = alignments = torch.zeros(1)
        mel_outputs = torch.zeros(1)
        while True:
            mel, gate, weights = self.decode(x)
            if first_iter:
                mel_outputs = mel.unsqueeze(0)
                gate_outputs = gate
                alignments = weights
                first_iter = False
            else:
                mel_outputs = torch.cat((mel_outputs, mel.unsqueeze(0)), dim=0)
                gate_outputs = torch.cat((gate_outputs, gate), dim=0)
                alignments = torch.cat((alignments, weights), dim=0)
            if len(mel_outputs) == steps:
                break
            x = mel
        return mel_outputs, gate_outputs, alignments
"""
    found = findings(source)
    assert [line for line, _ in found] == [19, 20]
    assert found[0][1].startswith("`gate_outputs` grows by a `cat` in every iteration of the loop")


def test_a_join_with_cat_imported_from_torch_in_a_sampling_loop_is_flagged():
    source = """\
from torch import cat, softmax
import torch


def sample(model, x: torch.Tensor, target: torch.Tensor, steps: int):
    probs = torch.zeros(x.shape[0], 0)
    for i in range(steps):
        p = softmax(model(x)[:, -1], dim=-1)
        probs = cat((probs, torch.gather(p, 1, target[:, i:i + 1])), dim=1)
    return torch.log(probs)
"""
    assert [line for line, _ in findings(source)] == [9]


def test_look_alikes_stay_silent():
    source = """\
import numpy as np
import torch


def f(net, seq: torch.Tensor, xs: list, a: np.ndarray, steps: int):
    for _ in range(steps):
        seq = torch.cat((seq, net(seq)[:, -1:]), dim=-1)
    acc = xs[0]
    for x in xs:
        acc += 1
        acc = torch.cat((acc, x))
    for x in xs:
        a = np.concatenate((a, x))
    host = xs[0].cpu()
    for x in xs:
        host = torch.cat((host, x.to("cpu")), dim=0)
    out = xs[0]
    while out.shape[0] < steps:
        out = torch.cat((out, xs[1]))
    middle = xs[0]
    for x in xs:
        middle = torch.cat((x, middle, x))
    return seq, acc, a, host, out, middle
"""
    assert findings(source) == []
