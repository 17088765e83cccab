"""Every rank's plan as flat arrays: one row per action (the simulator's input; its atoms: :mod:`.atoms`)."""

from __future__ import annotations

from itertools import chain
from operator import attrgetter
from types import SimpleNamespace
from typing import Sequence

import numpy as np

from ..plan.ir import Buf, Kind, Plan, Renamed, with_peer
from .atoms import Moves

__all__ = ["BUF_NAMES", "SEND", "RECV", "REDUCE", "COPY", "PlanArrays", "Side"]

BUF_NAMES = ("in", "out", "scr")
_BUF = {Buf.INPUT: 0, Buf.OUTPUT: 1, Buf.SCRATCH: 2, None: -1}
SEND, RECV, REDUCE, COPY = range(4)
_NO_REGION = SimpleNamespace(buf=None, offset=0, count=0, repeat=1, stride=None)
_KIND = {Kind.SEND: SEND, Kind.RECV: RECV, Kind.REDUCE: REDUCE, Kind.COPY: COPY}


class PlanArrays:
    """Every action of every plan, one row each, ordered by (step, rank, transfers before locals, index).

    Columns: ``step, rank, local (0/1), index, kind, peer``, and per side (``s`` source, ``d``
    destination; a send has only a source, a receive only a destination) ``buf, off, cnt, rep,
    stride`` (``buf`` -1 where the action has no such region, ``stride`` 0 for one piece). In
    place, input regions are rewritten into the output buffer at the rank's ``shift``.
    """

    def __init__(self, plans: Sequence[Plan], shift: Sequence[int] | None, reserve=None) -> None:
        """``reserve``: called with the number of actions before their rows are made (the memory guard)."""
        parts, groups = [], []          # per step: its transfers, then its locals; a renamed step's group
        for p in plans:
            for s in p.steps:
                if type(s) is Renamed:
                    parts += (s.canon, s.local)
                    groups += (s.group, None)
                else:
                    parts += (s.transfers, s.local)
                    groups += (None, None)
        nsteps = np.array([len(p.steps) for p in plans], dtype=np.int64)
        step_of_part = np.arange(len(parts)) // 2 - np.repeat(np.cumsum(nsteps) - nsteps, 2 * nsteps)
        by_step = np.argsort(step_of_part, kind="stable")      # (step, rank, transfers | locals): the rows' order
        order = by_step.tolist()
        parts, groups = [parts[i] for i in order], [groups[i] for i in order]
        sizes = np.fromiter(map(len, parts), np.int64, len(parts))
        if reserve is not None:
            reserve(int(sizes.sum()))
        self.step = np.repeat(step_of_part[by_step], sizes)
        self.rank = np.repeat(np.repeat(np.array([p.rank for p in plans], dtype=np.int64), 2 * nsteps)[by_step], sizes)
        self.local = np.repeat(by_step % 2, sizes)
        self.index = np.arange(len(self.step)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        # plans share parts and actions (templates are memoised, renamed steps share the template's): read each once
        _, first, at = np.unique(np.fromiter(map(id, parts), np.int64, len(parts)), return_index=True,
                                 return_inverse=True)
        self._acts = acts = list(chain.from_iterable(parts[i] for i in first.tolist()))
        dsizes = sizes[first]
        self._row_act = row_act = np.repeat((np.cumsum(dsizes) - dsizes)[at.reshape(-1)], sizes) + self.index
        _, first, at = np.unique(np.fromiter(map(id, acts), np.int64, len(acts)), return_index=True, return_inverse=True)
        distinct = [acts[i] for i in first.tolist()]
        at = at.reshape(-1)[row_act]
        kind = _ints(distinct, "kind", _KIND)
        peer = np.full(len(distinct), -1, np.int64)         # read where a transfer needs one
        xfer = np.flatnonzero((kind == SEND) | (kind == RECV))
        peer[xfer] = _ints([distinct[i] for i in xfer.tolist()], "peer")
        self.kind, self.peer = kind[at], peer[at]
        _rename(self.peer, groups, sizes)
        moved = None if shift is None else np.asarray(shift, dtype=np.int64)[self.rank]
        self.src = _side(list(map(_GET["src"], distinct)), at, moved)
        self.dst = _side(list(map(_GET["dst"], distinct)), at, moved)
        self.nsteps = int(self.step.max()) + 1 if len(self.step) else 0
        self.step_start = np.searchsorted(self.step, np.arange(self.nsteps + 1))

    def action(self, row: int):
        """The IR action of ``row`` (for messages)."""
        a, peer = self._acts[self._row_act[row]], int(self.peer[row])
        return with_peer(a, peer) if type(a.peer) is int and a.peer != peer else a     # a renamed transfer


def _rename(peer: np.ndarray, groups: list, sizes: np.ndarray) -> None:
    """Rename in place the peers of the rows of renamed parts (``groups[i]``: part i's group, or None): position
    ``p`` becomes ``group[p]``, -1 (a bad peer) where ``p`` is not a position of the group."""
    table: dict[tuple, int] = {}
    code, last, c = [], None, -1
    for g in groups:
        if g is None:
            code.append(-1)
            continue
        if g is not last:
            last, c = g, table.setdefault(g, len(table))
        code.append(c)
    if not table:
        return
    lens = np.fromiter(map(len, table), np.int64, len(table))
    flat = np.fromiter(chain.from_iterable(table), np.int64, int(lens.sum()))
    rcode = np.repeat(np.array(code, dtype=np.int64), sizes)
    rows = np.flatnonzero(rcode >= 0)
    c, p = rcode[rows], peer[rows]
    ok = (p >= 0) & (p < lens[c])
    peer[rows] = np.where(ok, flat[np.where(ok, (np.cumsum(lens) - lens)[c] + p, 0)], -1)


def _side(regions: list, order: np.ndarray, shift: np.ndarray | None) -> "Side":
    """The regions (None for none) as a :class:`Side`, rows in ``order``; in place (``shift``: each row's rank's
    input offset in the output), input regions rewritten into the output."""
    ids = np.fromiter(map(id, regions), np.int64, len(regions))
    _, first, at = np.unique(ids, return_index=True, return_inverse=True)      # actions share regions: read once
    rs = [regions[i] or _NO_REGION for i in first.tolist()]
    order = at.reshape(-1)[order]
    buf = _ints(rs, "buf", _BUF)[order]
    off = _ints(rs, "offset")[order]
    if shift is not None:
        aliased = buf == 0
        buf[aliased] = 1
        off[aliased] += shift[aliased]
    rep = _ints(rs, "repeat")
    stride = np.zeros(len(rs), np.int64)                    # None (one piece) but where repeat > 1
    multi = np.flatnonzero(rep > 1)
    stride[multi] = _ints([rs[i] for i in multi.tolist()], "stride")
    return Side(buf, off, _ints(rs, "count")[order], rep[order], stride[order])


_GET = {f: attrgetter(f) for f in ("kind", "peer", "src", "dst", "buf", "offset", "count", "repeat", "stride")}


def _ints(objs: list, field: str, code: dict | None = None) -> np.ndarray:
    """Attribute ``field`` of every object (through ``code`` where given) as int64, read in C; where any is
    None or not in ``code`` (a malformed plan), read one at a time, with -1 for those."""
    try:
        values = map(_GET[field], objs)
        return np.fromiter(values if code is None else map(code.__getitem__, values), np.int64, len(objs))
    except (TypeError, KeyError):
        values = map(_GET[field], objs)
        if code is not None:
            values = (code.get(v) for v in values)
        return np.array([-1 if v is None else v for v in values], dtype=np.int64)


class Side:
    """Regions as arrays: buffer code, offset, piece count, pieces, stride (rows of :class:`PlanArrays`)."""

    def __init__(self, buf: np.ndarray, off: np.ndarray, cnt: np.ndarray, rep: np.ndarray,
                 stride: np.ndarray) -> None:
        self.buf, self.off, self.cnt, self.rep, self.stride = buf, off, cnt, rep, stride
        self.size = cnt * rep
        self.end = off + stride * (rep - 1) + cnt          # one past the last element

    def take(self, rows: np.ndarray, base: np.ndarray) -> "Moves":
        """The regions of ``rows`` as keyed pieces (``base``: the key of element 0 of each row's buffer)."""
        return Moves(base + self.off[rows], self.cnt[rows], self.rep[rows], self.stride[rows])
