"""A machine: a layout and the views every layer above reads (TopoInfo per rank, groups per level)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .calc import calc_topo_info
from .info import TopoInfo
from .layout import Layout
from .spec import parse_topo

__all__ = ["Machine", "machine"]


@dataclass(frozen=True)
class Machine:
    """An emulated machine: its spec text, layout, and the TopoInfo views the selectors read.

    ``infos`` holds rank 0's view on a symmetric machine (every rank's is alike) and every
    rank's view otherwise (HCCL selects per rank; the ranks must agree).
    """

    text: str
    layout: Layout
    infos: tuple[TopoInfo, ...]

    @property
    def nranks(self) -> int:
        return self.layout.nranks

    @property
    def uniform(self) -> bool:
        """Every group of a level has the same size (HCCL's symmetric layouts)."""
        return self.layout.uniform

    def info(self, rank: int) -> TopoInfo:
        """``rank``'s TopoInfo."""
        return self.infos[rank if len(self.infos) > 1 else 0]

    def groups(self, rank: int, nlevels: int) -> tuple[tuple[int, ...], ...]:
        """``rank``'s group at each level of an algorithm with ``nlevels`` levels (``Layout.algo_groups``)."""
        return _groups(self.text, nlevels)[rank]

    def all_groups(self, nlevels: int) -> tuple[tuple[tuple[int, ...], ...], ...]:
        """Every rank's groups for an algorithm with ``nlevels`` levels, rank by rank."""
        return _groups(self.text, nlevels)


def machine(topo: Any) -> Machine:
    """The :class:`Machine` for a spec (text such as ``"1x2x4"``, TopoMeta lists, a TopoSpec); cached."""
    return _machine(topo if isinstance(topo, str) else parse_topo(topo).to_text())


@lru_cache(maxsize=64)
def _machine(text: str) -> Machine:
    spec = parse_topo(text)
    layout = Layout(spec)
    ranks = range(layout.nranks) if not layout.uniform else range(1)
    return Machine(spec.to_text(), layout, tuple(calc_topo_info(spec, r) for r in ranks))


@lru_cache(maxsize=64)
def _groups(text: str, nlevels: int) -> tuple:
    layout = _machine(text).layout
    return tuple(layout.algo_groups(r, nlevels) for r in range(layout.nranks))
