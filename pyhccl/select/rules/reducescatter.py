"""ReduceScatter rule selector: HCCL's branches per engine, in HCCL's order (D = per-rank block).

HCCL source: src/ops/reduce_scatter/selector/reduce_scatter_auto_selector.cc (version
67534412500; hccl-selection.md §5.3). The single-level CCU_SCHED branch is given there only as
"as in the older sheet" with its constants; it is rebuilt from those constants and the AllReduce
sibling (see docs/selection.md, open questions).
"""

from __future__ import annotations

from .. import thresholds as th
from ...algo.dtypes import HcclDataType
from .base import (
    CLOS, MESH_1D, TWO_DIE_NOT_REGULAR, TWO_DIE_REGULAR, UBX, Ctx, Answer, aicpu_ubx_tail, aiv_gate,
    dpu_sequence_or_pipeline, hit, miss, miss_if, sched_gate, sched_ubx)

OP = "ReduceScatter"


def ccu_ms(x: Ctx) -> Answer:
    """``SelectCcuMsAlgo``."""
    gate = miss_if(strict=x.strict, topoLevelNums__1=x.multi)
    if gate:
        return gate
    if x.two_level and x.R == 2 and x.D >= th.RS_2P_DETOUR_DATA_SIZE:
        return miss("twoLevel, R == 2, D >= RS_2P_DETOUR_DATA_SIZE")
    gate = miss_if(int8=x.int8, PROD=x.prod, _64_bit=x.b64)
    if gate:
        return gate
    if x.shape == MESH_1D:
        if x.inplace:
            return miss("MESH_1D, in-place")
        if x.mesh_type == TWO_DIE_REGULAR:
            return hit("CcuMSReduceScatterSoleMesh2Die", "MESH_1D, TWO_DIE_REGULAR")
        if x.mesh_type == TWO_DIE_NOT_REGULAR:
            return miss("MESH_1D, TWO_DIE_NOT_REGULAR")
        if x.is960 and x.D * x.R > th.SMALL_COUNT_16M and x.two_level:
            return hit("CcuMSReduceScatterSoleMeshConcur", "MESH_1D, 960, D x R > SMALL_COUNT_16M, twoLevel")
        return hit("CcuMSReduceScatterSoleMesh", "MESH_1D")
    if x.shape == UBX:
        if x.pcie and not x.allconn:
            return miss("UBX, PCIe, not allconn")
        if x.equal and x.R <= th.MAX_RANK_NUM_FOR_CONCURRENT_ALGO:
            return (hit("CcuMSReduceScatterSoleMesh", "UBX, equal, R <= 4, small") if x.small else
                    hit("CcuMSReduceScatterConcurMeshNHRMultiLink", "UBX, equal, R <= 4, not small"))
        if x.multiple and not x.small:
            return (miss("UBX, multiple, D < OMNI_UBX_RS_MS_DATA_SIZE") if x.D < th.OMNI_UBX_RS_MS_DATA_SIZE else
                    hit("CcuMSReduceScatterPipeLineMeshNHR", "UBX, multiple, D >= OMNI_UBX_RS_MS_DATA_SIZE"))
        if x.R <= th.MAX_RANK_NUM_FOR_REDUCE_MS_ALGO:
            return hit("CcuMSReduceScatterSoleMesh", "UBX, R <= MAX_RANK_NUM_FOR_REDUCE_MS_ALGO")
        return miss("UBX, R > MAX_RANK_NUM_FOR_REDUCE_MS_ALGO")
    return miss("level0 CLOS")


def _sched_mesh1d(x: Ctx, where: str) -> Answer:
    if x.int8:
        return miss(f"{where}: int8")
    if x.D * th.DEFAULT_RANK_SIZE / x.R >= th.RS_M2M_1D_MAX_DATA_SIZE:
        return miss(f"{where}: D x 8/R >= RS_M2M_1D_MAX_DATA_SIZE")
    if x.mesh_type == TWO_DIE_REGULAR:
        return hit("CcuSchedReduceScatterSoleMesh2Die", f"{where}: TWO_DIE_REGULAR")
    if x.mesh_type == TWO_DIE_NOT_REGULAR:
        return miss(f"{where}: TWO_DIE_NOT_REGULAR")
    return hit("CcuSchedReduceScatterSoleMesh", f"{where}: D x 8/R < RS_M2M_1D_MAX_DATA_SIZE")


def ccu_sched(x: Ctx) -> Answer:
    """``SelectCcuScheduleAlgo``."""
    gate = sched_gate(x)
    if gate:
        return gate
    gate = miss_if(strict=x.strict, PROD=x.prod, in_place=x.inplace, _64_bit=x.b64)
    if gate:
        return gate
    D, R, T, F = x.D, x.R, x.D * x.R, th.MAX_FRAME_NUM_FOR_CCU_ALGO
    if x.multi:
        if x.shape == MESH_1D:
            if D >= th.RS_CCU_SCHEDULE_2LEVEL_MAX_PER_RANK_DATA_SIZE:
                return miss("multi-level MESH_1D, D >= 32 MiB")
            if x.topo.level1_nhr:
                return hit("CcuSchedReduceScatterSoleNHR", "multi-level MESH_1D, Level1Nhr")
            if x.l0_1:
                return hit("CcuSchedReduceScatterSoleNHR", "multi-level MESH_1D, L0 <= 1")
            if x.int8:
                return miss("multi-level MESH_1D, int8")
            if (R == th.RS_CCU_2DIE_RANK_SIZE and x.frame == th.RS_CCU_2DIE_FRAME_NUM
                    and th.RS_CCU_2DIE_MIN_DATA_SIZE <= T <= th.RS_CCU_2DIE_MAX_DATA_SIZE):
                return hit("CcuSchedReduceScatterSoleMesh2Die", "R == 16, frame == 2, 4 MiB <= D x R <= 16 MiB")
            n = th.RS_CCU_MAX_RANK_SIZE
            if T < th.RS_FLATTEN_MAX_DATA_SIZE and R < n:
                return hit("CcuSchedReduceScatterSoleMesh", "D x R < RS_FLATTEN_MAX_DATA_SIZE, R < 64")
            if T < th.RS_CCU_64P_SEQ_DATA_SIZE and R < n and x.frame <= F:
                return hit("CcuSchedReduceScatterSequenceMeshMesh", "D x R < RS_CCU_64P_SEQ_DATA_SIZE, R < 64")
            if T <= th.RS_CCU_64P_SEQ_DATA_SIZE and R == n and x.frame <= F:
                return hit("CcuSchedReduceScatterSequenceMeshMesh", "D x R <= RS_CCU_64P_SEQ_DATA_SIZE, R == 64")
            if T <= th.RS_CCU_64P_MIN_DATA_SIZE and R == n and x.frame <= F:
                return hit("CcuSchedReduceScatterParallelMeshNHR", "D x R <= RS_CCU_64P_MIN_DATA_SIZE, R == 64")
            if x.frame > F:
                return hit("CcuSchedReduceScatterSoleNHR", "frame > 16")
            return miss("multi-level MESH_1D, otherwise")
        if x.shape == CLOS:
            return hit("CcuSchedReduceScatterSoleNHR", "multi-level CLOS")
        return miss("multi-level MESH_1D_CLOS")
    if x.shape == MESH_1D:
        return _sched_mesh1d(x, "MESH_1D")
    if x.shape == UBX:
        return sched_ubx(x, _sched_mesh1d, "ParallelMeshNHRMultiLink", "OMNI_UBX_RS_SCHED_DATA_SIZE")
    return miss("CLOS, PCIe") if x.pcie else hit("CcuSchedReduceScatterSoleNHR", "CLOS")


def aiv(x: Ctx) -> Answer:
    """``SelectAivAlgo`` (size D x R)."""
    gate = aiv_gate(x)
    if gate:
        return gate
    if x.strict or x.prod or x.dtype_is(HcclDataType.UINT64, HcclDataType.FP64):
        return miss("strict, PROD, UINT64 or FP64")
    return hit("AivReduceScatterSoleMesh", "AIV gate passed")


def _mesh1d(x: Ctx, where: str) -> Answer:
    ratio = (th.RS_1D_TWO_LEVEL_RATIO_BASE / x.R) ** 2
    if x.special:
        return hit("AicpuReduceScatterSoleMesh", f"{where}: special")
    if x.two_level:
        if x.R == 2 and x.D >= th.RS_2P_DETOUR_DATA_SIZE:
            return hit("AicpuReduceScatterSoleMeshConcur", f"{where}: twoLevel, R == 2, D >= RS_2P_DETOUR_DATA_SIZE")
        if x.D * x.R > th.RS_AICPU_1D_TWO_LEVEL_DATA_SIZE_THRESHOLD:
            return hit("AicpuReduceScatterSoleMeshChunk", f"{where}: twoLevel, D x R > 1.5 GiB")
    if x.D * ratio > th.RS_AICPU_1D_MAX_DATA_SIZE:
        return hit("AicpuReduceScatterSoleMeshChunk", f"{where}: D x (8/R)^2 > RS_AICPU_1D_MAX_DATA_SIZE")
    return hit("AicpuReduceScatterSoleMesh", f"{where}: D x (8/R)^2 <= RS_AICPU_1D_MAX_DATA_SIZE")


def aicpu(x: Ctx) -> Answer:
    """``SelectAicpuAlgo``."""
    t, D, R = x.topo, x.D, x.R
    if x.strict:
        return (hit("AicpuReduceScatterStrictOrderedGroupMesh", "strict, R > 8") if R > th.MAX_RANK_NUM_FOR_ORDER_PRESERVED
                else hit("AicpuReduceScatterStrictOrderedMesh", "strict, R <= 8"))
    if x.multi:
        if x.special:
            return hit("AicpuReduceScatterSoleNHRAicpuReduce", "multi-level, 64-bit or PROD")
        if x.sym and x.dev8 and t.top_level_uboe:
            return (hit("AicpuReduceScatterPipeLineMeshNHR", "sym, dev8, topLevelUboe, 2 levels") if x.levels == 2 else
                    hit("AicpuReduceScatterPipeLineMeshNHRMesh", "sym, dev8, topLevelUboe, 3 levels"))
        if x.sym and x.levels == 3 and t.top_level_uboe:
            return hit("AicpuReduceScatterParallelMeshNHR", "sym, 3 levels, topLevelUboe")
        if t.level1_nhr or t.level0_nhr:
            return hit("AicpuReduceScatterSoleNHR", "multi-level, Level1Nhr / Level0Nhr")
        if not x.l0_1 and x.shape == MESH_1D:
            if x.levels == 3:
                return (hit("AicpuReduceScatterSequenceMeshConcurNHRNHR", "MESH_1D, 3 levels, sym") if x.sym else
                        hit("AicpuReduceScatterSoleNHR", "MESH_1D, 3 levels, not sym"))
            if D * R >= th.AICPU_2LEVEL_MAX_TOTAL_DATA_SIZE and R >= th.RS_AICPU_MAX_RANKSIZE:
                return hit("AicpuReduceScatterParallelMeshNHR", "D x R >= 1 GiB, R >= 256")
            if D > th.RS_AICPU_1D_MIN_DATA_SIZE:
                return (hit("AicpuReduceScatterSequenceMeshConcurNHR", "D > 4 MiB, D x R > RS_AICPU_SEQUENCE_SIZE_THRESHOLD")
                        if D * R > th.RS_AICPU_SEQUENCE_SIZE_THRESHOLD else
                        hit("AicpuReduceScatterParallelMeshNHR", "D > RS_AICPU_1D_MIN_DATA_SIZE"))
            return hit("AicpuReduceScatterSoleNHR", "MESH_1D, D <= RS_AICPU_1D_MIN_DATA_SIZE")
        if x.l0_1:
            return hit("AicpuReduceScatterSoleNHR", "multi-level, L0 == 1")
        if x.shape == CLOS:
            return hit("AicpuReduceScatterSoleNHRMultiLink", "multi-level CLOS")
        return miss("multi-level MESH_1D_CLOS")
    if x.shape == MESH_1D:
        return _mesh1d(x, "MESH_1D")
    if x.shape == CLOS:
        return (hit("AicpuReduceScatterSoleNHRAicpuReduce", "CLOS, special") if x.special else
                hit("AicpuReduceScatterSoleNHRMultiLink", "CLOS"))
    if x.pcie:
        if x.allconn:
            return _mesh1d(x, "UBX PCIe allconn")
        if x.special:
            return hit("AicpuReduceScatterSequenceMeshNHRAicpuReduce", "UBX PCIe, special")
        return (hit("AicpuReduceScatterParallelMeshNHR", "UBX PCIe, D < OMNI_PCIE_RS_DATA_SIZE")
                if D < th.OMNI_PCIE_RS_DATA_SIZE else
                hit("AicpuReduceScatterPipeLineMeshNHR", "UBX PCIe, D >= OMNI_PCIE_RS_DATA_SIZE"))
    if x.allconn:
        if x.special:
            return hit("AicpuReduceScatterSoleMesh", "UBX allconn, special")
        if not x.small:
            return hit("AicpuReduceScatterConcurMeshNHR", "UBX allconn, not small")
        if D * (th.RS_1D_TWO_LEVEL_RATIO_BASE / R) ** 2 > th.RS_AICPU_1D_MAX_DATA_SIZE:
            return hit("AicpuReduceScatterSoleMeshChunk", "UBX allconn, D x (8/R)^2 > RS_AICPU_1D_MAX_DATA_SIZE")
        return hit("AicpuReduceScatterSoleMesh", "UBX allconn, small")
    return aicpu_ubx_tail(x)


def dpu(x: Ctx) -> Answer:
    """``SelectDPUAlgo`` (multi-level only)."""
    return dpu_sequence_or_pipeline(x, "DpuReduceScatterSequenceMeshMesh", "DpuReduceScatterPipeLineMeshNHRMesh",
                                    x.l0_1, "L0 == 1")


RULES = {"CCU_MS": ccu_ms, "CCU_SCHED": ccu_sched, "AIV": aiv, "AICPU": aicpu, "DPU": dpu}
