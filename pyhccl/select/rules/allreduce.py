"""AllReduce rule selector: HCCL's branches per engine, in HCCL's order.

HCCL source: src/ops/all_reduce/selector/all_reduce_auto_selector.cc (version 67252505230;
hccl-selection.md §5.1).
"""

from __future__ import annotations

from .. import thresholds as th
from ...algo.dtypes import HcclDataType
from .base import (
    CLOS, MESH_1D, TWO_DIE_NOT_REGULAR, TWO_DIE_REGULAR, UBX, Ctx, Answer, aicpu_ubx_tail, aiv_gate,
    dpu_sequence_or_pipeline, hit, miss, miss_if, sched_gate, sched_ubx)

OP = "AllReduce"


def ccu_ms(x: Ctx) -> Answer:
    """``SelectCcuMsAlgo`` -> ``SelectMeshAlgo`` / ``SelectMeshUBXAlgo``."""
    gate = miss_if(strict=x.strict, topoLevelNums__1=x.multi, int8=x.int8, PROD=x.prod, _64_bit=x.b64)
    if gate:
        return gate
    if x.two_level and x.R == 2 and x.D >= th.AR_2P_DETOUR_DATA_SIZE:
        return miss("twoLevel, R == 2, D >= AR_2P_DETOUR_DATA_SIZE (AICPU detour instead)")
    if x.shape == MESH_1D:
        if x.inplace:
            return miss("MESH_1D, in-place")
        if x.mesh_type == TWO_DIE_REGULAR:
            return (hit("CcuMSAllReduceSoleMesh2Die", "MESH_1D, TWO_DIE_REGULAR, small") if x.small else
                    hit("CcuMSAllReduceSequenceMesh2Die", "MESH_1D, TWO_DIE_REGULAR, not small"))
        if x.mesh_type == TWO_DIE_NOT_REGULAR:
            return miss("MESH_1D, TWO_DIE_NOT_REGULAR")
        if x.small:
            return hit("CcuMSAllReduceSoleMeshOneShot", "MESH_1D, D < SMALL_COUNT_512KB")
        if x.is960 and x.D > th.SMALL_COUNT_16M and x.two_level:
            return hit("CcuMSAllReduceSoleMeshConcur", "MESH_1D, 960, D > SMALL_COUNT_16M, twoLevel")
        return hit("CcuMSAllReduceSoleMesh", "MESH_1D, D >= SMALL_COUNT_512KB")
    if x.shape == UBX:
        if x.inplace:
            return miss("MESH_1D_CLOS, in-place")
        if x.equal is None or x.multiple is None:
            return miss("MESH_1D_CLOS, mesh/CLOS sizes not computable")
        if x.equal and x.R <= th.MAX_RANK_NUM_FOR_CONCURRENT_ALGO:
            return (hit("CcuMSAllReduceSoleMeshOneShot", "UBX, equal, R <= 4, small") if x.small else
                    hit("CcuMSAllReduceConcurMeshNHRMultiLink", "UBX, equal, R <= 4, not small"))
        if x.multiple and not x.small:
            if x.D < th.OMNI_UBX_AR_MS_DATA_SIZE:
                return miss("UBX, multiple, D < OMNI_UBX_AR_MS_DATA_SIZE")
            return hit("CcuMSAllReducePipeLineMeshNHR", "UBX, multiple, D >= OMNI_UBX_AR_MS_DATA_SIZE")
        if x.R <= th.MAX_RANK_NUM_FOR_REDUCE_MS_ALGO:
            return hit("CcuMSAllReduceSoleMesh", "UBX, R <= MAX_RANK_NUM_FOR_REDUCE_MS_ALGO")
        return miss("UBX, R > MAX_RANK_NUM_FOR_REDUCE_MS_ALGO")
    return miss("level0 CLOS")


def _sched_mesh1d(x: Ctx, where: str) -> Answer:
    if x.int8:
        return miss(f"{where}: int8")
    if x.D * th.DEFAULT_RANK_SIZE / x.R / x.R > th.AR_M2M_1D_MAX_DATA_SIZE:
        return miss(f"{where}: D x 8/R/R > AR_M2M_1D_MAX_DATA_SIZE")
    if x.mesh_type == TWO_DIE_REGULAR:
        return (hit("CcuSchedAllReduceSoleMesh2Die", f"{where}: TWO_DIE_REGULAR, small") if x.small else
                hit("CcuSchedAllReduceSequenceMesh2Die", f"{where}: TWO_DIE_REGULAR, not small"))
    if x.mesh_type == TWO_DIE_NOT_REGULAR:
        return miss(f"{where}: TWO_DIE_NOT_REGULAR")
    return hit("CcuSchedAllReduceSoleMesh", f"{where}: D x 8/R/R <= AR_M2M_1D_MAX_DATA_SIZE")


def ccu_sched(x: Ctx) -> Answer:
    """``SelectCcuScheduleAlgo``."""
    gate = sched_gate(x)
    if gate:
        return gate
    gate = miss_if(strict=x.strict, PROD=x.prod, _64_bit=x.b64)
    if gate:
        return gate
    D, R, n = x.D, x.R, th.AR_CCU_MAX_RANK_SIZE
    if x.multi:
        if x.shape == MESH_1D:
            if x.inplace:
                return miss("multi-level MESH_1D, in-place")
            if x.topo.level1_nhr:
                return hit("CcuSchedAllReduceSoleNHR", "multi-level MESH_1D, Level1Nhr")
            if x.l0_1:
                return hit("CcuSchedAllReduceSoleNHR", "multi-level MESH_1D, L0 == 1")
            if x.topo.is_2die_full_mesh:
                return miss("multi-level MESH_1D, is2DieFullMesh")
            if D <= th.AR_MORE_64P_SEQ_MAX_DATA_SIZE and R > n:
                return hit("CcuSchedAllReduceSequenceMeshMesh", "D <= AR_MORE_64P_SEQ_MAX_DATA_SIZE, R > 64")
            if D <= th.RS_MAX_DATA_SIZE and R >= n and not x.int8:
                return hit("CcuSchedAllReduceSequenceMeshMesh", "D <= RS_MAX_DATA_SIZE, R >= 64, not int8")
            if D <= th.AR_FLATTEN_MAX_DATA_SIZE and R <= n and not x.inplace and not x.int8:
                return hit("CcuSchedAllReduceSoleMesh", "D <= AR_FLATTEN_MAX_DATA_SIZE, R <= 64, not int8")
            if D <= th.AR_CCU_SEQ_MAX_DATA_SIZE and R < n and not x.int8:
                return hit("CcuSchedAllReduceSequenceMeshMesh", "D <= AR_CCU_SEQ_MAX_DATA_SIZE, R < 64, not int8")
            if D <= th.AR_CCU_SEQ_MAX_DATA_SIZE:
                return (miss("D <= AR_CCU_SEQ_MAX_DATA_SIZE, int8") if x.int8 else
                        hit("CcuSchedAllReduceParallelMeshNHR", "D <= AR_CCU_SEQ_MAX_DATA_SIZE"))
            return miss("multi-level MESH_1D, D > AR_CCU_SEQ_MAX_DATA_SIZE")
        if x.shape == CLOS and not x.inplace:
            return (hit("CcuSchedAllReduceSoleNHR", "multi-level CLOS, D < AR_CCU_CLOS_1D_SMALL_DATA_SIZE")
                    if D < th.AR_CCU_CLOS_1D_SMALL_DATA_SIZE else
                    miss("multi-level CLOS, D >= AR_CCU_CLOS_1D_SMALL_DATA_SIZE"))
        return miss(f"multi-level {x.shape.name}{', in-place' if x.inplace else ''}")
    if x.inplace:
        return miss("single level, in-place")
    if x.shape == MESH_1D:
        return _sched_mesh1d(x, "MESH_1D")
    if x.shape == UBX:
        return sched_ubx(x, _sched_mesh1d, "ParallelMeshNHRMultiJetty", "OMNI_UBX_AR_SCHED_DATA_SIZE")
    if x.pcie:
        return miss("CLOS, PCIe")
    return (hit("CcuSchedAllReduceSoleNHR", "CLOS, D < AR_CCU_CLOS_1D_SMALL_DATA_SIZE")
            if D < th.AR_CCU_CLOS_1D_SMALL_DATA_SIZE else miss("CLOS, D >= AR_CCU_CLOS_1D_SMALL_DATA_SIZE"))


def aiv(x: Ctx) -> Answer:
    """``SelectAivAlgo``."""
    gate = aiv_gate(x)
    if gate:
        return gate
    if x.strict or x.prod or x.dtype_is(HcclDataType.UINT64, HcclDataType.FP64):
        return miss("strict, PROD, UINT64 or FP64")
    if x.shape != MESH_1D:
        return hit("AivAllReduceSoleMeshTwoShot", "level0 not MESH_1D")
    if x.R <= th.AR_AIV_BOARD_SIZE:
        return (hit("AivAllReduceSoleMeshOneShot", "R <= 8, D < AR_AIV_SMALL_DATA_SIZE_IN_BOARD")
                if x.D < th.AR_AIV_SMALL_DATA_SIZE_IN_BOARD else
                hit("AivAllReduceSoleMeshTwoShot", "R <= 8, D >= AR_AIV_SMALL_DATA_SIZE_IN_BOARD"))
    return (hit("AivAllReduceSoleMeshOneShot", "R > 8, small") if x.small else
            hit("AivAllReduceSoleMeshTwoShot", "R > 8, not small"))


def _mesh_ladder(x: Ctx, where: str, detour: bool) -> Answer:
    ratio = th.DEFAULT_RANK_SIZE / x.R / x.R
    if x.special:
        return (hit("AicpuAllReduceSoleMeshOneShot", f"{where}: special, D <= AR_AICPU_1D_64DATATYPE_DATA_SIZE")
                if x.D <= th.AR_AICPU_1D_64DATATYPE_DATA_SIZE else
                hit("AicpuAllReduceSoleMeshTwoShot", f"{where}: special, D > AR_AICPU_1D_64DATATYPE_DATA_SIZE"))
    if detour and x.two_level and x.R == 2 and x.D >= th.AR_2P_DETOUR_DATA_SIZE:
        return hit("AicpuAllReduceSoleMeshConcur", f"{where}: twoLevel, R == 2, D >= AR_2P_DETOUR_DATA_SIZE")
    if x.D <= th.AR_AICPU_1D_SMALL_DATA_SIZE:
        return hit("AicpuAllReduceSoleMeshOneShot", f"{where}: D <= AR_AICPU_1D_SMALL_DATA_SIZE")
    if x.D * ratio > th.AR_AICPU_1D_MAX_DATA_SIZE:
        if detour and x.two_level and x.D > th.AR_AICPU_SEQUENCE_DATA_SIZE:
            return hit("AicpuAllReduceSoleMeshConcur", f"{where}: D x 8/R/R > 32 MiB, twoLevel, D > 4 GiB")
        return hit("AicpuAllReduceSoleMeshChunkTwoShot", f"{where}: D x 8/R/R > AR_AICPU_1D_MAX_DATA_SIZE")
    return hit("AicpuAllReduceSoleMeshTwoShot", f"{where}: D x 8/R/R <= AR_AICPU_1D_MAX_DATA_SIZE")


def aicpu(x: Ctx) -> Answer:
    """``SelectAicpuAlgo``."""
    if x.strict:
        return (hit("AicpuAllReduceStrictOrderedGroupMesh", "strict, R > MAX_RANK_NUM_FOR_ORDER_PRESERVED")
                if x.R > th.MAX_RANK_NUM_FOR_ORDER_PRESERVED else
                hit("AicpuAllReduceStrictOrderedMesh", "strict, R <= MAX_RANK_NUM_FOR_ORDER_PRESERVED"))
    t = x.topo
    if x.multi:
        if x.special:
            return hit("AicpuAllReduceSoleNHRAicpuReduce", "multi-level, special dtype/op")
        if x.sym and x.dev8 and t.top_level_uboe:
            return (hit("AicpuAllReducePipeLineMeshNHR", "multi-level, sym, dev8, topLevelUboe, 2 levels")
                    if x.levels == 2 else
                    hit("AicpuAllReducePipeLineMeshNHRNHR", "multi-level, sym, dev8, topLevelUboe, 3 levels"))
        if x.sym and x.levels == 3 and t.top_level_uboe:
            return hit("AicpuAllReduceParallelMeshNHR", "sym, 3 levels, topLevelUboe")
        if t.level1_nhr:
            return hit("AicpuAllReduceSoleNHR", "multi-level, Level1Nhr")
        if x.l0_1:
            return hit("AicpuAllReduceSoleNHR", "multi-level, L0 == 1")
        if x.shape == MESH_1D:
            if x.levels == 3:
                return (hit("AicpuAllReduceSequenceMeshConcurNHRNHR", "MESH_1D, 3 levels, sym") if x.sym else
                        hit("AicpuAllReduceSoleNHR", "MESH_1D, 3 levels, not sym"))
            if x.levels == 2 and x.D > th.AR_AICPU_1D_CROSS_SMALL_DATA_SIZE:
                return (hit("AicpuAllReduceSequenceMeshConcurNHR", "MESH_1D, 2 levels, D > AR_AICPU_SEQUENCE_DATA_SIZE")
                        if x.D > th.AR_AICPU_SEQUENCE_DATA_SIZE else
                        hit("AicpuAllReduceParallelMeshNHR", "MESH_1D, 2 levels, D > AR_AICPU_1D_CROSS_SMALL_DATA_SIZE"))
            return hit("AicpuAllReduceSoleNHR", "MESH_1D, D <= AR_AICPU_1D_CROSS_SMALL_DATA_SIZE")
        if x.shape == CLOS:
            return hit("AicpuAllReduceSoleNHRMultiLink", "multi-level CLOS")
        return miss("multi-level MESH_1D_CLOS")
    if x.shape == MESH_1D:
        return _mesh_ladder(x, "MESH_1D", detour=True)
    if x.shape == CLOS:
        return (hit("AicpuAllReduceSoleNHRAicpuReduce", "CLOS, special") if x.special else
                hit("AicpuAllReduceSoleNHRMultiLink", "CLOS"))
    if x.pcie:
        if x.allconn:
            return _mesh_ladder(x, "UBX PCIe allconn", detour=False)
        if x.special:
            return hit("AicpuAllReduceSequenceMeshNHRAicpuReduce", "UBX PCIe not allconn, special")
        return (hit("AicpuAllReduceParallelMeshNHR", "UBX PCIe not allconn, D < OMNI_PCIE_AR_DATA_SIZE")
                if x.D < th.OMNI_PCIE_AR_DATA_SIZE else
                hit("AicpuAllReducePipeLineMeshNHR", "UBX PCIe not allconn, D >= OMNI_PCIE_AR_DATA_SIZE"))
    if x.equal and x.R <= th.MAX_RANK_NUM_FOR_CONCURRENT_ALGO:
        if x.D <= th.AR_AICPU_1D_SMALL_DATA_SIZE:
            return hit("AicpuAllReduceSoleMeshOneShot", "UBX, equal, R <= 4, D <= 8 MiB")
        return (hit("AicpuAllReduceSoleMeshTwoShot", "UBX, equal, R <= 4, special, D > 8 MiB") if x.special else
                hit("AicpuAllReduceConcurMeshTwoShotNHR", "UBX, equal, R <= 4, D > 8 MiB"))
    return aicpu_ubx_tail(x)


def dpu(x: Ctx) -> Answer:
    """``SelectDPUAlgo``."""
    return dpu_sequence_or_pipeline(x, "DpuAllReduceSequenceMeshNHR", "DpuAllReducePipeLineMeshNHRNHR",
                                    x.topo.device_num_per_module == 1, "deviceNumPerModule == 1")


RULES = {"CCU_MS": ccu_ms, "CCU_SCHED": ccu_sched, "AIV": aiv, "AICPU": aicpu, "DPU": dpu}
