"""The Sole executor: one template of the op's role over one group, as a whole collective.

HCCL: src/ops/*/executor/ins_v2_*_sole_executor.cc (hccl-templates.md §3.1). The executor
moves the user's data to where the template works (input -> output unless in place; a
staging area in scratch where the op has no output of that size), runs the template, and
copies the result out. ``op_steps`` also runs on a window ``[lo, hi)`` of every per-rank
block, which is how the Concur and Parallel executors give each template its share.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

from ..core.call import Call
from .executors import copy_step
from .ir import Buf, Region, Step, copy
from .slices import Slices, VSlices
from .templates import A2A, AG, AR, BARRIER, BCAST, GATHER, P2P, REDUCE, RS, SCATTER, positions
from .templates.alltoall import moved_on

__all__ = ["ROLE_OF_OP", "TABLES", "op_steps", "data_window", "rotates", "clear_caches"]

#: The template role that carries each op by itself (the Sole executor's template).
ROLE_OF_OP = {
    "allreduce": "AR", "reduce": "REDUCE", "broadcast": "BCAST", "all_gather": "AG", "gather": "GATHER",
    "scatter": "SCATTER", "reduce_scatter": "RS", "all_gather_v": "AG", "reduce_scatter_v": "RS",
    "alltoall": "A2A", "alltoallv": "A2A", "barrier": "BARRIER", "batch_send_recv": "P2P",
}
#: Role name -> template table.
TABLES: dict[str, dict[str, Callable]] = {
    "AR": AR, "RS": RS, "AG": AG, "SCATTER": SCATTER, "GATHER": GATHER, "BCAST": BCAST, "REDUCE": REDUCE,
    "A2A": A2A, "BARRIER": BARRIER, "P2P": P2P,
}


def data_window(call: Call) -> int:
    """The per-rank block length a window ``[lo, hi)`` cuts (see :func:`op_steps`)."""
    if call.op in ("all_gather_v", "reduce_scatter_v", "alltoallv", "batch_send_recv"):
        return 0               # V ops run whole: their blocks differ in size
    return 1 if call.op == "barrier" else call.count


def _slices(call: Call, base: int, lo: int, hi: int) -> Slices | VSlices:
    n, c = call.nranks, call.count
    if call.counts is not None:
        return VSlices(tuple(base + d for d in call.displs), call.counts)
    if lo == 0 and hi == c:
        return Slices(base, n, c, n, 0)
    return VSlices(tuple(base + j * c + lo for j in range(n)), (hi - lo,) * n)


@lru_cache(maxsize=64)
def _max_input(call: Call) -> int:
    """The largest per-rank input of ``call`` (asked once per call, not once per rank)."""
    return max(call.input_count(r) for r in range(call.nranks))


@lru_cache(maxsize=64)
def _alltoall_blocks(n: int, c: int, lo: int, w: int) -> tuple[tuple[Region | None, ...], tuple[Region | None, ...]]:
    """AlltoAll's send and receive blocks, the same on every rank (made once per call, not per rank)."""
    send = tuple(Region(Buf.INPUT, j * c + lo, w) if w else None for j in range(n))
    recv = tuple(Region(Buf.OUTPUT, j * c + lo, w) if w else None for j in range(n))
    return send, recv


def clear_caches() -> None:
    """Forget the blocks and the AlltoAll steps kept per call."""
    for f in (_max_input, _alltoall_blocks, _a2a_first):
        f.cache_clear()


def rotates(call: Call, template: Callable, group: tuple[int, ...]) -> bool:
    """Whether :func:`op_steps` makes every rank's steps of ``call`` with ``template`` over ``group`` as rank 0's
    moved on by its rank (:func:`~.templates.alltoall.moved_on`): an AlltoAll with one of the A2A templates as
    they are (not split over links) over all ranks in rank order."""
    return call.op == "alltoall" and template in A2A.values() and group == positions(call.nranks)


@lru_cache(maxsize=16)
def _a2a_first(template: Callable, group: tuple[int, ...], c: int, lo: int, w: int, scratch: int) -> tuple[Step, ...]:
    """Position 0's AlltoAll steps (every rank's are them moved on: :func:`rotates`)."""
    return tuple(template(group, 0, *_alltoall_blocks(len(group), c, lo, w), scratch=scratch))


def op_steps(call: Call, template: Callable, rank: int, group: tuple[int, ...], *, lo: int = 0,
             hi: int | None = None, scratch: int = 0, copies: bool = True) -> list[Step]:
    """Rank ``rank``'s steps for ``call`` with one template of the op's role over ``group``.

    ``group`` must hold every rank of the call (the Sole executor is one level over all
    ranks); ``[lo, hi)`` is the window of each per-rank block to move (default: all of it);
    scratch use starts at ``scratch``. ``copies=False`` leaves out the input -> output copy
    (a caller that already made it).
    """
    n, c, op = call.nranks, call.count, call.op
    hi = data_window(call) if hi is None else hi
    pos = group.index(rank)
    root = group.index(call.root)
    IN, OUT, SCR = Buf.INPUT, Buf.OUTPUT, Buf.SCRATCH
    w = hi - lo
    steps: list[Step] = []
    if op == "batch_send_recv":
        return template(call, rank)
    if op in ("allreduce", "reduce", "barrier"):
        data = Region(OUT, lo, w)
        if not call.in_place and copies:
            steps += copy_step(data, Region(IN, lo, w))
        if w == 0:
            return steps
        if op in ("allreduce", "barrier"):
            return steps + template(group, pos, data, scratch=scratch)
        return steps + template(group, pos, root, data, scratch=scratch)
    if op == "broadcast":
        return template(group, pos, root, Region(OUT, lo, w), scratch=scratch) if w else []
    if op in ("all_gather", "all_gather_v"):
        sl = _slices(call, 0, lo, hi)
        mine = sl.region(OUT, pos)
        if mine is not None and copies and not call.in_place:
            steps += copy_step(mine, mine.moved(IN, -mine.offset + (lo if call.counts is None else 0)))
        elif copies and not call.in_place:
            steps.append(Step())
        return steps + template(group, pos, sl, buf=OUT, scratch=scratch)
    if op in ("reduce_scatter", "reduce_scatter_v"):
        total = _max_input(call)
        if call.in_place:
            sl = _slices(call, 0, lo, hi)
            steps += template(group, pos, sl, buf=OUT, scratch=scratch)
        else:
            sl = _slices(call, scratch, lo, hi)
            if copies:
                blocks = _slices(call, 0, lo, hi)
                if isinstance(blocks, Slices) and blocks.total:       # contiguous blocks: one copy
                    whole = Region(IN, blocks.base, blocks.total)
                    steps.append(Step(local=(copy(whole.moved(SCR, scratch), whole),)))
                else:
                    steps.append(Step(local=tuple(copy(r.moved(SCR, scratch), r) for j in range(n)
                                                  if (r := blocks.region(IN, j)) is not None)))
            steps += template(group, pos, sl, buf=SCR, scratch=scratch + total)
        mine = sl.region(OUT if call.in_place else SCR, pos)
        if mine is not None:
            steps += copy_step(Region(OUT, lo, mine.count), mine)
        return steps
    if op == "alltoall":
        if rotates(call, template, group):
            return moved_on(_a2a_first(template, group, c, lo, w, scratch), group, pos, *_alltoall_blocks(n, c, lo, w))
        return template(group, pos, *_alltoall_blocks(n, c, lo, w), scratch=scratch)
    if op == "alltoallv":
        m = call.matrix
        send = [Region(IN, call.sdispls[rank][group[j]], m[rank][group[j]]) if m[rank][group[j]] else None
                for j in range(n)]
        recv = [Region(OUT, call.rdispls[rank][group[j]], m[group[j]][rank]) if m[group[j]][rank] else None
                for j in range(n)]
        return template(group, pos, send, recv, scratch=scratch)
    if op in ("gather", "scatter"):
        # the root works in its own buffer; the others stage all n blocks in scratch (a tree forwards them)
        at_root = pos == root
        if op == "gather":
            buf, base = (OUT, 0) if at_root else (SCR, scratch)
        else:
            buf, base = (IN, 0) if at_root else (SCR, scratch)
        sl = _slices(call, base, lo, hi)
        mine = sl.region(buf, pos)
        extra = 0 if at_root else n * c
        if op == "gather":
            if copies:      # one step on every rank, empty at an in-place root
                steps += copy_step(mine, Region(IN, lo, w)) if mine is not None and not (call.in_place and at_root) \
                    else [Step()]
            return steps + template(group, pos, root, sl, buf=buf, scratch=scratch + extra)
        steps += template(group, pos, root, sl, buf=buf, scratch=scratch + extra)
        if mine is not None:
            steps += copy_step(Region(OUT, lo, w), mine)
        return steps
    raise ValueError(f"no Sole form for op {op!r}")
