"""Placement: which rank of a communicator is which HCCL rank.

HCCL numbers ranks super pod by super pod, server by server (the rank table's order,
src/framework/.../rank_table parsing; CalcTopoShape's ``serverIdx`` and level groups assume it).
Launchers do not always place ranks that way: ``mpirun --map-by node``, Slurm's cyclic
distribution or MPICH's emulated cliques put consecutive ranks on different hosts. pyhccl keeps
the user's ranks and numbers the machine HCCL's way underneath: a :class:`Placement` is a layout
in HCCL's numbering and ``order``, the communicator rank at each HCCL rank. Block placement gives
the identity order; any other gives the same layout, so the same plans and the same results.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from .layout import Layout
from .spec import TopoSpec

__all__ = ["Placement", "node_order", "from_nodes", "from_rows", "restrict", "inverse"]


@dataclass(frozen=True)
class Placement:
    """A layout in HCCL's numbering and ``order[h]``: the communicator rank at HCCL rank ``h``."""

    spec: TopoSpec
    order: tuple[int, ...]

    def __post_init__(self) -> None:
        if sorted(self.order) != list(range(self.spec.nranks)):
            raise ValueError(f"expecting order to be a permutation of range({self.spec.nranks}), got {self.order}")

    @property
    def identity(self) -> bool:
        """Block placement: HCCL rank ``h`` is communicator rank ``h``."""
        return all(h == r for h, r in enumerate(self.order))


def inverse(order: Sequence[int]) -> tuple[int, ...]:
    """``inv[r]``: the HCCL rank of communicator rank ``r``."""
    inv = [0] * len(order)
    for h, r in enumerate(order):
        inv[r] = h
    return tuple(inv)


def node_order(leaders: Sequence[int]) -> tuple[int, ...]:
    """The ranks node by node: nodes by their lowest rank, ranks ascending within a node.

    ``leaders[r]`` is the lowest rank sharing memory with ``r`` (its node's name).
    """
    return tuple(sorted(range(len(leaders)), key=lambda r: (leaders[r], r)))


def from_nodes(leaders: Sequence[int], pod_servers: int = 0) -> Placement:
    """One server per node (devices 0, 1, ... in rank order), ``pod_servers`` servers per super pod (0: one pod).

    Raises:
        ValueError: ``pod_servers`` that does not divide the servers into whole super pods.
    """
    order = node_order(leaders)
    servers: list[list[int]] = []
    for i, r in enumerate(order):
        if i == 0 or leaders[r] != leaders[order[i - 1]]:
            servers.append([])
        servers[-1].append(len(servers[-1]))
    per = pod_servers or len(servers)
    if len(servers) % per:
        raise ValueError(f"expecting PYHCCL_SUPER_POD_SERVERS to divide the {len(servers)} servers (nodes) into "
                         f"whole super pods, got {per}; give a divisor of {len(servers)} or unset it")
    return Placement(TopoSpec([servers[i:i + per] for i in range(0, len(servers), per)]), order)


def from_rows(rows: Sequence[tuple[int, str, str, int]], name: str, **options: object) -> Placement:
    """A placement from (rank, super pod, server, device id) rows in any order (a rank table).

    HCCL's numbering: super pods by their lowest rank, servers within a pod by their lowest rank,
    ranks ascending within a server.

    Raises:
        ValueError: rank ids that are not 0 .. R-1 each once, or a server named in two super pods.
    """
    ranks = sorted(r for r, *_ in rows)
    if ranks != list(range(len(rows))):
        missing = sorted(set(range(len(rows))) - set(ranks))
        raise ValueError(f"{name}: expecting rank_id 0 .. {len(rows) - 1} each once, got {ranks}"
                         + (f" (missing {missing})" if missing else ""))
    pod_of: dict[str, str] = {}
    for rank, pod, server, _ in rows:
        if pod_of.setdefault(server, pod) != pod:
            raise ValueError(f"{name}: server {server!r} is in super pods {pod_of[server]!r} and {pod!r} "
                             f"(rank {rank}); "
                             "each server belongs to exactly one super pod")
    first_pod: dict[str, int] = {}
    first_server: dict[str, int] = {}
    for rank, pod, server, _ in rows:
        first_pod[pod] = min(first_pod.get(pod, rank), rank)
        first_server[server] = min(first_server.get(server, rank), rank)
    placed = sorted(rows, key=lambda row: (first_pod[row[1]], first_server[row[2]], row[0]))
    return Placement(TopoSpec(_nest(placed), **options), tuple(row[0] for row in placed))  # type: ignore[arg-type]


def _nest(placed: Sequence[tuple]) -> list[list[list[int]]]:
    """(rank, pod, server, device id, ...) rows in HCCL order -> super pods -> servers -> device ids."""
    layout: list[list[list[int]]] = []
    last: tuple | None = None
    for _, pod, server, dev, *_ in placed:
        if last is None or pod != last[0]:
            layout.append([])
        if last is None or (pod, server) != last:
            layout[-1].append([])
        layout[-1][-1].append(dev)
        last = (pod, server)
    return layout


def restrict(placement: Placement, members: Sequence[int]) -> Placement:
    """The placement a communicator of ``members`` (communicator ranks of ``placement``, in the new
    communicator's rank order) sees: they keep their super pods, servers and device ids, as HCCL
    derives a sub-communicator's rank graph from its parent's."""
    layout = Layout(placement.spec)
    hccl = inverse(placement.order)
    rows = sorted(((new, layout.coords[hccl[old]].super_pod, layout.coords[hccl[old]].server,
                    layout.coords[hccl[old]].device_id, hccl[old]) for new, old in enumerate(members)),
                  key=lambda row: row[4])       # the parent's HCCL order
    return Placement(replace(placement.spec, layout=_nest(rows)), tuple(row[0] for row in rows))
