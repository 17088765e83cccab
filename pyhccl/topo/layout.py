"""Layout: every rank's coordinates (super pod, server, device) and the rank groups of each level.

Levels as HCCL's templates number them (hccl-templates.md §0.4; topo_match_multilevel.cc
``TopoForLayer1``): level 0 = the ranks of one server; level 1 = the ranks with the same device
index in the other servers of the same super pod ("same-number cards"); level 2 = the ranks at
the same server and device index in the other super pods. On a symmetric machine this is
``rank = idx0 + L0*idx1 + L0*L1*idx2``; on an asymmetric one a group may be smaller (a device
index that a shorter server lacks).
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from functools import cached_property

from .spec import TopoSpec

__all__ = ["Coords", "Layout", "LEVEL_NAMES"]

#: What each level's groups are.
LEVEL_NAMES = ("same server",
               "same device index, other servers of the super pod",
               "same server and device index, other super pods")


@dataclass(frozen=True)
class Coords:
    """Where a rank sits: super pod, server, device.

    ``server`` is numbered over the whole machine (HCCL's ``serverIdx``), ``server_in_pod``
    within the super pod; ``device`` is the index within the server (the rank table's
    ``local_id``) and ``device_id`` the spec's device id.
    """

    super_pod: int
    server: int
    device: int
    device_id: int
    server_in_pod: int


class Layout:
    """Coordinates and level groups of every rank of a :class:`TopoSpec`.

    Args:
        spec: the machine; ranks are numbered super pod by super pod, server by server.
    """

    def __init__(self, spec: TopoSpec) -> None:
        self.spec = spec
        coords, server = [], 0
        for p, pod in enumerate(spec.layout):
            for s, ids in enumerate(pod):
                coords += [Coords(p, server, d, dev, s) for d, dev in enumerate(ids)]
                server += 1
        self.coords: tuple[Coords, ...] = tuple(coords)

    @property
    def nranks(self) -> int:
        """Ranks in the layout."""
        return len(self.coords)

    @cached_property
    def levels(self) -> tuple[tuple[tuple[int, ...], ...], ...]:
        """Per level (0, 1, 2), its groups: a partition of all ranks, groups ordered by first rank."""
        keys = (lambda c: c.server, lambda c: (c.super_pod, c.device),
                lambda c: (c.server_in_pod, c.device))
        out = []
        for key in keys:
            groups: dict = {}
            for rank, c in enumerate(self.coords):
                groups.setdefault(key(c), []).append(rank)
            out.append(tuple(tuple(g) for g in groups.values()))
        return tuple(out)

    def groups_of(self, rank: int) -> tuple[tuple[int, ...], ...]:
        """The group of ``rank`` at levels 0, 1 and 2."""
        if not 0 <= rank < self.nranks:
            raise ValueError(f"expecting rank in range({self.nranks}), got {rank}")
        return tuple(level[at[rank]] for level, at in zip(self.levels, self._group_index))

    @cached_property
    def _group_index(self) -> tuple[list[int], ...]:
        """Per level, each rank's group index in :attr:`levels` (one pass, not a search per rank)."""
        out = []
        for level in self.levels:
            at = [0] * self.nranks
            for i, g in enumerate(level):
                for r in g:
                    at[r] = i
            out.append(at)
        return tuple(out)

    @cached_property
    def uniform(self) -> bool:
        """Whether all groups of each level have one size (a symmetric machine)."""
        return all(len({len(g) for g in level}) == 1 for level in self.levels)

    def algo_groups(self, rank: int, nlevels: int) -> tuple[tuple[int, ...], ...]:
        """``rank``'s group at each level of an algorithm with ``nlevels`` levels.

        One level: all ranks (TopoMatchOneLevel takes the lowest level covering every rank).
        Two: the server, then the ranks at the same device index in every server, so that the top
        level covers all ranks (TopoMatchTwoLevel, hccl-selection.md §3.11). Three: the server,
        the same device index in the super pod, the same server and device index in other pods.
        """
        if nlevels == 1:
            return (self._everyone,)
        g0, g1, g2 = self.groups_of(rank)
        if nlevels == 2 and not self.uniform:
            l0, cuts, across = self._cut
            return cuts[rank // l0], across[rank % l0]
        if nlevels == 2:
            return g0, self._same_device[self.coords[rank].device]
        return g0, g1, g2

    @cached_property
    def _everyone(self) -> tuple[int, ...]:
        """Every rank, in order (one tuple that every rank's one-level group shares)."""
        return tuple(range(self.nranks))

    @cached_property
    def _cut(self) -> tuple[int, list[tuple[int, ...]], list[tuple[int, ...]]]:
        """Servers of different sizes: level-0 groups cut to gcd(sizes) ranks (topo_host.cc CalcLevel1Nhr;
        hccl-templates.md §0.4; gcd 1 leaves one flat level-1 group, HCCL's "NHR-HCF"): ``(gcd, the cuts in rank
        order, the ranks at each position of a cut)``, made once for every rank to share."""
        l0, n = math.gcd(*(len(g) for g in self.levels[0])), self.nranks     # n: a multiple of l0
        return l0, [tuple(range(s, s + l0)) for s in range(0, n, l0)], [tuple(range(i, n, l0)) for i in range(l0)]

    @cached_property
    def _same_device(self) -> dict[int, tuple[int, ...]]:
        """Per device index, the ranks at it in every server of the machine, in rank order."""
        out: dict[int, list[int]] = {}
        for r, c in enumerate(self.coords):
            out.setdefault(c.device, []).append(r)
        return {d: tuple(rs) for d, rs in out.items()}
