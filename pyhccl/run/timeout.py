"""Waiting with a deadline: the error a collective raises when a rank does not arrive in time.

With a timeout (the Communicator's ``timeout``, ``PYHCCL_TIMEOUT``) the runtimes wait for their
requests with :func:`wait_pending` instead of ``Waitall`` and raise :class:`CollectiveTimeoutError`
naming what they waited for; :func:`allgather_timed` is the Communicator's agreement under the same rule.
"""

from __future__ import annotations

import pickle
import time
from typing import Any, Sequence

import numpy as np
from mpi4py import MPI

__all__ = ["CollectiveTimeoutError", "wait_pending", "pending_of", "allgather_timed"]


class CollectiveTimeoutError(TimeoutError):
    """A step of a collective did not complete within the timeout (``PYHCCL_TIMEOUT``).

    Raised on the rank that waits; the message names the algorithm, the step and the peers and
    regions still pending. The communicator's state is undefined afterwards (its peers may still
    be in the call): free it or end the job.

    Attributes:
        algorithm: the algorithm (or the library phase, such as the agreement) that waited.
        step: the step index in the plan, or None outside a plan.
        pending: one line per transfer still pending.
    """

    def __init__(self, message: str, algorithm: str = "", step: int | None = None,
                 pending: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.algorithm, self.step, self.pending = algorithm, step, tuple(pending)


#: Polling while a timed wait is pending: spin this long, then sleep, doubling up to the cap.
_SPIN_S, _SLEEP_CAP_S = 1e-4, 1e-3


def wait_pending(reqs: list[MPI.Request], timeout: float) -> list[int]:
    """``MPI.Request.Waitall`` with a deadline: the indices still pending after ``timeout`` s, [] when done."""
    if MPI.Request.Testall(reqs):
        return []
    start = time.monotonic()
    pause = 0.0
    while not MPI.Request.Testall(reqs):
        now = time.monotonic()
        if now - start >= timeout:
            return pending_of(reqs)
        if now - start > _SPIN_S:
            time.sleep(pause)
            pause = min(2 * pause or 1e-5, _SLEEP_CAP_S)
    return []


def pending_of(reqs: list[MPI.Request]) -> list[int]:
    """The indices of the requests not complete yet (all of them when MPI cannot tell which)."""
    pending = [k for k, r in enumerate(reqs) if not r.Get_status()]
    return pending or ([] if MPI.Request.Testall(reqs) else list(range(len(reqs))))


def allgather_timed(comm: MPI.Intracomm, obj: Any, timeout: float | None, what: str) -> list:
    """``comm.allgather(obj)``; with a timeout, non-blocking and raising CollectiveTimeoutError on expiry.

    ``what`` names the phase in the error (``"the algorithm agreement of AllReduce of 8 x float32"``).
    """
    if timeout is None:
        return comm.allgather(obj)
    data = pickle.dumps(obj)
    n = comm.Get_size()
    sizes = np.zeros(n, np.int64)
    _timed(comm.Iallgather(np.array([len(data)], np.int64), sizes), comm, timeout, what)
    displs = np.zeros(n, np.int64)
    np.cumsum(sizes[:-1], out=displs[1:])
    out = bytearray(int(sizes.sum()))
    _timed(comm.Iallgatherv(data, [out, sizes.tolist(), displs.tolist(), MPI.BYTE]), comm, timeout, what)
    return [pickle.loads(out[d:d + s]) for d, s in zip(displs.tolist(), sizes.tolist())]


def _timed(req: MPI.Request, comm: MPI.Intracomm, timeout: float, what: str) -> None:
    """Wait for one collective request; on expiry raise naming the phase (which ranks lag is not known)."""
    if wait_pending([req], timeout):
        raise CollectiveTimeoutError(
            f"rank {comm.Get_rank()} waited {timeout:g} s (PYHCCL_TIMEOUT) in {what}: a collective over all "
            f"{comm.Get_size()} ranks that some rank has not joined (stalled, or calling another collective)",
            algorithm=what)
