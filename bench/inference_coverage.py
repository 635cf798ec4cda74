"""How much of real model code's tensor work fusionlint's tensor inference sees.

Ground truth comes from running models: small configs of a few transformers models, random
weights, one forward on CPU under a ``TorchFunctionMode`` that records, for every torch call that
returns a tensor (or reads one back to the host: ``.item()``, ``bool(x)``), the innermost frame in
the transformers package and the source span of the instruction running there (``self.fc(x)``,
``x.view(b, -1)``, ``a + b``). Metadata reads (``x.shape``, ``x.size(1)``, ``x.dtype``) are left
out: they do no tensor work.

Each such site is then looked up in the file's libcst tree, as the rules see it
(``collect_scopes`` over the whole file), and counts as recognised when the inference calls its
expression a tensor (for a host read: the tensor it reads). Reports the coverage per file and
overall, and the most common shapes of the expressions it misses, with names abstracted by where
they come from (``p`` an untyped parameter, ``p:Ann`` an annotated one, ``l`` a local, ``g`` a
global or import, ``self.A`` an attribute of ``self``).

    .venv/bin/python bench/inference_coverage.py            # all models
    .venv/bin/python bench/inference_coverage.py gpt2 bert  # some
    .venv/bin/python bench/inference_coverage.py --member-calls /tmp/corpus/timm/timm  # static, any folder

x_transformers' models run too when it is importable (its tuning wheel unpacked, with einops,
einx, loguru, frozendict and torch-einops-utils on ``PYTHONPATH``), and a spread of timm's model
families when timm is (its tuning wheel on ``PYTHONPATH``): built from factories, imported layer
classes and containers rather than transformers' one-file style, they are the nearer stand-in for
model code nobody tuned on. timm's models use nothing of torchvision, which it imports for its data
transforms: a stand-in takes its place when the real one does not load.
"""
from __future__ import annotations

import argparse
import ast
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path
from types import ModuleType
from typing import Callable

import libcst as cst
import torch
import transformers
from libcst.metadata import MetadataWrapper, PositionProvider
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from fusionlint.analysis import children, collect_scopes, module_facts
from fusionlint.ops import op_tables



class _Placeholder:
    """Any attribute of a module that ``_StandIn`` makes: a class whose attributes are distinct classes."""

    def __init__(self, *args, **kwargs) -> None:
        pass


class _PlaceholderType(type):
    def __getattr__(cls, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return _PlaceholderType(name, (_Placeholder,), {})


class _StandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of ``torchvision`` and its submodules give empty modules whose every attribute is a
    distinct placeholder class (``InterpolationMode.BILINEAR`` and ``.BICUBIC`` differ as dict keys)."""

    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] == "torchvision":
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = ModuleType(spec.name)
        module.__path__ = []

        def attribute(name: str) -> type:
            if name.startswith("__"):
                raise AttributeError(name)
            return _PlaceholderType(name, (_Placeholder,), {})

        module.__getattr__ = attribute  # type: ignore[attr-defined]
        return module

    def exec_module(self, module) -> None:
        pass


def _timm_importable() -> bool:
    if importlib.util.find_spec("timm") is None:
        return False
    try:
        import torchvision  # noqa: F401
    except Exception:
        for name in [name for name in sys.modules if name.partition(".")[0] == "torchvision"]:
            del sys.modules[name]
        sys.meta_path.insert(0, _StandIn())
    return True


# The packages whose frames count: files are named relative to the folder holding them.
PACKAGES = [
    "transformers",
    *(["x_transformers"] if importlib.util.find_spec("x_transformers") else []),
    *(["timm"] if _timm_importable() else []),
]
ROOTS = tuple(os.path.dirname(importlib.util.find_spec(name).origin) + os.sep for name in PACKAGES)
HOST_READS = frozenset({"item", "tolist", "__bool__", "__int__", "__float__", "__index__", "numpy"})
Span = tuple[int, int, int, int]  # first line, last line, first column, end column (bytes, as co_positions)


def tiny_models() -> dict[str, Callable[[], tuple[torch.nn.Module, dict]]]:
    """A builder per model: the model from a small config, and random inputs for one forward."""
    t = transformers
    ids = torch.randint(2, 100, (2, 12))
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, 8:] = 0
    image = torch.randn(2, 3, 32, 32)
    classes = torch.randint(0, 3, (2,))
    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
    seq2seq = dict(vocab_size=100, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                   decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128)
    text = dict(input_ids=ids, attention_mask=mask, labels=ids)

    def causal(name: str, **config) -> Callable[[], tuple[torch.nn.Module, dict]]:
        return lambda: (getattr(t, f"{name}ForCausalLM")(getattr(t, f"{name}Config")(vocab_size=100, **small, **config)), text)

    return {
        "gpt2": lambda: (t.GPT2LMHeadModel(t.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=100, n_positions=32)), text),
        "llama": causal("Llama", num_key_value_heads=2),
        "mistral": causal("Mistral", num_key_value_heads=2),
        "qwen2": causal("Qwen2", num_key_value_heads=2),
        "gemma": causal("Gemma", num_key_value_heads=2),
        "phi": causal("Phi", num_key_value_heads=2),
        "mixtral": causal("Mixtral", num_key_value_heads=2),
        "qwen3_moe": causal("Qwen3Moe", num_key_value_heads=2),
        "gpt_neox": causal("GPTNeoX"),
        "opt": causal("OPT"),
        "falcon": causal("Falcon"),
        "bloom": causal("Bloom"),
        "gemma3": lambda: (t.Gemma3ForCausalLM(t.Gemma3TextConfig(vocab_size=100, num_key_value_heads=2, head_dim=16, **small)), text),
        "mamba": lambda: (t.MambaForCausalLM(t.MambaConfig(vocab_size=100, hidden_size=32, state_size=8, num_hidden_layers=2)), text),
        "bert": lambda: (t.BertForMaskedLM(t.BertConfig(vocab_size=100, **small)), text),
        "roberta": lambda: (t.RobertaForMaskedLM(t.RobertaConfig(vocab_size=100, max_position_embeddings=40, **small)), text),
        "deberta_v2": lambda: (t.DebertaV2ForMaskedLM(t.DebertaV2Config(vocab_size=100, max_position_embeddings=40, **small)), text),
        "distilbert": lambda: (t.DistilBertForMaskedLM(t.DistilBertConfig(vocab_size=100, dim=64, n_layers=2, n_heads=4, hidden_dim=128)),
                               text),
        "t5": lambda: (t.T5ForConditionalGeneration(t.T5Config(vocab_size=100, d_model=64, d_ff=128, num_layers=2, num_heads=4, d_kv=16,
                                                               pad_token_id=0, decoder_start_token_id=0)),
                       dict(input_ids=ids, attention_mask=mask, labels=torch.randint(3, 100, (2, 6)))),
        "bart": lambda: (t.BartForConditionalGeneration(t.BartConfig(max_position_embeddings=32, **seq2seq)), text),
        "whisper": lambda: (t.WhisperForConditionalGeneration(t.WhisperConfig(
            num_mel_bins=16, max_source_positions=16, max_target_positions=32, pad_token_id=0, bos_token_id=1, eos_token_id=2,
            decoder_start_token_id=1, **seq2seq)), dict(input_features=torch.randn(2, 16, 32), labels=torch.randint(3, 100, (2, 6)))),
        "wav2vec2": lambda: (t.Wav2Vec2ForCTC(t.Wav2Vec2Config(
            vocab_size=20, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=2, **small)), dict(input_values=torch.randn(2, 800))),
        "vit": lambda: (t.ViTForImageClassification(t.ViTConfig(image_size=32, patch_size=8, num_labels=3, **small)),
                        dict(pixel_values=image, labels=classes)),
        "swin": lambda: (t.SwinForImageClassification(t.SwinConfig(
            image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4, num_labels=3)),
            dict(pixel_values=image, labels=classes)),
        "convnext": lambda: (t.ConvNextForImageClassification(t.ConvNextConfig(hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 2, 1], num_labels=3)),
                             dict(pixel_values=image, labels=classes)),
        "resnet": lambda: (t.ResNetForImageClassification(t.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1],
                                                                         num_labels=3)), dict(pixel_values=image, labels=classes)),
        "segformer": lambda: (t.SegformerForSemanticSegmentation(t.SegformerConfig(
            num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], num_attention_heads=[1, 2],
            decoder_hidden_size=32, num_labels=3)), dict(pixel_values=image, labels=torch.randint(0, 3, (2, 32, 32)))),
        "clip": lambda: (t.CLIPModel(t.CLIPConfig(
            text_config=dict(vocab_size=100, max_position_embeddings=16, **small),
            vision_config=dict(image_size=32, patch_size=8, **small))),
            dict(input_ids=ids, attention_mask=mask, pixel_values=image, return_loss=True)),
        **(x_transformers_models(ids, image) if "x_transformers" in PACKAGES else {}),
        **(timm_models() if "timm" in PACKAGES else {}),
    }


# timm's model families, one small variant each, with the image size each takes.
TIMM_MODELS = {
    "resnet18": 64, "resnest14d": 64, "regnetx_002": 64, "efficientnet_b0": 64, "mobilenetv3_small_100": 64,
    "ghostnet_100": 64, "convnext_atto": 64, "vit_tiny_patch16_224": 224, "deit_tiny_patch16_224": 224,
    "cait_xxs24_224": 224, "eva02_tiny_patch14_224": 224, "beit_base_patch16_224": 224, "xcit_nano_12_p16_224": 224,
    "swin_tiny_patch4_window7_224": 224, "swinv2_cr_tiny_224": 224, "maxvit_tiny_rw_224": 224, "coat_tiny": 224,
    "levit_128": 224, "volo_d1_224": 224, "poolformer_s12": 64, "hiera_tiny_224": 224, "fastvit_t8": 64,
    "efficientformerv2_s0": 224, "mobilevit_xxs": 64, "nfnet_f0": 64, "crossvit_tiny_240": 240, "pvt_v2_b0": 64,
    "twins_svt_small": 64, "davit_tiny": 64, "edgenext_xx_small": 64, "mvitv2_tiny": 224, "tnt_s_patch16_224": 224,
    "nest_tiny": 224, "gcvit_xxtiny": 224, "tiny_vit_5m_224": 224, "focalnet_tiny_srf": 64, "efficientvit_b0": 64,
    "repvit_m1": 64, "rdnet_tiny": 64, "mambaout_femto": 64, "hgnetv2_b0": 64, "vitamin_small_224": 224,
}


def timm_models() -> dict[str, Callable[[], tuple[torch.nn.Module, dict]]]:
    import timm

    def build(name: str, size: int) -> Callable[[], tuple[torch.nn.Module, dict]]:
        return lambda: (timm.create_model(name, pretrained=False, num_classes=3), dict(x=torch.randn(1, 3, size, size)))

    return {f"timm_{name}": build(name, size) for name, size in TIMM_MODELS.items()}


def x_transformers_models(ids: torch.Tensor, image: torch.Tensor) -> dict[str, Callable[[], tuple[torch.nn.Module, dict]]]:
    """x_transformers' wrappers with a spread of its options (it has no config objects)."""
    import x_transformers as x

    def lm(**options) -> Callable[[], tuple[torch.nn.Module, dict]]:
        return lambda: (x.TransformerWrapper(num_tokens=100, max_seq_len=32, attn_layers=x.Decoder(
            dim=32, depth=2, heads=4, **options)), dict(x=ids))

    return {
        "xt_rotary": lm(rotary_pos_emb=True, ff_glu=True, use_rmsnorm=True),
        "xt_alibi": lm(alibi_pos_bias=True, ff_swish=True),
        "xt_relpos": lm(rel_pos_bias=True, residual_attn=True, macaron=True, attn_qk_norm=True),
        "xt_encoder": lambda: (x.TransformerWrapper(num_tokens=100, max_seq_len=32, attn_layers=x.Encoder(
            dim=32, depth=2, heads=4, attn_gate_values=True, sandwich_norm=True)), dict(x=ids, mask=ids > 5)),
        "xt_vit": lambda: (x.ViTransformerWrapper(image_size=32, patch_size=8, num_classes=3, attn_layers=x.Encoder(
            dim=32, depth=2, heads=4)), dict(img=image)),
    }


def display(file: str) -> str:
    """``transformers/models/gpt2/modeling_gpt2.py``: the file from its package's folder on."""
    root = next(root for root in ROOTS if file.startswith(root))
    return os.path.relpath(file, os.path.dirname(root.rstrip(os.sep)))


class Recorder(TorchFunctionMode):
    """Records (file under transformers, span) of the innermost transformers frame of each call."""

    def __init__(self) -> None:
        super().__init__()
        self.sites: dict[tuple[str, Span], str] = {}  # -> the torch function's name

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        if name in HOST_READS or any(isinstance(leaf, torch.Tensor) for leaf in tree_leaves(result)):
            frame = sys._getframe(1)
            while frame is not None and not frame.f_code.co_filename.startswith(ROOTS):
                frame = frame.f_back
            if frame is not None:
                first, last, col, end = list(frame.f_code.co_positions())[frame.f_lasti // 2]
                if first is not None:
                    self.sites.setdefault((frame.f_code.co_filename, (first, last, col, end)), name)
        return result


class Locals:
    """What each local of each transformers function held while it ran: a tensor, something
    else (``None`` does not count), by (file, first line, function name)."""

    def __init__(self) -> None:
        self.held: dict[tuple[str, int, str], dict[str, set[bool]]] = defaultdict(lambda: defaultdict(set))

    def trace(self, frame, event, arg):
        return self._local if frame.f_code.co_filename.startswith(ROOTS) else None

    def _local(self, frame, event, arg):
        code = frame.f_code
        held = self.held[(code.co_filename, code.co_firstlineno, code.co_name)]
        for name, value in frame.f_locals.items():
            if value is not None:
                held[name].add(isinstance(value, torch.Tensor))
        return self._local


def record(names: list[str]) -> tuple[dict[tuple[str, Span], str], Locals]:
    """The sites and locals of one forward of each model, with each attention implementation
    that a small model runs on CPU (``sdpa``, the default, and ``eager``, the model file's own code)."""
    recorder, local_values = Recorder(), Locals()
    builders = tiny_models()
    for name in names:
        model, inputs = builders[name]()
        for attention in ("sdpa", "eager"):
            if hasattr(model, "config"):
                model.config._attn_implementation = attention
            sys.settrace(local_values.trace)
            try:
                with torch.no_grad(), recorder:
                    model.eval()(**inputs)
            finally:
                sys.settrace(None)
    return recorder.sites, local_values


class _Index(cst.CSTVisitor):
    """Each expression of a file by its span in bytes, with the scope holding it."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, lines: list[bytes], scopes: dict[int, object]) -> None:
        self.lines, self.scopes = lines, scopes
        self.stack: list[object] = []
        self.spans: list[tuple[Span, cst.BaseExpression, object]] = []
        self.functions: dict[tuple[int, str], object] = {}  # (first line, name) -> its scope

    def _byte(self, line: int, column: int) -> int:
        return len(self.lines[line - 1].decode()[:column].encode())

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self.stack.append(self.scopes.get(id(node)))
            if isinstance(node, cst.FunctionDef) and id(node) in self.scopes:
                self.functions[(self.get_metadata(PositionProvider, node).start.line, node.name.value)] = self.scopes[id(node)]
        elif isinstance(node, cst.BaseExpression) and self.stack and self.stack[-1] is not None:
            where = self.get_metadata(PositionProvider, node)
            span = (where.start.line, where.end.line, self._byte(where.start.line, where.start.column),
                    self._byte(where.end.line, where.end.column))
            self.spans.append((span, node, self.stack[-1]))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if isinstance(original_node, (cst.FunctionDef, cst.ClassDef)):
            self.stack.pop()

    def at(self, span: Span) -> tuple[cst.BaseExpression, object] | None:
        """The expression at ``span``, else the smallest one around it."""
        def inside(outer: Span) -> bool:
            return (outer[0], outer[2]) <= (span[0], span[2]) and (span[1], span[3]) <= (outer[1], outer[3])
        around = [(s, node, scope) for s, node, scope in self.spans if inside(s)]
        if not around:
            return None
        _, node, scope = min(around, key=lambda found: (found[0][1] - found[0][0], found[0][3] - found[0][2] + 10_000 * (found[0][1] - found[0][0])))
        return node, scope


def index_file(path: Path) -> _Index:
    source = path.read_text(encoding="utf-8")
    module = cst.parse_module(source)
    scopes = collect_scopes(module, module_facts(ast.parse(source)), op_tables())
    index = _Index(source.encode().splitlines(), {id(s.node): s for s in scopes if not s.is_module})
    MetadataWrapper(module, unsafe_skip_copy=True).visit(index)
    return index


def recognised(node: cst.BaseExpression, scope, host_read: bool) -> bool:
    """Is the expression a tensor; for a host read (``x.item()``, the ``bool`` of a condition),
    is it or one of its operands?"""
    if scope.is_tensor(node):
        return True
    if not host_read:
        return False
    if isinstance(node, cst.Call):
        operands = [node.func.value] if isinstance(node.func, cst.Attribute) else [arg.value for arg in node.args]
    else:
        operands = [child for child in children(node) if isinstance(child, cst.BaseExpression)]
    return any(scope.is_tensor(operand) for operand in operands)


def shape(node: cst.CSTNode, scope) -> str:
    """``p.view(...)``, ``self.A(...)``, ``l[...]``, ``g(...)``: the expression with its names
    replaced by where they come from, and method names kept."""
    if isinstance(node, cst.Name):
        name = node.value
        if name == "self":
            return "self"
        if name in scope.tensors:
            return "T"
        for param in [*scope.node.params.posonly_params, *scope.node.params.params, *scope.node.params.kwonly_params]:
            if param.name.value == name:
                note = param.annotation and cst.Module([]).code_for_node(param.annotation.annotation)
                return f"p:{note}" if note else "p"
        return "l" if any(name == getattr(t, "value", None) or name in cst.Module([]).code_for_node(t)
                          for t, _ in scope.assignments) else "g"
    if isinstance(node, cst.Attribute):
        owner = shape(node.value, scope)
        return "self.A" if owner == "self" else f"{owner}.{node.attr.value}"
    if isinstance(node, cst.Call):
        return f"{shape(node.func, scope)}(...)"
    if isinstance(node, cst.Subscript):
        return f"{shape(node.value, scope)}[...]"
    if isinstance(node, cst.BinaryOperation):
        return f"{shape(node.left, scope)} {type(node.operator).__name__} {shape(node.right, scope)}"
    if isinstance(node, cst.UnaryOperation):
        return f"{type(node.operator).__name__} {shape(node.expression, scope)}"
    return type(node).__name__


def site_coverage(sites: dict[tuple[str, Span], str], indexes: dict[str, _Index], shown: int) -> None:
    per_file: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    misses: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for (file, span), name in sorted(sites.items()):
        found = indexes[file].at(span)
        if found is None:
            continue  # module level or a class body: no scope the rules analyse
        node, scope = found
        tally = per_file[file]
        tally[1] += 1
        if recognised(node, scope, name in HOST_READS):
            tally[0] += 1
        else:
            kind = shape(node, scope)
            misses[kind] += 1
            line = Path(file).read_text(encoding="utf-8").splitlines()[span[0] - 1]
            examples.setdefault(kind, f"{display(file)}:{span[0]}: {line.strip()[:90]}")
    print(f"{'file':<56} {'seen':>5} {'sites':>5} {'coverage':>8}")
    for file, (seen, count) in sorted(per_file.items(), key=lambda item: -item[1][1]):
        print(f"{display(file):<56} {seen:>5} {count:>5} {seen / count:>8.2f}")
    per_package: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for file, (seen, count) in per_file.items():
        for tally in (per_package[package(file)], per_package["all"]):
            tally[0] += seen
            tally[1] += count
    for name, (seen, count) in per_package.items():
        print(f"{name:<56} {seen:>5} {count:>5} {seen / count:>8.2f}")
    print()
    print("most common missed shapes:")
    for kind, count in misses.most_common(shown):
        print(f"{count:>4}  {kind:<40} {examples[kind]}")


def name_accuracy(local_values: Locals, indexes: dict[str, _Index], shown: int) -> None:
    """The tensor names of each function that ran against what its locals held: a name that held
    a tensor should be one; a name that only held other values should not."""
    counts: dict[str, Counter] = defaultdict(Counter)
    wrong: list[str] = []
    missed_names: list[str] = []
    for (file, first, function), held in sorted(local_values.held.items()):
        scope = indexes[file].functions.get((first, function)) if file in indexes else None
        if scope is None:
            continue
        for name, kinds in held.items():
            if name in ("self", "cls"):
                continue
            inferred, tensor = name in scope.tensors, True in kinds
            counts[package(file)][(inferred, tensor)] += 1
            counts["all"][(inferred, tensor)] += 1
            if inferred and not tensor:
                wrong.append(f"{display(file)}:{first} {function}: {name}")
            elif tensor and not inferred:
                missed_names.append(f"{display(file)}:{first} {function}: {name}")
    print()
    for name, count in counts.items():
        found, missed, extra = count[(True, True)], count[(False, True)], count[(True, False)]
        print(f"{name}: locals that held a tensor, named tensors: {found}/{found + missed} ({found / max(found + missed, 1):.2f});"
              f" named tensors that held a tensor: {found}/{found + extra} ({found / max(found + extra, 1):.2f})")
    for line in wrong[:shown]:
        print(f"  named a tensor, held none: {line}")
    for line in missed_names[:shown]:
        print(f"  held a tensor, not named one: {line}")


def package(file: str) -> str:
    """The package a recorded file belongs to (``timm``)."""
    return display(file).split(os.sep)[0]


def member_calls(folders: list[Path]) -> None:
    """Without running anything: of the calls ``self.<member>(...)`` of a member the class
    assigns (no method of it) in each folder's files, how many the inference calls a tensor. Model
    libraries that build their layers from factories and their own classes (timm, torchvision,
    monai, ultralytics) call them this way; a miss is a module the inference does not see (or a
    member that holds no module)."""
    ops = op_tables()
    print(f"{'folder':<56} {'seen':>5} {'calls':>5} {'coverage':>8}")
    for folder in folders:
        seen = count = 0
        for path in sorted(folder.rglob("*.py")):
            source = path.read_text(encoding="utf-8", errors="replace")
            if "torch" not in source:
                continue
            try:
                facts, module = module_facts(ast.parse(source)), cst.parse_module(source)
            except (SyntaxError, cst.ParserSyntaxError):
                continue
            for scope in collect_scopes(module, facts, ops):
                for sites in scope.sites.values() if scope.class_name is not None else ():
                    for site in sites:
                        func = getattr(site.node, "func", None)
                        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" \
                                and not facts.has_method(scope.class_name, func.attr.value):
                            count += 1
                            seen += scope.is_tensor(site.node)
        print(f"{str(folder):<56} {seen:>5} {count:>5} {seen / max(count, 1):>8.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", help="a subset of: " + " ".join(tiny_models()))
    parser.add_argument("--misses", type=int, default=25, help="how many missed shapes and wrong names to list")
    parser.add_argument("--member-calls", type=Path, nargs="+", metavar="FOLDER",
                        help="instead, count the member calls the inference sees in these folders' files (no model runs)")
    args = parser.parse_args()
    if args.member_calls:
        member_calls(args.member_calls)
        return 0
    sites, local_values = record(args.models or list(tiny_models()))
    indexes = {file: index_file(Path(file)) for file in sorted({file for file, _ in sites})}
    site_coverage(sites, indexes, args.misses)
    name_accuracy(local_values, indexes, args.misses)
    return 0


if __name__ == "__main__":
    sys.exit(main())
