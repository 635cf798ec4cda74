"""Untyped parameters that the file's own calls pass tensors: ``rotate_half(x)`` called as
``rotate_half(q)`` with ``q`` a tensor makes ``x`` one. Model files keep small helpers
(``rotate_half``, ``apply_rotary_pos_emb``) whose parameters carry no annotation and whose body
uses them only by indexing and arithmetic, which a numbers-only reading would also allow."""
from __future__ import annotations

from typing import Iterator

import libcst as cst

from fusionlint.analysis.facts import ModuleFacts
from fusionlint.analysis.scope import Scope

_ROUNDS = 3  # a helper calling a helper: each round reaches one call deeper


def tensors_from_callers(scopes: list[Scope]) -> None:
    """Grow each function scope's tensors by the untyped parameters that every same-file call
    passing them passes a tensor (``helper(x)``, or ``self.helper(x)`` from a method of the class
    or a subclass). Every call, not some: ``default(val, d)`` takes anything."""
    callees: dict[str, list[Scope]] = {}
    for scope in scopes:
        if isinstance(scope.node, cst.FunctionDef) and scope.untyped - scope.params:
            callees.setdefault(scope.node.name.value, []).append(scope)
    for _ in range(_ROUNDS):
        passed: dict[int, dict[str, bool]] = {}  # callee -> parameter -> every call so far passed a tensor
        for caller in scopes:
            for name in caller.sites.keys() & callees.keys():
                for site in caller.sites[name]:
                    for callee in callees[name]:
                        if isinstance(site.node, cst.Call) and _calls(caller, site.node, callee):
                            seen = passed.setdefault(id(callee), {})
                            for param, tensor in _passed(caller, site.node, callee):
                                seen[param] = seen.get(param, True) and tensor
        grown = False
        for scope in (scope for named in callees.values() for scope in named):
            tensors = {param for param, tensor in passed.get(id(scope), {}).items() if tensor}
            if tensors:
                grown = True
                scope.params |= tensors
                scope.tensors |= tensors
                scope.retype()
        if not grown:
            return


def _calls(caller: Scope, call: cst.Call, callee: Scope) -> bool:
    func = call.func
    if callee.class_name is None:
        return isinstance(func, cst.Name)
    return (
        isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Name)
        and func.value.value == "self"
        and caller.class_name is not None
        and _inherits(caller.facts, caller.class_name, callee.class_name)
    )


def _inherits(facts: ModuleFacts, class_name: str, base: str) -> bool:
    seen, todo = set(), [class_name]
    while todo:
        name = todo.pop()
        if name == base:
            return True
        if name not in seen:
            seen.add(name)
            todo += facts.same_file_bases(name)
    return False


def _passed(caller: Scope, call: cst.Call, callee: Scope) -> Iterator[tuple[str, bool]]:
    """The callee's untyped parameters (not yet tensors) this call passes, each with whether it
    passes a tensor."""
    node = callee.node
    positional = [p.name.value for p in (*node.params.posonly_params, *node.params.params)]  # type: ignore[union-attr]
    if callee.class_name is not None and not any(
        isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in node.decorators  # type: ignore[union-attr]
    ):
        positional = positional[1:]  # self / cls
    open_params = callee.untyped - callee.params
    for i, arg in enumerate(call.args):
        if arg.star:
            if arg.star == "*":
                positional = positional[:i]  # what follows a *args is not known by position
            continue
        name = arg.keyword.value if arg.keyword is not None else positional[i] if i < len(positional) else None
        if name in open_params:
            yield name, caller.is_tensor(arg.value)
