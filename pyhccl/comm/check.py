"""The consistency check (``PYHCCL_CHECK``) and the abort after a timeout (``PYHCCL_TIMEOUT_ABORT``).

Before every collective one small allreduce compares what each rank is about to do; a difference
raises the same :class:`CheckError` on every rank, naming the ranks and their values, instead of a hang.
"""

from __future__ import annotations

import functools
import hashlib
import sys
import time
import traceback
from typing import Any

import numpy as np
from mpi4py import MPI

from ..run.timeout import CollectiveTimeoutError, allgather_timed, wait_pending
from .buffers import SUPPORTED_DTYPES, SUPPORTED_OPS
from .job import Job, describe, shared_shape, total
from .parsers import PARSERS

__all__ = ["CheckError", "Checker", "abort", "disagreement"]

#: Exit code of a job aborted after a timeout.
ABORT_CODE = 14
#: Seconds between printing the timeout error and aborting.
_ABORT_GRACE = 0.2
_METHOD_ID = {m: i for i, m in enumerate(PARSERS)}
_DTYPE_ID = {d: i for i, d in enumerate(SUPPORTED_DTYPES.values())}
_REDUCE_ID = {name.lower(): i for i, name in enumerate(SUPPORTED_OPS)}
#: What each rank does with the call, the check's ``runs`` field.
_PYHCCL, _FALLBACK, _ERROR, _EXCHANGE = range(4)
#: The check vector: call number, method, runs, dtype, count, root, reduce op, call digest, algorithm digest,
#: algorithm agreed (not compared: ranks that disagree on it all agree afresh).
_NCHECK = 10


class CheckError(ValueError):
    """Ranks disagree on a collective call (``check=True`` / ``PYHCCL_CHECK=1``); raised alike on every rank."""


class Checker:
    """The check's state on one communicator: the call number and the method being parsed.

    Args:
        comm: the private communicator the check's allreduce runs on.
        rank: this rank, for messages.
        check: whether the check is on (the parsers' allgather is then checked first).
        timeout: seconds the check and the parsers' allgather may wait (None: no limit).
    """

    def __init__(self, comm: MPI.Intracomm, rank: int, check: bool, timeout: float | None) -> None:
        self.comm, self.rank, self.enabled, self.timeout = comm, rank, check, timeout
        self.seq = 0                    # collectives called
        self.method = ""                # the method being parsed, for the check of the parsers' allgathers

    def begin(self, method: str) -> None:
        """A new call of ``method``: count it."""
        self.seq += 1
        self.method = method

    def allgather(self, obj: Any) -> list:
        """The parsers' allgather (Reduce_scatter's counts, Alltoallv's matrix): checked first, timed."""
        if self.enabled:
            self.check(self.method, None)
        return allgather_timed(self.comm, obj, self.timeout, f"the count exchange of {self.method}")

    def check(self, method: str, what: Job | str | BaseException | None, key: tuple | None = None,
              hit: tuple | None = None) -> bool:
        """One allreduce of a fixed-size int64 vector (max of v and -v): every rank's call must match.

        ``what``: the parsed job (``key`` its agreement key, ``hit`` the agreed algorithm or None), a
        fallback reason, the argument error, or None before a parser's own allgather. Returns whether
        every rank had agreed on the algorithm (False: all must agree afresh). A difference raises the
        same CheckError on every rank, naming ranks and values.
        """
        vec = [self.seq, _METHOD_ID[method], _PYHCCL, -1, -1, -1, -1, 0, 0, 1]
        if isinstance(what, Job):
            shape = key[0]
            vec[3:10] = (_DTYPE_ID.get(what.dtype, -2), total(shape), shape.root if shape.spec.rooted else -1,
                         _REDUCE_ID.get(what.reduce_op, -2) if what.ufunc is not None else -1, _digest(key),
                         _digest(str(hit[0])) if hit else 0, 1 if hit else 0)
        else:
            vec[2] = _FALLBACK if isinstance(what, str) else _ERROR if what is not None else _EXCHANGE
        both = np.array(vec + [-v for v in vec], np.int64)
        if self.timeout is None:
            self.comm.Allreduce(MPI.IN_PLACE, both, MPI.MAX)
        else:
            req = self.comm.Iallreduce(MPI.IN_PLACE, both, MPI.MAX)
            if wait_pending([req], self.timeout):
                raise CollectiveTimeoutError(
                    f"rank {self.rank} waited {self.timeout:g} s (PYHCCL_TIMEOUT) in the check (PYHCCL_CHECK) of "
                    f"{method}: some rank has not joined (stalled, or calling another collective)", algorithm="check")
        hi, lo = both[:_NCHECK], -both[_NCHECK:]
        agreed = lo[9] == 1
        if (hi[:8] == lo[:8]).all() and (not agreed or hi[8] == lo[8]):
            return bool(agreed)
        rows = allgather_timed(self.comm, _describe_call(method, what, hit, self.seq), self.timeout,
                               f"the check (PYHCCL_CHECK) of {method}")
        raise CheckError(disagreement(rows)) from (what if isinstance(what, BaseException) else None)


def abort(comm: MPI.Intracomm, rank: int, e: CollectiveTimeoutError, depth: int) -> None:
    """Print the timeout error and abort ``comm``'s job (MPI_Abort: mpiexec ends every rank).

    ``depth``: how many frames up from this function's caller the Communicator method is; the
    traceback shows the user's call of it.
    """
    where = traceback.format_stack(sys._getframe(depth + 1))          # the user's call, above the method
    # one write, then a moment for the launcher to forward it: mpiexec stops forwarding once it sees the abort
    sys.stderr.write("Traceback (most recent call last):\n" + "".join(where + traceback.format_exception(e)[1:])
                     + f"pyhccl: rank {rank} aborts the job after a timeout (PYHCCL_TIMEOUT); "
                     "set PYHCCL_TIMEOUT_ABORT=0 or abort_on_timeout=False to raise instead\n")
    sys.stderr.flush()
    time.sleep(_ABORT_GRACE)
    comm.Abort(ABORT_CODE)


def _describe_call(method: str, what: Any, hit: Any, seq: int) -> dict[str, str]:
    """This rank's call in words, field by field, for the check's error."""
    d = {"call number": str(seq), "method": method, "runs": "pyhccl", "dtype": "-", "count": "-",
         "root": "-", "reduce op": "-", "algorithm": str(hit[0]) if hit else "", "arguments": ""}
    if isinstance(what, Job):
        shape = shared_shape(what.call)
        d.update(dtype=str(what.dtype), count=describe(shape, root=False),
                 root=str(shape.root) if shape.spec.rooted else "-", arguments=repr(shape))
        if what.ufunc is not None and shape.op != "barrier":
            d["reduce op"] = what.reduce_op
    elif isinstance(what, str):
        d["runs"] = f"the wrapped MPI ({what})"
    elif what is not None:
        d["runs"] = f"an argument error ({type(what).__name__}: {what})"
    else:
        d["runs"] = "its count exchange"
    return d


def disagreement(rows: list[dict[str, str]]) -> str:
    """The check's error, built from every rank's description, so every rank raises the same text."""
    fields = [f for f in rows[0] if f not in ("algorithm", "arguments") and len({r[f] for r in rows}) > 1]
    if "runs" in fields:                # the other fields of a rank that does not run pyhccl say nothing
        fields = [f for f in fields if f in ("call number", "method", "runs")]
    if all(r["algorithm"] for r in rows) and len({r["algorithm"] for r in rows}) > 1:
        fields.append("algorithm")
    if not fields:
        fields = ["arguments"]
    parts = []
    for f in fields:
        groups: dict[str, list[int]] = {}
        for rank, r in enumerate(rows):
            groups.setdefault(r[f], []).append(rank)
        parts.append(f"{f}: " + "; ".join(f"{_ranks(rs)}: {v}" for v, rs in groups.items()))
    return (f"ranks disagree on a collective call (PYHCCL_CHECK): {' | '.join(parts)}; every rank must make the "
            "same collective calls in the same order, with matching counts, dtypes, root and op")


def _ranks(rs: list[int]) -> str:
    if len(rs) == 1:
        return f"rank {rs[0]}"
    return "ranks " + ", ".join(map(str, rs[:8])) + (f", ... ({len(rs)} ranks)" if len(rs) > 8 else "")


@functools.lru_cache(maxsize=256)
def _digest(value: Any) -> int:
    """A 56-bit digest of ``value``'s repr (it and its negation fit in int64)."""
    return int.from_bytes(hashlib.blake2b(repr(value).encode(), digest_size=7).digest(), "little")
