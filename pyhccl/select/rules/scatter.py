"""Scatter rule selector: HCCL's branches per engine, in HCCL's order (D = per-rank block, T = D x R).

HCCL source: src/ops/scatter/selector/scatter_auto_selector.cc (version 67107602722;
hccl-selection.md §5.7).
"""

from __future__ import annotations

from .. import thresholds as th
from .base import CLOS, MESH_1D, UBX, Ctx, Answer, aiv_gate, by_size, hit, miss, sched_gate

OP = "Scatter"


def ccu_ms(x: Ctx) -> Answer:
    """Scatter has no CCU_MS algorithm."""
    return miss("no CCU_MS algorithm for Scatter")


def ccu_sched(x: Ctx) -> Answer:
    """``SelectCcuScheduleAlgo``."""
    gate = sched_gate(x)
    if gate:
        return gate
    T = x.D * x.R
    if x.multi:
        if x.shape == MESH_1D:
            if x.D > th.CCU_SCHEDULE_2LEVEL_MAX_PER_RANK_DATA_SIZE or x.R > th.CCU_SCHEDULE_SCATTER_MAX_RANK_SIZE:
                return miss("multi-level MESH_1D, D > 1 MiB or R > 64")
            if x.topo.level1_nhr or x.l0_1:
                return hit("CcuSchedScatterSoleNHR", "multi-level MESH_1D, Level1Nhr or L0 == 1")
            if x.topo.is_2die_full_mesh:
                return miss("multi-level MESH_1D, is2DieFullMesh")
            return hit("CcuSchedScatterParallelMeshNHR", "multi-level MESH_1D")
        if x.shape == CLOS:
            return miss("multi-level CLOS, PCIe") if x.pcie else hit("CcuSchedScatterSoleNHR", "multi-level CLOS")
        return miss("multi-level MESH_1D_CLOS")
    if x.shape == MESH_1D:
        if x.inplace or x.topo.is_2die_full_mesh:
            return miss("MESH_1D, in-place or is2DieFullMesh")
        return hit("CcuSchedScatterSoleMesh", "MESH_1D")
    if x.shape == UBX:
        if x.allconn:
            return (hit("CcuSchedScatterSoleMesh", "UBX allconn, PCIe or D x R < UBX_SC_CONCURRENT_DATA_SIZE")
                    if x.pcie or T < th.UBX_SC_CONCURRENT_DATA_SIZE else
                    hit("CcuSchedScatterConcurMeshNHR", "UBX allconn, D x R >= UBX_SC_CONCURRENT_DATA_SIZE"))
        if x.pcie:
            return miss("UBX, PCIe, not allconn")
        return by_size("UBX (D x R)", T, "OMNI2D_UBX_SC_DATA_SIZE", "CcuSchedScatterParallelMeshNHRMultiJetty",
                       "CcuSchedScatterPipeLineMeshNHR")
    return miss("CLOS, PCIe") if x.pcie else hit("CcuSchedScatterSoleNHR", "CLOS")


def aiv(x: Ctx) -> Answer:
    """``SelectAivAlgo`` (size D x R)."""
    return aiv_gate(x) or hit("AivScatterSoleMesh", "AIV gate passed")


def aicpu(x: Ctx) -> Answer:
    """``SelectAicpuAlgo``."""
    t, T = x.topo, x.D * x.R
    if x.multi:
        if x.levels == 3:
            if not x.sym or x.l0_1:
                return hit("AicpuScatterSoleNHR", "3 levels, not sym or L0 == 1")
            if x.shape == MESH_1D and not t.top_level_uboe:
                return hit("AicpuScatterSequenceMeshConcurNHRNHR", "3 levels, MESH_1D, not topLevelUboe")
            return hit("AicpuScatterSoleNHR", "3 levels, otherwise")
        if t.level1_nhr or x.l0_1:
            return hit("AicpuScatterSoleNHR", "multi-level, Level1Nhr or L0 == 1")
        if x.shape == MESH_1D:
            return hit("AicpuScatterParallelMeshNHR", "multi-level MESH_1D")
        if x.shape == CLOS:
            return hit("AicpuScatterSoleNHR", "multi-level CLOS")
        return miss("multi-level MESH_1D_CLOS")
    if x.shape == MESH_1D:
        return hit("AicpuScatterSoleMesh", "MESH_1D")
    if x.shape == UBX:
        if x.allconn:
            return (hit("AicpuScatterSoleMesh", "UBX allconn, PCIe or D x R < UBX_SC_CONCURRENT_DATA_SIZE")
                    if x.pcie or T < th.UBX_SC_CONCURRENT_DATA_SIZE else
                    hit("AicpuScatterConcurMeshNHR", "UBX allconn, D x R >= UBX_SC_CONCURRENT_DATA_SIZE"))
        return (hit("AicpuScatterParallelMeshNHR", "UBX PCIe, not allconn") if x.pcie else
                hit("AicpuScatterParallelMeshNHRMultiJetty", "UBX, not allconn"))
    return hit("AicpuScatterSoleNHR", "CLOS, PCIe") if x.pcie else hit("AicpuScatterSoleMesh", "CLOS")


def dpu(x: Ctx) -> Answer:
    """``SelectDPUAlgo`` (multi-level only)."""
    if not x.multi:
        return miss("single level")
    if x.shape == UBX and not x.pcie and not (x.allconn or x.l0_1):
        return hit("DpuScatterOmniPipeMeshNHR", "MESH_1D_CLOS, no PCIe, not allconn")
    return hit("DpuScatterSequenceMeshNHR", "otherwise")


RULES = {"CCU_MS": ccu_ms, "CCU_SCHED": ccu_sched, "AIV": aiv, "AICPU": aicpu, "DPU": dpu}
