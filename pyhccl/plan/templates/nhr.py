"""NHR (Nonuniform Hierarchical Ring) templates: ReduceScatter, AllGather, AllReduce.

HCCL: src/ops/reduce_scatter/template/aicpu/ins_temp_reduce_scatter_nhr.cc (GetStepInfoList),
src/ops/all_gather/template/aicpu/ins_temp_all_gather_nhr.cc (GetStepInfo),
src/ops/all_reduce/template/aicpu/ins_temp_all_reduce_nhr.cc.
ceil(log2 N) steps per half for every N: non-powers of two need no extra step and no extra
byte, the modular peer and slice formulas absorb them.
"""

from __future__ import annotations

from ..ir import Buf, Region, Step, copy, reduce
from ..slices import Slices
from ._common import exchange, reduce_in_rank_order, scratch_slot

__all__ = ["nhr_step_count", "reduce_scatter_nhr", "all_gather_nhr", "allreduce_nhr", "allreduce_nhr_aicpu_reduce",
           "reduce_scatter_nhr_aicpu_reduce"]


def nhr_step_count(n: int) -> int:
    """ceil(log2 n) for n >= 2, 0 for n = 1 (GetNHRStepNum, src/ops/op_common/template/template_utils.cc)."""
    return (n - 1).bit_length()


def reduce_scatter_nhr(group: tuple[int, ...], pos: int, slices: Slices, *, buf: Buf = Buf.OUTPUT,
                       scratch: int = 0) -> list[Step]:
    """NHR ReduceScatter in place on ``slices``: afterwards slice ``pos`` holds the reduction.

    Step s (d = 2^s): send to pos-d the k = floor((N-1+2^s)/2^(s+1)) slices
    (pos-d - i*2^(s+1)) mod N, receive from pos+d the slices (pos - i*2^(s+1)) mod N and reduce
    them into mine. Received slices land in a scratch mirror of ``slices`` at ``scratch``.
    """
    n = len(group)
    mirror = scratch - slices.base
    steps = []
    for s in range(nhr_step_count(n)):
        d = 1 << s
        to, frm = (pos - d) % n, (pos + d) % n
        k = (n - 1 + d) // (2 * d)
        tx = _regions(slices, buf, to, 2 * d, k, n)
        rx = _regions(slices, buf, pos, 2 * d, k, n)
        scr = [r.moved(Buf.SCRATCH, mirror) for r in rx]
        steps.append(exchange(group[to], tx, group[frm], scr,
                              [reduce(a, b) for a, b in zip(rx, scr)]))
    return steps


def all_gather_nhr(group: tuple[int, ...], pos: int, slices: Slices, *,
                   buf: Buf = Buf.OUTPUT, scratch: int = 0) -> list[Step]:
    """NHR AllGather in place on ``slices``: the time-reversal of the ReduceScatter.

    Step s (d = 2^(S-1-s)): send to pos+d the k = floor((N-1+d)/(2d)) slices (pos - i*2d) mod N,
    receive from pos-d the slices (pos-d - i*2d) mod N.
    """
    n = len(group)
    total = nhr_step_count(n)
    steps = []
    for s in range(total):
        d = 1 << (total - 1 - s)
        to, frm = (pos + d) % n, (pos - d) % n
        k = (n - 1 + d) // (2 * d)
        tx = _regions(slices, buf, pos, 2 * d, k, n)
        rx = _regions(slices, buf, (pos - d) % n, 2 * d, k, n)
        steps.append(exchange(group[to], tx, group[frm], rx))
    return steps


def allreduce_nhr(group: tuple[int, ...], pos: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """NHR AllReduce in place on ``data``: NHR ReduceScatter then NHR AllGather, 2*ceil(log2 N) steps.

    "floor + tail" slices; scratch multiple 1 (ins_temp_all_reduce_nhr.cc).
    """
    if len(group) == 1 or data.count == 0:
        return []
    slices = Slices.floor_tail(data.offset, data.count, len(group))
    return (reduce_scatter_nhr(group, pos, slices, buf=data.buf, scratch=scratch)
            + all_gather_nhr(group, pos, slices, buf=data.buf))


def allreduce_nhr_aicpu_reduce(group: tuple[int, ...], pos: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """NHR AllReduce with a CPU-side reduce (64-bit types and PROD): gather whole vectors, reduce locally.

    HCCL ins_temp_all_reduce_aicpu_reduce_nhr.cc: an NHR AllGather of the whole input vectors
    (slot j = rank j's input, scratch multiple N), then ``out = x_r; out ⊕= slot t`` for t != r.
    pyhccl reduces in rank order instead, so that every rank ends bitwise identical.
    """
    n = len(group)
    if n == 1 or data.count == 0:
        return []
    c = data.count
    slots = [scratch_slot(scratch, t, c, c) for t in range(n)]
    steps = [Step(local=(copy(slots[pos], data),))]
    steps += all_gather_nhr(group, pos, Slices(scratch, n, c, n, 0), buf=Buf.SCRATCH)
    steps.append(Step(local=tuple(reduce_in_rank_order(data, slots, pos))))
    return steps


def reduce_scatter_nhr_aicpu_reduce(group: tuple[int, ...], pos: int, slices: Slices, *, buf: Buf = Buf.OUTPUT,
                                    scratch: int = 0) -> list[Step]:
    """NHR ReduceScatter with a CPU-side reduce: N sequential NHR AllGather passes, N*ceil(log2 N) steps.

    HCCL ins_temp_reduce_scatter_aicpu_reduce_nhr.cc: pass j copies my slice j into scratch slot
    ``pos``, gathers every position's slice j into slots 0..N-1 with the NHR AllGather, then
    position j reduces the N slots into its slice j (HCCL: own first, then t = 0..N-1;
    pyhccl: in rank order, as :func:`allreduce_nhr_aicpu_reduce`). Passes of empty slices are
    skipped (every position knows every slice's size). Bytes sent: (N-1) * total.
    Scratch: N slots of slice j's size, reused by every pass.
    """
    n = len(group)
    if n == 1 or slices.total == 0:
        return []
    steps: list[Step] = []
    pending: tuple = ()                 # local ops that must run before the next pass sends
    passes: dict[int, list[Step]] = {}
    for j in range(n):
        c = slices.count(j)
        if not c:
            continue
        mine = slices.region(buf, j)
        pending += (copy(scratch_slot(scratch, pos, c, c), mine),)
        if steps:
            last = steps[-1]
            steps[-1] = Step(last.transfers, last.local + pending)
        else:
            steps.append(Step(local=pending))
        gather = passes.get(c)
        if gather is None:      # the passes of equal slice sizes share their (immutable) steps
            gather = passes[c] = all_gather_nhr(group, pos, Slices(scratch, n, c, n, 0), buf=Buf.SCRATCH)
        steps += gather
        if j == pos:            # only the slice's owner reduces: the other passes need no slot list
            slots = [scratch_slot(scratch, t, c, c) for t in range(n)]
            pending = tuple(reduce_in_rank_order(mine, slots, pos))
        else:
            pending = ()
    last = steps[-1]
    steps[-1] = Step(last.transfers, last.local + pending)
    return steps


def _regions(slices: Slices, buf: Buf, first: int, step: int, k: int, n: int) -> list[Region]:
    """Regions of slices (first - i*step) mod n, i < k, as ascending runs (at most one wrap)."""
    c1 = min(k, first // step + 1)
    out = slices.regions(buf, first - (c1 - 1) * step, step, c1)
    if k > c1:
        c2 = k - c1
        out += slices.regions(buf, first - (k - 1) * step + n, step, c2)
    return out
