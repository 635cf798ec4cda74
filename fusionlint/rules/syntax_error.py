"""FL999: the file does not parse, so nothing else in it was checked."""
from __future__ import annotations

from fusionlint.model import FixSafety
from fusionlint.rule import Rule


class SyntaxErrorRule(Rule):
    code = "FL999"
    name = "syntax-error"
    message = "the file does not parse; the file was not checked"
    rationale = """
        The engine reports a file that Python's own parser rejects (or that contains null bytes)
        as one finding at the error's line and column, instead of failing the whole run, and
        checks the other files as usual. No other rule can look into such a file, so its other
        findings stay hidden until it parses. `# noqa` does not suppress this finding; select
        rules without FL999 to silence it.
    """
    use_instead = "Fix the syntax error; `python -m py_compile FILE` shows the same message."
    fix_safety = FixSafety.NONE
