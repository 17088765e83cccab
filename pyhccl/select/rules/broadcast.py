"""Broadcast rule selector: HCCL's branches per engine, in HCCL's order (D = whole buffer, p = D/R).

HCCL source: src/ops/broadcast/selector/broadcast_auto_selector.cc (version 67593207335;
hccl-selection.md §5.4).
"""

from __future__ import annotations

from .. import thresholds as th
from .base import CLOS, MESH_1D, UBX, Ctx, Answer, aiv_gate, by_size, hit, miss, sched_gate

OP = "Broadcast"


def ccu_ms(x: Ctx) -> Answer:
    """``SelectCcuMsAlgo`` (no common gate, no dtype tests)."""
    if x.multi:
        return miss("topoLevelNums > 1")
    if x.shape == MESH_1D:
        return (miss("MESH_1D, is2DieFullMesh") if x.topo.is_2die_full_mesh else
                hit("CcuMSBroadcastSoleMesh", "MESH_1D"))
    if x.shape == UBX:
        if not x.allconn:
            return miss("UBX, not allconn")
        if x.pcie or x.D < th.UBX_BC_CONCURRENT_DATA_SIZE:
            return hit("CcuMSBroadcastSoleMesh", "UBX allconn, PCIe or D < UBX_BC_CONCURRENT_DATA_SIZE")
        return hit("CcuMsBroadcastConcurMeshNHR", "UBX allconn, D >= UBX_BC_CONCURRENT_DATA_SIZE")
    return miss("level0 CLOS")


def ccu_sched(x: Ctx) -> Answer:
    """``SelectCcuScheduleAlgo``."""
    gate = sched_gate(x)
    if gate:
        return gate
    D, R, p, n = x.D, x.R, x.D / x.R, th.BROADCAST_CCU_MAX_RANK_SIZE
    if x.multi:
        if x.shape == MESH_1D:
            if R < n and D > th.CCU_SCHEDULE_2LEVEL_LESS_64P_MAX_SIZE:
                return miss("R < 64, D > CCU_SCHEDULE_2LEVEL_LESS_64P_MAX_SIZE")
            if R >= n and p > th.CCU_SCHEDULE_2LEVEL_MAX_PER_RANK_DATA_SIZE:
                return miss("R >= 64, D/R > CCU_SCHEDULE_2LEVEL_MAX_PER_RANK_DATA_SIZE")
            if x.topo.level1_nhr or x.l0_1:
                return hit("CcuSchedBroadcastSoleNHR", "multi-level MESH_1D, Level1Nhr or L0 == 1")
            if x.topo.is_2die_full_mesh:
                return miss("multi-level MESH_1D, is2DieFullMesh")
            if p <= th.BROADCAST_MESH_CCU_MAX_DATA_SIZE and R <= n:
                return hit("CcuSchedBroadcastSoleMesh", "D/R <= BROADCAST_MESH_CCU_MAX_DATA_SIZE, R <= 64")
            if (p <= th.BROADCAST_NHR_LESS_64P_CCU_MAX_DATA_SIZE and R < n) or (
                    p <= th.BROADCAST_NHR_CCU_MAX_DATA_SIZE and R >= n):
                return hit("CcuSchedBroadcastSoleNHR", "D/R within the NHR bound")
            return hit("CcuSchedBroadcastParallelMeshNHR", "D/R above the NHR bound")
        if x.shape == CLOS and not x.pcie:
            return hit("CcuSchedBroadcastSoleNHR", "multi-level CLOS")
        return miss(f"multi-level {x.shape.name}")
    if x.shape == MESH_1D:
        return (miss("MESH_1D, is2DieFullMesh") if x.topo.is_2die_full_mesh else
                hit("CcuSchedBroadcastSoleMesh", "MESH_1D"))
    if x.shape == UBX:
        if x.allconn:
            return (hit("CcuSchedBroadcastSoleMesh", "UBX allconn, PCIe or D < UBX_BC_CONCURRENT_DATA_SIZE")
                    if x.pcie or D < th.UBX_BC_CONCURRENT_DATA_SIZE else
                    hit("CcuSchedBroadcastConcurMeshNHR", "UBX allconn, D >= UBX_BC_CONCURRENT_DATA_SIZE"))
        if x.pcie:
            return miss("UBX, PCIe, not allconn")
        return by_size("UBX", D, "OMNI2D_UBX_BR_DATA_SIZE", "CcuSchedBroadcastParallelMeshNHRMultiJetty",
                       "CcuSchedBroadcastPipeLineMeshNHR")
    return miss("CLOS, PCIe") if x.pcie else hit("CcuSchedBroadcastSoleNHR", "CLOS")


def aiv(x: Ctx) -> Answer:
    """``SelectAivAlgo`` (size D; the 8 MiB x R cap is waived for UBX without PCIe and R <= 8)."""
    waive = x.shape == UBX and not x.pcie and x.R <= th.BROADCAST_UBX_AIV_MAX_RANK
    return aiv_gate(x, waive) or hit("AivBroadcastSoleMesh", "AIV gate passed")


def aicpu(x: Ctx) -> Answer:
    """``SelectAicpuAlgo``."""
    t = x.topo
    if x.multi:
        if x.levels == 3:
            if not x.sym or x.l0_1:
                return hit("AicpuBroadcastSoleNHR", "3 levels, not sym or L0 == 1")
            if x.shape == MESH_1D and not t.top_level_uboe:
                return hit("AicpuBroadcastSequenceMeshConcurNHRNHR", "3 levels, MESH_1D, not topLevelUboe")
            return hit("AicpuBroadcastParallelNHRNHR", "3 levels, otherwise")
        if t.level1_nhr or x.l0_1:
            return hit("AicpuBroadcastSoleNHR", "multi-level, Level1Nhr or L0 == 1")
        if x.shape == MESH_1D:
            return hit("AicpuBroadcastParallelMeshNHR", "multi-level MESH_1D")
        if x.shape == CLOS:
            return hit("AicpuBroadcastSoleNHRMultiLink", "multi-level CLOS")
        return miss("multi-level MESH_1D_CLOS")
    if x.shape == MESH_1D:
        return hit("AicpuBroadcastSoleMeshTwoShot", "MESH_1D")
    if x.shape == UBX:
        if x.allconn:
            return (hit("AicpuBroadcastSoleMeshTwoShot", "UBX allconn, PCIe or D < UBX_BC_CONCURRENT_DATA_SIZE")
                    if x.pcie or x.D < th.UBX_BC_CONCURRENT_DATA_SIZE else
                    hit("AicpuBroadcastConcurMeshNHR", "UBX allconn, D >= UBX_BC_CONCURRENT_DATA_SIZE"))
        if x.pcie:
            return hit("AicpuBroadcastParallelMeshNHR", "UBX PCIe, not allconn")
        return (hit("AicpuBroadcastParallelMeshNHRMultiJetty", "UBX, D >= LARGE_COUNT_1024KB") if x.large else
                hit("AicpuBroadcastSoleNHR", "UBX, D < LARGE_COUNT_1024KB"))
    return hit("AicpuBroadcastSoleNHRMultiLink", "CLOS")


def dpu(x: Ctx) -> Answer:
    """``SelectDPUAlgo`` (multi-level only)."""
    if not x.multi:
        return miss("single level")
    if x.topo.device_num_per_module == 1 or x.shape == MESH_1D:
        return hit("DpuBroadcastSequenceMeshNHR", "deviceNumPerModule == 1 or MESH_1D")
    if x.shape == UBX and not x.pcie and not (x.allconn or x.l0_1):
        return hit("DpuBroadcastOmniPipeMeshNHR", "MESH_1D_CLOS, no PCIe, not allconn")
    return hit("DpuBroadcastSequenceMeshNHR", "other level 0")


RULES = {"CCU_MS": ccu_ms, "CCU_SCHED": ccu_sched, "AIV": aiv, "AICPU": aicpu, "DPU": dpu}
