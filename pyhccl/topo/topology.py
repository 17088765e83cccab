"""Topology of a communicator: where its layout comes from, this rank's place in it, its TopoInfo.

Computed once per communicator, as HCCL computes TopoInfo once per communicator
(src/ops/op_common/op_common.cc ``HcclCalcTopoInfo``). The layout comes from the first of:

1. the ``topo=`` argument;
2. ``PYHCCL_TOPO`` (a spec, see :mod:`pyhccl.topo.spec`);
3. the rank table file named by ``PYHCCL_RANK_TABLE`` (see :mod:`pyhccl.topo.ranktable`);
4. MPI itself: the ranks that share memory (``Split_type(COMM_TYPE_SHARED)``) form a server,
   all servers one super pod. On a multi-host job this is the real machine.

A layout from the environment describes ``COMM_WORLD``; a smaller communicator (a ``Split``)
sees its members' part of it, as HCCL derives a sub-communicator's rank graph from its parent's.

Every rank must see the same settings. The communicator's one collective is an allgather that
checks that all ranks agree on the layout and that every rank's TopoInfo was computed (with MPI
detection it also carries each rank's node); a disagreement or a rank HCCL would reject raises
the same ValueError on every rank, so none is left waiting.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Mapping, cast

from ..core import settings
from .calc import calc_topo_info
from .info import TopoInfo
from .layout import Coords, Layout
from .machine import Machine, machine
from .ranktable import load_rank_table
from .spec import TopoSpec, parse_topo

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["Topology", "resolve_topo", "comm_topology"]

log = logging.getLogger("pyhccl")


@dataclass(frozen=True)
class Topology:
    """One rank's topology: the layout of all ranks, this rank's coordinates and groups, its TopoInfo."""

    rank: int
    source: str
    layout: Layout
    info: TopoInfo

    @classmethod
    def from_spec(cls, spec: TopoSpec, rank: int, source: str = "topo=") -> Topology:
        """Compute it without MPI (what every rank of a communicator computes for itself)."""
        return cls(rank, source, Layout(spec), calc_topo_info(spec, rank))

    @property
    def spec(self) -> TopoSpec:
        """The emulated (or detected) machine."""
        return self.layout.spec

    @property
    def coords(self) -> Coords:
        """This rank's super pod, server and device."""
        return self.layout.coords[self.rank]

    @property
    def machine(self) -> Machine:
        """The :class:`~pyhccl.topo.machine.Machine` of this layout (what ``build_plan`` takes); cached per layout."""
        return machine(self.spec)

    @property
    def groups(self) -> tuple[tuple[int, ...], ...]:
        """This rank's group at levels 0, 1 and 2 (ranks of the communicator)."""
        return self.layout.groups_of(self.rank)

    def __repr__(self) -> str:
        c = self.coords
        return (f"<Topology {self.spec.to_text()} from {self.source}: rank {self.rank} at super pod "
                f"{c.super_pod}, server {c.server}, device {c.device}>")


def resolve_topo(topo: Any = None, environ: Mapping[str, str] | None = None) -> tuple[TopoSpec | None, str]:
    """The spec by precedence, and where it came from; ``(None, "MPI")`` means detect from MPI."""
    if topo is not None:
        return parse_topo(topo), "topo="
    var, text = settings.topo_source(environ)
    if var == "PYHCCL_TOPO":
        return parse_topo(text), var
    if var == "PYHCCL_RANK_TABLE":
        return load_rank_table(text), f"PYHCCL_RANK_TABLE={text}"
    return None, "MPI"


def comm_topology(comm: MPI.Intracomm, topo: Any = None) -> Topology:
    """The topology of ``comm`` as seen by this rank, with one allgather on ``comm``.

    Raises:
        ValueError: a malformed spec or rank table, a layout whose device count differs from
            ``comm``'s size, ranks that disagree, or a layout HCCL rejects on some rank.
    """
    rank, size = comm.Get_rank(), comm.Get_size()
    spec, source = resolve_topo(topo)
    if spec is None:
        nodes = comm.allgather(_node_leader(comm))
        return Topology.from_spec(_spec_from_nodes(nodes), rank, source)
    if topo is None and spec.nranks != size:
        spec = _world_part(spec, comm)
    spec.check_size(size)
    try:
        mine, error = Topology.from_spec(spec, rank, source), None
    except ValueError as e:
        mine, error = None, str(e)
    gathered = comm.allgather((spec.to_text(), error))
    for r, (text, _) in enumerate(gathered):
        if text != gathered[0][0]:
            raise ValueError(f"ranks disagree on the topology: rank 0 has {gathered[0][0]!r}, rank {r} "
                             f"has {text!r}; give every rank the same topo= / PYHCCL_TOPO / PYHCCL_RANK_TABLE")
    failed = [(r, e) for r, (_, e) in enumerate(gathered) if e is not None]
    if failed:
        r, e = failed[0]
        raise ValueError(f"topology {gathered[0][0]} fails on {len(failed)} of {size} ranks; rank {r}: {e}")
    return cast(Topology, mine)         # no rank failed, so this one computed it


def _world_part(spec: TopoSpec, comm: MPI.Intracomm) -> TopoSpec:
    """A layout of ``COMM_WORLD`` (from the environment), seen by a smaller communicator."""
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    if spec.nranks != world.Get_size() or comm == world:
        return spec                         # check_size names the mismatch
    group, world_group = comm.Get_group(), world.Get_group()
    try:
        members = MPI.Group.Translate_ranks(group, list(range(comm.Get_size())), world_group)
    finally:
        group.Free()
        world_group.Free()
    layout = Layout(spec).restrict(list(members))
    if layout is None:
        log.warning("pyhccl: the ranks of one server of %s are not consecutive in this communicator; "
                    "its layout is taken as one server", spec.to_text())
        layout = [[list(range(len(members)))]]
    return replace(spec, layout=layout)


def _node_leader(comm: MPI.Intracomm) -> int:
    """The lowest rank of ``comm`` that shares memory with this one (``Split_type``, then local group maths)."""
    from mpi4py import MPI

    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    node_group, comm_group = node.Get_group(), comm.Get_group()
    try:
        return MPI.Group.Translate_ranks(node_group, [0], comm_group)[0]
    finally:
        node_group.Free()
        comm_group.Free()
        node.Free()


def _spec_from_nodes(leaders: list[int]) -> TopoSpec:
    """One server per node, one super pod; a node whose ranks are not consecutive flattens it."""
    servers: list[list[int]] = []
    for i, leader in enumerate(leaders):
        if i == 0 or leader != leaders[i - 1]:
            if leader in leaders[:i]:
                log.warning("pyhccl: MPI placed the ranks of one node non-consecutively (rank %d is on the "
                            "node of rank %d); HCCL numbers ranks server by server, so the layout is taken "
                            "as one server. Launch with block placement or set PYHCCL_TOPO.", i, leader)
                return TopoSpec([[list(range(len(leaders)))]])
            servers.append([])
        servers[-1].append(len(servers[-1]))
    return TopoSpec([servers])
