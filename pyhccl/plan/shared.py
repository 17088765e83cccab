"""Steps that share a template's actions: made when first read, equal to the plain :class:`~.ir.Step`.

A super pod's plans are a few templates' steps many times over: every group of a level runs one
template run per position, with its peers renamed and its data's regions moved where the group's
block starts (:class:`Renamed`), and a Parallel executor runs two levels' steps at once
(:class:`Merged`). Made in full, they would be every rank's actions anew; the simulator's rows
(:class:`pyhccl.verify.rows.PlanArrays`) read the templates' actions once instead, and the
runtime makes a step's actions when it first reads them.
"""

from __future__ import annotations

from typing import Iterator

from .ir import Action, Buf, Region, Step, _action, region_unchecked

__all__ = ["Renamed", "Merged", "moved_actions", "action_count", "EVERY"]

#: The bound of a move of every region of its buffer (``moved = (buf, delta)``): past every offset.
EVERY = 1 << 62


def _moved(r: Region | None, buf: Buf, delta: int, below: int | None = None) -> Region | None:
    """``r`` ``delta`` elements further on where it is in ``buf`` (with ``below``: only if it starts below it)."""
    if r is None or r.buf is not buf or (below is not None and r.offset >= below):
        return r
    return (region_unchecked if r.offset + delta >= 0 else Region)(buf, r.offset + delta, r.count, r.repeat, r.stride)


class Renamed(Step):
    """A step of a template run on positions (peers ``0..n-1``), for a group of ranks: its transfers are
    ``canon``'s with every peer ``p`` renamed ``group[p]``, and, with ``moved = (buf, delta)``, every region
    in ``buf`` (transfers' and locals') ``delta`` elements further on; with ``moved = (buf, delta, below)``,
    only the regions that start below ``below`` (data in scratch, the template's own scratch past it stays);
    made when first read.

    A super pod's plans hold millions of transfers that differ from a template's only in their peers
    and in where their group's data starts; the simulator's rows (:class:`pyhccl.verify.rows.PlanArrays`)
    read ``canon``, ``canon_local``, ``group`` and ``moved`` instead, every group's transfers as arrays.
    Equal to, hashed and pickled as the plain :class:`Step`.
    """

    __slots__ = ("template", "group", "moved", "_made", "_made_local")

    def __init__(self, step: Step, group: tuple[int, ...], moved: tuple | None = None) -> None:
        if isinstance(step, Renamed):
            inner, step = step, step.template
            group = tuple(group[p] for p in inner.group)
            if inner.moved is not None:
                if moved is None:
                    moved = inner.moved
                elif moved[0] is inner.moved[0] and len(moved) == len(inner.moved) == 2:
                    moved = (moved[0], inner.moved[1] + moved[1])
                else:                       # two buffers moved, or a bounded move: the inner move made now
                    step = Step(tuple(moved_actions(step.transfers, *inner.moved)),
                                tuple(moved_actions(step.local, *inner.moved)))
        if moved is not None and not moved[1]:
            moved = None
        object.__setattr__(self, "template", step)
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "moved", moved)
        object.__setattr__(self, "_made", None)
        object.__setattr__(self, "_made_local", None)

    @property
    def canon(self) -> tuple[Action, ...]:
        """The transfers as the template made them (peers are positions, before ``moved``)."""
        return self.template.transfers

    @property
    def canon_local(self) -> tuple[Action, ...]:
        """The local operations as the template made them (before ``moved``)."""
        return self.template.local

    @property
    def transfers(self) -> tuple[Action, ...]:      # type: ignore[override]
        if self._made is None:
            object.__setattr__(self, "_made", self._renamed())
        return self._made

    @property
    def local(self) -> tuple[Action, ...]:          # type: ignore[override]
        if self._made_local is None:
            object.__setattr__(self, "_made_local", self._moved_local())
        return self._made_local

    def _moved_local(self) -> tuple[Action, ...]:
        if self._made_local is not None:
            return self._made_local
        return self.template.local if self.moved is None else tuple(moved_actions(self.template.local, *self.moved))

    def _renamed(self) -> tuple[Action, ...]:
        if self._made is not None:
            return self._made
        g, n = self.group, len(self.group)
        # a peer that is not a position of the group (a broken template) becomes -1, as in the simulator's rows
        if self.moved is None:
            return tuple(_action(a.kind, g[a.peer] if type(a.peer) is int and 0 <= a.peer < n else -1, a.src, a.dst)
                         for a in self.canon)
        m = self.moved
        return tuple(_action(a.kind, g[a.peer] if type(a.peer) is int and 0 <= a.peer < n else -1,
                             _moved(a.src, *m), _moved(a.dst, *m)) for a in self.canon)

    def __eq__(self, other: object) -> bool:
        if type(other) is Renamed and self.template is other.template and self.group == other.group \
                and self.moved == other.moved:
            return True
        return _plain(self) == _plain(other) if isinstance(other, Step) else NotImplemented

    __hash__ = Step.__hash__

    def __reduce__(self):
        return Step, (self.transfers, self.local)


class Merged(Step):
    """Steps that run at the same time (an executor's merge of two parts' phases) as one step: its transfers
    are every part's in order, then its local operations every part's; made when first read.

    A Parallel executor merges two levels' steps on every rank; made, they would be every rank's
    transfers anew. The simulator's rows (:class:`pyhccl.verify.rows.PlanArrays`) read the parts
    instead (a :class:`Renamed` part as its template's). Equal to, hashed and pickled as the plain
    :class:`Step`.
    """

    __slots__ = ("parts", "_made", "_made_local")

    def __init__(self, parts: tuple[Step, ...]) -> None:
        object.__setattr__(self, "parts", tuple(q for p in parts for q in (p.parts if type(p) is Merged else (p,))))
        object.__setattr__(self, "_made", None)
        object.__setattr__(self, "_made_local", None)

    @property
    def transfers(self) -> tuple[Action, ...]:      # type: ignore[override]
        if self._made is None:
            object.__setattr__(self, "_made", self._joined(0))
        return self._made

    @property
    def local(self) -> tuple[Action, ...]:          # type: ignore[override]
        if self._made_local is None:
            object.__setattr__(self, "_made_local", self._joined(1))
        return self._made_local

    def _joined(self, local: int) -> tuple[Action, ...]:
        """The parts' transfers (0) or local operations (1), without keeping what a renamed part makes."""
        made = self._made_local if local else self._made
        if made is not None:
            return made
        return tuple(a for p in self.parts for a in _plain(p)[local])

    def __eq__(self, other: object) -> bool:
        if type(other) is Merged and len(other.parts) == len(self.parts) \
                and all(a is b for a, b in zip(self.parts, other.parts)):
            return True
        return _plain(self) == _plain(other) if isinstance(other, Step) else NotImplemented

    __hash__ = Step.__hash__

    def __reduce__(self):
        return Step, (self.transfers, self.local)


def _plain(step: Step) -> tuple[tuple[Action, ...], tuple[Action, ...]]:
    """``step``'s transfers and local operations, without keeping what a :class:`Renamed` or :class:`Merged` step
    makes (a sweep compares the plan sets of names that build equal ones)."""
    if type(step) is Renamed:
        return step._renamed(), step._moved_local()
    if type(step) is Merged:
        return step._joined(0), step._joined(1)
    return step.transfers, step.local


def moved_actions(acts: tuple[Action, ...], buf: Buf, delta: int, below: int | None = None) -> Iterator[Action]:
    """``acts`` with every region in ``buf`` (with ``below``: that starts below it) ``delta`` elements further on."""
    return (_action(a.kind, a.peer, _moved(a.src, buf, delta, below), _moved(a.dst, buf, delta, below))
            for a in acts)


def action_count(step: Step) -> int:
    """Transfers and local operations of ``step`` (a :class:`Renamed` or :class:`Merged` step's without making them)."""
    if type(step) is Renamed:
        return len(step.canon) + len(step.canon_local)
    if type(step) is Merged:
        return sum(map(action_count, step.parts))
    return len(step.transfers) + len(step.local)
