"""The engine's shortcuts give what the slow, whole-module way gives.

The engine places a finding by rendering only the method (or top-level function or class) around
it, at the indentation and first line the stdlib ast gives; here every node of every scope is
placed both ways, on code whose layout could trip the shortcut.
"""
from __future__ import annotations

import ast

import libcst as cst
import pytest
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from fusionlint.analysis import collect_scopes, module_facts
from fusionlint.engine import _LINE, _mask, _Positions
from fusionlint.ops import op_tables

LAYOUTS = {
    "decorated methods and a nested class": '''
import torch


class Outer(torch.nn.Module):
    """Doc."""

    scale = 2

    @staticmethod
    # a comment between the decorator and the def
    @torch.no_grad()
    def helper(x):
        return torch.relu(x) * 2

    def untouched(self):
        return 1

    class Inner:
        @property
        def value(self):
            y = torch.ones(3)
            return y.sum(
                dim=0,
                    keepdim=True,
            )

    async def later(self, x):
        text = """
not indented
        """
        return torch.exp(x), text


def top(x: torch.Tensor) -> torch.Tensor:
    def inner(y):
        return torch.sin(y)
    return inner(x) + torch.cos(x)
''',
    "tabs and windows line endings": (
        "import torch\r\n\r\nclass T:\r\n\tdef f(self, x):\r\n\t\treturn torch.tanh(x) \\\r\n\t\t\t+ 1\r\n\r\n"
        "\tdef g(self):\r\n\t\treturn 0\r\n"
    ),
    "a two-space class in a four-space file": (
        "import torch\n\n\ndef first(x):\n    return torch.abs(x)\n\n\nclass Narrow:\n  def f(self, x):\n"
        "    return torch.neg(x)\n"
    ),
}


def _every_node(node: cst.CSTNode):
    """The node and all below it."""
    yield node
    for child in node.children:
        yield from _every_node(child)


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_a_node_is_placed_where_the_whole_module_places_it(name: str) -> None:
    text = LAYOUTS[name].lstrip("\n")
    tree = ast.parse(text)
    lines = _LINE.findall(text)
    masked = _mask(lines, tree, lambda block, index, settled=(): {"FL000"} if "torch." in block[index] else set())
    assert masked is not None and masked.units is not None, "only functions hold candidates"
    module = cst.parse_module(masked.text)
    def in_file(position: CodePosition, end: bool = False) -> CodePosition:
        if end and position.column == 0 and position.line > 1:  # after the line before
            return CodePosition(masked.numbers[position.line - 2] + 1, 0)
        return CodePosition(masked.numbers[position.line - 1], position.column)

    expected = {  # the whole parsed module rendered, its lines mapped back to the file's
        node: CodeRange(in_file(where.start), in_file(where.end, end=True))
        for node, where in MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider).items()
    }
    scopes = [s for s in collect_scopes(module, module_facts(tree), op_tables(())) if not s.is_module]
    nodes = [  # the unit is rendered as a copy without its leading lines
        (scope, node)
        for scope in scopes
        for node in _every_node(scope.node.with_changes(leading_lines=()))
        if node is not scope.node and node in expected
    ]
    assert len(nodes) > 20
    some = nodes[::3]  # the nodes of some findings: only those are recorded
    ids = {id(node) for _, node in some}
    # announced: the nodes a rendering may stop after; one not announced has it rendered again, whole
    for wanted, checked, announced in ((None, nodes, []), (ids, some, []), (ids, some, some), (ids, some, some[::2])):
        positions = _Positions(module, masked, lines, wanted)
        for scope, node in announced:
            positions.expect(scope, [node])
        for scope, node in checked:
            assert positions.of(scope)(node) == expected[node], (type(node).__name__, cst.Module([]).code_for_node(node))


def test_the_facts_walk_meets_the_nodes_in_ast_walk_order() -> None:
    from fusionlint.analysis.facts import _walk

    tree = ast.parse(LAYOUTS["decorated methods and a nested class"])
    expected = list(ast.walk(tree))
    assert [id(node) for node in _walk(tree)] == [id(node) for node in expected]
    assert len(expected) > 100


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_the_unvalidated_parse_gives_libcsts_tree_and_validation_comes_back(name: str) -> None:
    from fusionlint.engine import _parse_module

    text = LAYOUTS[name].lstrip("\n")
    module = _parse_module(text)
    assert module.deep_equals(cst.parse_module(text))
    assert module.code == text
    with pytest.raises(cst.CSTValidationError):  # the nodes a fix makes are still checked
        cst.SimpleWhitespace("not whitespace")
