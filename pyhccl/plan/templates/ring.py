"""Ring templates: ReduceScatter, AllGather, AllReduce.

HCCL doc: docs/zh/user_guide/coll_algo_intro/Ring.md (no RS/AG/AR ring template in src/ops).
N-1 steps per half, each moving one slice to the right neighbour and receiving one from the
left; "floor + tail" slices as HCCL's NHR uses.
"""

from __future__ import annotations

from ..ir import Buf, Region, Step, reduce
from ..slices import Slices
from ._common import exchange

__all__ = ["reduce_scatter_ring", "all_gather_ring", "allreduce_ring"]


def reduce_scatter_ring(group: tuple[int, ...], pos: int, slices: Slices, *, buf: Buf = Buf.OUTPUT,
                        scratch: int = 0) -> list[Step]:
    """Ring ReduceScatter in place: step t = 1..N-1 sends partial slice (pos-t) to pos+1,
    receives slice (pos-t-1) from pos-1 and reduces it; slice ``pos`` ends fully reduced."""
    n = len(group)
    mirror = scratch - slices.base
    right, left = group[(pos + 1) % n], group[(pos - 1) % n]
    steps = []
    for t in range(1, n):
        tx = _one(slices, buf, (pos - t) % n)
        rx = _one(slices, buf, (pos - t - 1) % n)
        scr = [r.moved(Buf.SCRATCH, mirror) for r in rx]
        steps.append(exchange(right, tx, left, scr, [reduce(a, b) for a, b in zip(rx, scr)]))
    return steps


def all_gather_ring(group: tuple[int, ...], pos: int, slices: Slices, *,
                    buf: Buf = Buf.OUTPUT, scratch: int = 0) -> list[Step]:
    """Ring AllGather in place: step t = 1..N-1 sends slice (pos-t+1) right, receives (pos-t) from the left."""
    n = len(group)
    right, left = group[(pos + 1) % n], group[(pos - 1) % n]
    return [exchange(right, _one(slices, buf, (pos - t + 1) % n), left, _one(slices, buf, (pos - t) % n))
            for t in range(1, n)]


def allreduce_ring(group: tuple[int, ...], pos: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """Ring AllReduce in place on ``data``: ring ReduceScatter then ring AllGather, 2(N-1) steps."""
    if len(group) == 1 or data.count == 0:
        return []
    slices = Slices.floor_tail(data.offset, data.count, len(group))
    return (reduce_scatter_ring(group, pos, slices, buf=data.buf, scratch=scratch)
            + all_gather_ring(group, pos, slices, buf=data.buf))


def _one(slices: Slices, buf: Buf, j: int) -> list[Region]:
    r = slices.region(buf, j)
    return [] if r is None else [r]
