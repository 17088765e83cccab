"""Templates: pure functions that return a list of steps, one table per role.

A template is HCCL's unit of an algorithm (src/ops/<op>/template/): it runs on one group of
ranks (``group``: the ranks, ``pos``: my index in it) and works in place on regions of one
rank's buffers. Executors compose them across levels (:mod:`pyhccl.plan.executors`). Every
template accepts ``scratch`` (the first scratch element it may use) and returns ``[]`` when
there is nothing to move. Roots are positions in ``group``.

Roles and their contracts (``slices``: :class:`~pyhccl.plan.slices.Slices` or ``VSlices``,
one slice per position, in ``buf``):

- ``AR[name](group, pos, data, *, scratch)``: every position's ``data`` ends holding the
  reduction of all positions' ``data``.
- ``RS[name](group, pos, slices, *, buf, scratch)``: on entry every slice holds my
  contribution; on exit slice ``pos`` holds the reduction over the group (others: junk).
- ``AG[name](group, pos, slices, *, buf, scratch)``: on entry slice ``pos`` holds my block;
  on exit every slice ``j`` holds position j's block.
- ``SCATTER[name](group, pos, root, slices, *, buf, scratch)``: on entry the root holds every
  slice; on exit position ``j`` holds the root's slice j at slice j's place.
- ``GATHER[name](group, pos, root, slices, *, buf, scratch)``: on entry position j holds slice
  j; on exit the root holds every slice.
- ``BCAST[name](group, pos, root, data, *, scratch)``: the root's ``data`` ends on every position.
- ``REDUCE[name](group, pos, root, data, *, scratch)``: the root's ``data`` ends holding the
  reduction; other positions' ``data`` may be overwritten.
- ``A2A[name](group, pos, send, recv, *, scratch)``: ``send[j]`` (my block for position j) ends
  in position j's ``recv[pos]``; entries may be None (nothing to move).
- ``P2P[name](call, rank)``: BatchSendRecv's items (Send/Recv pairs, SendRecv) over all ranks.
- ``BARRIER[name](group, pos, token, *, scratch)``: a one-element token; on exit every
  position's token holds every position's contribution (so no rank leaves before all arrived).
"""

import inspect
import weakref
from functools import lru_cache, wraps

from ..ir import Buf, Region, Step
from ..shared import Renamed
from ..slices import Slices, VSlices
from .alltoall import A2A
from .barrier import BARRIER
from .mesh import (all_gather_mesh, allreduce_mesh_chunk, allreduce_mesh_one_shot, allreduce_mesh_two_shot,
                   reduce_scatter_mesh, reduce_scatter_mesh_chunk)
from .nb import all_gather_nb, allreduce_nb, reduce_scatter_nb
from .nhr import (all_gather_nhr, allreduce_nhr, allreduce_nhr_aicpu_reduce, nhr_step_count, reduce_scatter_nhr,
                  reduce_scatter_nhr_aicpu_reduce)
from .ordered import allreduce_ordered, reduce_scatter_ordered_group, reduce_scatter_ordered_level1
from .rhd import all_gather_rhd, allreduce_rhd, reduce_scatter_rhd
from .ring import all_gather_ring, allreduce_ring, reduce_scatter_ring
from .bcast_reduce import BCAST, REDUCE
from .rooted import GATHER, SCATTER
from .p2p import P2P

#: Results each table's template keeps (a sweep builds a call's plans for every rank, then again in place).
_MEMO_SIZE = 8192


def memoised(fn):
    """Template ``fn`` keeping its recent results.

    A template is a function of positions: its group enters only as the peers ``group[p]``,
    and where its data start only as an offset added to every region of the data's buffer.
    So ``fn`` runs once per group size over the positions ``0..n-1``, on data from offset 0,
    and a group of ranks gets that result with the peers relabelled and the data's regions
    moved where they are (:class:`~..shared.Renamed`: every level-0 group of a super pod shares
    one run per position, and so does every level-1 group, wherever its block starts). Data
    in scratch is moved too where it lies wholly below ``scratch``: a template's own scratch
    starts there and does not depend on where its data start, so only the regions below it
    move (a ReduceScatter's levels work on a copy of the input in scratch). A call repeated with
    equal arguments (the in-place and out-of-place forms of one call) shares the immutable
    steps. Unhashable arguments (lists of regions) call ``fn`` every time.
    """
    buf_param = inspect.signature(fn).parameters.get("buf")
    default_buf = None if buf_param is None else buf_param.default

    @lru_cache(maxsize=_MEMO_SIZE)
    def on_positions(key):
        return tuple(fn(*key[0], **dict(key[1])))

    @lru_cache(maxsize=_MEMO_SIZE)
    def cached(key):
        args, kw = key
        group = args[0]
        canon = positions(len(group))
        where, moved = at_zero(args, kw)
        steps = on_positions(((canon,) + where[1:], kw))
        return steps if group == canon and moved is None else relabel(steps, group, moved)

    def at_zero(args, kw):
        """``args`` with the data (the first region or slices) from offset 0, and the move back ``(buf, delta)``
        (None: no move)."""
        for i, x in enumerate(args):
            t = type(x)
            if t is Region:
                buf, delta = x.buf, x.offset
                zero = Region(buf, 0, x.count, x.repeat, x.stride) if delta else x
            elif t is Slices or t is VSlices:
                buf = dict(kw).get("buf", default_buf)
                delta = x.base
                if not delta:
                    zero = x
                elif t is Slices:
                    zero = Slices(0, x.n, x.size, x.regular, x.tail)
                else:
                    zero = VSlices(tuple(map(delta.__rsub__, x.offsets)), x.counts, x.repeat, x.rstride)
            else:
                continue
            if not delta or not isinstance(buf, Buf):
                return args, None
            if buf is not Buf.SCRATCH:
                return args[:i] + (zero,) + args[i + 1:], (buf, delta)
            below = dict(kw).get("scratch", 0)      # data in scratch: moved where it lies below the template's own
            if type(below) is not int or _end(x) > below:
                return args, None
            return args[:i] + (zero,) + args[i + 1:], (buf, delta, below)
        return args, None

    @wraps(fn)
    def call(*args, **kwargs):
        key = (args, tuple(sorted(kwargs.items())))
        try:
            hash(key)
        except TypeError:
            return fn(*args, **kwargs)
        return list(cached(key))
    _MEMOS.update((on_positions, cached))
    return call


def _end(data) -> int:
    """One past the last element of ``data`` (a region or slices), or more (VSlices: the furthest offset plus the
    largest slice)."""
    if type(data) is Region:
        return data.end
    if type(data) is Slices:
        return data.base + data.size * data.regular + (data.tail if data.regular < data.n else 0)
    return max(data.offsets, default=0) + (data.repeat - 1) * (data.rstride or 0) + max(data.counts, default=0)


#: Every memoised template's caches (weakly: a template made on the fly, a split one, goes with its function).
_MEMOS: weakref.WeakSet = weakref.WeakSet()


def clear_memos() -> None:
    """Forget every memoised template's results (a sweep between one call's group and the next: they
    share nothing, and a worker's caches would otherwise grow by the plans of every group it ran)."""
    for m in list(_MEMOS):
        m.cache_clear()


@lru_cache(maxsize=64)
def positions(n: int) -> tuple[int, ...]:
    """The group ``(0, 1, ..., n-1)``: a template run on it names positions as peers."""
    return tuple(range(n))


def relabel(steps, group, moved=None) -> tuple[Step, ...]:
    """``steps`` built on :func:`positions` with every peer ``p`` renamed ``group[p]`` and, with ``moved = (buf,
    delta)``, the regions in ``buf`` moved ``delta`` on (:class:`~..shared.Renamed`: made when first read, so that a
    super pod's plans share the template's)."""
    return tuple(Renamed(s, group, moved) if s.transfers or (moved and s.local) else s for s in steps)


#: AllReduce templates by short name, in the order the benchmark lists them.
AR = {
    "MeshOneShot": allreduce_mesh_one_shot,
    "MeshTwoShot": allreduce_mesh_two_shot,
    "MeshChunkTwoShot": allreduce_mesh_chunk,
    "NHR": allreduce_nhr,
    "NHRAicpuReduce": allreduce_nhr_aicpu_reduce,
    "Ring": allreduce_ring,
    "RHD": allreduce_rhd,
    "NB": allreduce_nb,
    "Ordered": allreduce_ordered,
}
RS = {"Mesh": reduce_scatter_mesh, "MeshChunk": reduce_scatter_mesh_chunk, "NHR": reduce_scatter_nhr,
      "NHRAicpuReduce": reduce_scatter_nhr_aicpu_reduce, "NB": reduce_scatter_nb, "RHD": reduce_scatter_rhd,
      "Ring": reduce_scatter_ring, "OrderedLevel1": reduce_scatter_ordered_level1,
      "OrderedGroup": reduce_scatter_ordered_group}
AG = {"Mesh": all_gather_mesh, "NHR": all_gather_nhr, "NB": all_gather_nb, "RHD": all_gather_rhd,
      "Ring": all_gather_ring}

for _table in (AR, RS, AG, SCATTER, GATHER, BCAST, REDUCE):
    for _name, _fn in _table.items():
        _table[_name] = memoised(_fn)

__all__ = [
    "memoised", "clear_memos", "positions", "AR", "RS", "AG", "SCATTER", "GATHER", "BCAST", "REDUCE", "A2A", "BARRIER", "P2P",
    "all_gather_mesh", "allreduce_mesh_chunk", "allreduce_mesh_one_shot", "allreduce_mesh_two_shot", "reduce_scatter_mesh",
    "all_gather_nhr", "allreduce_nhr", "allreduce_nhr_aicpu_reduce", "nhr_step_count", "reduce_scatter_nhr",
    "allreduce_rhd", "reduce_scatter_mesh_chunk", "reduce_scatter_nhr_aicpu_reduce", "reduce_scatter_nb",
    "all_gather_nb", "allreduce_nb", "reduce_scatter_rhd", "all_gather_rhd", "reduce_scatter_ordered_level1",
    "reduce_scatter_ordered_group", "allreduce_ordered",
    "all_gather_ring", "allreduce_ring", "reduce_scatter_ring",
]
