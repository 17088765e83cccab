"""A call in the communicator's ranks -> the same call in HCCL's numbering (ranks server by server).

When the launcher placed the ranks of a node apart (``Topology.order`` is not the identity), plans
are built and run in HCCL's numbering, on a private communicator ordered server by server, so
every level-0 group stays within one node and every rank does what the block-placed run's rank
at its place does. What names ranks moves with them: a root, the counts and displacements of
the vector ops (reordered, no copy), and the blocks of a buffer that holds one block per rank
(Allgather's and Gather's output, Scatter's and Reduce_scatter's input, both of Alltoall's),
gathered into HCCL's order in staging memory and scattered back after the run.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

from ..run.pool import ScratchPool
from ..topo import Topology
from .job import Job

__all__ = ["Placed", "RENAMES_ONLY"]

#: Ops whose relabelling renames ranks only (roots, counts, displacements): nothing staged around the run.
RENAMES_ONLY = frozenset({"allreduce", "barrier", "reduce", "broadcast", "all_gather_v", "alltoallv"})

#: A copy after the run (staged blocks back into the user's buffer), or None.
Finish = Callable[[], None] | None


class Placed:
    """Relabels jobs of one communicator (``topology.order[h]``: the communicator rank at HCCL rank ``h``)."""

    def __init__(self, topology: Topology) -> None:
        self.order = topology.order
        self.hccl = tuple(topology.hccl_rank(r) for r in range(len(self.order)))
        self.rank = topology.rank                   # this rank's HCCL rank
        self.inp, self.out = ScratchPool(), ScratchPool()

    def __call__(self, job: Job) -> tuple[Job, Finish]:
        """``job`` in HCCL's numbering, and the copy to run after it (None when nothing is staged)."""
        call, order = job.call, self.order
        op = call.op
        if op in ("allreduce", "barrier"):
            return job, None
        if op in ("reduce", "broadcast"):
            return _with(job, root=self.hccl[call.root]), None
        if op == "all_gather_v":
            return _with(job, counts=_perm(call.counts, order), displs=_perm(call.displs, order)), None
        if op == "alltoallv":
            return _with(job, matrix=_perm2(call.matrix, order), sdispls=_perm2(call.sdispls, order),
                         rdispls=_perm2(call.rdispls, order)), None
        if op == "reduce_scatter_v":
            src = _blocks(call.counts, call.displs, order)
            inp = self._gathered(job, job.inp, src, self.inp)
            call = dataclasses.replace(call, counts=_perm(call.counts, order), displs=None)
            return dataclasses.replace(job, call=call, inp=inp), None
        n, c = call.nranks, call.count
        even = [(u * c, c) for u in order]              # block h of HCCL's order is the user's block order[h]
        if op == "all_gather":
            return self._gather_out(job, even, own=job.call.in_place)
        if op == "gather":
            job = _with(job, root=self.hccl[call.root])
            return (job, None) if self.rank != job.call.root else self._gather_out(job, even, own=call.in_place)
        if op == "scatter":
            job = _with(job, root=self.hccl[call.root])
            if self.rank != job.call.root:
                return job, None
            return dataclasses.replace(job, inp=self._gathered(job, job.inp, even, self.inp)), None
        if op == "reduce_scatter":
            if not call.in_place:
                return dataclasses.replace(job, inp=self._gathered(job, job.inp, even, self.inp)), None
            staged = self._gathered(job, job.out, even, self.out)       # the input, then the result at 0
            user = job.out
            return dataclasses.replace(job, inp=staged, out=staged), lambda: _copy(job, user[:c], staged[:c])
        if op == "alltoall":
            inp = self._gathered(job, job.inp, even, self.inp)
            staged, user = self._space(job, n * c, self.out), job.out
            return (dataclasses.replace(job, inp=inp, out=staged),
                    lambda: _scatter(job, user, staged, even))
        raise ValueError(f"pyhccl cannot relabel {op}; expecting one of the ops the Communicator runs")

    def _gather_out(self, job: Job, even: list[tuple[int, int]], own: bool) -> tuple[Job, Finish]:
        """An output of one block per rank: run into staging (holding this rank's own block when in place)."""
        user, c = job.out, job.call.count
        staged = self._space(job, len(even) * c, self.out)
        if own:
            mine = self.order[self.rank] * c
            _copy(job, staged[self.rank * c:(self.rank + 1) * c], user[mine:mine + c])
        inp = staged if own else job.inp
        return dataclasses.replace(job, inp=inp, out=staged), lambda: _scatter(job, user, staged, even)

    def _gathered(self, job: Job, src: Any, pieces: list[tuple[int, int]], pool: ScratchPool) -> Any:
        """``src``'s pieces (offset, count), in HCCL's order, one after another in staging."""
        dst = self._space(job, sum(k for _, k in pieces), pool)
        at = 0
        for lo, k in pieces:
            _copy(job, dst[at:at + k], src[lo:lo + k])
            at += k
        return dst

    @staticmethod
    def _space(job: Job, count: int, pool: ScratchPool) -> Any:
        if job.device is None:
            return pool.get(job.dtype, count)
        return job.device.empty(count, job.dtype, job.out)


def _with(job: Job, **fields: Any) -> Job:
    return dataclasses.replace(job, call=dataclasses.replace(job.call, **fields))


def _perm(values: Sequence[int] | None, order: Sequence[int]) -> tuple[int, ...] | None:
    return None if values is None else tuple(values[u] for u in order)


def _perm2(rows: Sequence[Sequence[int]] | None, order: Sequence[int]) -> tuple | None:
    return None if rows is None else tuple(tuple(rows[u][v] for v in order) for u in order)


def _blocks(counts: Sequence[int], displs: Sequence[int], order: Sequence[int]) -> list[tuple[int, int]]:
    """(offset, count) of each user block, in HCCL's order."""
    return [(displs[u], counts[u]) for u in order]


def _copy(job: Job, dst: Any, src: Any) -> None:
    if job.device is None:
        np.copyto(dst, src)
    else:
        job.device.copyto(dst, src)


def _scatter(job: Job, user: Any, staged: Any, pieces: list[tuple[int, int]]) -> None:
    """Staged blocks (HCCL's order, one after another) back to their places in the user's buffer."""
    at = 0
    for lo, k in pieces:
        _copy(job, user[lo:lo + k], staged[at:at + k])
        at += k
