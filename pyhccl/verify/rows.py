"""Every rank's plan as flat arrays: one row per action (the simulator's input; its atoms: :mod:`.atoms`)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from operator import attrgetter
from types import SimpleNamespace
from typing import Sequence

import numpy as np

from ..plan.ir import Buf, Kind, Plan, with_peer
from ..plan.shared import EVERY, Merged, Renamed, moved_actions
from .atoms import Moves

__all__ = ["BUF_NAMES", "SEND", "RECV", "REDUCE", "COPY", "PlanArrays", "Side", "counts"]

BUF_NAMES = ("in", "out", "scr")
_BUF = {Buf.INPUT: 0, Buf.OUTPUT: 1, Buf.SCRATCH: 2, None: -1}
_BUFS = (Buf.INPUT, Buf.OUTPUT, Buf.SCRATCH)
SEND, RECV, REDUCE, COPY = range(4)
_NO_REGION = SimpleNamespace(buf=None, offset=0, count=0, repeat=1, stride=None)
_KIND = {Kind.SEND: SEND, Kind.RECV: RECV, Kind.REDUCE: REDUCE, Kind.COPY: COPY}
_BOTH_AT_ONCE = 1 << 20     # rows past which the two sides' columns are made in two threads


class PlanArrays:
    """Every action of every plan, one row each, ordered by (step, rank, transfers before locals, index).

    Columns: ``step, rank, local (0/1), index, kind, peer``, and per side (``s`` source, ``d``
    destination; a send has only a source, a receive only a destination) ``buf, off, cnt, rep,
    stride`` (``buf`` -1 where the action has no such region, ``stride`` 0 for one piece). In
    place, input regions are rewritten into the output buffer at the rank's ``shift``.
    """

    def __init__(self, plans: Sequence[Plan], shift: Sequence[int] | None, reserve=None) -> None:
        """``reserve``: called with the number of actions before their rows are made (the memory guard)."""
        # per step: its transfers, then its locals (a merged step's: every part's transfers, then every part's
        # locals); a renamed part's group and move
        parts, groups, moves, merged = [], [], [], []     # merged: (first part, parts) of each merged step
        for p in plans:
            for s in p.steps:
                if type(s) is Merged:
                    merged.append((len(parts), len(s.parts)))
                    halves = [_halves(q) for q in s.parts]
                    parts += [h[0] for h in halves] + [h[1] for h in halves]
                    groups += [h[2] for h in halves] + [None] * len(halves)
                    moves += [h[3] for h in halves] * 2
                else:
                    xfer, local, group, move = _halves(s)
                    parts += (xfer, local)
                    groups += (group, None)
                    moves += (move, move)
        nsteps = np.array([len(p.steps) for p in plans], dtype=np.int64)
        half = np.ones(int(nsteps.sum()), np.int64)                  # parts a step's transfers (and locals) come in
        if merged:              # step j's first part is part 2 j, plus 2 k - 2 for each merged step of k parts before it
            at, k = np.array(merged, dtype=np.int64).T
            half[(at - (np.cumsum(2 * k - 2) - (2 * k - 2))) // 2] = k
        step_no = np.arange(len(half)) - np.repeat(np.cumsum(nsteps) - nsteps, nsteps)    # a step's index in its plan
        step_of_part = np.repeat(step_no, 2 * half)
        within = np.arange(len(parts)) - np.repeat(np.cumsum(2 * half) - 2 * half, 2 * half)
        local_of_part = within >= np.repeat(half, 2 * half)
        by_step = np.argsort(step_of_part, kind="stable")      # (step, rank, transfers | locals): the rows' order
        sizes = np.fromiter(map(len, parts), np.int64, len(parts))[by_step]
        if reserve is not None:
            reserve(int(sizes.sum()))
        self.step = np.repeat(step_of_part[by_step], sizes)
        rank_of_part = np.repeat(np.repeat(np.array([p.rank for p in plans], dtype=np.int64), nsteps), 2 * half)
        rank_of_part = rank_of_part[by_step]
        self.rank = np.repeat(rank_of_part, sizes)
        local_of_part = local_of_part[by_step]
        self.local = np.repeat(local_of_part.astype(np.int64), sizes)
        rows = np.arange(len(self.step))
        in_part = rows - np.repeat(np.cumsum(sizes) - sizes, sizes)      # a row's index in its part
        if merged:              # a row's index among its step's transfers (or locals), the parts one after the other
            sp, rp, lp = step_of_part[by_step], rank_of_part, local_of_part
            new = np.concatenate(([True], (sp[1:] != sp[:-1]) | (rp[1:] != rp[:-1]) | (lp[1:] != lp[:-1])))
            row0 = np.cumsum(sizes) - sizes
            self.index = rows - np.repeat(row0[np.flatnonzero(new)][np.cumsum(new) - 1], sizes)
        else:
            self.index = in_part
        # plans share parts and actions (templates are memoised, renamed steps share the template's): read each once
        dparts, at = _distinct(parts, by_step)
        self._acts = acts = list(chain.from_iterable(dparts))
        dsizes = np.fromiter(map(len, dparts), np.int64, len(dparts))
        self._row_act = row_act = np.repeat((np.cumsum(dsizes) - dsizes)[at], sizes) + in_part
        distinct, at = _distinct(acts)
        at = at[row_act]
        kind = _ints(distinct, "kind", _KIND)
        peer = np.full(len(distinct), -1, np.int64)         # read where a transfer needs one
        xfer = np.flatnonzero((kind == SEND) | (kind == RECV))
        peer[xfer] = _ints([distinct[i] for i in xfer.tolist()], "peer")
        self.kind, self.peer = kind[at], peer[at]
        _rename(self.peer, *_distinct(groups, by_step), sizes)
        self._moves = _moves(*_distinct(moves, by_step), sizes)
        aliased = None if shift is None else np.asarray(shift, dtype=np.int64)[self.rank]
        sides = [list(map(_GET[f], distinct)) for f in ("src", "dst")]
        if len(at) > _BOTH_AT_ONCE:         # (two threads: numpy's passes over the rows release the GIL)
            with ThreadPoolExecutor(2) as pool:
                self.src, self.dst = pool.map(lambda rs: _side(rs, at, self._moves, aliased), sides)
        else:
            self.src, self.dst = (_side(rs, at, self._moves, aliased) for rs in sides)
        self.nsteps = int(self.step.max()) + 1 if len(self.step) else 0
        self.step_start = np.searchsorted(self.step, np.arange(self.nsteps + 1))

    def action(self, row: int):
        """The IR action of ``row`` (for messages)."""
        a, peer = self._acts[self._row_act[row]], int(self.peer[row])
        if self._moves is not None and self._moves[1][row]:       # a moved step's: its regions where they are
            buf, delta, below = (int(m[row]) for m in self._moves)
            a = next(moved_actions((a,), _BUFS[buf], delta, below))
        return with_peer(a, peer) if type(a.peer) is int and a.peer != peer else a     # a renamed transfer


def _halves(s) -> tuple:
    """A step's transfers and locals as its template made them, its group (None: the peers are ranks) and move."""
    if type(s) is Renamed:
        return s.canon, s.canon_local, s.group, s.moved
    return s.transfers, s.local, None, None


def _distinct(objs: list, order: np.ndarray | None = None) -> tuple[list, np.ndarray]:
    """The distinct objects of ``objs`` (by identity) and, per item (in ``order``, where given), the index of its
    object among them."""
    _, first, at = np.unique(np.fromiter(map(id, objs), np.int64, len(objs)), return_index=True, return_inverse=True)
    at = at.reshape(-1)
    return [objs[i] for i in first.tolist()], at if order is None else at[order]


def _rename(peer: np.ndarray, table: list, code: np.ndarray, sizes: np.ndarray) -> None:
    """Rename in place the peers of the rows of renamed parts (part i's group ``table[code[i]]``, or None):
    position ``p`` becomes ``group[p]``, -1 (a bad peer) where ``p`` is not a position of the group."""
    if all(g is None for g in table):
        return
    lens = np.array([-1 if g is None else len(g) for g in table], dtype=np.int64)
    flat = np.fromiter(chain.from_iterable(g for g in table if g is not None), np.int64, int(lens[lens > 0].sum()))
    start = np.cumsum(np.maximum(lens, 0)) - np.maximum(lens, 0)
    rcode = np.repeat(code, sizes)
    rows = np.flatnonzero(lens[rcode] >= 0)
    c, p = rcode[rows], peer[rows]
    ok = (p >= 0) & (p < lens[c])
    peer[rows] = np.where(ok, flat[np.where(ok, start[c] + p, 0)], -1)


def _moves(table: list, code: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Per row, the buffer code, the offset its part's regions in that buffer move by, and the offset they move
    below (part i's ``(buf, delta[, below])`` ``table[code[i]]``, or None); None where no part moves."""
    if all(m is None for m in table):
        return None
    buf = np.array([-1 if m is None else _BUF[m[0]] for m in table], dtype=np.int64)
    delta = np.array([0 if m is None else m[1] for m in table], dtype=np.int64)
    below = np.array([EVERY if m is None or len(m) == 2 else m[2] for m in table], dtype=np.int64)
    rcode = np.repeat(code, sizes)
    return buf[rcode], delta[rcode], below[rcode]


def _side(regions: list, order: np.ndarray, moves: tuple | None, shift: np.ndarray | None) -> "Side":
    """The regions (None for none) as a :class:`Side`, rows in ``order``, moved by ``moves`` (:func:`_moves`); in
    place (``shift``: each row's rank's input offset in the output), input regions rewritten into the output."""
    rs, at = _distinct(regions)                 # actions share regions: read once
    rs = [r or _NO_REGION for r in rs]
    order = at[order]
    buf = _ints(rs, "buf", _BUF)[order]
    off = _ints(rs, "offset")[order]
    if moves is not None:
        moved = buf == moves[0]
        moved &= off < moves[2]
        np.add(off, moves[1], out=off, where=moved)
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
        self.end = end = rep - 1                            # one past the last element (in place: rows are many)
        end *= stride
        end += off
        end += cnt

    def take(self, rows: np.ndarray, base: np.ndarray) -> "Moves":
        """The regions of ``rows`` as keyed pieces (``base``: the key of element 0 of each row's buffer)."""
        return Moves(base + self.off[rows], self.cnt[rows], self.rep[rows], self.stride[rows])


def counts(ops: PlanArrays, n: int) -> tuple[int, int]:
    """The rounds (steps that transfer data) of the rank with most, and the elements the rank that sends most sends."""
    step, rank = ops.step, ops.rank                 # (rows come in (step, rank) order, transfers first)
    first = np.ones(len(step), bool)
    first[1:] = (step[1:] != step[:-1]) | (rank[1:] != rank[:-1])
    starts = np.flatnonzero(first)
    rounds = np.bincount(rank[starts[ops.local[starts] == 0]], minlength=1)     # each (rank, step) once
    sends = np.flatnonzero(ops.kind == SEND)
    size = ops.src.size[sends]
    if int(size.max(initial=0)) * len(size) < 1 << 53:         # (every sum exact in a double)
        sent = np.bincount(rank[sends], weights=size.astype(np.float64), minlength=1).astype(np.int64)
    else:
        sent = np.zeros(n, np.int64)
        np.add.at(sent, rank[sends], size)
    return int(rounds.max()), int(sent.max(initial=0))
