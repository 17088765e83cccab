"""Strict order preservation: ReduceScatter by all-to-all and a fixed reduction tree, and its AllReduce.

HCCL: src/ops/reduce_scatter/template/aicpu/ins_temp_reduce_scatter_order_preserved_{level1,group}.cc,
src/ops/all_reduce/executor/ins_v2_all_reduce_order_preserved_executor.cc, src/common/order_preserved_common.h.
Used when HCCL_DETERMINISTIC=strict: every position's slice is reduced with the same bracketing
over contributor ranks, ((x0+x4)+(x2+x6))+((x1+x5)+(x3+x7)) style, whatever rank runs it and
whichever order the data arrived in, so results are bitwise reproducible run to run.
"""

from __future__ import annotations

from ..ir import Action, Buf, Region, Step, copy, recv, reduce, send
from ..slices import Slices
from ._common import scratch_slot
from .alltoall import mesh_rounds
from .mesh import all_gather_mesh
from .nhr import all_gather_nhr

__all__ = ["MAX_RANK_NUM_FOR_ORDER_PRESERVED", "ORDER_PRESERVED_MAX_THREADS", "tree_reduce_pairs",
           "reduce_scatter_ordered_level1", "reduce_scatter_ordered_group", "allreduce_ordered"]

#: Above this many ranks the AllReduce uses the Group RS and the NHR AllGather (order_preserved_common.h).
MAX_RANK_NUM_FOR_ORDER_PRESERVED = 8
#: Threads of the Group template, main thread included: at most 31 transfers in flight (order_preserved_common.h).
ORDER_PRESERVED_MAX_THREADS = 32


def tree_reduce_pairs(n: int) -> list[tuple[int, int]]:
    """``(dst, src)`` contributor indices of the fixed reduction tree, in order; the result ends in 0.

    HCCL RunLocalReduce (GetLargestPowerOf2LessThan): while m > 1 blocks remain, M = the largest
    power of two below m, reduce block t into block t-M for t = M..m-1, then m = M.
    N = 6: (0,4), (1,5), then (0,2), (1,3), then (0,1).
    """
    out = []
    m = n
    while m > 1:
        big = 1 << ((m - 1).bit_length() - 1)
        out += [(t - big, t) for t in range(big, m)]
        m = big
    return out


def reduce_scatter_ordered_level1(group: tuple[int, ...], pos: int, slices: Slices, *, buf: Buf = Buf.OUTPUT,
                                  scratch: int = 0) -> list[Step]:
    """Order-preserving ReduceScatter for N <= 8: one all-to-all round, then the fixed tree reduce.

    HCCL ins_temp_reduce_scatter_order_preserved_level1.cc: every peer p = pos+1..pos+N-1 gets my
    slice p; position t's contribution to my slice lands in scratch slot (t + pos) mod N
    (CalcOutputIndex), mine is copied to slot 2*pos mod N; then :func:`tree_reduce_pairs` over
    contributor indices and the result (slot of contributor 0) is copied into my slice.
    One step; bytes: every slice but mine. Scratch: N slots of the largest slice.
    """
    return _ordered(group, pos, slices, buf, scratch, len(group))


def reduce_scatter_ordered_group(group: tuple[int, ...], pos: int, slices: Slices, *, buf: Buf = Buf.OUTPUT,
                                 scratch: int = 0, max_threads: int = ORDER_PRESERVED_MAX_THREADS) -> list[Step]:
    """Order-preserving ReduceScatter for N > 8: the all-to-all with bounded concurrency, then the tree.

    HCCL ins_temp_reduce_scatter_order_preserved_group.cc: sends go out by distance, pos+d then
    pos-d for d = 1..N/2, spread over min(N, 32) - 1 slave threads. pyhccl turns the thread cap
    into rounds that both ends agree on: at most C = min(max_threads-1, N-1) peers per round, as
    whole +-d pairs (:func:`~.alltoall.mesh_rounds`: all peers at once up to N = 32; above, 15
    distances = 30 peers a round, so N = 33 takes two rounds). Slots and tree as the Level1 form.
    """
    return _ordered(group, pos, slices, buf, scratch, max(1, max_threads - 1))


def allreduce_ordered(group: tuple[int, ...], pos: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """Order-preserving AllReduce: ordered ReduceScatter, then Mesh AllGather (N <= 8) or NHR AllGather.

    HCCL ins_v2_all_reduce_order_preserved_executor.cc: "floor + tail" slices (the last takes the
    remainder); Level1 RS + Mesh1D AG up to MAX_RANK_NUM_FOR_ORDER_PRESERVED ranks, Group RS +
    NHR AG above. Every slice is reduced once, by the fixed tree, and then copied: the result is
    bitwise identical on every rank. Scratch: N slots of the largest slice.
    """
    n = len(group)
    if n == 1 or data.count == 0:
        return []
    slices = Slices.floor_tail(data.offset, data.count, n)
    if n <= MAX_RANK_NUM_FOR_ORDER_PRESERVED:
        return (reduce_scatter_ordered_level1(group, pos, slices, buf=data.buf, scratch=scratch)
                + all_gather_mesh(group, pos, slices, buf=data.buf))
    return (reduce_scatter_ordered_group(group, pos, slices, buf=data.buf, scratch=scratch)
            + all_gather_nhr(group, pos, slices, buf=data.buf))


def _ordered(group: tuple[int, ...], pos: int, slices: Slices, buf: Buf, scratch: int,
             concurrent: int) -> list[Step]:
    n = len(group)
    if n == 1 or slices.total == 0:
        return []
    c = slices.count(pos)
    mine = slices.region(buf, pos)
    width = slices.largest              # HCCL: slot stride = the tail slice size, the same on every rank
    slot = [scratch_slot(scratch, (t + pos) % n, width, c) for t in range(n)]     # by contributor t
    steps = []
    for peers in mesh_rounds(n, pos, concurrent):
        xfer: list[Action] = [send(group[p], r) for p in peers if (r := slices.region(buf, p)) is not None]
        if c:
            xfer += [recv(group[p], slot[p]) for p in peers]
        steps.append(Step(tuple(xfer)))
    if c:
        first = steps[0]
        steps[0] = Step(first.transfers, first.local + (copy(slot[pos], mine),))
        last = steps[-1]
        tree = tuple(reduce(slot[d], slot[s]) for d, s in tree_reduce_pairs(n))
        steps[-1] = Step(last.transfers, last.local + tree + (copy(mine, slot[0]),))
    return steps
