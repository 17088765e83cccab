"""Node barriers on sequence flags in shared memory: no MPI call, a few loads and one store.

Each rank counts the barriers it enters and publishes the count in its own cache line of a
small shared window; a barrier is over for a rank once every peer's count has reached its own.
Counts only grow, so a barrier needs no reset and a rank that leaves early (it saw every count)
cannot be caught by the next one. Stores and loads must not pass the flags: x86 keeps stores in
order and loads in order (TSO), so there nothing more is needed; on other machines ``MPI.Win.Sync``
before the store and after the loads is the memory barrier that orders them. A waiting rank with a
core of its own spins a while, then yields (``os.sched_yield``); when the node's ranks outnumber the
cores it yields after every look, as MPICH does with ``MPIR_CVAR_ENABLE_HEAVY_YIELD``, and a wait
that goes on sleeps between looks, leaving the cores to the ranks that have work.
"""

from __future__ import annotations

import os
import platform
import time

import numpy as np
from mpi4py import MPI

__all__ = ["FlagBarrier", "LINE", "SPINS", "cores"]

#: Bytes between two ranks' flags: one cache line each, so a store invalidates no peer's flag.
LINE = 64
#: Looks at a peer's flag before a waiting rank that has a core of its own starts yielding it.
SPINS = 200
#: Yields after which a rank still waiting sleeps :data:`NAP_S` between looks, when the ranks outnumber the
#: cores: a long wait (a peer copying megabytes) then leaves the cores to the ranks with work (AlltoAll 16 MiB,
#: 8 ranks on 2 cores: 1.0-1.1x native with yields only, 1.3-1.6x with naps; benchmarks/results/collectives/
#: README.md). A rank with a core of its own never naps: a nap costs it 50 us and more.
YIELDS = 100
NAP_S = 2e-5
#: Machines whose memory order keeps stores in order and loads in order (no barrier around the flags).
TSO = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")
#: Looks between two readings of the clock while a barrier waits against a deadline.
_CLOCK_EVERY = 64


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                      # not Linux
        return os.cpu_count() or 1


class FlagBarrier:
    """A barrier of the ranks of ``node`` (one node: ``Split_type(COMM_TYPE_SHARED)``) on shared flags.

    Creating and :meth:`free` are collective over ``node``; :meth:`wait` is not an MPI call.

    Attributes:
        seq: barriers this rank has entered.
        oversubscribed: the node's ranks outnumber this rank's cores (a waiting rank yields at once).
    """

    def __init__(self, node: MPI.Intracomm) -> None:
        rank, size = node.Get_rank(), node.Get_size()
        self.win = MPI.Win.Allocate_shared(size * LINE if rank == 0 else 0, 1, comm=node)
        self.win.Lock_all(MPI.MODE_NOCHECK)
        buf, _ = self.win.Shared_query(0)
        flags = np.frombuffer(buf, np.int64, size * LINE // 8)
        if rank == 0:
            flags[:] = 0
        self.win.Sync()
        node.Barrier()
        self.win.Sync()
        step = LINE // 8
        self._flags = memoryview(flags).cast("B").cast("q")
        self._mine = rank * step
        self._peers = tuple(p * step for p in range(size) if p != rank)
        self.seq = 0
        self.oversubscribed = size > cores()

    def wait(self, deadline: float | None = None) -> bool:
        """Enter the next barrier and wait until every rank of the node has; False when ``deadline``
        (``time.monotonic()`` seconds) passes first (this rank's count stays published: a late peer that
        arrives goes on without it)."""
        self.seq = seq = self.seq + 1
        flags = self._flags
        if not TSO:
            self.win.Sync()
        flags[self._mine] = seq
        for p in self._peers:
            if flags[p] < seq and not self._spin(p, seq, deadline):
                return False
        if not TSO:
            self.win.Sync()
        return True

    def _spin(self, p: int, seq: int, deadline: float | None) -> bool:
        flags, yield_, nap, looks = self._flags, os.sched_yield, time.sleep, 0
        spins, naps = (0, YIELDS) if self.oversubscribed else (SPINS, 1 << 62)    # a core of its own: never naps
        while flags[p] < seq:
            looks += 1
            if looks > naps:
                nap(NAP_S)
            elif looks > spins:
                yield_()
            if deadline is not None and looks % _CLOCK_EVERY == 0 and time.monotonic() > deadline:
                return False
        return True

    def free(self) -> None:
        """Free the flags' window (collective over the node)."""
        self.win.Unlock_all()
        self.win.Free()
