"""RankGraph: the HCOMM topology queries CalcTopoShape makes, answered for an emulated machine.

Follows HCCL's own emulation of a TopoMeta, the analyzer's ``TopoModel`` (test/st/algorithm/
.../topo_model.cc, DEV_TYPE_950 branch): net layers {0} for one server, {0, 1} for several
servers, {0, 1, 2} for several super pods; layer-0 instances are servers, layer-1 instances
super pods, layer 2 one instance of all ranks; levels 1 and 2 are one CLOS topology instance
each, with links between every pair of ranks of the instance; every link has header version 1.
Two departures, both stated in the spec's options: level 0 is wired as the spec says (mesh,
Clos or both, in blocks of ``mesh_size`` / ``clos_size``) instead of deriving row and column
meshes from device ids on an 8x8 grid; die ids and port counts come from the spec (the
analyzer answers die 0 and one port for everything). ``level0=mesh2d`` is the analyzer's
wiring (``InitTopoInstsMap``): a device's row mesh when its row has peers, its column mesh when
its column has, its row alone when it has neither, and the server's Clos when it has both;
that Clos holds the devices that list it (the analyzer reports no ranks for it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from .info import CommProtocol, CommTopo, Endpoint, EndpointLocType
from .spec import GRID_SIZE, TopoSpec

__all__ = ["RankGraph", "TopoInst", "Link"]


@dataclass(frozen=True)
class TopoInst:
    """A topology instance of one net layer: id, type, ranks, link protocol and ports per link."""

    inst_id: int
    topo_type: CommTopo
    ranks: tuple[int, ...]
    protocol: CommProtocol
    ports: int = 1


@dataclass(frozen=True)
class Link:
    """One link from a rank to a peer, as ``HcclRankGraphGetLinks`` reports it."""

    protocol: CommProtocol
    die: int = 0          # ENDPOINT_ATTR_DIE_ID of the source endpoint
    version: int = 1      # header.version


class RankGraph:
    """The rank graph of a :class:`TopoSpec`; method names follow ``HcclRankGraphGet*``.

    Args:
        spec: the emulated machine.
    """

    def __init__(self, spec: TopoSpec) -> None:
        self.spec = spec
        self.server_of: list[int] = []
        self.pod_of: list[int] = []
        self.server_ranks: list[tuple[int, ...]] = []
        self.pod_ranks: list[tuple[int, ...]] = []
        self.device_of: list[int] = []
        rank = 0
        for p, pod in enumerate(spec.layout):
            first = rank
            for server in pod:
                self.device_of += server
                self.server_ranks.append(tuple(range(rank, rank + len(server))))
                self.server_of += [len(self.server_ranks) - 1] * len(server)
                self.pod_of += [p] * len(server)
                rank += len(server)
            self.pod_ranks.append(tuple(range(first, rank)))
        self.nranks = rank

    @cached_property
    def net_layers(self) -> tuple[int, ...]:
        """``HcclRankGraphGetLayers`` (topo_model.cc ``InitNetLayerInfo``)."""
        if len(self.pod_ranks) > 1:
            return (0, 1, 2)
        return (0, 1) if len(self.server_ranks) > 1 else (0,)

    def inst_size_list(self, layer: int) -> tuple[int, ...]:
        """``HcclRankGraphGetInstSizeListByLayer``: instance sizes in rank order."""
        groups = (self.server_ranks, self.pod_ranks, [range(self.nranks)])[layer]
        return tuple(len(g) for g in groups)

    def ranks_by_layer(self, rank: int, layer: int) -> tuple[int, ...]:
        """``HcclRankGraphGetRanksByLayer``: the ranks of this rank's instance of ``layer``."""
        if layer == 0:
            return self.server_ranks[self.server_of[rank]]
        return self.pod_ranks[self.pod_of[rank]] if layer == 1 else tuple(range(self.nranks))

    def topo_insts(self, rank: int, layer: int) -> tuple[TopoInst, ...]:
        """``HcclRankGraphGetTopoInstsByLayer``: the topology instances that contain ``rank``."""
        if layer == 0:
            return tuple(i for i in self._level0[self.server_of[rank]] if rank in i.ranks)
        return (self._upper[layer - 1][self.pod_of[rank] if layer == 1 else 0],)

    def links(self, layer: int, src: int, dst: int) -> tuple[Link, ...]:
        """``HcclRankGraphGetLinks``: one link per shared topology instance (mesh first)."""
        if src == dst or (layer < 2 and (self.server_of, self.pod_of)[layer][src]
                          != (self.server_of, self.pod_of)[layer][dst]):
            return ()
        if layer > 0:
            return (Link(self._upper[layer - 1][0].protocol),)
        return tuple(Link(i.protocol, self._die(i, src, dst)) for i in self.topo_insts(src, 0)
                     if dst in i.ranks)

    def endpoints(self, rank: int, layer: int, inst: TopoInst) -> tuple[Endpoint, ...]:
        """``HcclRankGraphGetEndpointDesc``: this rank's endpoint on ``inst`` (one interface)."""
        host = self.spec.dpu and layer > 0
        loc = EndpointLocType.HOST if host else EndpointLocType.DEVICE
        return (Endpoint(inst.protocol, loc, _addr(rank, layer, inst)),)

    def port_num(self, rank: int, layer: int, endpoint: Endpoint) -> int:
        """``ENDPOINT_ATTR_BW_COEFF`` of an endpoint: the ports of its interface."""
        return next(i.ports for i in self.topo_insts(rank, layer) if _addr(rank, layer, i) == endpoint.addr)

    @cached_property
    def _upper(self) -> tuple[list[TopoInst], list[TopoInst]]:
        """Layer 1: one CLOS instance per super pod; layer 2: one of all ranks."""
        spec = self.spec
        return ([TopoInst(p, CommTopo.CLOS, ranks, spec.level1, spec.clos_ports)
                 for p, ranks in enumerate(self.pod_ranks)],
                [TopoInst(0, CommTopo.CLOS, tuple(range(self.nranks)), spec.level2, spec.clos_ports)])

    @cached_property
    def _level0(self) -> list[tuple[TopoInst, ...]]:
        """Per server: its mesh blocks, then its Clos blocks, with ids unique over the layer."""
        spec, out, next_id = self.spec, [], 0
        proto = CommProtocol.PCIE if spec.pcie else CommProtocol.UB_CTP
        for ranks in self.server_ranks:
            if spec.level0 == "mesh2d":
                insts = [TopoInst(next_id + i, t, r, proto, spec.clos_ports if t == CommTopo.CLOS else 1)
                         for i, (t, r) in enumerate(self._grid(ranks))]
                next_id += len(insts)
                out.append(tuple(insts))
                continue
            insts = []
            for kind, size, topo_type, ports in (("mesh", spec.mesh_size, CommTopo.MESH_1D, 1),
                                                 ("clos", spec.clos_size, CommTopo.CLOS, spec.clos_ports)):
                if kind not in spec.level0:
                    continue
                size = size or len(ranks)
                for lo in range(0, len(ranks), size):
                    insts.append(TopoInst(next_id, topo_type, ranks[lo:lo + size], proto, ports))
                    next_id += 1
            out.append(tuple(insts))
        return out

    def _grid(self, ranks: tuple[int, ...]) -> list[tuple[CommTopo, tuple[int, ...]]]:
        """A 2D-mesh server (topo_model.cc ``InitTopoInstsMap``): rows, then columns, then the Clos."""
        rows: dict[int, list[int]] = {}
        cols: dict[int, list[int]] = {}
        for r in ranks:
            rows.setdefault(self.device_of[r] // GRID_SIZE, []).append(r)
            cols.setdefault(self.device_of[r] % GRID_SIZE, []).append(r)

        def peers(r: int) -> tuple[bool, bool]:
            return len(rows[self.device_of[r] // GRID_SIZE]) > 1, len(cols[self.device_of[r] % GRID_SIZE]) > 1

        out = [(CommTopo.MESH_1D, tuple(rows[k])) for k in sorted(rows)
               if len(rows[k]) > 1 or not any(peers(rows[k][0]))]          # a lone device keeps its row
        out += [(CommTopo.MESH_1D, tuple(cols[k])) for k in sorted(cols) if len(cols[k]) > 1]
        both = tuple(r for r in ranks if all(peers(r)))                     # "only 2D has the Z-axis CLOS"
        return out + [(CommTopo.CLOS, both)] if both else out

    def _die(self, inst: TopoInst, src: int, dst: int) -> int:
        """Die of ``src``'s port towards ``dst``: 2-die meshes split the peers in order."""
        if self.spec.dies == 1 or inst.topo_type != CommTopo.MESH_1D:
            return 0
        peers = [r for r in inst.ranks if r != src]
        return 0 if peers.index(dst) < (len(peers) + 1) // 2 else 1


def _addr(rank: int, layer: int, inst: TopoInst) -> str:
    """The address of ``rank``'s interface on ``inst`` (one interface per instance)."""
    return f"rank{rank}/layer{layer}/inst{inst.inst_id}"
