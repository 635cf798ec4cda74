"""The other files of a package, read where an analysis follows a call into them, and the cache
entries that depend on them."""
from __future__ import annotations

import ast
import hashlib
import json
import os
import textwrap

import pytest

from fusionlint import check
from fusionlint.cache import Cache
from fusionlint.analysis import project
from fusionlint.analysis.facts import module_facts
from fusionlint.analysis.tensors import returned
from fusionlint.analysis.views import ast_view
from fusionlint.cli import main
from fusionlint.model import LintResult

ROPE = """\
import torch


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def causal_mask(x):
    n = x.size(-1)
    return torch.ones(n, n).tril()


def sizes(x):
    return [x.size(-1)] * 2
"""

# ``a * b + c`` is an addcmul only when ``a`` and ``b`` are tensors: here only the imported
# helpers tell.
MODEL = """\
import torch
from torch import nn
from .layers import causal_mask
from pkg.layers.rope import rotate_half


class Block(nn.Module):
    def forward(self, c):
        a = causal_mask(c)
        b = rotate_half(c)
        return a * b + 1.0 * c
"""

MEMBERS = {
    "m/__init__.py": "",
    "m/attention.py": """\
        import torch
        from torch import nn


        class Attention(nn.Module):
            def forward(self, x):
                return torch.softmax(x, -1) @ x, None

            def scores(self, x):
                return x @ x.transpose(-1, -2)


        class MLP(nn.Module):
            def gate(self, x):
                return torch.sigmoid(x)
        """,
    "m/model.py": """\
        import torch
        from torch import nn
        from .attention import MLP, Attention


        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = Attention()

            def forward(self, x):
                return self.attn(x)

            def scores(self, x):
                return self.attn.scores(x)


        class GatedMLP(MLP):
            def forward(self, x):
                return self.gate(x)

            def base_gate(self, x: torch.Tensor):
                return super().gate(x)
        """,
}


def write(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


@pytest.fixture
def package(tmp_path):
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/layers/__init__.py": "from .rope import causal_mask, rotate_half, sizes\n",
        "pkg/layers/rope.py": ROPE,
        "pkg/model.py": MODEL,
    })
    project.forget()
    return tmp_path


def facts_of(path):
    return module_facts(ast.parse(path.read_text()), str(path))


def test_relative_absolute_and_reexported_names_resolve_to_their_definitions(package):
    facts = facts_of(package / "pkg" / "model.py")
    other, name = project.imported(facts, "causal_mask")  # through pkg/layers/__init__.py
    assert other.path == str(package / "pkg" / "layers" / "rope.py") and name == "causal_mask"
    assert project.imported(facts, "rotate_half")[0] is other  # read once
    assert project.imported(facts, "nn") is None  # another package's name
    assert returned(other, None, "causal_mask") is True
    assert set(project.dependencies(facts)) >= {str(package / "pkg" / "layers" / "__init__.py"), other.path}


def test_parent_packages_and_what_lies_outside_the_package(tmp_path):
    write(tmp_path, {
        "top/__init__.py": "",
        "top/utils.py": "def helper(x):\n    return x\n",
        "top/models/__init__.py": "",
        "top/models/a.py": "from ..utils import helper\nfrom other.utils import helper as h2\n"
                           "from .missing import gone\n",
        "other/utils.py": "def helper(x):\n    return x\n",
    })
    facts = facts_of(tmp_path / "top" / "models" / "a.py")
    assert project.imported(facts, "helper")[0].path == str(tmp_path / "top" / "utils.py")
    assert project.imported(facts, "h2") is None  # not the file's own top-level package
    assert project.imported(facts, "gone") is None
    missing = str(tmp_path / "top" / "models" / "missing.py")
    assert project.dependencies(facts)[missing] is None  # looked for, absent: a file made later counts


def test_no_package_for_a_notebook_cycles_and_large_files(tmp_path, monkeypatch):
    write(tmp_path, {
        "p/__init__.py": "",
        "p/a.py": "from .b import f\n",
        "p/b.py": "from .a import f\n",
        "p/big.py": "def g(x):\n    return x\n",
        "p/c.py": "from .a import f\nfrom .big import g\n",
    })
    cell = module_facts(ast.parse("from .a import f\n"), str(tmp_path / "p" / "n.ipynb"))
    assert project.imported(cell, "f") is None and not cell.uses
    monkeypatch.setattr(project, "MAX_BYTES", 10)
    facts = facts_of(tmp_path / "p" / "c.py")
    assert project.imported(facts, "f") is None  # a re-export going round in circles
    assert project.imported(facts, "g") is None  # too large to read
    assert str(tmp_path / "p" / "big.py") in project.dependencies(facts)


def test_members_and_bases_of_another_file(tmp_path):
    write(tmp_path, MEMBERS)
    facts = facts_of(tmp_path / "m" / "model.py")
    assert project.member_class(facts, "Block", "attn")[1] == "Attention"
    assert project.inherited(facts, "GatedMLP", "gate")[1] == "MLP"
    assert project.inherited(facts, "GatedMLP", "scores") is None
    self_attn = ast.parse("self.attn").body[0].value
    assert project.imported_callee(facts, "Block", ast_view, self_attn)[1:] == ("Attention", "forward")


def test_what_members_and_bases_of_another_file_return(tmp_path):
    write(tmp_path, MEMBERS)
    facts = facts_of(tmp_path / "m" / "model.py")
    assert returned(facts, "Block", "forward") == (True, False)  # the tuple its forward returns
    assert returned(facts, "Block", "scores") is True
    assert returned(facts, "GatedMLP", "forward") is True
    assert returned(facts, "GatedMLP", "base_gate") is True


def test_a_cache_entry_is_used_only_while_the_files_it_depends_on_are_as_they_were(tmp_path):
    folder = tmp_path / "pkg"
    folder.mkdir()
    read, absent = folder / "rope.py", folder / "later.py"
    read.write_text("x = 1\n")
    stored = Cache(tmp_path / "cache", tool="v1")
    stored.put("k", LintResult(findings=()), {str(read): hashlib.sha256(b"x = 1\n").hexdigest(), str(absent): None},
               folder)
    stored.save()

    def hit(where=folder) -> bool:
        return Cache(tmp_path / "cache", tool="v1").get("k", where) is not None

    assert hit()
    read.write_text("x = 2\n")
    assert not hit()
    read.write_text("x = 1\n")
    absent.write_text("")
    assert not hit()  # a file looked for and absent now lies there
    absent.unlink()
    moved = tmp_path / "moved"
    folder.rename(moved)
    assert hit(moved) and not hit()  # paths relative to the file's folder


def test_an_imported_helper_makes_its_result_a_tensor_for_the_rules(package, capsys, monkeypatch):
    monkeypatch.chdir(package)
    main(["check", "--no-cache", "--select", "FL013", "pkg/model.py"])
    assert "pkg/model.py:11:16: FL013 written-out arithmetic that `torch.addcmul`" in capsys.readouterr().out
    (package / "pkg" / "model.py").write_text(MODEL.replace("causal_mask(c)", "sizes(c)").replace(
        "import causal_mask", "import sizes"))
    main(["check", "--no-cache", "--select", "FL013", "pkg/model.py"])
    assert "addcmul" not in capsys.readouterr().out  # a list times a tensor


def test_a_cached_finding_follows_the_files_it_depends_on(package, capsys, monkeypatch):
    monkeypatch.chdir(package)
    linted = []
    run_jobs = check._run_jobs
    monkeypatch.setattr(check, "_run_jobs", lambda jobs: linted.append(len(jobs)) or run_jobs(jobs))
    rope = package / "pkg" / "layers" / "rope.py"

    def addcmul() -> bool:
        main(["check", "--select", "FL013", "pkg"])
        return "addcmul" in capsys.readouterr().out

    assert addcmul()
    assert addcmul() and linted == [4, 0]  # nothing changed: every file from the cache
    stored = json.loads((package / ".fusionlint_cache" / "findings.json").read_text())
    (depends,) = [entry[2] for entry in stored["entries"].values() if len(entry) > 2]
    assert [os.path.join("layers", "rope.py"), hashlib.sha256(rope.read_bytes()).hexdigest()] in depends
    rope.write_text(ROPE.replace("return torch.ones(n, n).tril()", "return [[1] * n] * n"))
    assert not addcmul() and linted[-1] == 2  # the file changed and the one that read it
    assert not addcmul() and linted[-1] == 0
    rope.write_text(ROPE)
    assert addcmul() and linted[-1] == 1  # rope.py's first entry serves again; model.py's was replaced
    rope.unlink()
    assert not addcmul() and linted[-1] == 1  # the file that read it; the one gone is no file to lint


def test_a_namespace_folder_and_a_container_class_of_another_file(tmp_path):
    """A file in a folder without ``__init__.py`` imports its package by absolute name; a member
    holding another file's class deriving from ``nn.ModuleList`` is a container of modules."""
    write(tmp_path, {
        "tt/__init__.py": "",
        "tt/protocols.py": """\
            from torch import nn


            class ModuleList(nn.ModuleList):
                pass


            class ModuleDict(nn.ModuleDict):
                pass
            """,
        "tt/models/flux/model.py": """\
            import torch
            from torch import nn
            from tt.protocols import ModuleDict, ModuleList


            class Flux(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = ModuleList([nn.Linear(4, 4)])
                    self.heads = ModuleDict({"a": nn.Linear(4, 4)})

                def forward(self, x):
                    for block in self.blocks:
                        x = block(x)
                    for key in self.heads:
                        name = key
                    return x
            """,
    })
    path = tmp_path / "tt" / "models" / "flux" / "model.py"
    facts = facts_of(path)
    assert project.imported(facts, "ModuleList")[0].path == str(tmp_path / "tt" / "protocols.py")
    import libcst as cst
    from fusionlint.analysis import collect_scopes
    from fusionlint.ops import op_tables
    scopes = collect_scopes(cst.parse_module(path.read_text()), facts, op_tables())
    forward = next(s for s in scopes if isinstance(s.node, cst.FunctionDef) and s.node.name.value == "forward")
    assert "block" in forward.typing.modules and "key" not in forward.typing.modules
    assert "name" not in forward.tensors
