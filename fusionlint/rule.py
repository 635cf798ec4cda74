"""What a rule is: its documentation, its examples, and what it reports.

A rule is one class in one file under ``fusionlint/rules/``. It reads the analysed scopes
(``fusionlint.analysis``) and yields ``Violation``s; the engine turns them into positioned
``Finding``s and applies their fixes. The examples are the rule's tests
(``tests/lint/test_rules.py`` is generated from them) and its documentation (``explain``).
"""
from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import ClassVar, Iterable, Sequence

import libcst as cst

from fusionlint.analysis import Scope
from fusionlint.model import FixSafety
from fusionlint.ops import OpTables


@dataclass(frozen=True)
class Example:
    """Code the rule flags, where, and the code its fix must produce (None: no fix offered)."""

    bad: str
    at: tuple[tuple[int, int], ...]  # (line, column) of each expected finding, 1-based
    fixed: str | None
    # How fusionrt runs the example to prove the fix (tests/lint/test_contract.py): an
    # expression evaluated in the example's namespace, where ``randn(*shape)`` gives fresh
    # random float32 tensors. None: the example is not a runnable program (say why in a comment).
    call: str | None = None
    # The better program written by hand, for a rule that offers no fix (``fixed`` is None):
    # the contract test runs it against ``bad`` the way it runs ``fixed`` otherwise.
    good: str | None = None


@dataclass(frozen=True)
class StatementEdit:
    """Replace one whole statement line (``SimpleStatementLine``) by zero or more statements.

    The engine renders the replacements at the statement's indentation over exactly the lines
    the statement spans, so a fix never touches text outside the statements it names.
    """

    statement: cst.SimpleStatementLine
    replacement: tuple[cst.BaseStatement, ...]


@dataclass(frozen=True)
class Violation:
    node: cst.CSTNode  # the pattern itself: the finding points at its first character
    fix: tuple[StatementEdit, ...] | None = None
    message: str | None = None  # a more specific message than the rule's one-liner
    # The statements the finding is about, for precedence (``Rule.yields_to``): those its rewrite
    # moves code across. Empty: the node's own lines.
    spans: tuple[cst.CSTNode, ...] = ()
    # Where this finding's rewrite saves, when it is fewer places than the rule's ``pays_in``
    # (one spelling of several that pays in eager only). Empty: the rule's.
    pays_in: tuple[str, ...] = ()


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    rationale: ClassVar[str]  # markdown: why the pattern breaks fusion
    use_instead: ClassVar[str] = ""  # markdown
    fix_safety: ClassVar[FixSafety] = FixSafety.NONE
    fix_notes: ClassVar[str] = ""  # markdown: what the fix does and why it is (not) safe
    examples: ClassVar[tuple[Example, ...]] = ()
    valid: ClassVar[tuple[str, ...]] = ()  # look-alikes that must not be flagged
    # Codes whose finding is the better report of the same pattern: a finding of this rule is
    # dropped when one of theirs starts inside the statements it spans (``Violation.spans``).
    # The engine runs those rules for that even when they are not selected, so a rule reports
    # the same whatever else is enabled.
    yields_to: ClassVar[frozenset[str]] = frozenset()
    # Where the rewrite saves, FUSIONRT and/or EAGER (fusionlint.model): each place is one the
    # examples measurably save in (tests/lint/test_contract.py), and findings carry it.
    pays_in: ClassVar[tuple[str, ...]] = ()
    # markdown: where the rewrite stops paying under fusionrt with autograd on, and why (measured
    # on the examples as training steps: tests/lint/test_contract_training.py). Empty: it still pays.
    training_note: ClassVar[str] = ""

    @classmethod
    def may_match(cls, block: Sequence[str], index: int, ops: OpTables) -> bool:
        """Cheap text test: can statement ``index`` of a straight-line block hold a finding?

        ``block`` holds the source text of each statement of the block (only the header of a
        compound statement; its body comes as a block of its own). It must never say False
        where ``check`` could report: the engine does not parse code for which it says False.
        """
        return False

    @classmethod
    def needle(cls, ops: OpTables) -> re.Pattern[str] | None:
        """A pattern found in the text of every statement where ``may_match`` says True (None:
        no such pattern). The engine searches each file once for it (once per top-level
        alternative of ``a|b``) and asks ``may_match`` only about the statements on the lines it
        matched, so it must be a plain search: no ``^`` or ``$`` without ``re.M``, nothing that
        looks past a statement's text. Start each alternative with a literal (``\\[(?<=\\w\\[)``, not
        ``\\w\\[``): one that starts with a common class or an optional group is tried at every
        position of every file."""
        return None

    def check(self, scope: Scope) -> Iterable[Violation]:
        return ()

    @classmethod
    def fix_title(cls) -> str:
        """What the fix does, in one sentence: the first of ``fix_notes`` ("" without a fix)."""
        notes = " ".join(textwrap.dedent(cls.fix_notes).split())
        if cls.fix_safety is FixSafety.NONE or not notes:
            return ""
        return notes.split(". ")[0].rstrip(".") + "."

    @classmethod
    def explain(cls) -> str:
        parts = [f"# {cls.code} ({cls.name})", "", cls.message, "", "## What it does / why it breaks fusion", ""]
        parts += [textwrap.dedent(cls.rationale).strip(), ""]
        if cls.examples:
            example = cls.examples[0]
            parts += ["## Example", "", "```python", example.bad.strip(), "```", ""]
            if example.fixed is not None:
                parts += ["## Use instead", "", "```python", example.fixed.strip(), "```", ""]
        if cls.use_instead:
            parts += ([] if cls.examples and cls.examples[0].fixed else ["## Use instead", ""])
            parts += [textwrap.dedent(cls.use_instead).strip(), ""]
        if cls.pays_in:
            parts += ["## Where it pays", "", f"Pays in: {', '.join(cls.pays_in)} (measured on the examples).", ""]
        parts += ["## Fix safety", "", f"Fix: **{cls.fix_safety.value}**.", ""]
        if cls.fix_notes:
            parts += [textwrap.dedent(cls.fix_notes).strip(), ""]
        return "\n".join(parts).rstrip() + "\n"


def line_of(statement: cst.BaseSmallStatement) -> cst.SimpleStatementLine:
    return cst.SimpleStatementLine(body=[statement])


def assign(name: str, value: cst.BaseExpression) -> cst.SimpleStatementLine:
    """``name = value`` as a statement line; outer parentheses dropped when they wrap one line."""
    return line_of(cst.Assign(targets=[cst.AssignTarget(cst.Name(name))], value=unparenthesize(value)))


def unparenthesize(expr: cst.BaseExpression) -> cst.BaseExpression:
    if not expr.lpar:
        return expr
    bare = expr.with_changes(lpar=[], rpar=[])
    if "\n" in cst.Module([]).code_for_node(bare) or "\r" in cst.Module([]).code_for_node(bare):
        return expr  # the parentheses carry a line break
    return bare


def fresh_name(scope: Scope, base: str, taken: Sequence[str] = ()) -> str:
    """``base``, or ``base_2``, ``base_3``... : a name that appears nowhere in the file."""
    candidate, n = base, 1
    while candidate in scope.facts.identifiers or candidate in taken:
        n += 1
        candidate = f"{base}_{n}"
    return candidate


def fused_call(func: str, args: Sequence[cst.BaseExpression],
               keywords: Sequence[tuple[str, cst.BaseExpression | None]] = ()) -> cst.Call:
    """``func(*args, key=value, ...)`` as a fix writes the fused op: an argument that needs no
    parentheses loses them, keywords are written tight, and one whose value is None is left out."""
    tight = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    atomic = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)
    arguments = [cst.Arg(arg.with_changes(lpar=[], rpar=[]) if isinstance(arg, atomic) else arg) for arg in args]
    arguments += [cst.Arg(value, keyword=cst.Name(key), equal=tight) for key, value in keywords if value is not None]
    return cst.Call(func=cst.parse_expression(func), args=arguments)


def replace_nodes(node: cst.CSTNodeT, replacements: dict[cst.CSTNode, cst.CSTNode]) -> cst.CSTNodeT:
    """``node`` with each key node (by identity) replaced by its value, in one pass."""
    return node.visit(_Replace({id(old): new for old, new in replacements.items()}))


class _Replace(cst.CSTTransformer):
    def __init__(self, by_id: dict[int, cst.CSTNode]) -> None:
        super().__init__()
        self.by_id = by_id

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        return self.by_id.get(id(original_node), updated_node)
