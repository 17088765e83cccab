"""Receive slots composed away, for the quotient (:mod:`pyhccl.verify.quotient`).

HCCL's multi-level ReduceScatters receive each peer's data into a slot of scratch and reduce it from there
in the same step; where a slot lies depends on the rank's place in its level (Mesh: by the peer's device;
NHR: by the rank's server), so no rotation of scratch maps one rank's slots onto another's. What the slot
holds does map: "receive ``y`` from rank ``q`` into slot ``S``, then reduce ``S`` into ``x``" is "reduce ``y``
of rank ``q`` into ``x``", wherever ``S`` is. :func:`slot_pairs` finds the receives and locals that can be
read so, on every rank, and the quotient compares the ranks' relations with them composed.

The composition is exact where, on every rank:

- each receive into the slot area (scratch past the frame's rotated periods) is read, in its step, by
  exactly one local operation whose source is exactly its region, and each local that reads the area
  reads such a region (so a slot's data feeds one operation, whatever the slot's place);
- no send reads the area and no local writes it (slot data is never read outside its step, so a slot's
  place may differ from step to step);
- the slot receives of a rank's step have disjoint spans (no slot takes two receives).

Else nothing is composed and the quotient compares the slots as they are.
"""

from __future__ import annotations

import numpy as np

from .rotation import ALL
from .rows import RECV, REDUCE, SEND, PlanArrays

__all__ = ["order_free", "slot_pairs"]

_SCRATCH = 2
_PIECES = 1 << 24          # pieces of slots whose hulls meet compared one by one, at most (more: not composed)


def slot_pairs(ops: PlanArrays, frame: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The receive rows into the slot area and, aligned, the local rows that read each (see the module); None
    where there are none or they cannot be composed."""
    unit, k = int(frame[0][_SCRATCH]), int(frame[1][_SCRATCH])
    if unit == 0 or k >= ALL:
        return None
    edge = unit * k * n                     # scratch from here on: slots
    src, dst = ops.src, ops.dst
    slot = []
    for side in (src, dst):
        scr = (side.buf == _SCRATCH) & (side.size > 0)
        if (scr & (side.off < edge) & (side.end > edge)).any():
            return None                     # a region across the edge
        slot.append(scr & (side.off >= edge))
    xfer = ops.local == 0
    if (xfer & (ops.kind == SEND) & slot[0]).any() or (~xfer & slot[1]).any():
        return None
    recv = np.flatnonzero(xfer & (ops.kind == RECV) & slot[1])
    local = np.flatnonzero(~xfer & slot[0])
    if not len(recv) or len(recv) != len(local):
        return None
    keys = [[ops.rank[rows], ops.step[rows], side.off[rows], side.cnt[rows], side.rep[rows], side.stride[rows]]
            for rows, side in ((recv, dst), (local, src))]
    aligned = all(np.array_equal(x, y) for x, y in zip(*keys))      # (in row order already: the usual case)
    if not aligned and _within_groups(recv, local, keys):
        aligned = all(np.array_equal(x, y) for x, y in zip(*keys))
    if not aligned:
        for i, rows in enumerate((recv, local)):
            order = np.lexsort(keys[i][::-1])
            keys[i] = [c[order] for c in keys[i]]
            if i:
                local = rows[order]
            else:
                recv = rows[order]
        if not all(np.array_equal(x, y) for x, y in zip(*keys)):
            return None                     # a slot received and not read as a whole, or read and not received
    a = keys[0]
    if not _disjoint(a[0] * (ops.nsteps + 1) + a[1], a[2], a[3], a[4], a[5]):
        return None                         # two receives of a rank's step into one element
    return recv, local


def _within_groups(recv: np.ndarray, local: np.ndarray, keys: list) -> bool:
    """Where the receives and the locals come in the same (rank, step) groups and only their regions' order in
    some groups differs (a template that receives from its peers in one order and reduces in another), sort
    those groups' rows by offset, in place (``keys`` as the rows); each group stays where it is. Returns whether
    it sorted (False: the groups differ, and nothing changed)."""
    if not all(np.array_equal(x, y) for x, y in zip(keys[0][:2], keys[1][:2])):
        return False
    differ = np.zeros(len(recv), bool)
    for x, y in zip(keys[0][2:], keys[1][2:]):
        differ |= x != y
    rank, step = keys[0][:2]
    run = np.cumsum(np.concatenate(([True], (rank[1:] != rank[:-1]) | (step[1:] != step[:-1]))))
    at = np.flatnonzero(np.isin(run, run[differ]))
    for rows, cols in ((recv, keys[0]), (local, keys[1])):
        offs, place = np.unique(cols[2][at], return_inverse=True)
        order = at[np.argsort(run[at] * len(offs) + place.reshape(-1), kind="stable")]     # by group, then offset
        rows[at] = rows[order]
        for c in cols[2:]:
            c[at] = c[order]
    return True


def _disjoint(group: np.ndarray, off: np.ndarray, cnt: np.ndarray, rep: np.ndarray, stride: np.ndarray) -> bool:
    """Whether the regions of each group touch no common element: their hulls, and where hulls meet (strided
    regions interleaved), their pieces."""
    end = off + stride * (rep - 1) + cnt
    same = group[1:] == group[:-1]
    if (end[:-1][same] <= off[1:][same]).all():
        return True                         # (each group's hulls in order, one after the other: the usual case)
    meet = _meeting(group, off, end)
    if not meet.any():
        return True
    rows = np.flatnonzero(np.isin(group, group[meet]))         # those groups, piece by piece
    if rep[rows].sum() > _PIECES:
        return False
    at, start = _pieces(rows, off, rep, stride)
    return not _meeting(group[at], start, start + cnt[at]).any()


def _pieces(rows: np.ndarray, off: np.ndarray, rep: np.ndarray, stride: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each piece of the regions ``rows``: its region's index, and its first element."""
    k = rep[rows]
    at = np.repeat(rows, k)
    return at, off[at] + (np.arange(len(at)) - np.repeat(np.cumsum(k) - k, k)) * stride[at]


def _meeting(group: np.ndarray, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """Per interval ``[start, stop)``: whether it meets an interval of its group that starts before it."""
    lo, hi = _keys(group, start, stop)
    order = np.argsort(lo, kind="stable")
    hit = np.zeros(len(lo), bool)
    hit[order[1:]] = lo[order[1:]] < np.maximum.accumulate(hi[order])[:-1]
    return hit


def _keys(group: np.ndarray, start: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Intervals as int64 keys: within a group ordered as their ends, each group's above the last group's (the
    ends ranked among all, so that the keys fit whatever the offsets)."""
    ends, at = np.unique(np.concatenate([start, stop]), return_inverse=True)
    _, g = np.unique(group, return_inverse=True)
    lo, hi = (g.reshape(-1) * (len(ends) + 1) + a for a in np.split(at.reshape(-1), 2))
    return lo, hi


def order_free(ops: PlanArrays, rows: np.ndarray) -> bool:
    """Whether one rank's local operations of each step (``rows``) give the same result in any order, element by
    element: an element a copy writes is touched by nothing else, one a reduce writes only by other reduces (sums
    commute), and nothing reads an element the step writes.

    Asked of rank 0 alone: where every rank's relation is rank 0's rotated (each step's elements written by copies,
    by reduces and read, as multisets), every rank answers as rank 0 does. (The simulator's own check,
    :class:`~.checks.Checks`, judges hulls: strided regions interleaved meet there.)"""
    if not len(rows):
        return True
    both = np.concatenate([rows, rows])
    kind = np.concatenate([np.where(ops.kind[rows] == REDUCE, 1, 0), np.full(len(rows), 2)])   # copy, reduce, read
    buf, off, cnt, rep, stride = (np.concatenate([getattr(side, f)[rows] for side in (ops.dst, ops.src)])
                                  for f in ("buf", "off", "cnt", "rep", "stride"))
    at, start = _pieces(np.arange(len(both)), off, rep, stride)
    lo, hi = _keys(ops.step[both][at] * 3 + buf[at], start, start + cnt[at])
    order = np.argsort(lo, kind="stable")
    lo, hi, kind = lo[order], hi[order], kind[at][order]
    copy, red, read = (np.concatenate(([-1], np.maximum.accumulate(np.where(kind == k, hi, -1))[:-1]))
                       for k in range(3))               # per kind: the furthest end of those that start before
    clash = lo < np.select([kind == 0, kind == 1], [np.maximum(np.maximum(copy, red), read), np.maximum(copy, read)],
                           np.maximum(copy, red))
    return not clash.any()
