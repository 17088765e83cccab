"""AllToAll, AllToAllV and AllToAllVC rule selectors (D = per-peer bytes, sendCounts[0] x size).

HCCL source: src/ops/all_to_all_v/selector/{alltoall,alltoallv,alltoallvc}_auto_selector.cc
(commit b198b83f; hccl-selection.md §5.6).
"""

from __future__ import annotations

from .. import thresholds as th
from ...algo.dtypes import DATATYPE_SIZE
from .base import (
    CLOS, MESH_1D, TWO_DIE_NOT_REGULAR, TWO_DIE_REGULAR, UBX, Ctx, Answer, aiv_gate, hit, miss,
    sched_gate)

__all__ = ["ALLTOALL", "ALLTOALLV", "ALLTOALLVC", "pairwise"]


def pairwise(x: Ctx) -> bool:
    """``IsPairwiseCapable``: multi-level MESH_1D, 8 devices per module, R a multiple of 16."""
    return (x.multi and x.shape == MESH_1D and x.topo.device_num_per_module == th.PAIRWISE_RANK_NUM_PER_BOARD
            and x.R >= th.PAIRWISE_UNIT_RANK_SIZE and x.R % th.PAIRWISE_UNIT_RANK_SIZE == 0)


def _no_ccu_ms(x: Ctx) -> Answer:
    return miss(f"no CCU_MS algorithm for {x.call.op}")


def _aiv_v(x: Ctx) -> Answer:
    if x.R > th.MAX_RANK_SIZE_V:
        return miss(f"R > MAX_RANK_SIZE_V {th.MAX_RANK_SIZE_V}")
    if x.topo.level2_ub_rtp or x.levels >= 3:
        return miss("level2UbRtp or topoLevelNums >= 3")
    return hit(f"Aiv{x.call.op}SoleMesh", "AIV V-gate passed")


def _dpu(x: Ctx) -> Answer:
    return hit(f"Dpu{x.call.op}SoleMesh", "multi-level") if x.multi else miss("single level")


def _sched_single(x: Ctx, concurrent: bool) -> Answer:
    op = x.call.op
    if x.shape == MESH_1D:
        if x.mesh_type == TWO_DIE_REGULAR:
            return hit(f"CcuSched{op}SoleMesh2Die", "MESH_1D, TWO_DIE_REGULAR")
        if x.mesh_type == TWO_DIE_NOT_REGULAR:
            return miss("MESH_1D, TWO_DIE_NOT_REGULAR")
        if op == "AllToAll" and x.is960 and x.D * x.R > th.SMALL_COUNT_16M and x.two_level:
            return hit("CcuSchedAllToAllSoleMeshConcur", "MESH_1D, 960, D x R > SMALL_COUNT_16M, twoLevel")
        return hit(f"CcuSched{op}SoleMesh", "MESH_1D")
    if x.shape == UBX:
        if x.pcie:
            return hit(f"CcuSched{op}SoleMesh", "UBX PCIe allconn") if x.allconn else miss("UBX PCIe, not allconn")
        if x.equal is None:
            return miss("UBX, mesh/CLOS sizes not computable")
        if x.equal and x.R <= th.CONCURRENT_RANK_LIMIT and concurrent:
            return hit(f"CcuSched{op}SoleMeshConcurrent", "UBX, equal, R <= 4")
        return hit(f"CcuSched{op}SoleMeshMultiJetty", "UBX, otherwise")
    return miss("level0 CLOS")


def a2a_sched(x: Ctx) -> Answer:
    """AllToAll ``SelectCcuScheduleAlgo``."""
    gate = sched_gate(x)
    if gate:
        return gate
    if x.inplace or not x.call.has_send_counts:
        return miss("in-place or null sendCounts")
    if x.multi:
        return (hit("CcuSchedAllToAllSoleMeshMultiLink", "multi-level MESH_1D, R <= 64")
                if x.shape == MESH_1D and x.R <= th.A2A_CCU_MAX_RANK_SIZE else miss("multi-level, otherwise"))
    return _sched_single(x, concurrent=x.D > th.BIG_DATA_SIZE_LIMIT)


def a2a_aicpu(x: Ctx) -> Answer:
    """AllToAll ``SelectAicpuAlgo`` (the multi-level assignment is overwritten, §9.17)."""
    if x.multi and pairwise(x):
        return hit("AicpuAllToAllSolePairwise", "multi-level, pairwise-capable")
    if x.shape in (MESH_1D, CLOS):
        return (hit("AicpuAllToAllSoleMesh", "D x R > ALLTOALL_ENABLE_MULTI_CHANNEL_DATA_SIZE_LIMIT")
                if x.D * x.R > th.ALLTOALL_ENABLE_MULTI_CHANNEL_DATA_SIZE_LIMIT else
                hit("AicpuAllToAllSoleMeshSingleChannel", "D x R <= ALLTOALL_ENABLE_MULTI_CHANNEL_DATA_SIZE_LIMIT"))
    if x.pcie:
        return hit("AicpuAllToAllSoleMesh", "UBX PCIe")
    count = x.D // DATATYPE_SIZE[x.call.dtype]
    if x.equal and x.R <= th.CONCURRENT_RANK_LIMIT and count > th.BIG_DATA_SIZE_LIMIT:
        return hit("AicpuAllToAllSoleMeshConcurrent", "UBX, equal, R <= 4, sendCounts[0] > 512 elements")
    return hit("AicpuAllToAllSoleMeshMultiJetty", "UBX, otherwise")


def a2av_sched(x: Ctx) -> Answer:
    """AllToAllV ``SelectCcuScheduleAlgo`` (no in-place test)."""
    gate = sched_gate(x)
    if gate:
        return gate
    if x.multi:
        if x.shape == CLOS:
            return miss("multi-level CLOS")
        if x.int8 or x.R > th.A2A_CCU_MAX_RANK_SIZE:
            return miss("multi-level, int8 or R > 64")
        return (hit("CcuSchedAllToAllVSoleMesh", "multi-level, R <= 4") if x.R <= th.CONCURRENT_RANK_LIMIT else
                hit("CcuSchedAllToAllVSoleMeshMultiLink", "multi-level, R > 4"))
    return _sched_single(x, concurrent=True)


def a2av_aicpu(x: Ctx) -> Answer:
    """AllToAllV ``SelectAicpuAlgo``."""
    if x.multi and pairwise(x):
        return hit("AicpuAllToAllVSolePairwise", "multi-level, pairwise-capable")
    if x.shape in (MESH_1D, CLOS) or x.pcie:
        return hit("AicpuAllToAllVSoleMesh", "MESH_1D, CLOS or UBX PCIe")
    if x.equal and x.R <= th.CONCURRENT_RANK_LIMIT:
        return hit("AicpuAllToAllVSoleMeshConcurrent", "UBX, equal, R <= 4")
    return hit("AicpuAllToAllVSoleMeshMultiJetty", "UBX, otherwise")


def a2avc_sched(x: Ctx) -> Answer:
    """AllToAllVC ``SelectCcuScheduleAlgo``."""
    gate = sched_gate(x)
    if gate:
        return gate
    if x.multi:
        return miss("topoLevelNums > 1")
    return hit("CcuSchedAllToAllVCSoleMesh", "MESH_1D") if x.shape == MESH_1D else miss(f"level0 {x.shape.name}")


def a2avc_aicpu(x: Ctx) -> Answer:
    """AllToAllVC ``SelectAicpuAlgo``."""
    return (hit("AicpuAllToAllVCSolePairwise", "pairwise-capable") if pairwise(x) else
            hit("AicpuAllToAllVCSoleMesh", "any topology"))


def a2a_aiv(x: Ctx) -> Answer:
    """AllToAll ``SelectAivAlgo`` (size D x R)."""
    return aiv_gate(x) or hit("AivAllToAllSoleMesh", "AIV gate passed")


ALLTOALL = {"CCU_MS": _no_ccu_ms, "CCU_SCHED": a2a_sched, "AIV": a2a_aiv, "AICPU": a2a_aicpu, "DPU": _dpu}
ALLTOALLV = {"CCU_MS": _no_ccu_ms, "CCU_SCHED": a2av_sched, "AIV": _aiv_v, "AICPU": a2av_aicpu, "DPU": _dpu}
ALLTOALLVC = {"CCU_MS": _no_ccu_ms, "CCU_SCHED": a2avc_sched, "AIV": _aiv_v, "AICPU": a2avc_aicpu, "DPU": _dpu}
