"""Reduce rule selector: HCCL's branches per engine, in HCCL's order (D = whole buffer, p = D/R).

HCCL source: src/ops/reduce/selector/reduce_auto_selector.cc (version 67297759252;
hccl-selection.md §5.5).
"""

from __future__ import annotations

from .. import thresholds as th
from ...algo.dtypes import HcclDataType
from .base import CLOS, MESH_1D, UBX, Ctx, Answer, aiv_gate, by_size, hit, miss, miss_if, sched_gate

OP = "Reduce"


def ccu_ms(x: Ctx) -> Answer:
    """``SelectCcuMsAlgo`` (no common gate)."""
    gate = miss_if(topoLevelNums__1=x.multi, int8=x.int8, PROD=x.prod, _64_bit=x.b64)
    if gate:
        return gate
    if x.shape == MESH_1D:
        if x.topo.is_2die_full_mesh:
            return miss("MESH_1D, is2DieFullMesh")
        if x.D >= th.REDUCE_AICPU_1D_MAX_DATA_SIZE:
            return miss("MESH_1D, D >= REDUCE_AICPU_1D_MAX_DATA_SIZE (AICPU instead)")
        return hit("CcuMSReduceSoleMesh", "MESH_1D, D < REDUCE_AICPU_1D_MAX_DATA_SIZE")
    if x.shape == UBX:
        if x.allconn:
            return (miss("UBX allconn, D >= REDUCE_AICPU_1D_MAX_DATA_SIZE") if x.D >= th.REDUCE_AICPU_1D_MAX_DATA_SIZE
                    else hit("CcuMSReduceSoleMesh", "UBX allconn, D < REDUCE_AICPU_1D_MAX_DATA_SIZE"))
        return (miss("UBX not allconn, D < OMNI_UBX_MS_DATA_SIZE") if x.D < th.OMNI_UBX_MS_DATA_SIZE else
                hit("CcuMSReducePipeLineMeshNHR", "UBX not allconn, D >= OMNI_UBX_MS_DATA_SIZE"))
    return miss("level0 CLOS")


def ccu_sched(x: Ctx) -> Answer:
    """``SelectCcuScheduleAlgo`` (no in-place test)."""
    gate = sched_gate(x)
    if gate:
        return gate
    if x.prod or x.b64:
        return miss("PROD or 64-bit")
    D, R, p, n = x.D, x.R, x.D / x.R, th.REDUCE_CCU_MAX_RANK_SIZE
    if x.multi:
        if x.shape == MESH_1D:
            if R < n and D > th.CCU_SCHEDULE_2LEVEL_LESS_64P_MAX_SIZE:
                return miss("R < 64, D > CCU_SCHEDULE_2LEVEL_LESS_64P_MAX_SIZE")
            if R >= n and p > th.CCU_SCHEDULE_2LEVEL_MAX_PER_RANK_DATA_SIZE:
                return miss("R >= 64, D/R > CCU_SCHEDULE_2LEVEL_MAX_PER_RANK_DATA_SIZE")
            if x.topo.level1_nhr:
                return hit("CcuSchedReduceSoleNHR", "multi-level MESH_1D, Level1Nhr")
            if x.l0_1:
                return hit("CcuSchedReduceSoleNHR", "multi-level MESH_1D, L0 == 1")
            if x.topo.is_2die_full_mesh:
                return miss("multi-level MESH_1D, is2DieFullMesh")
            if x.int8:
                return miss("multi-level MESH_1D, int8")
            return (hit("CcuSchedReduceSoleNHR", "D/R <= REDUCE_NHR_CCU_MAX_DATA_SIZE")
                    if p <= th.REDUCE_NHR_CCU_MAX_DATA_SIZE else
                    hit("CcuSchedReduceParallelMeshNHR", "D/R > REDUCE_NHR_CCU_MAX_DATA_SIZE"))
        if x.shape == CLOS:
            return miss("multi-level CLOS, PCIe") if x.pcie else hit("CcuSchedReduceSoleNHR", "multi-level CLOS")
        return miss("multi-level MESH_1D_CLOS")
    if x.shape == MESH_1D:
        if x.topo.is_2die_full_mesh:
            return miss("MESH_1D, is2DieFullMesh")
        if R < 8 and D >= th.REDUCE_AICPU_1D_MAX_DATA_SIZE:
            return miss("MESH_1D, R < 8, D >= REDUCE_AICPU_1D_MAX_DATA_SIZE")
        if D > th.REDUCE_CCU_TWOSHOT_1D_MAX_DATA_SIZE:
            return miss("MESH_1D, D > REDUCE_CCU_TWOSHOT_1D_MAX_DATA_SIZE")
        if x.int8:
            return miss("MESH_1D, int8")
        return hit("CcuSchedReduceSoleMeshTwoShot", "MESH_1D")
    if x.shape == UBX:
        if x.allconn:
            return (miss("UBX allconn, D >= REDUCE_AICPU_1D_MAX_DATA_SIZE") if D >= th.REDUCE_AICPU_1D_MAX_DATA_SIZE
                    else hit("CcuSchedReduceSoleMesh", "UBX allconn, D < REDUCE_AICPU_1D_MAX_DATA_SIZE"))
        if x.pcie:
            return miss("UBX, PCIe, not allconn")
        if x.int8:
            return miss("UBX, int8")
        return by_size("UBX", D, "OMNI2D_UBX_REDUCE_DATA_SIZE", "CcuSchedReduceParallelMeshNHRMultiJetty",
                       "CcuSchedReducePipeLineMeshNHR")
    return miss("CLOS, PCIe") if x.pcie else hit("CcuSchedReduceSoleNHR", "CLOS")


def aiv(x: Ctx) -> Answer:
    """``SelectAivAlgo`` (size D; no strict test)."""
    gate = aiv_gate(x)
    if gate:
        return gate
    if x.prod or x.dtype_is(HcclDataType.UINT64, HcclDataType.FP64):
        return miss("PROD, UINT64 or FP64")
    return hit("AivReduceSoleMesh", "AIV gate passed")


def _ladder(x: Ctx, where: str) -> Answer:
    return (hit("AicpuReduceSoleMeshTwoShot", f"{where}: D >= REDUCE_AICPU_1D_MAX_DATA_SIZE")
            if x.D >= th.REDUCE_AICPU_1D_MAX_DATA_SIZE else
            hit("AicpuReduceSoleMesh", f"{where}: D < REDUCE_AICPU_1D_MAX_DATA_SIZE"))


def aicpu(x: Ctx) -> Answer:
    """``SelectAicpuAlgo``."""
    t = x.topo
    if x.multi:
        if x.special:
            return hit("AicpuReduceSoleNHRAicpuReduce", "multi-level, special")
        if x.l0_1 or x.shape == CLOS:
            return hit("AicpuReduceSoleNHR", "multi-level, L0 == 1 or CLOS")
        if x.levels == 3 and t.top_level_uboe:
            layer1 = t.net_layer_details.local_net_ins_size_of_layer
            if not x.sym or (len(layer1) > 1 and layer1[1] == 1):
                return hit("AicpuReduceSoleNHRAicpuReduce", "3 levels, topLevelUboe, not sym or layer-1 size 1")
            return hit("AicpuReduceParallelNHRNHR", "3 levels, topLevelUboe")
        if x.levels == 3 and x.shape == MESH_1D:
            return (hit("AicpuReduceSequenceMeshConcurNHRNHR", "3 levels, MESH_1D, sym") if x.sym else
                    hit("AicpuReduceSoleNHR", "3 levels, MESH_1D, not sym"))
        if t.level1_nhr:
            return hit("AicpuReduceSoleNHR", "multi-level, Level1Nhr")
        if t.device_num_per_module > 1 and x.shape == MESH_1D:
            return hit("AicpuReduceParallelMeshNHR", "multi-level MESH_1D, deviceNumPerModule > 1")
        return miss("multi-level, otherwise")
    if x.shape == MESH_1D:
        return _ladder(x, "MESH_1D")
    if x.shape == UBX:
        if x.pcie:
            if x.allconn:
                return _ladder(x, "UBX PCIe allconn")
            return (hit("AicpuReduceSoleNHRAicpuReduce", "UBX PCIe, special") if x.special else
                    hit("AicpuReduceParallelMeshNHR", "UBX PCIe, not allconn"))
        if x.allconn:
            if x.special:
                return hit("AicpuReduceSoleMesh", "UBX allconn, special")
            return (hit("AicpuReduceConcurMeshNHR", "UBX allconn, D >= UBX_REDUCE_CONCURRENT_DATA_SIZE")
                    if x.D >= th.UBX_REDUCE_CONCURRENT_DATA_SIZE else
                    hit("AicpuReduceSoleMesh", "UBX allconn, D < UBX_REDUCE_CONCURRENT_DATA_SIZE"))
        if x.special:
            return hit("AicpuReduceSoleNHRAicpuReduce", "UBX not allconn, special")
        return (hit("AicpuReduceParallelMeshNHRMultiJetty", "UBX not allconn, D >= LARGE_COUNT_1024KB") if x.large
                else hit("AicpuReduceSoleNHR", "UBX not allconn, D < LARGE_COUNT_1024KB"))
    return (hit("AicpuReduceSoleNHRAicpuReduce", "CLOS, special") if x.special else
            hit("AicpuReduceSoleNHR", "CLOS"))


def dpu(x: Ctx) -> Answer:
    """``SelectDPUAlgo`` (multi-level only)."""
    if not x.multi:
        return miss("single level")
    if x.topo.device_num_per_module == 1 or x.shape == MESH_1D:
        return hit("DpuReduceSequenceMeshNHR", "deviceNumPerModule == 1 or MESH_1D")
    if x.shape == UBX:
        if x.pcie:
            return hit("DpuReduceSequenceMeshNHR", "MESH_1D_CLOS, PCIe")
        return miss("MESH_1D_CLOS, allconn") if x.allconn else hit("DpuReducePipeLineMeshNHRNHR", "MESH_1D_CLOS")
    return miss("CLOS")


RULES = {"CCU_MS": ccu_ms, "CCU_SCHED": ccu_sched, "AIV": aiv, "AICPU": aicpu, "DPU": dpu}
