"""The rule registry: every rule class, by code."""
from __future__ import annotations

from fusionlint.rule import Rule
from fusionlint.rules.bmm_scale_add import BmmScaleAdd
from fusionlint.rules.cat_grown_in_loop import CatGrownInLoop
from fusionlint.rules.clone_before_compute import CloneBeforeCompute
from fusionlint.rules.compute_bound_sequence import ComputeBoundSequence
from fusionlint.rules.computed_twice import ComputedTwice
from fusionlint.rules.copy_updated_by_slices import CopyUpdatedBySlices
from fusionlint.rules.elementwise_by_hand import ElementwiseByHand
from fusionlint.rules.elementwise_on_expanded import ElementwiseOnExpanded
from fusionlint.rules.fill_by_hand import FillByHand
from fusionlint.rules.host_scalar_tensor import HostScalarTensor
from fusionlint.rules.host_sync_in_tensor_work import HostSyncInTensorWork
from fusionlint.rules.kept_alive_across_compute import KeptAliveAcrossCompute
from fusionlint.rules.kept_alive_by_container import KeptAliveByContainer
from fusionlint.rules.layer_norm_by_hand import LayerNormByHand
from fusionlint.rules.lerp_by_hand import LerpByHand
from fusionlint.rules.log_by_hand import LogByHand
from fusionlint.rules.loop_invariant_work import LoopInvariantWork
from fusionlint.rules.loop_over_slices import LoopOverSlices
from fusionlint.rules.manual_attention import ManualAttention
from fusionlint.rules.mask_multiply import MaskMultiply
from fusionlint.rules.matmul_bias import MatmulBias
from fusionlint.rules.min_max_one_output import MinMaxOneOutput
from fusionlint.rules.norm_before_select import NormBeforeSelect
from fusionlint.rules.norm_by_hand import NormByHand
from fusionlint.rules.reduce_before_compute import ReduceBeforeCompute
from fusionlint.rules.rotate_half_copy import RotateHalfCopy
from fusionlint.rules.redundant_copy import RedundantCopy
from fusionlint.rules.replicated_for_broadcast import ReplicatedForBroadcast
from fusionlint.rules.scalar_fused_op import ScalarFusedOp
from fusionlint.rules.scale_after_matmul import ScaleAfterMatmul
from fusionlint.rules.scale_smaller_factor import ScaleSmallerFactor
from fusionlint.rules.split_reduction import SplitReduction
from fusionlint.rules.softmax_by_hand import SoftmaxByHand
from fusionlint.rules.sum_started_from_zeros import SumStartedFromZeros
from fusionlint.rules.syntax_error import SyntaxErrorRule
from fusionlint.rules.unit_offset_scale import UnitOffsetScale
from fusionlint.rules.view_breaks_fused_block import ViewBreaksFusedBlock

SYNTAX_ERROR_CODE = SyntaxErrorRule.code

_RULES: tuple[type[Rule], ...] = (
    ViewBreaksFusedBlock,
    CloneBeforeCompute,
    HostSyncInTensorWork,
    KeptAliveAcrossCompute,
    KeptAliveByContainer,
    RedundantCopy,
    ReduceBeforeCompute,
    ScaleAfterMatmul,
    ScaleSmallerFactor,
    FillByHand,
    ManualAttention,
    MatmulBias,
    BmmScaleAdd,
    ScalarFusedOp,
    ComputeBoundSequence,
    LerpByHand,
    RotateHalfCopy,
    ElementwiseByHand,
    UnitOffsetScale,
    LayerNormByHand,
    SoftmaxByHand,
    NormBeforeSelect,
    HostScalarTensor,
    CopyUpdatedBySlices,
    MinMaxOneOutput,
    NormByHand,
    LogByHand,
    MaskMultiply,
    LoopOverSlices,
    ComputedTwice,
    CatGrownInLoop,
    LoopInvariantWork,
    SumStartedFromZeros,
    ReplicatedForBroadcast,
    SplitReduction,
    ElementwiseOnExpanded,
    SyntaxErrorRule,
)


def all_rules() -> list[type[Rule]]:
    return sorted(_RULES, key=lambda rule: rule.code)


def get_rule(code: str) -> type[Rule]:
    """The rule with this code (case-insensitive); KeyError naming the known codes otherwise."""
    for rule in _RULES:
        if rule.code == code.upper():
            return rule
    raise KeyError(f"unknown rule {code!r}; known: {', '.join(r.code for r in all_rules())}")
