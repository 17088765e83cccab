"""Rotations of a rank's frame for the quotient (:mod:`pyhccl.verify.quotient`): rank ``r``'s buffers read as
rank 0's, each rank-indexed block's index moved back by ``r``'s digits (one axis of N ranks, or a machine's
levels as a mixed radix), and regions of strided pieces cut where a rotation wraps, a few parts each.

A segment is the elements ``side + i s<side> + j`` (``i0 <= i < i1``, ``j0 <= j < j1``) of one side ('x' or
'y') of a move: its buffer ``b<side>`` and the rank ``r<side>`` whose frame it is read in.
"""

from __future__ import annotations

import numpy as np

from .rows import PlanArrays

__all__ = ["ALL", "Axes", "rotate", "periods_kept", "unmoved"]

ALL = 1 << 40           # periods a buffer's frame rotates: all of them


class Axes:
    """The rotations a plan set may be symmetric under: rank ``r`` is the digits of ``r`` in the mixed radix
    ``sizes`` (innermost first: a machine's devices in a server, its servers, ...), and rank ``r``'s frame moves
    each digit back by ``r``'s. One axis of ``n`` is the plain rotation."""

    def __init__(self, sizes: tuple[int, ...]) -> None:
        self.sizes = sizes
        self.below = [int(np.prod(sizes[:a], dtype=np.int64)) for a in range(len(sizes))]     # ranks a digit counts
        self.n = int(np.prod(sizes, dtype=np.int64))
        self._cache: dict = {}

    def rel(self, peer: np.ndarray, rank: np.ndarray) -> np.ndarray:
        """``peer`` as seen from ``rank``: digit by digit, the difference (per digit, a lookup in tables of the
        digits and of their differences: divisions of every row cost ten times more)."""
        peer, rank = np.asarray(peer, np.int64), np.asarray(rank, np.int64)
        if len(self.sizes) == 1:
            return (peer - rank) % self.n
        out = np.zeros(np.broadcast(peer, rank).shape, np.int64)
        for a, (b, z) in enumerate(zip(self.below, self.sizes)):
            digit, diff = self._tables(a)
            out += diff[digit[peer] * z + digit[rank]] if diff is not None else (digit[peer] - digit[rank]) % z * b
        return out

    def _tables(self, a: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Axis ``a``'s digit of every rank, and (for up to 1024 values) ``(d - e) % z`` times its weight."""
        m = self._cache.get(("rel", a))
        if m is None:
            b, z = self.below[a], self.sizes[a]
            pairs = (np.arange(z)[:, None] - np.arange(z)) % z * b if z <= 1024 else None
            m = self._cache["rel", a] = (np.arange(self.n, dtype=np.int64) // b % z, None if pairs is None else
                                         pairs.ravel())
        return m

    def add(self, x: int, q: int) -> int:
        """Index ``x`` moved on by rank ``q``, digit by digit."""
        return sum((x // b % z + q // b % z) % z * b for b, z in zip(self.below, self.sizes))

    def sub(self, x: int, q: int) -> int:
        return sum((x // b % z - q // b % z) % z * b for b, z in zip(self.below, self.sizes))

    def rotate_bits(self, v: int, q: int) -> int:
        """A set of ranks (bit ``c`` for rank ``c``) with each rank moved on by ``q``."""
        for b, z in zip(self.below, self.sizes):
            sh = q // b % z * b
            if sh:
                block = z * b                   # rotate each block of ``block`` bits left by ``sh``
                lo, hi = self._mask(block, sh)
                v = ((v & lo) << sh) | ((v & hi) >> (block - sh))
        return v

    def _mask(self, block: int, sh: int) -> tuple[int, int]:
        m = self._cache.get((block, sh))
        if m is None:
            every = ((1 << self.n) - 1) // ((1 << block) - 1)        # bit 0 of every block
            lo = ((1 << (block - sh)) - 1) * every
            m = self._cache[block, sh] = (lo, ((1 << self.n) - 1) ^ lo)
        return m


def rotate(seg: dict, side: str, frame: np.ndarray, axes: Axes) -> list[dict] | None:
    """``seg``'s ``side`` ('x' or 'y': the elements ``side + i s<side> + j`` of buffer ``b<side>``, for ``i0 <= i <
    i1``, ``j0 <= j < j1``) in the frame of rank ``r<side>``, as parts of segments; None where a segment spans
    rotated periods in a way no rotation maps piece by piece.

    A buffer's frame is ``(unit, k)``: its first ``k`` periods of ``n`` blocks of ``unit`` elements rotate (each
    block's index moved back by the rank's digits), the rest (a template's fixed slots after its rank-indexed copy
    of the data) and a buffer of unit 0 do not. Each axis, outermost first, moves its digit: a segment within one
    period of the axis is cut where the rotation wraps (pieces below the cut move up a period); one whose pieces
    lie in different periods of it, each at the same place, is cut within every piece alike."""
    unit, k = frame[0][seg["b" + side]], frame[1][seg["b" + side]]
    period = unit * axes.n
    first = seg[side] + seg["i0"] * seg["s" + side] + seg["j0"]
    moved = (period > 0) & (first // np.maximum(period, 1) < k)
    if moved.all():             # (the usual case: nothing stays, nothing is copied)
        fixed, work = [], [dict(seg, _u=unit)]
    else:
        fixed, work = [_take(seg, ~moved)], [dict(_take(seg, moved), _u=unit[moved])]
    for a in reversed(range(len(axes.sizes))):
        nxt = []
        for part in work:
            if len(part[side]):
                out = _rotate_axis(part, side, part["_u"] * axes.below[a], axes.sizes[a],
                                   part["r" + side] // axes.below[a] % axes.sizes[a])
                if out is None:
                    return None
                nxt += out
        work = nxt
    for part in work:
        del part["_u"]
    return fixed + work


def unmoved(seg: dict, frame: np.ndarray, axes: Axes) -> np.ndarray:
    """Per segment, whether its (x, y) pairs, as a set, are the same in their ranks' rotated frames as they are:
    read in one rank's frame, each side one piece per block (its stride the block) through whole rotated periods,
    each piece within its block. A rotation moves every block's piece to another block's, on both sides alike
    (piece ``i`` of both sides lies in block ``i`` mod N), so it only permutes the pairs: their hash needs no
    rotation, however many periods the pieces run through (an input copied whole into scratch)."""
    n, ok = axes.n, seg["rx"] == seg["ry"]
    ok &= (seg["i1"] - seg["i0"]) % n == 0
    for side in ("x", "y"):
        unit, k, s = frame[0][seg["b" + side]], frame[1][seg["b" + side]], seg["s" + side]
        u = np.maximum(unit, 1)
        first = seg[side] + seg["i0"] * s + seg["j0"]
        last = first + (seg["i1"] - seg["i0"] - 1) * s
        ok &= (unit > 0) & (s == unit) & (first // u % n == 0) & (first % u + seg["j1"] - seg["j0"] <= u)
        ok &= last // (u * n) < k
    return ok


def _rotate_axis(seg: dict, side: str, w: np.ndarray, z: int, g: np.ndarray, split: bool = True) -> list[dict] | None:
    """One axis of :func:`rotate`: blocks of ``w`` elements, ``z`` to a period, digit moved back by ``g``. A
    progression that runs through a few periods of the axis (``split``) is cut into one part a period first."""
    seg = dict(seg, _w=w, _g=g)
    period, gw = w * z, g * w
    b, s = seg[side], seg["s" + side]
    i0, i1, j0, j1 = seg["i0"], seg["i1"], seg["j0"], seg["j1"]
    first = b + i0 * s + j0
    start = first // period * period
    within = (b + (i1 - 1) * s + j1 - 1) // period == first // period
    apart = ~within & (s > 0) & (s % period == 0) & ((b + i0 * s + j1 - 1) // period == first // period)
    if not (within | apart).all():
        if not split:
            return None
        rest = ~(within | apart)
        other = "y" if side == "x" else "x"     # contiguous through several periods (both sides): cut at their ends
        one = rest & ((i1 - i0 == 1) | ((j0 == 0) & (j1 == s) & (seg["s" + other] == s)))
        many = rest & ~one
        out = _each(side, z, [_take(seg, within | apart)] + (_unroll(_take(seg, one), side, period[one])
                                                              if one.any() else []))
        if out is None or not many.any():
            return out
        more = _by_period(_take(seg, many), side, period[many])
        got = None if more is None else _each(side, z, [more])
        if got is None:                         # pieces through period ends: each piece on its own, cut at them
            more = _pieces(_take(seg, many))
            got = None if more is None else _each(side, z, _unroll(more, side, np.repeat(period[many],
                                                                                         more.pop("_k"))))
        return None if got is None else out + got
    last = b + (i1 - 1) * s + j1 - 1
    low_all, high_all = within & (last < start + gw), within & (first >= start + gw)
    whole = low_all | high_all              # (most: below or above the cut as a whole, moved as they are)
    out = []
    if whole.any():
        part = _take(seg, whole) if not whole.all() else dict(seg)
        part[side] = part[side] - gw[whole] + np.where(low_all[whole], period[whole], 0)
        out.append({key: v for key, v in part.items() if key not in ("_w", "_g")})
        if whole.all():
            return out
    seg = dict(seg, _P=period, _gw=gw, _T=start + gw, _at=b + i0 * s - start)
    low, high = _cut_at(_take(seg, within & ~whole), side) if (within & ~whole).any() else ([], [])
    if apart.any():
        each = _take(seg, apart)            # every piece cut alike: j below gw - (its place in the period) wraps
        jm = each["_gw"] - each["_at"]
        low.append(dict(each, j1=np.minimum(each["j1"], jm)))
        high.append(dict(each, j0=np.maximum(each["j0"], jm)))
    for parts, up in ((low, True), (high, False)):
        for part in parts:
            keep = (part["i1"] > part["i0"]) & (part["j1"] > part["j0"])
            part = _take(part, keep)
            part[side] = part[side] - part["_gw"] + (part["_P"] if up else 0)
            out.append({key: v for key, v in part.items() if key not in ("_P", "_gw", "_T", "_at", "_w", "_g")})
    return out


def _each(side: str, z: int, parts: list[dict]) -> list[dict] | None:
    """:func:`_rotate_axis` of parts each within a period or apart (no further cut), joined."""
    out = []
    for part in parts:
        got = _rotate_axis(part, side, part.pop("_w"), z, part.pop("_g"), split=False)
        if got is None:
            return None
        out += got
    return out


_PERIODS = 256          # a progression through more periods of an axis than this is not cut: declined


def _by_period(seg: dict, side: str, period: np.ndarray) -> dict | None:
    """``seg``'s progressions cut into one part per period of ``period`` they run through (at most
    :data:`_PERIODS`); None where one runs through more, or a piece straddles a period's end."""
    b, s = seg[side], np.maximum(seg["s" + side], 1)
    i0, i1, j0 = seg["i0"], seg["i1"], seg["j0"]
    lo, hi = (b + i0 * s + j0) // period, (b + (i1 - 1) * s + j0) // period
    count = hi - lo + 1
    if (count > _PERIODS).any():
        return None
    at = np.repeat(np.arange(len(b)), count)
    q = np.repeat(lo, count) + (np.arange(len(at)) - np.repeat(np.cumsum(count) - count, count))
    out = _take(seg, at)
    bb, ss, jj = b[at], s[at], j0[at]
    first = np.maximum(i0[at], -((bb + jj - q * period[at]) // ss))          # pieces starting in period q
    last = np.minimum(i1[at], -((bb + jj - (q + 1) * period[at]) // ss))
    out["i0"], out["i1"] = first, last
    return _take(out, last > first)


def _unroll(seg: dict, side: str, period: np.ndarray) -> list[dict]:
    """``seg`` (a run of contiguous elements on both sides) cut where ``side``'s periods end: a head, then the
    whole periods as pieces one period apart, then a tail."""
    other = "y" if side == "x" else "x"
    at = {v: seg[v] + seg["i0"] * seg["s" + v] + seg["j0"] for v in (side, other)}     # each side's first
    size = (seg["i1"] - seg["i0"]) * (seg["j1"] - seg["j0"])
    head = np.minimum(size, (-at[side]) % period)                  # up to the first period's end
    tail = head + (size - head) // period * period
    zero, one = np.zeros_like(size), np.ones_like(size)
    ends = dict(seg, i0=zero, i1=one, **{side: at[side], other: at[other], "s" + side: zero, "s" + other: zero})
    mid = dict(ends, i1=(tail - head) // period, j0=zero, j1=period,
               **{side: at[side] + head, other: at[other] + head, "s" + side: period, "s" + other: period})
    parts = [dict(ends, j0=zero, j1=head), _take(mid, mid["i1"] > 0), dict(ends, j0=tail, j1=size)]
    return [_take(p, p["j1"] > p["j0"]) for p in parts]


def _pieces(seg: dict) -> dict | None:
    """``seg``'s pieces as segments of one piece each (``_k``: how many each segment made); None where one has
    more than :data:`_PERIODS`."""
    k = seg["i1"] - seg["i0"]
    if (k > _PERIODS).any():
        return None
    at = np.repeat(np.arange(len(k)), k)
    out = _take(seg, at)
    out["i0"] = out["i0"] + np.arange(len(at)) - np.repeat(np.cumsum(k) - k, k)
    out["i1"] = out["i0"] + 1
    out["_k"] = k
    return out


def _take(seg: dict, mask: np.ndarray) -> dict:
    """``seg``'s rows where ``mask`` (booleans, or row indices) holds."""
    if mask.dtype == bool:
        if mask.all():
            return dict(seg)        # (every array is replaced, never written in place: shared safely)
        mask = np.flatnonzero(mask)
    return {key: v.take(mask) for key, v in seg.items()}


def _cut_at(seg: dict, side: str) -> tuple[list[dict], list[dict]]:
    """``seg``'s elements below ``_T`` and at or above it, as parts (pieces no wider than the stride: at most one
    straddles ``_T``)."""
    b, s, t = seg[side], np.maximum(seg["s" + side], 1), seg["_T"]
    i0, i1, j0, j1 = seg["i0"], seg["i1"], seg["j0"], seg["j1"]
    ia = np.clip((t - b - j1) // s + 1, i0, i1)            # pieces [i0, ia) end at or before t
    ib = np.clip(-((b + j0 - t) // s), i0, i1)             # pieces [ib, i1) start at or after it
    jm = t - b - ia * s                                     # the straddling piece ia (when ia < ib) splits here
    mid = np.minimum(ib, ia + 1)
    return ([dict(seg, i1=ia), dict(seg, i0=ia, i1=mid, j1=np.minimum(j1, jm))],
            [dict(seg, i0=ia, i1=mid, j0=np.maximum(j0, jm)), dict(seg, i0=ib)])


def periods_kept(ops: PlanArrays, frames: list[np.ndarray], n: int) -> list[bool]:
    """Per frame, whether every region of a rotated period lies within it (see :func:`rotate`)."""
    kept = [True] * len(frames)
    for side in (ops.src, ops.dst):
        for b in range(3):
            rows = np.flatnonzero((side.buf == b) & (side.size > 0))
            spans = {}                  # per period: the first period of each region, and whether it ends there
            for i, frame in enumerate(frames):
                period = int(frame[0][b]) * n
                if period and len(rows) and kept[i]:
                    if period not in spans:
                        first = side.off[rows] // period
                        spans[period] = first, first != (side.end[rows] - 1) // period
                    first, across = spans[period]
                    kept[i] = not (across & (first < frame[1][b])).any()
    return kept
