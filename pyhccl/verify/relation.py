"""Whether every rank's plan is rank 0's, rotated (the quotient's check, :mod:`pyhccl.verify.quotient`).

A rank's *relation* is each element it receives, with the relative rank and the element it comes from, and
each element its local operations read and write, all in its rotated frame (:mod:`.rotation`). Relations are
compared as sums of ``g^x h^y k^key`` modulo two primes near 2^31: a strided region's sum is a product of two
geometric series, so a region costs O(1) whatever its pieces; different relations agree with probability
about 2^-60. The sums are taken over chunks of rows, two threads at a time.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import numpy as np

from .rotation import Axes, rotate, unmoved
from .rows import REDUCE, PlanArrays

__all__ = ["hash_bases", "relations_alike", "sides_alike"]

_PRIMES = (2147483647, 2147483629)      # primes below 2^31: a product of two residues fits an int64
_MOD = np.array(_PRIMES, np.int64)[:, None]     # (sums per prime and owner taken modulo their prime)
_CHUNK = 1 << 15                        # rows hashed at a time
_THREADS = 2                            # threads hashing chunks (numpy releases the GIL in its loops)


def hash_bases(seed: int, n: int) -> np.ndarray:
    """Per prime, the hash's random bases ``g, h, k`` (``g h`` not 1: its geometric series has a denominator)."""
    rng = np.random.default_rng([seed, n, 20])
    while True:
        bases = rng.integers(2, _PRIMES[1] - 2, size=(len(_PRIMES), 3))
        if all(int(b[0]) * int(b[1]) % p != 1 for b, p in zip(bases, _PRIMES)):
            return bases


@lru_cache(maxsize=16)
def _table(g: int, p: int) -> np.ndarray:
    """``g ** (i << 16 k) % p`` for ``k < 2``, ``i < 2^16``: an exponent below 2^32 in two lookups."""
    t = np.ones((2, 1 << 16), np.int64)
    for k in range(2):
        b = pow(g, 1 << (16 * k), p)
        w = 1
        while w < 1 << 15:              # t[w:2w] = t[:w] * b^w, doubling
            t[k][w:2 * w] = t[k][:w] * pow(b, w, p) % p
            w *= 2
        t[k][w:] = t[k][:w] * pow(b, w, p) % p
    return t


def _pow(g: int, exp: np.ndarray, p: int) -> np.ndarray:
    """``g ** exp % p`` elementwise (``exp`` reduced mod ``p - 1``)."""
    e = np.asarray(exp, np.int64) % (p - 1)
    t = _table(g, p)
    return t[0][e & 0xFFFF] * t[1][e >> 16] % p


def _geometric(a: np.ndarray, m: np.ndarray, p: int) -> np.ndarray:
    """``sum(a ** t for t < m) % p`` elementwise (``a`` nonzero mod p): computed once per distinct ``(a, m)``."""
    key, inv = np.unique(a * (1 << 31) + m % (p - 1), return_inverse=True)     # (a, m < 2^31: one int64)
    out = np.empty(len(key), np.int64)
    for i, (ai, mi) in enumerate(zip((key >> 31).tolist(), (key & ((1 << 31) - 1)).tolist())):
        out[i] = mi % p if ai == 1 else (pow(ai, mi, p) - 1) * pow(ai - 1, p - 2, p) % p
    return out[inv.reshape(-1)]


def _hash(rows: int, segments, n: int, bases: np.ndarray, frame: np.ndarray, axes: Axes) -> np.ndarray | None:
    """Per prime, per owner (``seg['own']`` below ``n``): the sum over the segments' elements, each side in its
    rank's frame, of ``g^x h^y k^key``; None where a region cannot be rotated piece by piece. ``segments(a, b)``:
    those of rows ``a`` to ``b`` (of ``rows``), made a chunk at a time in the threads."""

    def chunk(a: int) -> np.ndarray | None:
        part = segments(a, min(a + _CHUNK, rows))
        same = unmoved(part, frame, axes)
        if same.any():          # (hashed as they are; the rest rotated)
            out = _hash_part({k: v[same] for k, v in part.items()}, n, bases)
            part = {k: v[~same] for k, v in part.items()}
        else:
            out = np.zeros((len(_PRIMES), n), np.int64)
        xs = rotate(part, "x", frame, axes)
        if xs is None:
            return None
        for p in xs:
            ys = rotate(p, "y", frame, axes)
            if ys is None:
                return None
            for part in ys:
                out = (out + _hash_part(part, n, bases)) % _MOD
        return out

    starts = range(0, rows, _CHUNK)         # (a sum over rows: in chunks whose temporaries stay in cache)
    if _THREADS > 1 and len(starts) > 2:
        pool = ThreadPoolExecutor(_THREADS)
        try:
            sums = list(pool.map(chunk, starts))
        finally:                # (stopped by Ctrl-C or a deadline: the chunks not started are dropped)
            pool.shutdown(cancel_futures=True)
    else:
        sums = [chunk(a) for a in starts]
    if any(s is None for s in sums):
        return None
    return sum(sums, np.zeros((len(_PRIMES), n), np.int64)) % _MOD


def _hash_part(seg: dict, n: int, bases: np.ndarray) -> np.ndarray:
    """:func:`_hash` of segments read as they are (each in its rank's frame already)."""
    out = np.zeros((len(_PRIMES), n), np.int64)
    x0 = seg["x"] + seg["i0"] * seg["sx"] + seg["j0"]
    y0 = seg["y"] + seg["i0"] * seg["sy"] + seg["j0"]
    for k, p in enumerate(_PRIMES):
        g, h, kk = (int(v) for v in bases[k])
        term = _pow(g, x0, p) * _pow(h, y0, p) % p * _pow(kk, seg["key"], p) % p
        many = np.flatnonzero(seg["i1"] - seg["i0"] != 1)         # (a region of one piece: a factor of 1)
        if len(many):
            a = _pow(g, seg["sx"][many], p) * _pow(h, seg["sy"][many], p) % p
            term[many] = term[many] * _geometric(a, seg["i1"][many] - seg["i0"][many], p) % p
        gh = g * h % p
        inv = pow(gh - 1, p - 2, p)             # (g h is not 1: g, h drawn from [2, p - 2) and checked)
        term = term * ((_pow(gh, seg["j1"] - seg["j0"], p) - 1) % p * inv % p) % p
        out[k] = np.bincount(seg["own"], weights=term.astype(np.float64), minlength=n).astype(np.int64) % p
    return out


def _segments(ops: PlanArrays, xrows, yrows, xrank, yrank, key) -> dict:
    """The moves from side ``src`` of ``yrows`` (in the frame of rank ``yrank``) to side ``dst`` of ``xrows``
    (owned by ``xrank``, in its frame), as segments (see :func:`~.rotation.rotate`)."""
    d, s = ops.dst, ops.src
    zero = np.zeros(len(xrows), np.int64)
    return dict(x=d.off[xrows], sx=d.stride[xrows], bx=d.buf[xrows], rx=xrank, y=s.off[yrows], sy=s.stride[yrows],
                by=s.buf[yrows], ry=yrank, i0=zero, i1=d.rep[xrows], j0=zero, j1=d.cnt[xrows], key=key, own=xrank)


def relations_alike(ops, n, frame, axes, bases, s, r, loc, slots=None) -> bool:
    """Whether every rank's relation (its receives with their sources, its local operations) is rank 0's; with
    ``slots`` (receive rows and, aligned, the local rows that read them (:func:`~.slots.slot_pairs`) and the sends
    matched with the receives) each such local counts as reading the sender's data."""
    rows = [(r, s, "transfer")]
    if slots is not None:
        recv, local, send = slots
        taken = np.zeros(len(ops.step), bool)
        taken[recv] = taken[local] = True
        rows = [(r[~taken[r]], s[~taken[r]], "transfer"), (local, send, "composed")]
        loc = loc[~taken[loc]]
    out = np.zeros((len(_PRIMES), n), np.int64)
    for x, y, what in rows + [(loc, loc, "local")]:
        f = _hash(len(x), lambda a, b, x=x, y=y, what=what: _moves(ops, n, axes, x[a:b], y[a:b], what), n, bases,
                  frame, axes)
        if f is None:
            return False
        out = (out + f) % _MOD
    return bool((out == out[:, :1]).all())


def _moves(ops, n: int, axes: Axes, x: np.ndarray, y: np.ndarray, what: str) -> dict:
    """The segments of moves from the sources of rows ``y`` to the destinations of rows ``x`` (``what``: transfer,
    composed or local), keyed by step, kind, relative source rank and buffers."""
    reduce = ops.kind[x] == REDUCE
    xrank, yrank = ops.rank[x], ops.rank[y]
    if what == "local":
        rel, code = 0, np.where(reduce, 2, 1)
    else:
        rel = axes.rel(yrank, xrank)
        code = 0 if what == "transfer" else np.where(reduce, 4, 3)
    key = ((ops.step[x] * 5 + code) * n + rel) * 9 + ops.dst.buf[x] * 3 + ops.src.buf[y]
    return _segments(ops, x, y, xrank, yrank, key)


def sides_alike(ops, n, frame, axes, bases, sample, skip=()) -> bool:
    """Whether each side of the rows of the ``sample`` ranks (what each sends and receives, to and from which
    relative rank; what its locals read and write) is rank 0's, rotated: a necessary condition, on few rows.
    The rows in ``skip`` (arrays: receive slots composed away) are left out."""
    mark = np.zeros(n, bool)
    mark[sample] = True
    keep = mark[ops.rank] & ((ops.src.size > 0) | (ops.dst.size > 0))
    for rows in skip:
        keep[rows] = False
    rows = np.flatnonzero(keep)
    rank = ops.rank[rows]
    who = np.searchsorted(sample, rank)
    rel = np.where(ops.local[rows] == 0, axes.rel(np.maximum(ops.peer[rows], 0), rank), 0)
    segs = []
    for side, code in ((ops.src, 0), (ops.dst, 1)):
        has = (side.buf[rows] >= 0) & (side.size[rows] > 0)
        rr, b = rows[has], side.buf[rows[has]]
        zero = np.zeros(len(rr), np.int64)
        key = ((ops.step[rr] * 4 + ops.kind[rr]) * n + rel[has]) * 6 + b * 2 + code
        segs.append(dict(x=side.off[rr], sx=side.stride[rr], bx=b, rx=rank[has], y=side.off[rr],
                         sy=side.stride[rr], by=b, ry=rank[has], i0=zero, i1=side.rep[rr], j0=zero, j1=side.cnt[rr],
                         key=key, own=who[has]))         # (y: x again)
    seg = {k: np.concatenate([a[k] for a in segs]) for k in segs[0]}
    f = _hash(len(seg["x"]), lambda a, b: {k: v[a:b] for k, v in seg.items()}, len(sample), bases, frame, axes)
    return f is not None and bool((f == f[:, :1]).all())
