"""NB (Nonuniform Bruck) templates: ReduceScatter, AllGather, AllReduce.

HCCL doc: docs/zh/user_guide/coll_algo_intro/NB.md (no RS/AG/AR template in src/ops; the only
NB code is the legacy Scatter src/ops/scatter/algo/template/scatter_nb.cc).
ceil(log2 N) steps per half for every N, (N-1)/N of the data per half, no extra step for
non-powers of two. The doc's NB ReduceScatter slice count is exactly the code's NHR
ReduceScatter; its AllGather is the classic Bruck one (distance 2^k increasing, 2^k slices,
the last step the remainder N - 2^(S-1)), which differs from the NHR AllGather.
"""

from __future__ import annotations

from ..ir import Buf, Region, Step
from ..slices import Slices
from ._common import exchange
from .nhr import nhr_step_count, reduce_scatter_nhr

__all__ = ["reduce_scatter_nb", "all_gather_nb", "allreduce_nb"]


def reduce_scatter_nb(group: tuple[int, ...], pos: int, slices: Slices, *, buf: Buf = Buf.OUTPUT,
                      scratch: int = 0) -> list[Step]:
    """NB ReduceScatter in place on ``slices``: step k sends floor((N-1+2^k)/2^(k+1)) slices at distance 2^k.

    HCCL doc NB.md: the formula is the NHR ReduceScatter's (ins_temp_reduce_scatter_nhr.cc),
    so this is :func:`~pyhccl.plan.templates.nhr.reduce_scatter_nhr`. Scratch: a mirror of ``slices``.
    """
    return reduce_scatter_nhr(group, pos, slices, buf=buf, scratch=scratch)


def all_gather_nb(group: tuple[int, ...], pos: int, slices: Slices, *, buf: Buf = Buf.OUTPUT,
                  scratch: int = 0) -> list[Step]:
    """NB (Bruck) AllGather in place on ``slices``: ceil(log2 N) steps, distance 2^k increasing.

    HCCL doc NB.md ("the last step carries N - 2^floor(log2 N) slices"). Before step k
    (d = 2^k) I hold slices pos .. pos+d-1 (mod N); I send the first m = min(d, N-d) of them to
    pos-d and receive slices pos+d .. pos+d+m-1 from pos+d. Slices per step: 1, 2, 4, ...,
    N - 2^(S-1) (N = 5: 1, 2, 1; N = 6: 1, 2, 2); (N-1)/N of the data in all. No scratch.
    """
    n = len(group)
    if n == 1 or slices.total == 0:
        return []
    steps = []
    for k in range(nhr_step_count(n)):
        d = 1 << k
        m = min(d, n - d)
        steps.append(exchange(group[(pos - d) % n], _circular(slices, buf, pos, m, n),
                              group[(pos + d) % n], _circular(slices, buf, pos + d, m, n)))
    return steps


def allreduce_nb(group: tuple[int, ...], pos: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """NB AllReduce in place on ``data``: NB ReduceScatter then NB AllGather, 2*ceil(log2 N) steps.

    HCCL doc NB.md (AllReduce = ReduceScatter + AllGather); "floor + tail" slices as NHR.
    Scratch: ``data.count`` elements (the ReduceScatter mirror).
    """
    if len(group) == 1 or data.count == 0:
        return []
    slices = Slices.floor_tail(data.offset, data.count, len(group))
    return (reduce_scatter_nb(group, pos, slices, buf=data.buf, scratch=scratch)
            + all_gather_nb(group, pos, slices, buf=data.buf))


def _circular(slices: Slices, buf: Buf, first: int, k: int, n: int) -> list[Region]:
    """Non-empty slices first, first+1, ..., first+k-1 (mod n), as ascending runs (at most one wrap)."""
    first %= n
    head = min(k, n - first)
    return slices.regions(buf, first, 1, head) + slices.regions(buf, 0, 1, k - head)
