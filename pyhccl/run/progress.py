"""A compiled plan run step by step without blocking: the engine of the nonblocking and persistent collectives.

:class:`Progress` holds one rank's run of a :class:`~pyhccl.run.mpi.CompiledPlan` on host arrays.
Each :meth:`Progress.advance` goes as far as it can without waiting: it posts the current step's
messages, tests them, and when they are complete unpacks, runs the step's local ops and posts the
next step, until a step is still in flight (False) or the plan is done (True). The caller decides
when to advance (pyhccl's requests do on start and on every test or wait).

Each run has its own MPI tag (``tag``) so several runs outstanding on one communicator never match
each other's messages: every rank starts its collectives in the same order, so the tags agree.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
from mpi4py import MPI

from .mpi import CompiledPlan, apply_local
from .timeout import wait_pending
from .transport import host_view

__all__ = ["Progress"]


class Progress:
    """One rank's nonblocking run of ``plan`` on ``comm`` with host arrays ``bufs`` = (input, output, scratch).

    Args:
        plan: the compiled plan (the MPI runtime's).
        comm: the communicator the plan's messages go on.
        bufs: the run's arrays; the scratch is the run's own (two runs outstanding never share it).
        ufunc: the reduction (None for ops that reduce nothing).
        tag: the MPI tag of this run's messages.
        timeout: seconds a step may stay in flight after it was posted before :meth:`advance` raises
            :class:`~pyhccl.run.timeout.CollectiveTimeoutError` (None: no limit).

    Attributes:
        done: every step has completed (the result is in ``bufs[1]``).
    """

    __slots__ = ("plan", "comm", "bufs", "raw", "ufunc", "tag", "timeout", "step", "reqs", "posted", "done")

    def __init__(self, plan: CompiledPlan, comm: MPI.Intracomm, bufs: tuple[np.ndarray, np.ndarray, np.ndarray],
                 ufunc: Callable | None, tag: int, timeout: float | None = None) -> None:
        self.plan, self.comm, self.bufs, self.ufunc, self.tag, self.timeout = plan, comm, bufs, ufunc, tag, timeout
        self.raw = [b.view(np.uint8) for b in bufs]
        self.restart()

    def restart(self) -> None:
        """Back to step 0 (a persistent request's next start); posts nothing until :meth:`advance`."""
        self.step, self.reqs, self.posted, self.done = 0, None, 0.0, not self.plan.steps

    def advance(self) -> bool:
        """Go as far as possible without waiting; True once the whole plan has completed.

        Raises:
            CollectiveTimeoutError: with a ``timeout``, the step in flight was posted more than ``timeout`` s ago.
        """
        steps, bufs = self.plan.steps, self.bufs
        while self.step < len(steps):
            msgs, packs, unpacks, local = steps[self.step]
            reqs = self.reqs
            if reqs is None:
                reqs = self.reqs = self._post(msgs, packs) if msgs else []
                if self.timeout is not None:
                    self.posted = time.monotonic()
            if reqs and not MPI.Request.Testall(reqs):
                if self.timeout is not None and time.monotonic() - self.posted > self.timeout:
                    raise self.plan.stalled(self.comm, msgs, reqs, self.timeout)
                return False
            scratch = bufs[2]
            for r, at in unpacks:
                np.copyto(host_view(bufs, r), scratch[at:at + r.size].reshape(r.repeat, r.count))
            if local:
                apply_local(bufs, local, self.ufunc, host_view, np.copyto)
            self.step += 1
            self.reqs = None
        self.done = True
        return True

    def wait(self) -> None:
        """Run to the end, blocking in MPI's wait for each step's messages (MPI's own waiting policy:
        ``MPIR_CVAR_ENABLE_HEAVY_YIELD`` and the like apply), against the deadline with a ``timeout``.

        Raises:
            CollectiveTimeoutError: with a ``timeout``, a step still in flight ``timeout`` s after it was posted.
        """
        while not self.advance():
            if self.timeout is None:
                MPI.Request.Waitall(self.reqs)
            else:
                left = self.timeout - (time.monotonic() - self.posted)
                if left > 0:
                    wait_pending(self.reqs, left)

    def _post(self, msgs: list[tuple], packs: list) -> list[MPI.Request]:
        """Pack the step's strided sends, then post its messages."""
        bufs, raw, tag, comm = self.bufs, self.raw, self.tag, self.comm
        for r, at in packs:
            np.copyto(bufs[2][at:at + r.size].reshape(r.repeat, r.count), host_view(bufs, r))
        return [comm.Isend(raw[b][lo:hi], peer, tag) if send else comm.Irecv(raw[b][lo:hi], peer, tag)
                for send, peer, b, lo, hi in msgs]
