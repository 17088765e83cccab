"""The shared-memory engine of one communicator: its node communicator, its growing window, alloc'd memory.

Each rank's data that a peer reads lives in that rank's segment of one window
(``MPI.Win.Allocate_shared`` on ``comm.Split_type(MPI.COMM_TYPE_SHARED)``); every rank sees
every segment as a numpy array. The window is allocated once per communicator and grown,
never per call. :meth:`ShmEngine.alloc` gives memory in a window of its own that plans read in
place. The engine is cached on its communicator under :data:`KEYVAL` (:func:`shm_engine`).

With cross-memory attach (:mod:`.cma`; asked for with ``cma=True`` and kept only when
:func:`.cma.probe` finds it works on every rank, :attr:`ShmEngine.cma`) a rank reads its peers'
ordinary arrays in place: each rank publishes where its input and output are in its header
every call and the window holds only the plans' scratch.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from ..timeout import wait_pending
from . import cma as _cma
from .flags import FlagBarrier
from .oneshot import Slots

__all__ = ["KEYVAL", "HEADER", "CMA_MIN_BYTES", "ShmEngine", "shm_engine", "adopt_engine", "release_engine",
           "NodeEngine", "node_engine"]

#: Bytes at the start of a segment: where this call's input and output are (6 int64, padded to a cache line):
#: input's allocation id and offset, output's allocation id and offset, input's and output's addresses.
HEADER = 64
#: Below this many bytes in a call's largest buffer the window path (copy-in, loads, copy-out, all in
#: cache) beats cross-memory attach, whose every read pins the pages it reads (measured on the
#: 2-core machine, MeshTwoShot at 2 ranks, time outside barriers: 1 MiB 100 us through the window
#: against 167 us with CMA; 4 MiB 705-732 us against 546-632 us).
CMA_MIN_BYTES = 2 << 20
#: The MPI attribute under which a communicator keeps its engine (:func:`shm_engine`).
KEYVAL = MPI.Comm.Create_keyval()
#: The attribute under which a communicator over several nodes keeps its :class:`NodeEngine`.
NODE_KEYVAL = MPI.Comm.Create_keyval()
#: Window generations, unique over all engines: views a runner bound to a freed window never match a new one.
_GENERATIONS = itertools.count(1)
#: Node barriers a timeout left pending that never completed: MPI forbids freeing an active
#: collective request, so they are kept for the life of the process.
_ABANDONED: list[MPI.Request] = []
#: :attr:`ShmEngine.stalled` after a flag barrier timed out (nothing is left pending in MPI then).
_FLAGS_STALLED = "a node barrier on flags"


class ShmEngine:
    """The node communicator and the growing shared window of one communicator.

    Attributes:
        stalled: the node barrier a timeout left pending (the engine is unusable then), else None.
        cma: whether ranks read each other's arrays with cross-memory attach (asked for with ``cma``
        and found to work on every rank); ``pids``: every rank's process id then.

    Raises:
        ValueError: ranks of ``comm`` on more than one node (the window cannot span nodes).
    """

    def __init__(self, comm: MPI.Intracomm, cma: bool = False) -> None:
        node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
        ok = node.Get_size() == comm.Get_size()
        if not comm.allreduce(ok, op=MPI.LAND):
            node.Free()
            raise ValueError(f"expecting every rank of the communicator on one node for the shared-memory "
                             f"engine, got {comm.Get_size()} ranks over several nodes; use the MPI runtime "
                             f"(pyhccl.run.mpi.compile_plan) or a node communicator "
                             f"(comm.Split_type(MPI.COMM_TYPE_SHARED))")
        self.comm, self.rank, self.size = node, node.Get_rank(), node.Get_size()
        self.win: MPI.Win | None = None
        self.nbytes = 0
        self.generation = 0
        self.users = 1                    # communicators holding it (adopt_engine adds, release_engine drops)
        self.segments: list[np.ndarray] = []
        self.heads: list[np.ndarray] = []   # per rank, its header (HEADER): 6 int64
        self.heaps: dict[int, _Heap] = {}   # alloc() memory by id (ids never reused: a freed one never matches)
        self._heap_ids = itertools.count(1)
        self.stalled: MPI.Request | str | None = None
        self._stall_s = 0.0
        self.cma = bool(comm.allreduce(bool(cma), op=MPI.LAND)) and _cma.probe(node)
        self.pids: list[int] = node.allgather(os.getpid()) if self.cma else []
        self.flags = FlagBarrier(node)
        self.slots = Slots()                # the one-shot runner's (:mod:`.oneshot`), made on first use
        self._bounce: np.ndarray | None = None

    def reserve(self, nbytes: int, timeout: float | None = None) -> bool:
        """Make every segment at least ``nbytes`` (collective: every rank asks for the same).

        With ``timeout``, growing first meets every rank at a node barrier waited that long;
        False when some rank did not arrive (nothing allocated; :attr:`stalled` is set).
        """
        if nbytes <= self.nbytes and self.win is not None:
            return True
        if timeout is not None and not self._meet(timeout):
            return False
        nbytes = max(nbytes, 2 * self.nbytes, 1 << 16)
        if self.win is not None:
            self.win.Unlock_all()
            self.win.Free()               # nothing outside points into it: runners bind per generation
        self.win = MPI.Win.Allocate_shared(nbytes, 1, comm=self.comm)
        self.win.Lock_all(MPI.MODE_NOCHECK)
        self.segments = []
        for p in range(self.size):
            buf, _ = self.win.Shared_query(p)
            self.segments.append(np.frombuffer(buf, np.uint8, nbytes))
        self.heads = [seg[:48].view(np.int64) for seg in self.segments]
        self.nbytes = nbytes
        self.generation = next(_GENERATIONS)
        return True

    def cma_for(self, call: Any, itemsize: int, least: int = CMA_MIN_BYTES) -> bool:
        """Whether ``call`` (a :class:`~pyhccl.core.call.Call`, the same on every rank) reads peers' arrays with
        cross-memory attach on this engine: where it works and the largest buffer has ``least`` bytes or more
        (CMA_MIN_BYTES unless a machine profile measured where it pays)."""
        if not self.cma:
            return False
        big = max(max(call.input_count(r), call.output_count(r)) for r in range(call.nranks))
        return big * itemsize >= least

    def bounce(self, nbytes: int) -> np.ndarray:
        """``(2, nbytes)`` bytes of local memory the runners of this engine read peers' pieces into (one
        call runs at a time on an engine, so they share it)."""
        if self._bounce is None or self._bounce.shape[1] < nbytes:
            self._bounce = np.empty((2, nbytes), np.uint8)
        return self._bounce

    def sync(self, timeout: float | None = None) -> bool:
        """Make every rank's stores to the window visible to all: a node barrier on shared flags (:mod:`.flags`).

        With ``timeout`` the barrier is waited that long; False when some rank did not arrive in time
        (the engine is then :attr:`stalled`; a late rank that catches up with its own ``sync`` goes on).
        """
        if timeout is None:
            return self.flags.wait()
        if self.flags.wait(time.monotonic() + timeout):
            return True
        self.stalled = self.stalled or _FLAGS_STALLED
        return False

    def _meet(self, timeout: float) -> bool:
        """A node barrier waited ``timeout`` seconds; on expiry kept pending in :attr:`stalled`."""
        req = self.comm.Ibarrier()
        if wait_pending([req], timeout):
            self.stalled, self._stall_s = req, timeout
            return False
        return True

    def alloc(self, nbytes: int) -> np.ndarray:
        """``nbytes`` of memory that every rank's plans load from in place: this rank's part as uint8.

        Collective: every rank asks for the same size (ValueError on every rank otherwise). The
        memory is a shared window of its own, valid until :meth:`release` or :meth:`free`.
        """
        sizes = self.comm.allgather(int(nbytes))
        if len(set(sizes)) != 1 or sizes[0] < 0:
            raise ValueError(f"expecting every rank to allocate the same number of bytes (>= 0) of shared "
                             f"memory, got {sorted(set(sizes))}; allocate collectively with the same "
                             f"shape and dtype on every rank")
        win = MPI.Win.Allocate_shared(max(nbytes, 1), 1, comm=self.comm)
        win.Lock_all(MPI.MODE_NOCHECK)
        segs = [np.frombuffer(win.Shared_query(p)[0], np.uint8, max(nbytes, 1))[:nbytes] for p in range(self.size)]
        heap = _Heap(next(self._heap_ids), win, segs, segs[self.rank])
        self.heaps[heap.id] = heap
        return segs[self.rank]

    def release(self, arr: np.ndarray) -> None:
        """Free the :meth:`alloc` memory ``arr`` lies in (collective; every rank passes its part of the same one)."""
        hid = self.where(arr)[0]
        ids = self.comm.allgather(hid)
        if len(set(ids)) != 1 or not hid:
            raise ValueError("expecting every rank to free the same shared allocation, got "
                             + ("an array outside any shared allocation" if not hid else "different ones")
                             + "; free each array from alloc() once, on every rank together")
        self.heaps.pop(hid).free()

    def where(self, arr: np.ndarray) -> tuple[int, int]:
        """``(allocation id, byte offset)`` of ``arr`` in this rank's :meth:`alloc` memory, ``(0, 0)`` outside it."""
        if self.heaps:
            lo = arr.__array_interface__["data"][0]
            hi = lo + arr.nbytes
            for h in self.heaps.values():
                if h.lo <= lo and hi <= h.hi and (arr.size or lo == h.lo):    # an empty one: at its start
                    return h.id, lo - h.lo
        return 0, 0

    def free(self) -> None:
        """Free the windows, the :meth:`alloc` memory and the node communicator (collective).

        A node barrier a timeout left pending gets as long again to complete (the late ranks
        catching up), else it is abandoned.
        """
        if isinstance(self.stalled, MPI.Request):
            if wait_pending([self.stalled], self._stall_s):
                _ABANDONED.append(self.stalled)
            self.stalled = None
        if self.win is not None:
            self.win.Unlock_all()
            self.win.Free()
        for h in self.heaps.values():
            h.free()
        self.flags.free()
        self.slots.free()
        self.heaps = {}
        self.win, self.segments, self.heads, self.nbytes = None, [], [], 0
        self.comm.Free()


class _Heap:
    """One :meth:`ShmEngine.alloc`: its window, every rank's segment, this rank's address range."""

    __slots__ = ("id", "win", "segments", "lo", "hi")

    def __init__(self, hid: int, win: MPI.Win, segments: list[np.ndarray], mine: np.ndarray) -> None:
        self.id, self.win, self.segments = hid, win, segments
        self.lo = mine.__array_interface__["data"][0]
        self.hi = self.lo + mine.nbytes

    def free(self) -> None:
        self.win.Unlock_all()
        self.win.Free()


@dataclass(frozen=True)
class NodeEngine:
    """The engine of this rank's node on a communicator over several nodes (the hierarchical runtime):
    ``node[i]`` is comm rank ``i``'s node (its lowest comm rank), ``local[i]`` its index in the node."""

    engine: ShmEngine
    node: tuple[int, ...]
    local: tuple[int, ...]


def node_engine(comm: MPI.Intracomm) -> NodeEngine:
    """The :class:`NodeEngine` cached on ``comm``, created on first use (collective then)."""
    ne = comm.Get_attr(NODE_KEYVAL)
    if ne is None:
        sub = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
        try:
            places = comm.allgather((sub.allreduce(comm.Get_rank(), op=MPI.MIN), sub.Get_rank()))
            ne = NodeEngine(ShmEngine(sub), tuple(n for n, _ in places), tuple(i for _, i in places))
        finally:
            sub.Free()
        comm.Set_attr(NODE_KEYVAL, ne)
    return ne


def shm_engine(comm: MPI.Intracomm, cma: bool = False) -> ShmEngine:
    """The engine cached on ``comm`` (an MPI attribute), created on first use (collective then; ``cma``:
    read peers' arrays with cross-memory attach where it works, see :class:`ShmEngine`)."""
    eng = comm.Get_attr(KEYVAL)
    if eng is None:
        eng = ShmEngine(comm, cma)
        comm.Set_attr(KEYVAL, eng)
    return eng


def adopt_engine(comm: MPI.Intracomm, engine: ShmEngine) -> None:
    """Let ``comm`` use ``engine`` (made on another communicator of the same ranks): one window for many
    communicators that never run at the same time (the benchmark's, one per algorithm)."""
    if comm.Get_attr(KEYVAL) is engine:
        return
    release_engine(comm)
    engine.users += 1
    comm.Set_attr(KEYVAL, engine)


def release_engine(comm: MPI.Intracomm) -> None:
    """Drop ``comm``'s engine, if any; the last communicator using it frees its windows and node communicator
    (collective: before ``comm.Free()``, which frees nothing of the engine)."""
    ne = comm.Get_attr(NODE_KEYVAL)
    if ne is not None:
        comm.Delete_attr(NODE_KEYVAL)
        ne.engine.free()
    eng = comm.Get_attr(KEYVAL)
    if eng is None:
        return
    comm.Delete_attr(KEYVAL)
    eng.users -= 1
    if eng.users == 0:
        eng.free()
