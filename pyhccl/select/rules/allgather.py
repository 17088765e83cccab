"""AllGather rule selector: HCCL's branches per engine, in HCCL's order (D = per-rank block).

HCCL source: src/ops/all_gather/selector/all_gather_auto_selector.cc (version 67224656919;
hccl-selection.md §5.2).
"""

from __future__ import annotations

from .. import thresholds as th
from .base import (
    CLOS, MESH_1D, TWO_DIE_NOT_REGULAR, TWO_DIE_REGULAR, UBX, Ctx, Answer, aiv_gate,
    dpu_sequence_or_pipeline, hit, miss, sched_gate)

OP = "AllGather"


def ccu_ms(x: Ctx) -> Answer:
    """``SelectCcuMsAlgo``."""
    if x.multi:
        return miss("topoLevelNums > 1")
    if x.two_level and x.R == 2 and x.D >= th.AG_2P_DETOUR_DATA_SIZE:
        return miss("twoLevel, R == 2, D >= AG_2P_DETOUR_DATA_SIZE")
    if x.shape == MESH_1D:
        if x.inplace:
            return miss("MESH_1D, in-place")
        if x.mesh_type == TWO_DIE_REGULAR:
            return hit("CcuMSAllGatherSoleMesh2Die", "MESH_1D, TWO_DIE_REGULAR")
        if x.mesh_type == TWO_DIE_NOT_REGULAR:
            return miss("MESH_1D, TWO_DIE_NOT_REGULAR")
        return hit("CcuMSAllGatherSoleMesh", "MESH_1D")
    if x.shape == UBX:
        if x.pcie and not x.allconn:
            return miss("UBX, PCIe, not allconn")
        if x.equal is None or x.multiple is None:
            return miss("UBX, mesh/CLOS sizes not computable")
        if x.D > th.SMALL_COUNT_512KB:
            return miss("UBX, D > SMALL_COUNT_512KB")
        return hit("CcuMSAllGatherSoleMesh", "UBX, D <= SMALL_COUNT_512KB")
    return miss("level0 CLOS")


def _sched_mesh1d(x: Ctx, where: str) -> Answer:
    if x.mesh_type == TWO_DIE_REGULAR:
        return hit("CcuSchedAllGatherSoleMesh2Die", f"{where}: TWO_DIE_REGULAR")
    if x.mesh_type == TWO_DIE_NOT_REGULAR:
        return miss(f"{where}: TWO_DIE_NOT_REGULAR")
    if x.is960 and x.D > th.SMALL_COUNT_16M and x.two_level:
        return hit("CcuSchedAllGatherSoleMeshConcur", f"{where}: 960, D > SMALL_COUNT_16M, twoLevel")
    if x.two_level and x.R == 2 and x.D >= th.AG_2P_DETOUR_DATA_SIZE:
        return miss(f"{where}: twoLevel, R == 2, D >= AG_2P_DETOUR_DATA_SIZE")
    return hit("CcuSchedAllGatherSoleMesh", where)


def ccu_sched(x: Ctx) -> Answer:
    """``SelectCcuScheduleAlgo``."""
    gate = sched_gate(x)
    if gate:
        return gate
    D, R, F = x.D, x.R, th.MAX_FRAME_NUM_FOR_CCU_ALGO
    if x.multi:
        if x.shape == MESH_1D:
            if x.inplace:
                return miss("multi-level MESH_1D, in-place")
            if R > th.AG_CCU_MAX_RANK_SIZE:
                return miss("multi-level MESH_1D, R > AG_CCU_MAX_RANK_SIZE")
            if x.topo.level1_nhr:
                return hit("CcuSchedAllGatherSoleNHR", "multi-level MESH_1D, Level1Nhr")
            if x.topo.is_2die_full_mesh:
                return miss("multi-level MESH_1D, is2DieFullMesh")
            if x.l0_1:
                return hit("CcuSchedAllGatherSoleNHR", "multi-level MESH_1D, L0 == 1")
            if R <= th.MAX_RANK_NUM_FOR_SEQ_ALGO:
                if D <= th.AG_CCU_CLOS_SMALL_DATA_SIZE:
                    return hit("CcuSchedAllGatherSoleMesh", "R <= 8, D <= AG_CCU_CLOS_SMALL_DATA_SIZE")
                if x.frame <= F:
                    return hit("CcuSchedAllGatherParallelMeshNHR", "R <= 8, frame <= 16")
                return hit("CcuSchedAllGatherSoleNHR", "R <= 8, frame > 16")
            if D < th.AG_FLATTEN_MAX_DATA_SIZE and R <= th.AG_CCU_RANK_SIZE:
                return hit("CcuSchedAllGatherSoleMesh", "D < AG_FLATTEN_MAX_DATA_SIZE, R <= AG_CCU_RANK_SIZE")
            if D < th.AG_CCU_SEQUENCE_MAX_DATA_SIZE and x.frame <= F:
                return hit("CcuSchedAllGatherSequenceMeshMesh", "D < AG_CCU_SEQUENCE_MAX_DATA_SIZE, frame <= 16")
            if x.frame <= F:
                return hit("CcuSchedAllGatherParallelMeshNHR", "frame <= 16")
            return hit("CcuSchedAllGatherSoleNHR", "frame > 16")
        if x.shape == CLOS and not x.inplace:
            return hit("CcuSchedAllGatherSoleNHR", "multi-level CLOS")
        return miss(f"multi-level {x.shape.name}{', in-place' if x.inplace else ''}")
    if x.inplace:
        return miss("single level, in-place")
    if x.shape == MESH_1D:
        return _sched_mesh1d(x, "MESH_1D")
    if x.shape == UBX:
        if x.pcie:
            return _sched_mesh1d(x, "UBX PCIe allconn") if x.allconn else miss("UBX PCIe, not allconn")
        if D > th.SMALL_COUNT_512KB:
            if x.equal and R <= th.MAX_RANK_NUM_FOR_CONCURRENT_ALGO:
                return hit("CcuSchedAllGatherConcurMeshNHRMultiLink", "UBX, D > 512 KiB, equal, R <= 4")
            if x.multiple:
                return (hit("CcuSchedAllGatherParallelMeshNHRMultiLink", "UBX, multiple, D < OMNI_UBX_AG_DATA_SIZE")
                        if D < th.OMNI_UBX_AG_DATA_SIZE else
                        hit("CcuSchedAllGatherPipeLineMeshNHR", "UBX, multiple, D >= OMNI_UBX_AG_DATA_SIZE"))
            return hit("CcuSchedAllGatherSoleNHRMultiLink", "UBX, D > 512 KiB, not equal/multiple")
        return hit("CcuSchedAllGatherSoleMesh", "UBX, D <= SMALL_COUNT_512KB")
    return miss("CLOS, PCIe") if x.pcie else hit("CcuSchedAllGatherSoleNHR", "CLOS")


def aiv(x: Ctx) -> Answer:
    """``SelectAivAlgo`` (size D x R; the 8 MiB x R cap is waived for UBX with 4 < R <= 8)."""
    waive = x.shape == UBX and th.AG_UBX_AIV_BIGDATA_RANK_LOWER < x.R <= th.AG_UBX_AIV_BIGDATA_RANK_UPPER
    return aiv_gate(x, waive) or hit("AivAllGatherSoleMesh", "AIV gate passed")


def aicpu(x: Ctx) -> Answer:
    """``SelectAicpuAlgo``."""
    t, D, R = x.topo, x.D, x.R
    if x.multi:
        if x.sym and x.dev8 and t.top_level_uboe:
            return (hit("AicpuAllGatherPipeLineMeshNHR", "sym, dev8, topLevelUboe, 2 levels") if x.levels == 2 else
                    hit("AicpuAllGatherPipeLineMeshNHRNHR", "sym, dev8, topLevelUboe, 3 levels"))
        if x.sym and x.levels == 3 and t.top_level_uboe:
            return hit("AicpuAllGatherParallelNHRNHR", "sym, 3 levels, topLevelUboe")
        if t.level1_nhr or t.level0_nhr or x.l0_1:
            return hit("AicpuAllGatherSoleNHR", "multi-level, Level1Nhr / Level0Nhr / L0 == 1")
        if x.shape == MESH_1D:
            if x.levels >= 3:
                return (hit("AicpuAllGatherSequenceMeshConcurNHRNHR", "MESH_1D, 3 levels, sym") if x.sym else
                        hit("AicpuAllGatherSoleNHR", "MESH_1D, 3 levels, not sym"))
            if D * R >= th.AICPU_2LEVEL_MAX_TOTAL_DATA_SIZE and R >= th.AG_AICPU_MAX_RANKSIZE:
                return hit("AicpuAllGatherParallelMeshNHR", "D x R >= 1 GiB, R >= 1024")
            if D > th.AG_AICPU_SMALL_DATA_SIZE:
                return (hit("AicpuAllGatherSequenceMeshConcurNHR", "D > 1 MiB, D x R > AG_AICPU_SEQUENCE_DATA_SIZE")
                        if D * R > th.AG_AICPU_SEQUENCE_DATA_SIZE else
                        hit("AicpuAllGatherParallelMeshNHR", "D > AG_AICPU_SMALL_DATA_SIZE"))
            return hit("AicpuAllGatherSoleNHR", "MESH_1D, D <= AG_AICPU_SMALL_DATA_SIZE")
        if x.shape == CLOS:
            return hit("AicpuAllGatherSoleNHRMultiLink", "multi-level CLOS")
        return miss("multi-level MESH_1D_CLOS")
    if x.shape == MESH_1D:
        if x.two_level and (D * R > th.AG_AICPU_1D_TWO_LEVEL_DATA_SIZE_THRESHOLD
                            or (R == 2 and D >= th.AG_2P_DETOUR_DATA_SIZE)):
            return hit("AicpuAllGatherSoleMeshConcur", "MESH_1D, twoLevel, D x R > 1 GiB or 2P detour")
        return hit("AicpuAllGatherSoleMesh", "MESH_1D")
    if x.shape == UBX:
        if x.pcie:
            if x.allconn:
                return hit("AicpuAllGatherSoleMesh", "UBX PCIe allconn")
            return (hit("AicpuAllGatherParallelMeshNHR", "UBX PCIe, D < OMNI_PCIE_AG_DATA_SIZE")
                    if D < th.OMNI_PCIE_AG_DATA_SIZE else
                    hit("AicpuAllGatherPipeLineMeshNHR", "UBX PCIe, D >= OMNI_PCIE_AG_DATA_SIZE"))
        if x.equal and R <= th.MAX_RANK_NUM_FOR_CONCURRENT_ALGO:
            return (hit("AicpuAllGatherConcurMeshNHR", "UBX, equal, R <= 4, D > 512 KiB") if D > th.SMALL_COUNT_512KB
                    else hit("AicpuAllGatherSoleMesh", "UBX, equal, R <= 4, D <= 512 KiB"))
        if x.multiple and D > th.SMALL_COUNT_512KB:
            return (hit("AicpuAllGatherParallelMeshNHRMultiJetty", "UBX, multiple, D < OMNI_PCIE_AG_DATA_SIZE")
                    if D < th.OMNI_PCIE_AG_DATA_SIZE else
                    hit("AicpuAllGatherPipeLineMeshNHR", "UBX, multiple, D >= OMNI_PCIE_AG_DATA_SIZE"))
        return hit("AicpuAllGatherSoleNHR", "UBX, otherwise")
    return hit("AicpuAllGatherSoleNHRMultiLink", "CLOS")


def dpu(x: Ctx) -> Answer:
    """``SelectDPUAlgo`` (multi-level only)."""
    return dpu_sequence_or_pipeline(x, "DpuAllGatherSequenceMeshNHR", "DpuAllGatherPipeLineMeshNHRNHR",
                                    x.l0_1, "L0 == 1")


RULES = {"CCU_MS": ccu_ms, "CCU_SCHED": ccu_sched, "AIV": aiv, "AICPU": aicpu, "DPU": dpu}
