"""The hierarchical runtime: ``@shm`` on several nodes, one plan, the transport chosen per transfer.

HCCL's multi-level executors already split the work by level (level 0 inside a server, the levels
above between servers); here each transfer of a rank's plan goes where its peer is: a peer on this
node is read from its segment of the node's shared window (the shared-memory engine's window,
:class:`~.engine.ShmEngine` on the node communicator), a peer on another node over MPI
point-to-point. The plan is the one the MPI runtime runs, step by step:

1. the step's transfers with other nodes: nonblocking receives and sends on the window's memory,
   waited;
2. a node barrier (the peers' data of the step visible), the loads from the node's peers (each
   receive matched to the peer's send, in order per pair within the step, as MPI matches them),
   a node barrier (no rank overwrites what a peer still loads);
3. the local reduces and copies.

Each rank's input, output and scratch live in its segment at offsets every rank of the node
computes alike from every node rank's plan (so barriers and offsets agree); the input and the
output are copied in before the first step and the output out after the last. Barriers are
skipped in steps where no rank of the node loads. Ops: those of the shared-memory engine
(:data:`~.compile.OPS`), whose Call is the same on every rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from mpi4py import MPI

from ...plan.ir import Buf, Kind, Plan, Region
from ..timeout import CollectiveTimeoutError, wait_pending
from .engine import HEADER, NodeEngine

__all__ = ["HierPlan", "HierRunner", "compile_hier"]

_ALIGN = 64
_BUFS = (Buf.INPUT, Buf.OUTPUT, Buf.SCRATCH)


@dataclass(frozen=True)
class _Step:
    recvs: tuple[tuple[int, Region], ...]              # from other nodes: (comm rank, dst)
    sends: tuple[tuple[int, Region], ...]              # to other nodes: (comm rank, src)
    loads: tuple[tuple[Region, int, Region], ...]      # from this node: (dst, peer's node index, peer's src)
    local: tuple[tuple[Kind, Region, Region], ...]     # (REDUCE | COPY, dst, src)
    sync: bool                                          # some rank of the node loads in this step


@dataclass(frozen=True)
class HierPlan:
    """One rank's plan compiled for the hierarchical runtime: byte offsets of its buffers in a
    segment (alike on every rank of the node), the bytes a segment needs, and the steps."""

    plan: Plan
    itemsize: int
    offsets: tuple[int, int, int]       # bytes: input, output, scratch
    sizes: tuple[int, int, int]         # elements
    alias: bool                         # input and output are one area (in place, Broadcast)
    nbytes: int
    steps: tuple[_Step, ...]


def compile_hier(plans: Sequence[Plan | None], rank: int, node: Sequence[int], local: Sequence[int], itemsize: int,
                 alias: bool) -> HierPlan:
    """Compile rank ``rank``'s plan given the plans of every rank of its node (``plans[i]`` for comm rank
    ``i``, None elsewhere); ``node[i]`` / ``local[i]``: comm rank ``i``'s node and index in it; ``alias``:
    the input is the output (an in-place call, Broadcast)."""
    mine = [i for i, n in enumerate(node) if n == node[rank]]
    sizes = [max(_end(plans[i], b) for i in mine) for b in _BUFS]
    if alias:
        sizes[0] = sizes[1] = max(sizes[0], sizes[1])
    offsets, at = [], HEADER
    for b, n in zip(_BUFS, sizes):
        if b is Buf.OUTPUT and alias:
            offsets.append(offsets[0])
            continue
        offsets.append(at)
        at += -(-n * itemsize // _ALIGN) * _ALIGN
    nsteps = max(len(plans[i].steps) for i in mine)
    steps = []
    for t in range(nsteps):
        sync = any(t < len(plans[i].steps) and any(a.kind is Kind.RECV and node[a.peer] == node[rank]
                                                   for a in plans[i].steps[t].transfers) for i in mine)
        step = plans[rank].steps[t] if t < len(plans[rank].steps) else None
        recvs, sends, loads, ops = [], [], [], []
        if step is not None:
            nth: dict[int, int] = {}
            for a in step.transfers:
                if node[a.peer] != node[rank]:
                    (recvs if a.kind is Kind.RECV else sends).append((a.peer, a.dst if a.kind is Kind.RECV else a.src))
                elif a.kind is Kind.RECV:
                    k = nth[a.peer] = nth.get(a.peer, -1) + 1
                    loads.append((a.dst, local[a.peer], _sent(plans[a.peer], t, rank, k)))
            ops = [(a.kind, a.dst, a.src) for a in step.local]
        steps.append(_Step(tuple(recvs), tuple(sends), tuple(loads), tuple(ops), sync))
    return HierPlan(plans[rank], itemsize, tuple(offsets), tuple(sizes), alias, at, tuple(steps))  # type: ignore


def _end(plan: Plan, buf: Buf) -> int:
    regions = [r for s in plan.steps for a in (*s.transfers, *s.local) for r in (a.src, a.dst)
               if r is not None and r.buf is buf]
    return max((r.end for r in regions), default=0)


def _sent(plan: Plan, t: int, to: int, k: int) -> Region:
    """The ``k``-th region ``plan``'s rank sends to ``to`` in step ``t``."""
    sends = [a.src for a in plan.steps[t].transfers if a.kind is Kind.SEND and a.peer == to]
    if k >= len(sends):
        raise ValueError(f"rank {plan.rank}'s plan sends {len(sends)} regions to rank {to} in step {t}; "
                         f"rank {to} receives more: the plans do not match")
    return sends[k]


class HierRunner:
    """A :class:`HierPlan` on a node engine: the :class:`~pyhccl.run.base.Runner` of ``@shm`` on several nodes."""

    scratch_count = 0

    def __init__(self, plan: HierPlan, node: NodeEngine) -> None:
        self.plan, self.node = plan, node

    def run(self, comm: MPI.Intracomm, bufs: tuple, ufunc: Callable | None, timeout: float | None = None) -> None:
        """Execute with ``(input, output, scratch)`` numpy arrays of one dtype (scratch unused).

        Raises:
            CollectiveTimeoutError: with ``timeout`` (seconds), a transfer or node barrier not done in time.
        """
        p, eng = self.plan, self.node.engine
        if not eng.reserve(p.nbytes, timeout):
            raise self._late("the node barrier before the shared window grows", 0, timeout)
        inp, out = bufs[0], bufs[1]
        areas = [self._areas(s, inp.dtype) for s in eng.segments]
        mine = areas[eng.rank]
        k = min(inp.size, p.sizes[0])
        mine[Buf.INPUT][:k] = inp[:k]
        if not p.alias:                             # the output's gaps keep the caller's values
            k = min(out.size, p.sizes[1])
            mine[Buf.OUTPUT][:k] = out[:k]
        for t, st in enumerate(p.steps):
            if st.recvs or st.sends:
                staged = [(r, np.empty(r.size, inp.dtype)) for _, r in st.recvs]
                reqs = [comm.Irecv(b, peer) for (peer, _), (_, b) in zip(st.recvs, staged)]
                reqs += [comm.Isend(np.ascontiguousarray(_view(mine, r)).reshape(-1), peer) for peer, r in st.sends]
                if timeout is None:
                    MPI.Request.Waitall(reqs)
                elif wait_pending(reqs, timeout):
                    raise self._late("the transfers with other nodes", t, timeout)
                for r, b in staged:
                    _store(mine, r, b, None)
            if st.sync:
                self._sync(t, timeout)
                for dst, peer, src in st.loads:
                    _store(mine, dst, _view(areas[peer], src), None)
                self._sync(t, timeout)
            for kind, dst, src in st.local:
                _store(mine, dst, _view(mine, src), ufunc if kind is Kind.REDUCE else None)
        k = min(out.size, p.sizes[1])
        out[:k] = mine[Buf.OUTPUT][:k]

    def run_device(self, comm: Any, bufs: tuple, dev: Any, ufunc: Callable | None,
                   timeout: float | None = None) -> None:
        """The window is host memory: device arrays go through host copies (``dev.run_on_host``)."""
        dev.run_on_host(self, comm, bufs, ufunc, timeout)

    def _areas(self, seg: np.ndarray, dtype: np.dtype) -> dict[Buf, np.ndarray]:
        p = self.plan
        return {b: seg[o:o + n * p.itemsize].view(dtype) for b, o, n in zip(_BUFS, p.offsets, p.sizes)}

    def _sync(self, t: int, timeout: float | None) -> None:
        if timeout is None:
            self.node.engine.sync()
        elif not self.node.engine.sync(timeout):
            raise self._late("a node barrier", t, timeout)

    def _late(self, what: str, t: int, timeout: float) -> CollectiveTimeoutError:
        info = self.plan.plan.info
        algo = f"{info('algo', '?')}@shm"
        return CollectiveTimeoutError(
            f"rank {self.plan.plan.rank} waited {timeout:g} s (PYHCCL_TIMEOUT) in {what} of step {t} of "
            f"{info('op', '?')} algorithm {algo} on several nodes (count {info('count', '?')}); still pending: {what}",
            algorithm=algo, step=t, pending=[what])


def _view(areas: dict[Buf, np.ndarray], r: Region) -> np.ndarray:
    """The elements of ``r`` in ``areas``: 1-D, or (repeat, count) for a strided region (a view either way)."""
    a = areas[r.buf]
    if r.repeat == 1:
        return a[r.offset:r.offset + r.count]
    return np.lib.stride_tricks.as_strided(a[r.offset:], (r.repeat, r.count), (r.stride * a.itemsize, a.itemsize))


def _store(areas: dict[Buf, np.ndarray], dst: Region, src: np.ndarray, ufunc: Callable | None) -> None:
    """``dst <- src`` (or ``dst <- ufunc(dst, src)``), ``src`` of the same size in any shape."""
    d = _view(areas, dst)
    if src.shape != d.shape:
        src = np.ascontiguousarray(src).reshape(d.shape)
    if ufunc is None:
        np.copyto(d, src)
    else:
        ufunc(d, src, out=d)
