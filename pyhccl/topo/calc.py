"""calc_topo_info: HCCL's InitRankInfo and CalcTopoShape's twelve steps, in HCCL's order.

HCCL source: src/ops/op_common/topo/topo_host.cc (newest version, 12-step ``CalcTopoShape``),
run against :class:`~pyhccl.topo.rankgraph.RankGraph` instead of HCOMM, for DEV_TYPE_950 and
CANN >= 9.2 (so the UBoE and UB_RTP checks are live). Where HCCL fails with an error code,
:class:`HcclError` (a ValueError) carries that code.
"""

from __future__ import annotations

from dataclasses import replace
from math import gcd
from typing import Any

from .info import (CommProtocol, CommTopo, EndpointLocType, Level0MeshType, Level0Shape,
                   NetLayerDetails, TopoInfo, TopoInstDetails)
from .physical import build_physical_levels
from .rankgraph import RankGraph
from .spec import parse_topo

__all__ = ["calc_topo_info", "HcclError", "BIG_CLOS_RANGE"]

#: A level-0 Clos of more ranks than this is "big" (topo_host.h ``BIG_CLOS_RANGE``).
BIG_CLOS_RANGE = 8
#: Topology instances of the UBX shape (topo_host.cc ``TOPO_INST_NUM_MESH_1D_CLOS``).
TOPO_INST_NUM_MESH_1D_CLOS = 2
#: Dies of a 2-die device (topo_host.cc ``Is2DieFullMesh``: "dieNum = 2").
DIE_NUM = 2


class HcclError(ValueError):
    """A topology HCCL rejects; ``code`` is HCCL's result (``HCCL_E_INTERNAL``, ``HCCL_E_PARA``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{message} ({code} in HCCL's topo_host.cc)")
        self.code = code


def calc_topo_info(topo: Any, rank: int = 0) -> TopoInfo:
    """The TopoInfo HCCL computes for ``rank`` of the machine ``topo``.

    Args:
        topo: a TopoSpec, a RankGraph, or any spec form :func:`parse_topo` reads.
        rank: the rank whose view to compute (TopoInfo differs per rank on asymmetric machines).

    Raises:
        HcclError: where HCCL's CalcTopoShape fails (e.g. a level-0 mesh smaller than the server).
        ValueError: ``rank`` out of range, or a malformed spec.
    """
    g = topo if isinstance(topo, RankGraph) else RankGraph(parse_topo(topo))
    if not 0 <= rank < g.nranks:
        raise ValueError(f"expecting rank in range({g.nranks}), got {rank}")
    f: dict[str, Any] = {}
    _init_rank_info(g, rank, f)
    # CalcTopoShape: the twelve steps in topo_host.cc's order.
    net = _extract_net_layer_details(g, rank, f)                       # 1
    _calc_level1_nhr(net, f)                                           # 2
    insts = _extract_topo_details(g, rank, net, f)                     # 3
    insts[0] = _calc_level0_topo_shape(insts[0], net.local_net_ins_size_of_layer[0], f)   # 4
    f["is_2die_full_mesh"] = _is_2die_full_mesh(g, rank, f)            # 5
    f["level0_pcie_mix"] = _is_level0_pcie_mix(g, rank)                # 6
    f["level0_mesh_type"] = _calc_level0_mesh_type(g, rank, f)         # 7
    f["top_level_uboe"] = _calc_top_level_uboe(g, rank, net, f)        # 8
    f["level2_ub_rtp"] = _calc_level2_ub_rtp(g, rank, net)             # 9
    f["host_dpu_only"] = _calc_host_dpu_only(g, rank, net, f)          # 10
    f["is_pod"] = g.spec.pod                                           # 11 CalcDeviceFormFactor
    levels = build_physical_levels(g, rank, net)                       # 12
    f["topo_inst_details_of_layer"] = tuple(insts)
    return TopoInfo(**f, physical_levels=levels, physical_level_num=len(levels))


def _init_rank_info(g: RankGraph, rank: int, f: dict[str, Any]) -> None:
    """InitRankInfo for DEV_TYPE_950: CalcMyRankInfo and SetServerModuleInfo (910B/910_93 parts skipped)."""
    f.update(user_rank=rank, user_rank_size=g.nranks, device_type="DEV_TYPE_950")
    sizes = g.inst_size_list(0)
    f["server_idx"], f["server_num"] = _group_idx(sizes, rank), len(sizes)       # CalcGroupIdx(L0)
    layers = g.net_layers
    # CalcMyRankInfo: superPodIdx from layer 1 only when the last net layer is 1, else 0.
    f["super_pod_idx"] = _group_idx(g.inst_size_list(1), rank) if len(layers) >= 2 and layers[-1] == 1 else 0
    f["module_idx"] = f["server_idx"]                      # GetModuleIdxByRank: serverIdx off 910B A+X
    f["device_num_per_module"] = len(g.ranks_by_layer(rank, 0))   # GetDeviceNumPerModule: rank size of L0
    f["module_num"] = len(sizes)                           # SetServerModuleInfo: moduleMap.size()
    f["multi_module_diff_device_num_mode"] = any(s != f["device_num_per_module"] for s in sizes)


def _group_idx(sizes: tuple[int, ...], rank: int) -> int:
    """topo_host.cc CalcGroupIdx: the instance whose prefix sum first exceeds ``rank``."""
    total = 0
    for i, size in enumerate(sizes):
        total += size
        if rank < total:
            return i
    return 0


def _extract_net_layer_details(g: RankGraph, rank: int, f: dict[str, Any]) -> NetLayerDetails:
    """Step 1, ExtractNetLayerDetails: per-layer instance sizes, topoLevelNums, symmetry flags."""
    layers = g.net_layers
    width = layers[-1] + 1                  # "highest layer + 1" to allow sparse ids such as {0, 3}
    nums, sizes, local = [0] * width, [()] * width, [0] * width
    for layer in layers:
        sizes[layer] = g.inst_size_list(layer)
        nums[layer] = len(sizes[layer])
        if sum(sizes[layer]) != g.nranks:
            raise HcclError("HCCL_E_PARA", f"net layer {layer} has {sum(sizes[layer])} ranks, "
                                           f"the communicator {g.nranks}")
        local[layer] = len(g.ranks_by_layer(rank, layer))
    levels = 0
    for layer in layers:                    # count layers up to the first with a single instance
        levels += 1
        if nums[layer] == 1:
            break
    f["topo_level_nums"] = levels
    first = sizes[layers[0]]
    f["level0_symmetric"] = bool(first) and all(s == first[0] for s in first)
    if levels > 1 and sizes[layers[1]]:     # level1Symmetric is only evaluated with several levels
        second = sizes[layers[1]]
        f["level1_symmetric"] = all(s == second[0] for s in second)
    net = NetLayerDetails(len(layers), layers, tuple(nums), tuple(sizes), tuple(local))
    f["net_layer_details"] = net
    return net


def _calc_level1_nhr(net: NetLayerDetails, f: dict[str, Any]) -> None:
    """Step 2, CalcLevel1Nhr: GCD of the layer-0 sizes 1 -> mesh is meaningless, degrade to NHR."""
    sizes = net.inst_size_list_of_layer[0]
    if f["topo_level_nums"] > 1 and sizes:
        f["level1_nhr"] = gcd(*sizes) == 1


def _extract_topo_details(g: RankGraph, rank: int, net: NetLayerDetails,
                          f: dict[str, Any]) -> list[TopoInstDetails]:
    """Step 3, ExtractTopoDetails: this rank's topology instances of every net layer, by type."""
    width = net.net_layers[-1] + 1
    out = [TopoInstDetails() for _ in range(width)]
    for layer in net.net_layers:
        insts = g.topo_insts(rank, layer)
        by_type: dict[CommTopo, list[int]] = {}
        for inst in insts:
            by_type.setdefault(inst.topo_type, []).append(len(inst.ranks))
        out[layer] = TopoInstDetails(len(insts), (0,) * len(insts), tuple(i.topo_type for i in insts),
                                     tuple(i.ranks for i in insts), _as_map(by_type))
    f["topo_inst_details_of_layer_size"] = width
    return out


def _as_map(by_type: dict) -> tuple[tuple[CommTopo, tuple[int, ...]], ...]:
    """A ``std::map<CommTopo, vector<u32>>``: sorted by key."""
    return tuple((k, tuple(by_type[k])) for k in sorted(by_type))


def _calc_level0_topo_shape(details: TopoInstDetails, local_size: int, f: dict[str, Any]) -> TopoInstDetails:
    """Step 4, CalcLevel0TopoShape: HCCL's decision table with its size checks.

    The C++ reads ``rankNumForTopoType[type]`` with ``std::map::operator[]``, which inserts an
    empty entry for each type it looks up; ``lookup`` does the same, and the layer-0 details
    are returned with those entries, as HCCL keeps them.
    """
    by_type = dict(details.rank_num_for_topo_type)
    num = details.topo_inst_num

    def lookup(t: CommTopo) -> tuple[int, ...]:
        return by_type.setdefault(t, ())

    def check(t: CommTopo) -> None:
        if lookup(t)[0] != local_size:
            raise HcclError("HCCL_E_INTERNAL", f"level-0 {t.name} instance has {lookup(t)[0]} ranks but this "
                                               f"rank's server has {local_size}; a level-0 {t.name} must "
                                               "span the whole server (drop mesh_size / clos_size; with "
                                               "level0=mesh2d, one grid row or column or a full rectangle of it)")

    if num == 1 and len(lookup(CommTopo.MESH_1D)) == 1:                       # row 1
        check(CommTopo.MESH_1D)
        shape = Level0Shape.MESH_1D
    elif num == 1 and len(lookup(CommTopo.CLOS)) == 1:                        # row 2
        check(CommTopo.CLOS)
        shape = Level0Shape.CLOS
    elif num == TOPO_INST_NUM_MESH_1D_CLOS and len(lookup(CommTopo.CLOS)) == 1 \
            and len(lookup(CommTopo.MESH_1D)) == 1:                           # row 3, UBX
        f["level0_big_clos_range"] = lookup(CommTopo.CLOS)[0] > BIG_CLOS_RANGE
        check(CommTopo.CLOS)
        shape = Level0Shape.MESH_1D_CLOS
    else:                                   # row 4: "A2 scenario not matched, default CLOS" (a warning)
        shape = Level0Shape.CLOS
    f["level0_topo"] = shape
    return replace(details, rank_num_for_topo_type=_as_map(by_type))


def _die_link_counts(g: RankGraph, rank: int, step: str) -> list[int]:
    """Is2DieFullMesh / CalcLevel0MeshType: per die, the peers reached from it (first link)."""
    counts = [0] * DIE_NUM
    for peer in g.ranks_by_layer(rank, 0):
        if peer == rank:
            continue
        links = g.links(0, rank, peer)
        if not links:
            raise HcclError("HCCL_E_INTERNAL", f"{step}: no layer-0 link from rank {rank} to {peer}")
        if links[0].die >= DIE_NUM:
            raise HcclError("HCCL_E_INTERNAL", f"{step}: die id {links[0].die} out of range {DIE_NUM}")
        counts[links[0].die] += 1
    return counts


def _is_2die_full_mesh(g: RankGraph, rank: int, f: dict[str, Any]) -> bool:
    """Step 5, Is2DieFullMesh: a 1D mesh of more than 2 ranks reached from both dies."""
    if f["level0_topo"] != Level0Shape.MESH_1D or len(g.ranks_by_layer(rank, 0)) <= 2:
        return False
    return all(_die_link_counts(g, rank, "Is2DieFullMesh"))


def _is_level0_pcie_mix(g: RankGraph, rank: int) -> bool:
    """Step 6, IsLevel0PcieMix: some link to a layer-0 peer leaves over PCIe."""
    return any(link.protocol == CommProtocol.PCIE for peer in g.ranks_by_layer(rank, 0)
               for link in g.links(0, rank, peer))


def _calc_level0_mesh_type(g: RankGraph, rank: int, f: dict[str, Any]) -> Level0MeshType:
    """Step 7, CalcLevel0MeshType: single die, or two dies split regularly (off by one) or not."""
    if f["level0_topo"] != Level0Shape.MESH_1D:
        return Level0MeshType.NOT_MESH
    if len(g.ranks_by_layer(rank, 0)) <= 2:
        return Level0MeshType.SINGLE_DIE
    c0, c1 = _die_link_counts(g, rank, "CalcLevel0MeshType")
    if c0 == 0 or c1 == 0:
        return Level0MeshType.SINGLE_DIE
    return Level0MeshType.TWO_DIE_REGULAR if abs(c0 - c1) == 1 else Level0MeshType.TWO_DIE_NOT_REGULAR


def _calc_top_level_uboe(g: RankGraph, rank: int, net: NetLayerDetails, f: dict[str, Any]) -> bool:
    """Step 8, CalcTopLevelUboe: the first peer linked on the top effective level decides."""
    layer = net.net_layers[f["topo_level_nums"] - 1]
    for dst in range(g.nranks):
        links = g.links(layer, rank, dst)
        if links and links[0].version >= 1:
            return links[0].protocol == CommProtocol.UBOE
    return False


def _calc_level2_ub_rtp(g: RankGraph, rank: int, net: NetLayerDetails) -> bool:
    """Step 9, CalcLevel2UbRtp: a UB_RTP link on net layer 2 to a peer with no lower-layer link."""
    if 2 not in net.net_layers:
        return False
    for dst in range(g.nranks):
        links = g.links(2, rank, dst)
        if not any(link.version >= 1 and link.protocol == CommProtocol.UB_RTP for link in links):
            continue
        if not any(g.links(layer, rank, dst) for layer in net.net_layers if layer < 2):
            return True
    return False


def _calc_host_dpu_only(g: RankGraph, rank: int, net: NetLayerDetails, f: dict[str, Any]) -> bool:
    """Step 10, CalcHostDPUOnly: the top level's all-rank CLOS instances have host endpoints only."""
    if f["server_num"] == 1 or f["topo_level_nums"] == 1:
        return False
    host = False
    for layer in net.net_layers:
        if layer < f["topo_level_nums"] - 1:       # HCCL compares the layer id with the level count
            continue
        for inst in g.topo_insts(rank, layer):
            if inst.topo_type != CommTopo.CLOS or len(inst.ranks) != g.nranks:
                continue
            for ep in g.endpoints(rank, layer, inst):
                if ep.loc == EndpointLocType.DEVICE:
                    return False
                host = host or ep.loc == EndpointLocType.HOST
    return host
