"""Every rank's postcondition (:attr:`~pyhccl.core.call.OpSpec.post`) as arrays, without a Python loop over ranks.

At 8192 ranks an AllGather's postcondition is 67 million contributions and an AllReduce's
8192 sets of every rank: asking ``post`` rank by rank costs more than simulating. The ops
whose postcondition is a formula in the rank get it here as numpy arithmetic (the same
formulas as ``pyhccl.core.call.OPS``, which ``tests/test_verify_post.py`` compares rank by
rank), as one row per rank of ``rep`` contributions in a row (an AllGather's n blocks: row
``i`` of them holds set ``sid + i * sid_step`` at shift ``shift + i * shift_step``); the
others (the V ops, BatchSendRecv) ask ``post`` per rank, one row per contribution.

Sets of contributing ranks are numbered: 0 is every rank, ``1 + j`` is rank ``j`` alone,
later numbers any other set met.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.call import Call

__all__ = ["Post", "post_arrays", "post_rows"]

_I = np.int64


@dataclass(frozen=True)
class Post:
    """The postcondition as rows, in (rank, offset) order: row ``j`` is ``rep[j]`` contributions of
    ``cnt[j]`` elements one after the other from ``off[j]`` of ``rank[j]``'s output, the ``i``-th
    holding set ``sid[j] + i * sid_step[j]`` of input index (output index + ``shift[j] + i *
    shift_step[j]``); ``expect[set]`` is the set's (number of ranks, wrapping sum of the keys, bit
    mask or 0)."""

    rank: np.ndarray
    off: np.ndarray
    cnt: np.ndarray
    rep: np.ndarray
    sid: np.ndarray
    sid_step: np.ndarray
    shift: np.ndarray
    shift_step: np.ndarray
    expect: np.ndarray

    def expand(self) -> tuple[np.ndarray, ...]:
        """One row per contribution: ``(rank, offset, count, set, shift)``."""
        j = np.repeat(np.arange(len(self.rep)), self.rep)
        i = np.arange(len(j)) - (np.cumsum(self.rep) - self.rep)[j]
        return (self.rank[j], self.off[j] + i * self.cnt[j], self.cnt[j], self.sid[j] + i * self.sid_step[j],
                self.shift[j] + i * self.shift_step[j])


def post_arrays(call: Call, keys: np.ndarray, use_mask: bool, *, generic: bool = False) -> Post:
    """``call``'s postcondition (:class:`Post`), the sets keyed by ``keys``.

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
        rank, off, cnt, sid, shift = (np.array(x, dtype=_I) for x in (rank, off, cnt, sid, shift))
        one, zero = np.ones(len(rank), _I), np.zeros(len(rank), _I)
        rows = (rank, off, cnt, one, sid, zero, shift, zero)
    j = np.arange(n, dtype=_I)
    ones = np.ones(n, _I)
    mask = np.left_shift(ones, j) if use_mask else np.zeros(n, _I)
    every = (n, int(keys.sum()), _mask(range(n)) if use_mask else 0)
    expect = np.concatenate([np.array([every], dtype=_I), np.stack([ones, keys.astype(_I), mask], axis=1),
                             np.array(extra, dtype=_I).reshape(len(extra), 3)])
    return Post(*rows, expect)


def post_rows(call: Call) -> int:
    """About the rows :func:`post_arrays` makes for ``call`` (for the memory guard): one a rank where a formula
    applies, else one a contribution (the root's, and another rank's for every other rank)."""
    if call.op in _FORMULA:
        return call.nranks
    other = (call.root + 1) % call.nranks
    return len(call.spec.post(call, call.root)) + (call.nranks - 1) * len(call.spec.post(call, other))


def _mask(ranks) -> int:
    """The ranks (all below 64) as an int64 bit set."""
    m = sum(1 << x for x in ranks)
    return m - (1 << 64) if m >> 63 else m


_BY_COUNT = {"allreduce", "broadcast", "barrier", "reduce_scatter", "reduce", "scatter", "all_gather", "gather",
             "alltoall"}
_FORMULA = _BY_COUNT | {"reduce_scatter_v"}     # the ops :func:`_formula` gives rows for


def _formula(c: Call) -> tuple | None:
    """The rows of ``c``'s postcondition (:class:`Post`'s fields but ``expect``) where ``OPS[c.op].post`` is a
    formula; None for the others."""
    n, k, op = c.nranks, c.count, c.op
    r = np.arange(n, dtype=_I)
    zero, one = np.zeros(n, _I), np.ones(n, _I)
    if op == "barrier":
        k = 1
    if k <= 0 and op in _BY_COUNT:
        return _empty()
    if op in ("allreduce", "broadcast", "barrier", "reduce_scatter"):
        sid = zero + (1 + c.root if op == "broadcast" else 0)
        return r, zero, zero + k, one, sid, zero, r * k if op == "reduce_scatter" else zero, zero
    if op == "reduce":
        z = zero[:1]
        return z + c.root, z, z + k, z + 1, z, z, z, z
    if op == "scatter":
        return r, zero, zero + k, one, zero + 1 + c.root, zero, r * k, zero
    if op == "reduce_scatter_v":
        cnt, displs = np.array(c.counts, dtype=_I), np.array(c.displs, dtype=_I)
        keep = cnt > 0
        return r[keep], zero[keep], cnt[keep], one[keep], zero[keep], zero[keep], displs[keep], zero[keep]
    if op in ("all_gather", "gather", "alltoall"):
        who = np.array([c.root], dtype=_I) if op == "gather" else r
        z = np.zeros(len(who), _I)
        # block j of rank r: rank j's input (AllGather, Gather), or its block r (AlltoAll: shift (r - j) k)
        return who, z, z + k, z + n, z + 1, z + 1, who * k if op == "alltoall" else z, z - k
    return None


def _empty() -> tuple:
    e = np.zeros(0, _I)
    return (e,) * 8
