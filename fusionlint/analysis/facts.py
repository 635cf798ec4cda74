"""File-level facts, read from the stdlib ``ast`` of the whole file: cheap, and it survives the
engine's masking of the text libcst parses."""
from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True)
class ModuleFacts:
    """Facts read from the stdlib ``ast`` of the whole file (cheap, and survives masking)."""

    aliases: dict[str, str]  # local name -> canonical dotted torch path ("F" -> "torch.nn.functional")
    class_tensor_attrs: dict[str, frozenset[str]]  # class name -> its self.<attr> tensors
    identifiers: frozenset[str]  # every name bound or read anywhere in the file (for fresh names)

    @property
    def imports_torch(self) -> bool:
        return bool(self.aliases)

    def canonical(self, dotted: str) -> str | None:
        """``F.linear`` -> ``torch.nn.functional.linear``; None when not a torch name."""
        head, _, rest = dotted.partition(".")
        base = self.aliases.get(head)
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base


def module_facts(tree: ast.Module) -> ModuleFacts:
    aliases: dict[str, str] = {}
    classes: dict[str, set[str]] = defaultdict(set)
    identifiers: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            identifiers.add(node.id)
        elif isinstance(node, ast.arg):
            identifiers.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            identifiers.add(node.name)
        elif isinstance(node, ast.alias):
            identifiers.add(node.asname or node.name.partition(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            identifiers.update(node.names)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "torch" or alias.name.startswith("torch."):
                    if alias.asname:
                        aliases[alias.asname] = alias.name
                    else:
                        aliases["torch"] = "torch"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "torch" or node.module.startswith("torch."):
                for alias in node.names:
                    if alias.name != "*":
                        aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.ClassDef):
            classes[node.name] |= _class_tensor_attrs(node)
    class_attrs = {name: frozenset(attrs) for name, attrs in classes.items()}
    return ModuleFacts(aliases, class_attrs, frozenset(identifiers))


def _class_tensor_attrs(cls: ast.ClassDef) -> set[str]:
    """``self.w = nn.Parameter(...)`` / ``self.w = torch.ones(...)`` / ``register_buffer("w", ...)``."""
    attrs = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            callee = ast.unparse(node.value.func)
            if callee.startswith(("torch.", "nn.Parameter", "Parameter")) or callee in ("nn.Buffer",):
                for target in node.targets:
                    if (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        attrs.add(target.attr)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "register_buffer"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            attrs.add(node.args[0].value)
    return attrs
