"""What the rules know about a file: torch imports, tensor names, op classes and liveness.

Heuristics (documented in docs/engine.md), all static; local to one file, except that a call of a
function or module class imported from another file of the same package is read in that file
(``analysis.project``), which then counts among the file's cache dependencies:

- torch names come from the file's imports (``import torch as th``, ``import torch.nn.functional
  as F``, ``from torch import Tensor, matmul``); a file that never imports torch has no tensors.
- a name holds a tensor when it is a parameter annotated ``Tensor``/``torch.*Tensor`` (also inside
  ``Optional[...]`` or ``... | None``), an argument of ``forward`` (unless annotated otherwise or
  defaulting to a non-``None`` constant; a TorchScript signature comment ``# type: (Tensor, int)
  -> Tensor`` counts as annotations), an untyped parameter that every same-file call passing
  it passes a tensor (``rotate_half(q)``), a name the scope uses the way only a tensor is used
  (``x.clone()``, ``x.cpu()``, ``x.sum(dim=1)``, ``torch.matmul(x, y)``, a method of an op name no
  other value of a model file has, ``x.clamp(0, 1)``, ``t.exp()``, also down a chain of
  tensor methods: ``x.pow(2).mean(-1, keepdim=True)``; ``x @ y``, ``x.transpose()``,
  ``x.item()``, ``x.shape`` and ``x[:, None]`` only in a file without numpy, triton or helion),
  what a ``for`` takes from a tensor or from a parameter annotated ``list[Tensor]`` (also through ``enumerate``/``zip``), or
  is assigned from a tensor expression anywhere in its scope (flow-insensitive, to a fixpoint):
  a torch / ``F.*`` / einops call that returns tensors, a
  tensor method or tensor attribute (``.T``, ``.data``) of a tensor, arithmetic and indexing with
  a tensor operand (not ``x is None`` nor ``k in x``), the call of a module (``self.fc(x)`` where
  the class or a same-file base assigns ``self.fc = nn.Linear(...)``, a same-file module class
  (one deriving from torch.nn or defining ``forward``) or a functional op (``F.gelu``,
  ``partial(F.softmax, dim=-1)``); ``self.layers[i](x)`` and ``for blk in self.blocks: blk(x)``
  over an ``nn.ModuleList``/``Sequential``; a local bound to a module, ``loss_fct =
  CrossEntropyLoss()``; a parameter annotated with a module class, ``attn: Attention`` making
  ``attn.to_q(x)`` a call of its ``to_q``), ``super().forward(x)`` in a torch.nn layer's subclass,
  or the call of a same-file function, ``self.`` method or method of a same-file module attribute
  (``self.altup.predict(x)``) whose return annotation or ``return`` values are tensors, or, given
  a tensor, are tensors when its untyped parameters are (``remove_cls(x)`` of ``return
  x[:, 1:]``). Of a tuple such a call returns (``return out, weights``, ``-> tuple[Tensor, int]``), or a parameter
  annotated as one, unpacking and constant indexing give the elements that are tensors; of what
  a module returns that is no tensor (a tuple, a model output), element 0 is one.
  In a module class, a member the class assigns (a constructor argument, a factory's or another
  file's layer, ``self.attn = attn``, ``self.norm = make_norm(dim)``) or an attribute of a module of
  another file's class (``self.head.fc``), called on a tensor, returns one. A list built of tensors
  (appended, a display or comprehension of them, ``list[Tensor]`` annotated) gives tensors by
  index and by iteration; comprehensions bind names as loops do, and a loop over ``zip`` of
  module containers binds modules.
  ``self.<attr>`` is a (concrete) tensor when the class assigns it an ``nn.Parameter`` or a torch
  call, or registers it as a buffer, or a method assigns it a tensor (``self.cache =
  k.detach()``), and ``self.weight``/``self.bias`` in a torch.nn layer's subclass (``class
  Positions(nn.Embedding)``).
- liveness is conservative along straight-line statement sequences: a read in a later statement,
  in a loop that repeats the statement, in an exception handler that may follow, in a nested
  function or lambda (a closure), or after ``locals()``/``eval`` keeps a name alive.

One module per idea: ``facts`` (the file's imports and classes), ``views`` (one view of an
expression over libcst and ast), ``tensors`` (which expressions hold tensors), ``scope`` (scopes,
blocks and statements), ``nodes`` (small helpers over libcst nodes), ``collect`` (the one pass that
builds the scopes), ``callers`` (untyped parameters that same-file calls pass tensors), ``flow``
(statements in flow order), ``compute`` (compute-bound statements and the element-wise work that
may move past them), ``rescale`` (a value rescaled by a later statement), ``numbers`` (names that
surely hold Python numbers), ``torch_calls`` (a torch call's operand and reduced dim, function or
method).
"""
from fusionlint.analysis.collect import collect_scopes
from fusionlint.analysis.compute import (
    ComputeSite,
    compute_statements,
    elementwise_assignment,
    is_elementwise_expr,
)
from fusionlint.analysis.facts import ModuleFacts, module_facts
from fusionlint.analysis.flow import inner_blocks, own_parts, scope_statements, statements_after, statements_before
from fusionlint.analysis.nodes import (
    ancestors,
    bound_names,
    children,
    count_name,
    dotted_name,
    is_method_call,
    names_of,
    reaching_assignment,
    reaching_value,
    root_name,
)
from fusionlint.analysis.scope import Block, Scope, Site, StatementRef, per_scope

__all__ = [
    "Block",
    "ComputeSite",
    "ModuleFacts",
    "Scope",
    "Site",
    "StatementRef",
    "ancestors",
    "bound_names",
    "children",
    "collect_scopes",
    "compute_statements",
    "count_name",
    "dotted_name",
    "elementwise_assignment",
    "inner_blocks",
    "is_elementwise_expr",
    "is_method_call",
    "module_facts",
    "names_of",
    "own_parts",
    "per_scope",
    "reaching_assignment",
    "reaching_value",
    "root_name",
    "scope_statements",
    "statements_after",
    "statements_before",
]
