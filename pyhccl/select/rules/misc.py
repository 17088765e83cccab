"""AllGatherV, ReduceScatterV, Barrier, Send, Recv and BatchSendRecv rule selectors.

HCCL source: src/ops/{all_gather_v,reduce_scatter_v,barrier,send,recv,batch_send_recv}/selector/
*_auto_selector.cc (hccl-selection.md §5.8). For ReduceScatterV, D is the total
(sum of the first R entries of varData x size).
"""

from __future__ import annotations

from .. import thresholds as th
from ...algo.dtypes import HcclDataType
from ...topo.info import EndpointLocType
from .base import MESH_1D, UBX, Ctx, Answer, hit, miss, sched_gate

__all__ = ["ALLGATHERV", "REDUCESCATTERV", "BARRIER", "SEND", "RECV", "BATCHSENDRECV"]


def _no(engine: str):
    def rule(x: Ctx) -> Answer:
        return miss(f"no {engine} algorithm for {x.call.op}")
    rule.__doc__ = f"{engine}: NOT_MATCH."
    return rule


def agv_sched(x: Ctx) -> Answer:
    """AllGatherV CCU_SCHED."""
    gate = sched_gate(x)
    if gate:
        return gate
    if x.inplace:
        return miss("in-place")
    return (hit("CcuSchedAllGatherVSoleMesh", "1 level, MESH_1D") if x.levels == 1 and x.shape == MESH_1D
            else miss("not (1 level and MESH_1D)"))


def agv_aicpu(x: Ctx) -> Answer:
    """AllGatherV AICPU."""
    return hit("AicpuAllGatherVSoleMesh", "1 <= levels <= 3") if 1 <= x.levels <= 3 else miss("levels out of 1..3")


def rsv_sched(x: Ctx) -> Answer:
    """ReduceScatterV CCU_SCHED."""
    gate = sched_gate(x)
    if gate:
        return gate
    if x.inplace or x.prod or x.b64 or x.int8 or x.multi:
        return miss("in-place, PROD, 64-bit, int8 or topoLevelNums > 1")
    if x.shape == MESH_1D:
        if x.topo.is_2die_full_mesh:
            return miss("MESH_1D, is2DieFullMesh")
        if x.D < th.RSV_CCU_8P_MIN_DATA_SIZE:
            return hit("CcuSchedReduceScatterVSoleMesh", "MESH_1D, total < RSV_CCU_8P_MIN_DATA_SIZE")
        return miss("MESH_1D, total >= RSV_CCU_8P_MIN_DATA_SIZE")
    if x.shape == UBX and x.allconn and x.D < th.RSV_CCU_8P_MIN_DATA_SIZE:
        return hit("CcuSchedReduceScatterVSoleMesh", "UBX allconn, total < RSV_CCU_8P_MIN_DATA_SIZE")
    return miss("otherwise")


def rsv_aicpu(x: Ctx) -> Answer:
    """ReduceScatterV AICPU."""
    if x.dtype_is(HcclDataType.UINT64, HcclDataType.FP64):
        return miss("UINT64 or FP64")
    return hit("AicpuReduceScatterVSoleMesh", "1 <= levels <= 3") if 1 <= x.levels <= 3 else miss("levels out of 1..3")


def _p2p(op: str):
    def aicpu(x: Ctx) -> Answer:
        return hit(f"Aicpu{op}SoleMesh", "always")

    def aiv(x: Ctx) -> Answer:
        if x.topo.level2_ub_rtp or x.levels >= 3:
            return miss("level2UbRtp or topoLevelNums >= 3")
        return hit(f"Aiv{op}SoleMesh", "not level2UbRtp, levels < 3")

    def dpu(x: Ctx) -> Answer:
        # HCCL scans the links of the highest net layer down; pyhccl reads the physical levels'
        # endpoint location instead (a host-located top level stands for a host->device link).
        for level in reversed(x.topo.physical_levels):
            if level.has_topo_inst:
                if level.loc_type == EndpointLocType.HOST:
                    return hit(f"Dpu{op}SoleHost", "highest linked level has host endpoints")
                break
        return hit(f"Dpu{op}SoleMesh", "highest linked level on devices (or no link)")
    return {"CCU_MS": _no("CCU_MS"), "CCU_SCHED": _no("CCU_SCHED"), "AIV": aiv, "AICPU": aicpu, "DPU": dpu}


def _fixed(aicpu_name: str, dpu_name: str, why: str):
    return {"CCU_MS": lambda x: miss(why), "CCU_SCHED": lambda x: miss(why), "AIV": lambda x: miss(why),
            "AICPU": lambda x: hit(aicpu_name, "always"), "DPU": lambda x: hit(dpu_name, "always")}


ALLGATHERV = {"CCU_MS": _no("CCU_MS"), "CCU_SCHED": agv_sched, "AIV": _no("AIV"), "AICPU": agv_aicpu,
              "DPU": _no("DPU")}
REDUCESCATTERV = {"CCU_MS": _no("CCU_MS"), "CCU_SCHED": rsv_sched, "AIV": _no("AIV"), "AICPU": rsv_aicpu,
                  "DPU": _no("DPU")}
BARRIER = _fixed("AicpuBarrierSoleNHR", "DpuBarrierSequenceMeshNHR",
                 "CCU/AIV barriers fall back to HcclBarrier before selection")
BATCHSENDRECV = _fixed("AicpuBatchSendRecvSoleMesh", "DpuBatchSendRecvSoleMesh", "no such algorithm")
SEND, RECV = _p2p("Send"), _p2p("Recv")
