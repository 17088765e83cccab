"""Cost-model terms: bandwidths, CalcMeshParam / CalcNHRParams / copy / reduce / latency / launch, UB tables.

HCCL source: src/ops/op_common/selector/cost_model.cc (``InitBandwidth``, ``CalcMeshParam``,
``CalcNHRParams``, ``CalcLocalCopyParams``, ``CalcLocalReduceParams``, ``CalcLatencyParams``,
``CalcLaunchParams``, ``CalcTransTaskNum``, ``CalcSyncTaskNum``, ``QueryUbUtil``), generation N3;
hccl-selection.md §6.2-§6.4.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from ...algo.names import CostEngine
from ...topo.info import CommTopo

__all__ = ["Coeff", "LOCAL_COPY_BW", "LOCAL_REDUCE_BW", "CROSS_CHIP_BW", "CCU_LOCAL_COPY_BW", "CCU_LOCAL_REDUCE_BW",
           "CCU_CIRCLE_BW", "mesh_a", "nhr_a", "copy_b", "reduce_b", "latency_c", "launch_d", "trans_tasks",
           "sync_tasks", "ub_util", "MESH_UB", "CLOS_UB", "CLOS_ONE_JETTY_UB", "US"]

US = 1e-6
LOCAL_COPY_BW = 1400e9            # cost_model.cc InitBandwidth localCopyBw_ (B/s)
LOCAL_REDUCE_BW = 900e9           # cost_model.cc InitBandwidth localReduceBw_
CROSS_CHIP_BW = 56e9              # cost_model.cc InitBandwidth crossChipBw_
CCU_LOCAL_COPY_BW = 200e9         # cost_model.cc InitBandwidth ccuLocalCopyBw_
CCU_LOCAL_REDUCE_BW = 35e9        # cost_model.cc InitBandwidth ccuLocalReduceBw_
CCU_CIRCLE_BW = 47.6 * 2 ** 30    # cost_model.cc InitBandwidth ccuCircleLocalCopyBw_ / ReduceBw_
LATENCY_PER_TASK = {CostEngine.AICPU: 2 * US, CostEngine.AIV: 1 * US, CostEngine.CCU: 2 * US}  # CalcLatencyParams
LAUNCH_PER_TASK_AICPU = 0.5 * US  # cost_model.cc CalcLaunchParams: AICPU only, others 0

_M = 1 << 20
_K = 1 << 10
#: (upper bound in bytes, utilisation): the entry is the first bound strictly greater than s (QueryUbUtil).
MESH_UB = tuple(zip((1 * _M, 2 * _M, 4 * _M, 8 * _M, 16 * _M, 32 * _M, 64 * _M, 128 * _M, 256 * _M),
                    (0.7135, 0.7758, 0.8112, 0.8301, 0.84, 0.8449, 0.8475, 0.8487, 0.8494)))
CLOS_UB = tuple(zip((128 * _K, 256 * _K, 512 * _K, 1 * _M, 2 * _M, 4 * _M, 8 * _M, 16 * _M, 32 * _M, 64 * _M,
                     128 * _M, 256 * _M),
                    (0.10388, 0.10388, 0.10388, 0.1855, 0.3, 0.4288, 0.5302, 0.568, 0.6549, 0.7184, 0.7408, 0.7644)))
CLOS_ONE_JETTY_UB = tuple(zip((1 * _M, 2 * _M, 4 * _M, 8 * _M, 16 * _M, 32 * _M, 64 * _M, 128 * _M, 256 * _M),
                              (0.217, 0.3453, 0.4904, 0.6207, 0.7159, 0.7753, 0.8089, 0.8268, 0.8361)))
#: AIV utilisation factors (QueryUbUtil: x0.65 on MESH, x0.85 on CLOS; the AIV-CLOS table is N4 only).
AIV_UB_FACTOR = {CommTopo.MESH_1D: 0.65, CommTopo.CLOS: 0.85}
#: Segment algoTypes that use the one-jetty-one-port CLOS table (N2+).
ONE_JETTY_TYPES = frozenset({"Mesh", "MeshMultiLink", "MeshSingleChannel", "MeshOneShot", "MeshTwoShot"})
#: AllGather on CLOS looks sizes below 1 MiB up at 1 MiB (QueryUbUtil).
AG_CLOS_MIN_LOOKUP = 1 * _M


@dataclass(frozen=True)
class Coeff:
    """``CostModelParam``: A (s/byte over links), B (s/byte local), C (s), D (launch time, s)."""

    A: float
    B: float
    C: float
    D: float = 0.0


def _ports(ports: float, net: CommTopo, is_pod: bool) -> float:
    return ports / 2.0 if is_pod and net == CommTopo.CLOS else ports      # N3: real halving


def mesh_a(n: float, net: CommTopo, ports: float, R: int, is_pod: bool) -> float:
    """``CalcMeshParam``: MESH n/bw; CLOS n(R-1)/(ports bw), ports halved on pods."""
    if net == CommTopo.CLOS:
        return n * (R - 1) / (_ports(ports, net, is_pod) * CROSS_CHIP_BW)
    return n / CROSS_CHIP_BW


def nhr_a(n: float, net: CommTopo, ports: float, R: int, is_pod: bool, halve_pod_port: bool = True) -> float:
    """``CalcNHRParams``: n(R-1)/(ports bw) for every net type."""
    p = _ports(ports, net, is_pod) if halve_pod_port else ports
    return n * (R - 1) / (p * CROSS_CHIP_BW)


def copy_b(n: float, eng: CostEngine) -> float:
    """``CalcLocalCopyParams``."""
    bw = {CostEngine.CCU: CCU_LOCAL_COPY_BW, CostEngine.CCU_CIR_MODE: CCU_CIRCLE_BW}.get(eng, LOCAL_COPY_BW)
    return n / bw


def reduce_b(n: float, eng: CostEngine) -> float:
    """``CalcLocalReduceParams``."""
    bw = {CostEngine.CCU: CCU_LOCAL_REDUCE_BW, CostEngine.CCU_CIR_MODE: CCU_CIRCLE_BW}.get(eng, LOCAL_REDUCE_BW)
    return n / bw


def latency_c(tasks: float, eng: CostEngine) -> float:
    """``CalcLatencyParams``: AICPU 2 us, AIV 1 us, CCU 2 us per task, others 0."""
    return LATENCY_PER_TASK.get(eng, 0.0) * tasks


def launch_d(tasks: float, eng: CostEngine) -> float:
    """``CalcLaunchParams``: AICPU 0.5 us per task; AIV, CCU and the others 0."""
    return LAUNCH_PER_TASK_AICPU * tasks if eng == CostEngine.AICPU else 0.0


def trans_tasks(R: int) -> int:
    """``CalcTransTaskNum``: 5(R-1) cross-card transfer tasks."""
    return 5 * (R - 1)


def sync_tasks(R: int) -> int:
    """``CalcSyncTaskNum``: 2(R-1) main/sub-stream synchronisation tasks."""
    return 2 * (R - 1)


def ub_util(nbytes: int, data_ratio: float | None, rank_size: int, net: CommTopo, algo_type: str,
            eng: CostEngine, op: str) -> float:
    """``QueryUbUtil`` for one segment (N3: per-segment size, first bound strictly greater)."""
    s = nbytes * (data_ratio if data_ratio and data_ratio > 0 else 1)
    if algo_type in ("NHR", "NHRMultiLink"):
        s *= rank_size / 2
    if s == 0:
        s = nbytes
    if net == CommTopo.CLOS:
        table = CLOS_ONE_JETTY_UB if algo_type in ONE_JETTY_TYPES else CLOS_UB
        if op == "AllGather" and s < AG_CLOS_MIN_LOOKUP:
            s = AG_CLOS_MIN_LOOKUP
    else:
        table = MESH_UB
    bounds = [b for b, _ in table]
    i = bisect_right(bounds, s)
    util = table[min(i, len(table) - 1)][1]
    if eng == CostEngine.AIV:
        util *= AIV_UB_FACTOR.get(net, 1.0)
    return util
