"""The other files of a file's package, as far as an analysis follows a call into them.

Model code imports its helpers from sibling modules (``from .embeddings import rotate_half``,
``from ..utils import apply_rotary_pos_emb``); what such a call returns, or how it reads its
arguments, is read from the facts of the file that defines the name, as for a same-file function.

A name is resolved the first time an analysis asks about it, never up front: most imports of a
file (configs, logging, typing) are never asked about, and parsing their modules would cost more
than linting the file. A module is read with the stdlib ``ast`` once per run (``forget`` starts
another) and kept while its bytes stay the same; a file over ``MAX_BYTES`` is not parsed. Resolution follows a re-export
(``from .x import f`` in an ``__init__.py``) at most ``MAX_HOPS`` times, and a module met again
on the way is not entered twice.

Every file consulted is noted in the asking facts' ``uses`` (with the sha256 of the bytes read,
or as absent), so the findings cache can tell when a file's findings may have changed:
``dependencies`` gives them, through the modules consulted in turn, and ``recording`` collects
them for one lint. Only a file linted from a ``.py`` path has a package; a notebook has none.
"""
from __future__ import annotations

import ast
import hashlib
import os
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

from fusionlint.analysis.views import ATTR, NAME, View

if TYPE_CHECKING:
    from fusionlint.analysis.facts import ModuleFacts

# About 5,000 lines: larger modules are a framework's bases (transformers' modeling_utils.py,
# generation/utils.py), whose parse costs a tenth of a CPU-second per process for calls that
# rarely tell anything about tensors.
MAX_BYTES = 200_000
MAX_HOPS = 3

_modules: dict[str, "_Module"] = {}  # by path
_roots: dict[str, str | None] = {}  # folder -> the folder of its top-level package (None: in no package)
_named: dict[tuple[str, str], str | None] = {}  # (folder, name) -> the package folder of that name above it
_recorded: list[dict[str, str | None]] = []  # the open recordings, innermost last


def imported(facts: ModuleFacts, name: str, wanted: str | None = None) -> tuple[ModuleFacts, str] | None:
    """(facts of the file of the same package that defines ``name``, its name there) for a name
    the file imports (``from .attention import Attention as Attn``), following re-exports; None
    when it is not imported from the package, or its definition is not found. ``wanted``: a
    text that the defining file must hold for it to be parsed (``"def {}("``, ``{}`` the name
    there): most names asked about are of no use, and reading a large file's tree is not cheap.
    Only a package's ``__init__.py`` is parsed without it, for its re-exports."""
    key = name if wanted is None else (name, wanted)
    if key in facts.resolved:
        return facts.resolved[key]
    facts.resolved[key] = None  # a re-export that comes back here finds nothing
    found = _resolve(facts, name, MAX_HOPS, set(), wanted)
    facts.resolved[key] = found
    return found


def member_class(facts: ModuleFacts, class_name: str, attr: str) -> tuple[ModuleFacts, str] | None:
    """(facts, class) of the module class of another file of the package that ``self.<attr>``
    holds: every value the class assigns it is a call of that class (``self.attn =
    Attention(config)``, ``Attention`` imported from the package)."""
    key = ("member", class_name, attr)
    if key not in facts.resolved:
        facts.resolved[key] = _member_class(facts, class_name, attr)
    return facts.resolved[key]


def _member_class(facts: ModuleFacts, class_name: str, attr: str) -> tuple[ModuleFacts, str] | None:
    names = set()
    for assignment in facts.member_values(class_name, attr):
        call = assignment.value
        func = call.func if isinstance(call, ast.Call) else None
        if not (isinstance(func, ast.Name) and func.id in facts.import_sources):
            return None
        names.add(func.id)
    found = imported(facts, names.pop(), "class {}") if len(names) == 1 else None
    return found if found is not None and found[1] in found[0].classes and found[0].is_module_class(found[1]) else None


def inherited(facts: ModuleFacts, class_name: str, method: str) -> tuple[ModuleFacts, str] | None:
    """(facts, class) of the nearest base of ``class_name`` (or of its same-file bases), defined
    in another file of the package, that has ``method`` (``class GemmaMLP(LlamaMLP)``)."""
    key = ("inherited", class_name, method)
    if key not in facts.resolved:
        facts.resolved[key] = next(filter(None, (
            _with_method(imported(facts, base, f"def {method}("), method) for base in facts.imported_bases(class_name)
        )), None)
    return facts.resolved[key]


def _with_method(found: tuple[ModuleFacts, str] | None, method: str) -> tuple[ModuleFacts, str] | None:
    if found is None or found[1] not in found[0].classes or not found[0].has_method(found[1], method):
        return None
    return found


def imported_callee(facts: ModuleFacts, class_name: str | None, view: View, func: object
                    ) -> tuple[ModuleFacts, str | None, str] | None:
    """(facts, class or None, function) of a callee defined in another file of the package, in
    either syntax tree through ``view``, as ``ModuleFacts.callee`` gives a same-file one:
    ``helper(x)`` of an imported function, ``self.block(x)`` (its class's ``forward``) and
    ``self.block.scale(x)`` of a member holding an imported module class, ``self.norm(x)`` of a
    method an imported base defines."""
    callee = view(func)
    if callee[0] == NAME:
        found = imported(facts, callee[1], "def {}(") if callee[1] not in facts.functions else None
        return (found[0], None, found[1]) if found is not None and found[1] in found[0].functions else None
    if callee[0] != ATTR or class_name is None:
        return None
    owner = view(callee[1])
    if owner[0] == NAME and owner[1] == "self":
        if facts.has_method(class_name, callee[2]):
            return None  # a same-file one
        base = inherited(facts, class_name, callee[2])
        if base is not None:
            return base[0], base[1], callee[2]
        member, method = callee[2], "forward"
    elif owner[0] == ATTR and view(owner[1])[:2] == (NAME, "self"):
        member, method = owner[2], callee[2]
    else:
        return None
    held = member_class(facts, class_name, member) if facts.module_attr(class_name, member) == "nn" else None
    return (held[0], held[1], method) if held is not None and held[0].has_method(held[1], method) else None


def forget() -> None:
    """Drops what was read: files may have changed since (a new run in the same process)."""
    _modules.clear()
    _roots.clear()
    _named.clear()


def dependencies(facts: ModuleFacts) -> dict[str, str | None]:
    """Every file the analysis of ``facts`` consulted, also through the files consulted in turn:
    path -> sha256 of the bytes read, None where a file was looked for and none lay. The file of
    ``facts`` itself is left out."""
    found: dict[str, str | None] = {}
    seen = {id(facts)}
    todo = [facts]
    while todo:
        for path, (digest, other) in todo.pop().uses.items():
            found.setdefault(path, digest)
            if other is not None and id(other) not in seen:
                seen.add(id(other))
                todo.append(other)
    if facts.path is not None:
        found.pop(os.path.abspath(facts.path), None)
    return found


@contextmanager
def recording() -> Iterator[dict[str, str | None]]:
    """Collects the ``dependencies`` of the files linted inside it (``record``)."""
    found: dict[str, str | None] = {}
    _recorded.append(found)
    try:
        yield found
    finally:
        _recorded.remove(found)


def record(facts: ModuleFacts) -> None:
    """Adds the ``dependencies`` of a linted file's facts to the open recordings."""
    if _recorded and facts.uses:
        found = dependencies(facts)
        for recording in _recorded:
            recording.update(found)


def _resolve(facts: ModuleFacts, name: str, hops: int, entered: set[str], wanted: str | None
             ) -> tuple[ModuleFacts, str] | None:
    source = facts.import_sources.get(name)
    if source is None or facts.path is None:
        return None
    level, module, original = source
    folder = _module_folder(facts.path, level, module)
    if folder is None:
        return None
    target = _load_module(facts, folder, wanted.format(original) if wanted is not None else None)
    if target is None or target.path in entered:
        return None
    if original in target.functions or original in target.classes:
        return target, original
    if hops and original in target.import_sources:  # a re-export: ``from .x import f`` in ``__init__.py``
        entered.add(target.path)
        return _resolve(target, original, hops - 1, entered, wanted)
    return None


def _module_folder(path: str, level: int, module: str | None) -> str | None:
    """The path, without suffix, of the module ``from <level dots><module>`` names from the file
    at ``path``; for an absolute import, only inside the file's own top-level package."""
    if not path.endswith(".py"):
        return None
    folder = os.path.dirname(os.path.abspath(path))
    parts = module.split(".") if module else []
    if level:
        for _ in range(level - 1):
            folder = os.path.dirname(folder)
    else:
        if not parts:
            return None
        root = _package_root(folder)
        if root is None or parts[0] != os.path.basename(root):
            root = _named_ancestor(folder, parts[0])  # a file in a namespace folder of the package
            if root is None:
                return None
        folder = os.path.dirname(root)
    return os.path.join(folder, *parts)


def _named_ancestor(folder: str, name: str) -> str | None:
    """The nearest folder above ``folder`` named ``name`` that is a package (``__init__.py``):
    where ``torchtitan/models/flux/model/`` (no ``__init__.py``) imports ``torchtitan.protocols``."""
    key = (folder, name)
    if key not in _named:
        found = None
        current = folder
        while True:
            if os.path.basename(current) == name and os.path.isfile(os.path.join(current, "__init__.py")):
                found = current
                break
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
        _named[key] = found
    return _named[key]


def _package_root(folder: str) -> str | None:
    """The folder of the top-level package ``folder`` belongs to: up while ``__init__.py`` lies there."""
    if folder not in _roots:
        root = None
        current = folder
        while os.path.isfile(os.path.join(current, "__init__.py")):
            root = current
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
        _roots[folder] = root
    return _roots[folder]


def _load_module(facts: ModuleFacts, base: str, wanted: str | None) -> ModuleFacts | None:
    """The facts of the module at ``base`` (a package's ``__init__.py``, else ``base.py``), noted
    in ``facts.uses`` with every path looked at; None for a module not parsed, or not holding
    ``wanted``."""
    for path in (os.path.join(base, "__init__.py"), base + ".py"):
        known = facts.uses.get(path)
        if known is not None and (known[0] is None or known[1] is not None):
            if known[0] is None:
                continue  # looked for before: absent
            return known[1]
        module = _read(path)
        if module is None:
            facts.uses[path] = (None, None)
            continue
        parse = wanted is None or path.endswith("__init__.py") or wanted.encode() in module.data
        found = module.facts() if parse else None
        facts.uses[path] = (module.digest, found)
        return found
    return None


class _Module:
    """A file's bytes and, once asked for, their facts (None if they do not parse or are too large)."""

    def __init__(self, path: str, data: bytes, digest: str) -> None:
        self.path, self.data, self.digest = path, data, digest
        self._facts: ModuleFacts | None = None
        self._parsed = False

    def facts(self) -> ModuleFacts | None:
        if not self._parsed:
            self._parsed = True
            self._facts = _parse(self.path, self.data, self.digest)
        return self._facts


def _read(path: str) -> _Module | None:
    """The module at ``path`` as its bytes are now (the one read before while they are the same)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    digest = hashlib.sha256(data).hexdigest()
    known = _modules.get(path)
    if known is None or known.digest != digest:
        known = _modules[path] = _Module(path, data, digest)
    return known


def _parse(path: str, data: bytes, digest: str) -> ModuleFacts | None:
    if len(data) > MAX_BYTES:
        return None
    try:
        tree = ast.parse(data, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    from fusionlint.analysis.facts import module_facts

    return module_facts(tree, path, digest)
