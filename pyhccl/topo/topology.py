"""Topology of a communicator: where its layout comes from, this rank's place in it, its TopoInfo.

Computed once per communicator, as HCCL computes TopoInfo once per communicator
(src/ops/op_common/op_common.cc ``HcclCalcTopoInfo``). The layout comes from the first of:

1. the ``topo=`` argument;
2. ``PYHCCL_TOPO`` (a spec, see :mod:`pyhccl.topo.spec`);
3. the rank table file named by ``PYHCCL_RANK_TABLE`` (see :mod:`pyhccl.topo.ranktable`);
4. MPI itself: the ranks that share memory (``Split_type(COMM_TYPE_SHARED)``) form a server,
   ``PYHCCL_SUPER_POD_SERVERS`` servers a super pod (default: all). On a multi-host job this is
   the real machine, whatever the placement.

The layout is in HCCL's numbering (server by server); ``Topology.order`` maps it to the
communicator's ranks (:mod:`pyhccl.topo.placement`). Detection orders the nodes by their lowest
rank; a spec (``topo=``, ``PYHCCL_TOPO``) is laid over the ranks in that same node order, so a
spec of the nodes' shape gives the real machine under any placement; a rank table says where
each rank is. A layout from the environment describes ``COMM_WORLD``; a smaller communicator
(a ``Split``) sees its members' part of it, as HCCL derives a sub-communicator's rank graph from
its parent's (a ``PYHCCL_TOPO`` of the world is then read in world rank order).

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
from .placement import Placement, from_nodes, inverse, node_order, restrict
from .ranktable import rank_table_placement
from .spec import TopoSpec, parse_topo

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["Topology", "resolve_topo", "comm_topology"]

log = logging.getLogger("pyhccl")


@dataclass(frozen=True)
class Topology:
    """One rank's topology: the layout of all ranks, this rank's coordinates and groups, its TopoInfo.

    ``rank``, ``layout``, ``groups`` and ``info`` are in HCCL's numbering (server by server, what
    plans are built in); ``order[h]`` is the communicator rank at HCCL rank ``h`` (the identity
    under block placement), ``comm_rank`` and ``comm_groups`` the same in the communicator's ranks.
    """

    rank: int
    source: str
    layout: Layout
    info: TopoInfo
    order: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.order:
            object.__setattr__(self, "order", tuple(range(self.layout.nranks)))

    @classmethod
    def from_spec(cls, spec: TopoSpec, rank: int, source: str = "topo=", order: tuple[int, ...] = ()) -> Topology:
        """Compute it without MPI (what every rank of a communicator computes for itself); ``rank`` is HCCL's."""
        return cls(rank, source, Layout(spec), calc_topo_info(spec, rank), order)

    @property
    def identity(self) -> bool:
        """Block placement: HCCL rank ``h`` is communicator rank ``h``."""
        return all(h == r for h, r in enumerate(self.order))

    @property
    def comm_rank(self) -> int:
        """This rank in the communicator's numbering."""
        return self.order[self.rank]

    def hccl_rank(self, comm_rank: int) -> int:
        """The HCCL rank of communicator rank ``comm_rank``."""
        return inverse(self.order)[comm_rank]

    @property
    def comm_groups(self) -> tuple[tuple[int, ...], ...]:
        """:attr:`groups` in the communicator's ranks."""
        return tuple(tuple(self.order[h] for h in g) for g in self.groups)

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
        where = "" if self.identity else f" (communicator rank {self.comm_rank})"
        return (f"<Topology {self.spec.to_text()} from {self.source}: HCCL rank {self.rank}{where} at super pod "
                f"{c.super_pod}, server {c.server}, device {c.device}>")


def resolve_topo(topo: Any = None, environ: Mapping[str, str] | None = None) -> tuple[TopoSpec | None, str]:
    """The spec by precedence, and where it came from; ``(None, "MPI")`` means detect from MPI."""
    found, source = _resolve(topo, environ)
    return (found.spec if isinstance(found, Placement) else found), source


def _resolve(topo: Any, environ: Mapping[str, str] | None = None) -> tuple[TopoSpec | Placement | None, str]:
    """A spec (laid over the nodes), a rank table's placement, or None (detect), and the source."""
    if topo is not None:
        return parse_topo(topo), "topo="
    var, text = settings.topo_source(environ)
    if var == "PYHCCL_TOPO":
        return parse_topo(text), var
    if var == "PYHCCL_RANK_TABLE":
        try:
            return rank_table_placement(text), f"PYHCCL_RANK_TABLE={text}"
        except FileNotFoundError:
            raise FileNotFoundError(f"PYHCCL_RANK_TABLE names {text!r}, which does not exist: set it to a rank table "
                                    "file, or unset it") from None
    return None, "MPI"


def comm_topology(comm: MPI.Intracomm, topo: Any = None) -> Topology:
    """The topology of ``comm`` as seen by this rank, with two allgathers on ``comm``.

    Raises:
        ValueError: a malformed spec or rank table, a layout whose device count differs from
            ``comm``'s size, ranks that disagree, or a layout HCCL rejects on some rank.
    """
    rank, size = comm.Get_rank(), comm.Get_size()
    found, source = _resolve(topo)
    if found is None:
        placement: TopoSpec | Placement = from_nodes(comm.allgather(_node_leader(comm)), settings.super_pod_servers())
    elif isinstance(found, TopoSpec) and found.nranks == size:
        placement = Placement(found, node_order(comm.allgather(_node_leader(comm))))
    elif isinstance(found, TopoSpec) and topo is not None:
        placement = found                   # check_size names the mismatch
    else:
        placement = _world_part(found, comm)
    spec = placement.spec if isinstance(placement, Placement) else placement
    spec.check_size(size)
    order = placement.order if isinstance(placement, Placement) else tuple(range(size))
    try:
        mine, error = Topology.from_spec(spec, inverse(order)[rank], source, order), None
    except ValueError as e:
        mine, error = None, str(e)
    gathered = comm.allgather((spec.to_text(), order, error))
    for r, (text, o, _) in enumerate(gathered):
        if (text, o) != gathered[0][:2]:
            raise ValueError(f"ranks disagree on the topology: rank 0 has {gathered[0][0]!r} (order {gathered[0][1]}), "
                             f"rank {r} has {text!r} (order {o}); give every rank the same topo= / PYHCCL_TOPO / "
                             "PYHCCL_RANK_TABLE / PYHCCL_SUPER_POD_SERVERS")
    failed = [(r, e) for r, (_, _, e) in enumerate(gathered) if e is not None]
    if failed:
        r, e = failed[0]
        raise ValueError(f"topology {gathered[0][0]} fails on {len(failed)} of {size} ranks; rank {r}: {e}")
    return cast(Topology, mine)         # no rank failed, so this one computed it


def _world_part(found: TopoSpec | Placement, comm: MPI.Intracomm) -> TopoSpec | Placement:
    """A layout of ``COMM_WORLD`` (from the environment), seen by a smaller communicator."""
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    spec = found.spec if isinstance(found, Placement) else found
    if spec.nranks != world.Get_size():
        return spec                         # check_size names the mismatch
    if comm == world:
        return found
    group, world_group = comm.Get_group(), world.Get_group()
    try:
        members = MPI.Group.Translate_ranks(group, list(range(comm.Get_size())), world_group)
    finally:
        group.Free()
        world_group.Free()
    if isinstance(found, TopoSpec):         # PYHCCL_TOPO of the world: in world rank order
        found = Placement(found, tuple(range(found.nranks)))
    return restrict(found, list(members))


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
