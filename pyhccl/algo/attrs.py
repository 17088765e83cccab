"""Declared algorithm attributes (REGISTER_ALG_ATTRS) and HCCL's checks of them, with its reasons.

HCCL source: src/ops/op_common/selector/alg_attrs.h (``TopoAttrs``, ``OpAttrs``, presets),
src/ops/op_common/selector/cost_model.cc (``CheckAlgoMatchTopoWithReason``) and
src/ops/op_common/selector/cost_table.cc (``CheckAlgoMatchOpWithReason``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..topo.info import Level0MeshType, Level0Shape, TopoInfo
from .dtypes import HcclDataType as T
from .dtypes import HcclReduceOp
from .names import OpExecuteConfig
from .predicates import OpCall, all_mesh_connected, is_strict

__all__ = ["TopoAttrs", "OpAttrs", "Check", "check_topo", "check_op", "UNSUPPORTED_INT8_AND_64BIT",
           "UNSUPPORTED_64BIT", "UNSUPPORTED_UINT64_FP64", "SUPPORTED_FLOAT_ONLY", "CCU_SCHED_MAX_RANK_SIZE",
           "LEVEL0_ANY", "MESH_TYPES_ANY", "NO_LEVEL1_NHR_CHECK_OPS"]

UNSUPPORTED_INT8_AND_64BIT = frozenset({T.INT8, T.INT64, T.UINT64, T.FP64})   # alg_attrs.h
UNSUPPORTED_64BIT = frozenset({T.INT64, T.UINT64, T.FP64})                    # alg_attrs.h
UNSUPPORTED_UINT64_FP64 = frozenset({T.UINT64, T.FP64})                       # alg_attrs.h
SUPPORTED_FLOAT_ONLY = frozenset({T.FP16, T.FP32, T.BFP16, T.FP64})           # alg_attrs.h
CCU_SCHED_MAX_RANK_SIZE = 64                                                  # alg_attrs.h
LEVEL0_ANY = frozenset(Level0Shape)                                           # LEVEL0_TOPO_ANY (0xFF)
MESH_TYPES_ANY = frozenset(Level0MeshType)                                    # mesh-type mask 0xFF
#: Ops whose attribute check skips the Level1Nhr test (cost_model.cc, step 7).
NO_LEVEL1_NHR_CHECK_OPS = frozenset({"AllToAll", "AllToAllV", "AllToAllVC", "Send", "Recv",
                                     "BatchSendRecv", "Barrier", "AllGatherV", "ReduceScatterV"})
_CCU = (OpExecuteConfig.CCU_MS, OpExecuteConfig.CCU_SCHED)


@dataclass(frozen=True)
class Check:
    """A custom (soft) check: a label for traces and a predicate."""

    label: str
    fn: Callable[..., bool] = field(compare=False)

    def __call__(self, *args) -> bool:
        return bool(self.fn(*args))


@dataclass(frozen=True)
class TopoAttrs:
    """``TopoAttrs`` with HCCL's defaults (alg_attrs.h)."""

    min_topo_level_num: int = 1
    max_topo_level_num: int = 3
    support_level0_topos: frozenset = frozenset({Level0Shape.MESH_1D})
    support_level0_mesh_types: frozenset = frozenset({Level0MeshType.NOT_MESH, Level0MeshType.SINGLE_DIE})
    is_support_level1_nhr: bool = False
    is_support_2die_full_mesh: bool = False
    is_support_level0_pcie_mix: bool = False
    require_all_mesh_connected: bool = False
    max_support_rank_size: int = 0
    support_dev_types: frozenset = frozenset()
    is_host_dpu_only: bool = False
    topo_custom_check: Check | None = None
    topo_priority_check: Check | None = None


@dataclass(frozen=True)
class OpAttrs:
    """``OpAttrs`` with HCCL's defaults (alg_attrs.h)."""

    is_support_prod: bool = True
    unsupported_data_types: frozenset = frozenset()
    supported_data_types: frozenset = frozenset()
    is_support_inplace: bool = True
    is_support_float_order_preserved: bool = False
    op_custom_check: Check | None = None
    op_priority_check: Check | None = None


def _names(items) -> str:
    return "|".join(sorted(getattr(i, "name", str(i)) for i in items))


def check_topo(op: str, engine: OpExecuteConfig, a: TopoAttrs, topo: TopoInfo, soft: bool = True) -> str | None:
    """``CheckAlgoMatchTopoWithReason``: None when the topology passes, else the first reason.

    Args:
        op: the algorithm's op type (Pascal, e.g. "AllReduce").
        engine: the algorithm's engine (``AlgAttrs.engine``).
        a: its topology attributes.
        topo: the communicator's TopoInfo.
        soft: ``needSoftPolicyCheck``; False skips ``topoCustomCheck``.
    """
    levels, shape = topo.topo_level_nums, topo.level0_topo
    if levels < a.min_topo_level_num:
        return f"topoLevelNums {levels} < minTopoLevelNum {a.min_topo_level_num}"
    if levels > a.max_topo_level_num:
        return f"topoLevelNums {levels} > maxTopoLevelNum {a.max_topo_level_num}"
    if shape not in a.support_level0_topos:
        return f"level0Topo {shape.name} not in supportLevel0Topos {_names(a.support_level0_topos)}"
    if (a.support_level0_mesh_types != MESH_TYPES_ANY and shape in (Level0Shape.MESH_1D, Level0Shape.MESH_1D_CLOS)
            and engine in _CCU and topo.level0_mesh_type not in a.support_level0_mesh_types):
        return (f"level0MeshType {topo.level0_mesh_type.name} not in supportLevel0MeshTypes "
                f"{_names(a.support_level0_mesh_types)}")
    if topo.is_2die_full_mesh and not a.is_support_2die_full_mesh and shape == Level0Shape.MESH_1D and engine in _CCU:
        return "is2DieFullMesh and not isSupport2DieFullMesh"
    if topo.level0_pcie_mix and not a.is_support_level0_pcie_mix and shape in (Level0Shape.MESH_1D_CLOS,
                                                                              Level0Shape.CLOS):
        return "level0PcieMix and not isSupportLevel0PcieMix"
    if topo.level1_nhr and not a.is_support_level1_nhr and op not in NO_LEVEL1_NHR_CHECK_OPS:
        return "Level1Nhr and not isSupportLevel1Nhr"
    if a.require_all_mesh_connected and topo.level0_pcie_mix and not all_mesh_connected(topo):
        return "requireAllMeshConnected: level 0 not covered by one 1DMESH instance"
    if a.support_dev_types and topo.device_type not in a.support_dev_types:
        return f"deviceType {topo.device_type} not in supportDevTypes {_names(a.support_dev_types)}"
    if a.is_host_dpu_only != topo.host_dpu_only:
        return f"isHostDpuOnly {a.is_host_dpu_only} != hostDpuOnly {topo.host_dpu_only}"
    if a.max_support_rank_size and topo.user_rank_size > a.max_support_rank_size:
        return f"rank size {topo.user_rank_size} > maxSupportRankSize {a.max_support_rank_size}"
    if soft and a.topo_custom_check is not None and not a.topo_custom_check(topo):
        return f"topoCustomCheck failed: {a.topo_custom_check.label}"
    return None


def check_op(a: OpAttrs, call: OpCall, topo: TopoInfo, soft: bool = True) -> str | None:
    """``CheckAlgoMatchOpWithReason``: None when the call passes, else the first reason."""
    dt = call.dtype
    if a.supported_data_types:
        if dt not in a.supported_data_types:
            return f"dtype {dt.name} not in supportedDataTypes {_names(a.supported_data_types)}"
    elif dt in a.unsupported_data_types:
        return f"dtype {dt.name} in unsupportedDataTypes {_names(a.unsupported_data_types)}"
    if not a.is_support_prod and call.reduce_op == HcclReduceOp.PROD:
        return "reduce op PROD and not isSupportProd"
    if not a.is_support_inplace and call.inplace:
        return "in-place and not isSupportInplace"
    if is_strict(call, topo.user_rank_size) and not a.is_support_float_order_preserved:
        return "strict order preservation needed and not isSupportFloatOrderPreserved"
    if soft and a.op_custom_check is not None and not a.op_custom_check(call, topo):
        return f"opCustomCheck failed: {a.op_custom_check.label}"
    return None
