"""Executors' ``CalcCostCoeff`` / ``GetAlgNetMeta``: the segments an algorithm runs and how they combine.

HCCL source: the executors under src/ops/<op>/algorithm/executor/ (hccl-selection.md §6.6, newer
rows; the AllGather and ReduceScatter Sole rows follow the older snapshot's segments, §6.9),
with the level match of src/ops/op_common/topo/topo_match_*.cc (§3.11) read from the physical
levels.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...algo.names import OpExecuteConfig, to_cost_engine
from ...algo.registry import Registration
from ...topo.info import CommTopo, EndpointLocType, PhysicalLevelInfo, TopoInfo
from .templates import Seg

__all__ = ["NetMeta", "Calibration", "calibrate", "PARALLEL_SPLIT_RATIO", "CONCURRENT_SPLIT_RATIO"]

#: ``CalcParallelDataSplitRatio`` is not in the reference: pyhccl splits the two data parts evenly
#: (the older snapshot's 1/2 per part).
PARALLEL_SPLIT_RATIO = 0.5
#: The concurrent executors' mesh/CLOS split is not in the reference for AllReduce: even split.
CONCURRENT_SPLIT_RATIO = 0.5


@dataclass(frozen=True)
class NetMeta:
    """``AlgNetMeta``: per-segment net types, data ratios and rank sizes, and the group layout."""

    net_types: tuple[CommTopo, ...]
    data_ratios: tuple[float, ...]
    rank_sizes: tuple[int, ...]
    algo_types: tuple[str, ...]
    intra_group_mode: str = "SUM"
    group_sizes: tuple[int, ...] = ()


@dataclass(frozen=True)
class Calibration:
    """What ``CalcCostCoeff`` gives: segments and meta, or the reason the algorithm is uncalibrated."""

    segs: tuple[Seg, ...] = ()
    meta: NetMeta | None = None
    reason: str = ""


def _levels(topo: TopoInfo, engine: OpExecuteConfig) -> list[PhysicalLevelInfo]:
    """``CollectEffectiveIndices``: levels with a TopoInstance; HOST ones only for HOSTCPU."""
    keep = []
    for lv in topo.physical_levels:
        if not lv.has_topo_inst:
            continue
        if lv.loc_type == EndpointLocType.HOST and engine != OpExecuteConfig.HOSTCPU:
            continue
        keep.append(lv)
    return keep


def _algo_type(template: str) -> str:
    return "NHR" if "NHR" in template or "Nhr" in template else "Mesh"


def calibrate(reg: Registration, topo: TopoInfo) -> Calibration:
    """The segments and meta of ``reg`` on ``topo``, or why it is uncalibrated."""
    levels = _levels(topo, reg.engine)
    if not levels:
        return Calibration(reason="no physical levels (TopoMatch fails)")
    R, eng, pod = topo.user_rank_size, to_cost_engine(reg.engine), topo.is_pod
    full = [lv for lv in levels if len(lv.local_ranks) == R]
    tpls = [t.template for t in reg.templates]

    def seg(t: str, rank: int, ratio: float, lv: PhysicalLevelInfo, net=None, **kw) -> Seg:
        return Seg(t, rank, ratio, net if net is not None else (lv.topo_type or CommTopo.MESH_1D), lv.port_nums,
                   pod, eng, reg.name, **kw)

    ex = reg.executor
    if ex in ("InsV2AllReduceSoleExecutor", "InsV2AllGatherSoleExecutor", "InsV2ReduceScatterSoleExecutor"):
        if not full:
            return Calibration(reason="TopoMatchOneLevel: no physical level of R ranks")
        lv = full[0]
        if not lv.port_nums:
            return Calibration(reason="matched level has no port numbers")
        if ex == "InsV2AllReduceSoleExecutor":
            segs = (seg(tpls[0], R, 1 / R, lv),)
        elif ex == "InsV2AllGatherSoleExecutor":     # older: CLOS if NHR template or multi-level
            net = CommTopo.CLOS if "NHR" in tpls[0] or topo.topo_level_nums > 1 else CommTopo.MESH_1D
            segs = (seg(tpls[0], R, 1.0, lv, net),)
        else:
            segs = (seg(tpls[0], R, 1.0, lv, CommTopo.MESH_1D),)
        return Calibration(segs, NetMeta((segs[0].net,), (segs[0].data_ratio,), (R,), (_algo_type(tpls[0]),),
                                         "SUM", (1,)))
    if ex in ("InsAllReduceParallelExecutor", "InsReduceScatterParallelExecutor", "InsV2AllGatherParallelExecutor"):
        if len(levels) < 2 or not full or len(levels[0].local_ranks) >= R:
            return Calibration(reason="TopoMatchTwoLevel: needs a lower level and one of R ranks")
        l0, l1 = levels[0], full[0]
        L0 = len(l0.local_ranks)
        L1 = R // L0
        if not l0.port_nums or not l1.port_nums:
            return Calibration(reason="matched level has no port numbers")
        r = PARALLEL_SPLIT_RATIO
        mesh_t, nhr_t = tpls[0], tpls[1]
        if ex == "InsAllReduceParallelExecutor":
            ag_mesh, ag_nhr = tpls[2], tpls[3]
            order = [mesh_t, nhr_t, mesh_t, nhr_t, ag_mesh, ag_nhr, ag_mesh, ag_nhr]
            ratios = [r / L0, (1 - r) / L1, (1 - r) / R, r / R, (1 - r) / R, r / R, r / L0, (1 - r) / L1]
            lvls = [l0, l1] * 4
            groups = (2, 2, 2, 2)
        elif ex == "InsReduceScatterParallelExecutor":
            order, ratios, lvls, groups = [mesh_t, nhr_t, nhr_t, mesh_t], [0.5 * L1, 0.5 * L0, 0.5, 0.5], \
                [l0, l1, l1, l0], (2, 2)
        else:
            order, ratios, lvls, groups = [mesh_t, nhr_t, mesh_t, nhr_t], [1 - r, r, r * L1, (1 - r) * L0], \
                [l0, l1, l0, l1], (2, 2)
        segs = tuple(seg(t, L0 if lv is l0 else L1, q, lv, in_ne_scratch=i < 2, out_ne_scratch=i < 2,
                         in_ne_out=i < 2) for i, (t, q, lv) in enumerate(zip(order, ratios, lvls)))
        return Calibration(segs, NetMeta(tuple(s.net for s in segs), tuple(ratios), tuple(s.rank_size for s in segs),
                                         tuple(_algo_type(t) for t in order), "MAX", groups))
    if ex == "InsV2AllReduceConcurrentExecutor":
        if not full:
            return Calibration(reason="TopoMatchConcurrentV2: no physical level of R ranks")
        lv = full[0]
        mesh_lv = next((x for x in full if x.topo_type == CommTopo.MESH_1D), lv)
        clos_lv = next((x for x in full if x.topo_type == CommTopo.CLOS), lv)
        s = CONCURRENT_SPLIT_RATIO
        segs = (seg(tpls[0], R, s / R, mesh_lv, CommTopo.MESH_1D), seg(tpls[1], R, (1 - s) / R, clos_lv, CommTopo.CLOS))
        return Calibration(segs, NetMeta((CommTopo.MESH_1D, CommTopo.CLOS), (s / R, (1 - s) / R), (R, R),
                                         (_algo_type(tpls[0]), _algo_type(tpls[1])), "MAX", (2,)))
    return Calibration(reason=f"executor {ex}: no CalcCostCoeff in the reference (uncalibrated)")
