"""Which functions a fix changed, and how each can be called with random tensors (read statically).

A fix is proven function by function, so a change is attributed to the innermost function
around it; a change outside any function cannot be run and is never proven.
"""
from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass

MODULE_LEVEL = "<module>"


@dataclass(frozen=True)
class Harness:
    """How to call one function: the names of its required tensor parameters, or why it cannot be."""

    name: str  # dotted: ``f``, ``Class.method``
    tensors: tuple[str, ...] = ()
    unusable: str | None = None  # why no call with random tensors reaches it


def _function_spans(text: str) -> list[tuple[int, int, str]]:
    """(first line, last line, dotted name) of every function, classes naming their methods."""
    spans: list[tuple[int, int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    spans.append((child.lineno, child.end_lineno or child.lineno, name))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(text), "")
    return spans


def function_at(spans: list[tuple[int, int, str]], first: int, last: int) -> str:
    """The innermost function holding lines ``first..last``."""
    around = [(s, e, n) for s, e, n in spans if s <= first and last <= e]
    return min(around, key=lambda span: span[1] - span[0])[2] if around else MODULE_LEVEL


def function_of_line(text: str, line: int) -> str:
    return function_at(_function_spans(text), line, line)


def _hunks(original: str, fixed: str) -> list[tuple[tuple[int, int, int, int], str]]:
    """Each changed range of lines (difflib's i1, i2, j1, j2) with the function of ``original`` it falls in."""
    spans = _function_spans(original)
    before, after = original.splitlines(keepends=True), fixed.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    hunks = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        first, last = (i1 + 1, i2) if i2 > i1 else (i1, i1)  # an insertion sits after line i1
        hunks.append(((i1, i2, j1, j2), function_at(spans, max(first, 1), max(last, 1))))
    return hunks


def changed_functions(original: str, fixed: str) -> list[str]:
    """Dotted names (``Class.method``) of the innermost functions around each line the fix changed."""
    names: list[str] = []
    for _, name in _hunks(original, fixed):
        if name not in names:
            names.append(name)
    return names


def apply_only(original: str, fixed: str, functions: set[str]) -> str:
    """``original`` with only the changes that ``fixed`` makes inside ``functions``."""
    before, after = original.splitlines(keepends=True), fixed.splitlines(keepends=True)
    lines = list(before)
    for (i1, i2, j1, j2), name in reversed(_hunks(original, fixed)):
        if name in functions:
            lines[i1:i2] = after[j1:j2]
    return "".join(lines)


def harnesses(text: str, names: list[str]) -> dict[str, Harness]:
    """How to call each function of ``names`` (defined in ``text``) with random tensors.

    Tensor parameters are those the analysis sees as tensors (annotated ``Tensor``, ``forward``'s
    arguments, ...); a parameter with a default keeps it; any other required parameter leaves
    the function without a harness. A method also needs its class to be built without arguments,
    which only running it tells.
    """
    import libcst as cst

    from fusionlint.analysis import collect_scopes, module_facts
    from fusionlint.ops import op_tables

    module = cst.parse_module(text)
    scopes = collect_scopes(module, module_facts(ast.parse(text)), op_tables())
    tensors_of = {id(scope.node): scope.params | scope.tensors for scope in scopes}
    found: dict[str, Harness] = {}

    def visit(body, prefix: str, in_class: bool) -> None:
        for statement in body:
            if isinstance(statement, cst.ClassDef):
                visit(statement.body.body, f"{prefix}{statement.name.value}.", True)
            elif isinstance(statement, cst.FunctionDef):
                name = f"{prefix}{statement.name.value}"
                if name in names:
                    found[name] = _harness(name, statement, tensors_of.get(id(statement), set()), in_class)
            elif isinstance(statement, (cst.If, cst.Try)):  # `if TYPE_CHECKING:`, `try: import ...`
                visit(statement.body.body, prefix, in_class)

    visit(module.body, "", False)
    for name in names:
        if name == MODULE_LEVEL:
            found[name] = Harness(name, unusable="the fix changes module-level code: there is no function to run")
        elif name not in found:
            found[name] = Harness(name, unusable=f"{name} is nested in a function: it cannot be called alone")
    return found


def _harness(name: str, node, tensors: set[str], in_class: bool) -> Harness:
    import libcst as cst

    params = node.params
    positional = [*params.posonly_params, *params.params]
    decorators = {d.decorator.value for d in node.decorators if isinstance(d.decorator, cst.Name)}
    if in_class and "staticmethod" not in decorators:
        if "classmethod" in decorators or "property" in decorators or not positional:
            return Harness(name, unusable=f"{name} is not a plain method or function")
        positional = positional[1:]  # self
    if node.asynchronous is not None:
        return Harness(name, unusable=f"{name} is a coroutine")
    chosen = []
    for param in [*positional, *params.kwonly_params]:
        if param.default is not None:
            continue
        if param.name.value not in tensors:
            return Harness(name, unusable=f"parameter {param.name.value!r} is required and not known to be a tensor")
        chosen.append(param.name.value)
    return Harness(name, tuple(chosen))
