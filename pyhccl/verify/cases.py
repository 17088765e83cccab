"""The calls ``python -m pyhccl.verify`` sweeps per op and rank count: counts, roots, V counts, matrices.

Everything is deterministic: the uneven V counts and AlltoAllV matrices come from a
``random.Random`` seeded with the op and the rank count, so a failure reproduces exactly.
"""

from __future__ import annotations

import random
from functools import lru_cache
from typing import Sequence

from ..core.call import OPS, Call
from ..core.p2p import pair_items, sendrecv_items
from .memory import require_matrices

__all__ = ["LARGE_COUNT", "PRIME_COUNT", "FULL_SWEEP_MAX_RANKS", "parse_ranks", "default_counts", "default_roots",
           "uneven_counts", "uneven_matrix", "batch_items", "calls"]

#: A prime above ten billion: a count the simulator handles as cheaply as a count of ten.
LARGE_COUNT = 10_000_000_019
#: A prime of moderate size.
PRIME_COUNT = 7919
#: Above this many ranks the sweep runs fewer counts and roots per case (each simulation costs more).
FULL_SWEEP_MAX_RANKS = 64


def parse_ranks(text: str) -> list[int]:
    """``1-64``, ``4096``, ``1,2,8-16`` or ``none`` to a sorted list of rank counts.

    Raises:
        ValueError: a malformed range or a count below 1.
    """
    if text.strip().lower() in ("", "none"):
        return []
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError:
            raise ValueError(f"expecting --ranks like 1-64, 4096, 1,2,8-16 or none, got {text!r}") from None
        if a < 1 or b < a:
            raise ValueError(f"expecting rank counts >= 1 in increasing ranges, got {part.strip()!r}")
        out.update(range(a, b + 1))
    return sorted(out)


def default_counts(n: int) -> list[int]:
    """0, 1, N-1, N, N+1, a prime and ten billion and nineteen; above 64 ranks 1, N+1 and the large one."""
    if n > FULL_SWEEP_MAX_RANKS:
        return sorted({1, n + 1, LARGE_COUNT})
    return sorted({0, 1, max(n - 1, 0), n, n + 1, PRIME_COUNT, LARGE_COUNT})


def default_roots(n: int) -> list[int]:
    """The first, middle and last rank (first and last above 64 ranks)."""
    if n > FULL_SWEEP_MAX_RANKS:
        return sorted({0, n - 1})
    return sorted({0, n // 2, n - 1})


def uneven_counts(n: int, seed: object = 0, *, large: bool = False) -> tuple[int, ...]:
    """Per-rank counts between 0 and 2N+3, about a quarter of them 0; ``large`` puts ten billion on one rank."""
    rng = random.Random(f"counts:{seed}:{n}")
    counts = [0 if rng.random() < 0.25 else rng.randint(1, 2 * n + 3) for _ in range(n)]
    if large:
        counts[rng.randrange(n)] = LARGE_COUNT
    return tuple(counts)


def uneven_matrix(n: int, seed: object = 0, *, large: bool = False) -> tuple[tuple[int, ...], ...]:
    """An N x N send-count matrix like :func:`uneven_counts`; ``large`` puts ten billion in one row and column."""
    rng = random.Random(f"matrix:{seed}:{n}")
    m = [[0 if rng.random() < 0.25 else rng.randint(1, n + 3) for _ in range(n)] for _ in range(n)]
    if large:
        i, j = rng.randrange(n), rng.randrange(n)
        m[i][j] = m[j][i] = LARGE_COUNT
    return tuple(tuple(row) for row in m)


def batch_items(n: int, seed: object = 0) -> tuple:
    """BatchSendRecv items: each rank sends to a few random peers (itself included), some pairs twice,
    some items of count 0, in a shuffled list order; every send has its receive."""
    rng = random.Random(f"items:{seed}:{n}")
    rows: list[list] = [[] for _ in range(n)]
    for src in range(n):
        for _ in range(rng.randint(0, 3)):
            dst, count = rng.randrange(n), rng.choice([0, 1, 2, n + 1, rng.randint(1, 2 * n + 3)])
            rows[src].append(("send", dst, count))
            rows[dst].append(("recv", src, count))
    for row in rows:
        rng.shuffle(row)
    return tuple(tuple(row) for row in rows)


def _gapped(counts: Sequence[int]) -> tuple[int, ...]:
    """Displacements that place the blocks in reverse rank order with a one-element gap between them."""
    displs, at = [0] * len(counts), 0
    for r in reversed(range(len(counts))):
        displs[r] = at
        at += counts[r] + 1
    return tuple(displs)


def calls(op: str, n: int, counts: Sequence[int] | None = None, *, in_place: bool = True) -> list[Call]:
    """Every call of the sweep for ``op`` over ``n`` ranks.

    Args:
        op: pyhccl's op name.
        counts: per-rank counts to use (default :func:`default_counts`); the V ops use each as an
            equal count on every rank, and add uneven ones only by default.
        in_place: add the in-place form of every call, where the op has one.

    Raises:
        MemoryBudgetError: AlltoAllV's N x N send-count matrices would not fit in the memory available.
    """
    return list(_calls(op, n, None if counts is None else tuple(counts), in_place))


@lru_cache(maxsize=64)
def _calls(op: str, n: int, counts: tuple[int, ...] | None, in_place: bool) -> tuple[Call, ...]:
    """:func:`calls`, kept: every algorithm of a sweep's (op, machine) group runs the same calls
    (checking an N x N AlltoAllV matrix once, not once per algorithm)."""
    return tuple(_make_calls(op, n, counts, in_place))


def _make_calls(op: str, n: int, counts: Sequence[int] | None, in_place: bool) -> list[Call]:
    spec = OPS[op]
    given = counts is not None
    counts = list(counts) if given else default_counts(n)
    out: list[Call] = []
    if op == "barrier":
        return [Call(op, n)]
    if spec.vector == "counts":
        vecs = [((c,) * n, None) for c in counts]
        if not given:
            small = uneven_counts(n, op)
            vecs += [(small, None), (small, _gapped(small)), (uneven_counts(n, op, large=True), None)]
        return [Call(op, n, counts=v, displs=d) for v, d in vecs]
    if spec.vector == "items":
        lists = [sendrecv_items(n, c) for c in counts]
        if not given:           # a Send/Recv pair, SendRecv backwards, and a batch with repeated pairs
            lists += [pair_items(n, 0, n - 1, PRIME_COUNT), sendrecv_items(n, n + 1, shift=-1), batch_items(n, op)]
        return [Call(op, n, items=x) for x in lists]
    if spec.vector == "matrix":
        require_matrices(op, n, len(counts) + (not given))
        mats = [tuple((c,) * n for _ in range(n)) for c in counts]
        if not given:      # no uneven matrix with a huge entry: the simulator's atoms cascade on it (docs/verify.md)
            mats += [uneven_matrix(n, op)]
        return [Call(op, n, matrix=m) for m in mats]
    roots = default_roots(n) if spec.rooted else [0]
    places = (False, True) if in_place and spec.in_place_ok and op != "broadcast" else (False,)
    for c in counts:
        for root in roots:
            out += [Call(op, n, c, root=root, in_place=ip) for ip in places]
    return out
