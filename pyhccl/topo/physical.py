"""BuildPhysicalLevels: the chain of nested rank ranges one rank sees (CalcTopoShape's step 12).

HCCL source: src/ops/op_common/topo/physical_level_build.cc (candidates per net layer),
physical_level_normalize.cc (three-key sort, chain check, invariants). As in HCCL, any failure
degrades to an empty tuple instead of an error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .info import (CommTopo, EndpointLocType, NetLayerDetails, PhysicalLevelInfo, PhysicalLevelView)

if TYPE_CHECKING:
    from .rankgraph import RankGraph

__all__ = ["build_physical_levels"]

#: physical_level.h ``ENDPOINT_NUM_SANITY_LIMIT`` / ``PORT_NUM_SANITY_LIMIT``.
ENDPOINT_NUM_SANITY_LIMIT = 64
PORT_NUM_SANITY_LIMIT = 64
#: physical_level_normalize.cc ``TopoTypeOrder``: mesh inside Clos; no instance after both.
_TOPO_ORDER = {CommTopo.MESH_1D: 0, CommTopo.CLOS: 1}
_TOPO_ORDER_NO_TOPO_INST = 2


class _Degrade(Exception):
    """A check failed: HCCL logs a warning and leaves ``physicalLevels`` empty."""


def build_physical_levels(g: RankGraph, rank: int, net: NetLayerDetails) -> tuple[PhysicalLevelInfo, ...]:
    """The physical levels of ``rank``, or ``()`` where HCCL's build degrades."""
    try:
        candidates = [c for layer in net.net_layers for c in _layer_candidates(g, rank, net, layer)]
        return _normalize(candidates, rank)
    except _Degrade:
        return ()


def _layer_candidates(g: RankGraph, rank: int, net: NetLayerDetails, layer: int) -> list[PhysicalLevelInfo]:
    """BuildLayerCandidates: a same-range topology instance merges with the NetInstance (GLOBAL)."""
    net_ranks = tuple(sorted(g.ranks_by_layer(rank, layer)))          # FetchLocalNetRanks
    if len(net_ranks) != net.local_net_ins_size_of_layer[layer] or rank not in net_ranks:
        raise _Degrade
    partition = net.inst_size_list_of_layer[layer]
    _check_partition(partition, rank, len(net_ranks), g.nranks)       # ValidateInstSizeLayout
    out, merged = [], False
    for inst in g.topo_insts(rank, layer):                            # FetchTopoInstances
        if rank not in inst.ranks:
            continue
        eps = tuple(sorted(g.endpoints(rank, layer, inst), key=lambda e: (e.protocol, e.loc, e.addr)))
        if len(eps) > ENDPOINT_NUM_SANITY_LIMIT:                      # FetchEndpoints: skip endpoints
            eps = ()
        same = tuple(sorted(inst.ranks)) == net_ranks
        merged = merged or same
        out.append(PhysicalLevelInfo(
            local_ranks=tuple(sorted(inst.ranks)), view=PhysicalLevelView.GLOBAL if same else PhysicalLevelView.LOCAL,
            inst_size_list_by_layer=partition if same else (), net_layer=layer, topo_inst_id=inst.inst_id,
            has_topo_inst=True, topo_type=inst.topo_type, loc_type=_loc(eps),
            protocols=tuple(sorted({e.protocol for e in eps})), port_nums=_port_nums(g, rank, layer, eps),
            endpoints=eps))
    if not merged:                          # the NetInstance alone: partition, no link attributes
        out.append(PhysicalLevelInfo(local_ranks=net_ranks, view=PhysicalLevelView.GLOBAL,
                                     inst_size_list_by_layer=partition, net_layer=layer))
    return out


def _check_partition(partition: tuple[int, ...], rank: int, local: int, nranks: int) -> None:
    """ValidateInstSizeLayout: non-empty, sums to R, no zero, and ``rank``'s block has its size."""
    if not partition or sum(partition) != nranks or 0 in partition:
        raise _Degrade
    total = 0
    for size in partition:
        total += size
        if rank < total:
            if size != local:
                raise _Degrade
            return
    raise _Degrade


def _loc(eps: tuple) -> EndpointLocType:
    """FetchLocAndProtocols: the endpoints' common location, RESERVED when they disagree."""
    if not eps:
        return EndpointLocType.RESERVED
    locs = {e.loc for e in eps}
    return eps[0].loc if len(locs) == 1 else EndpointLocType.RESERVED


def _port_nums(g: RankGraph, rank: int, layer: int, eps: tuple) -> tuple[int, ...]:
    """FetchPortNums: ports per interface (deduplicated by address), descending; all or nothing."""
    seen, ports = set(), []
    for e in eps:
        if e.addr in seen:
            continue
        n = g.port_num(rank, layer, e)
        if not 0 < n <= PORT_NUM_SANITY_LIMIT:
            return ()
        seen.add(e.addr)
        ports.append(n)
    return tuple(sorted(ports, reverse=True))


def _normalize(candidates: list[PhysicalLevelInfo], rank: int) -> tuple[PhysicalLevelInfo, ...]:
    """NormalizePhysicalLevels: drop foreign candidates, sort by the three keys, check the chain."""
    valid = [c for c in candidates if rank in c.local_ranks]
    if not valid or any(c.has_topo_inst and c.topo_type not in _TOPO_ORDER for c in valid):
        raise _Degrade
    valid.sort(key=_level_key)
    for inner, outer in zip(valid, valid[1:]):      # adjacent ranges nest (equal allowed)
        if not set(inner.local_ranks) <= set(outer.local_ranks):
            raise _Degrade
    return tuple(valid)


def _level_key(c: PhysicalLevelInfo) -> tuple:
    """LevelLess: block size, LOCAL before GLOBAL, mesh before Clos, then two tie-breakers."""
    order = _TOPO_ORDER[c.topo_type] if c.has_topo_inst else _TOPO_ORDER_NO_TOPO_INST
    inst = c.topo_inst_id if c.topo_inst_id is not None else 2**32 - 1     # INVALID_UINT sorts last
    return (len(c.local_ranks), c.view, order, c.local_ranks, c.net_layer, inst)
