"""Every rank's postcondition (:attr:`~pyhccl.core.call.OpSpec.post`) as arrays, without a Python loop over ranks.

At 8192 ranks an AllGather's postcondition is 67 million contributions and an AllReduce's
8192 sets of every rank: asking ``post`` rank by rank costs more than simulating. The ops
whose postcondition is a formula in the rank get it here as numpy arithmetic (the same
formulas as ``pyhccl.core.call.OPS``, which ``tests/test_verify_post.py`` compares rank by
rank); the others (the V ops, BatchSendRecv) ask ``post`` per rank.

Sets of contributing ranks are numbered: 0 is every rank, ``1 + j`` is rank ``j`` alone,
later numbers any other set met.
"""

from __future__ import annotations

import numpy as np

from ..core.call import Call

__all__ = ["post_arrays"]

_I = np.int64


def post_arrays(call: Call, keys: np.ndarray, use_mask: bool, *, generic: bool = False) -> tuple:
    """``(rank, offset, count, set, shift, expect)``: one row per contribution, in (rank, offset) order;
    ``expect[set]`` is the set's (number of ranks, wrapping sum of ``keys``, bit mask or 0).

    ``generic``: ask ``call.spec.post`` per rank even where a formula exists (the tests' reference).
    """
    n = call.nranks
    sets: dict[frozenset, int] = {}
    extra: list[tuple[int, int, int]] = []
    rows = None if generic else _formula(call)
    if rows is None:
        rank, off, cnt, sid, shift = ([] for _ in range(5))
        for r in range(n):
            for c in call.spec.post(call, r):
                if len(c.ranks) == n:
                    i = 0
                elif len(c.ranks) == 1:
                    i = 1 + next(iter(c.ranks))
                else:
                    i = sets.get(c.ranks)
                    if i is None:
                        rk = sorted(c.ranks)
                        i = sets[c.ranks] = n + 1 + len(extra)
                        extra.append((len(rk), int(keys[rk].sum()) if rk else 0, _mask(rk) if use_mask else 0))
                rank.append(r)
                off.append(c.offset)
                cnt.append(c.count)
                sid.append(i)
                shift.append(c.shift)
        rows = tuple(np.array(x, dtype=_I) for x in (rank, off, cnt, sid, shift))
    j = np.arange(n, dtype=_I)
    ones = np.ones(n, _I)
    mask = np.left_shift(ones, j) if use_mask else np.zeros(n, _I)
    every = (n, int(keys.sum()), _mask(range(n)) if use_mask else 0)
    expect = np.concatenate([np.array([every], dtype=_I), np.stack([ones, keys.astype(_I), mask], axis=1),
                             np.array(extra, dtype=_I).reshape(len(extra), 3)])
    return (*rows, expect)


def _mask(ranks) -> int:
    """The ranks (all below 64) as an int64 bit set."""
    m = sum(1 << x for x in ranks)
    return m - (1 << 64) if m >> 63 else m


def _formula(c: Call) -> tuple | None:
    """The rows of ``c``'s postcondition where ``OPS[c.op].post`` is a formula; None for the others."""
    n, k, op = c.nranks, c.count, c.op
    r = np.arange(n, dtype=_I)
    zero = np.zeros(n, _I)
    if op in ("allreduce", "broadcast", "barrier", "reduce_scatter"):
        if op == "barrier":
            k = 1
        if k <= 0:
            return _empty()
        sid = zero + (1 + c.root if op == "broadcast" else 0)
        return r, zero, zero + k, sid, r * k if op == "reduce_scatter" else zero
    if op == "reduce":
        if k <= 0:
            return _empty()
        one = np.array([c.root], dtype=_I)
        return one, one * 0, one * 0 + k, one * 0, one * 0
    if op == "scatter":
        if k <= 0:
            return _empty()
        return r, zero, zero + k, zero + 1 + c.root, r * k
    if op == "reduce_scatter_v":
        cnt, displs = np.array(c.counts, dtype=_I), np.array(c.displs, dtype=_I)
        keep = cnt > 0
        return r[keep], zero[keep], cnt[keep], zero[keep], displs[keep]
    if op in ("all_gather", "gather", "alltoall"):
        if k <= 0:
            return _empty()
        who = np.array([c.root], dtype=_I) if op == "gather" else r
        rank, src = np.repeat(who, n), np.tile(r, len(who))
        shift = (rank - src) * k if op == "alltoall" else -src * k
        return rank, src * k, np.full(len(rank), k, _I), 1 + src, shift
    return None


def _empty() -> tuple:
    e = np.zeros(0, _I)
    return e, e, e, e, e
