"""The memory roofline of one host: how fast a collective could be if it only moved the bytes it must.

:func:`measure` runs a STREAM-like probe on every local rank at once (a copy ``b[:] = a`` and a
reduce ``c = a + b`` over arrays larger than the last-level cache, a few repetitions, about
0.1 s): each rank's rate in bytes read plus written per second while all ranks run, so ranks
that share cores or memory channels see their share. :func:`bound_seconds` prices the bytes
one rank must read and write in a collective on one host, at those rates, with single-copy
transfers (a rank reads a peer's data once, straight from the peer's buffer):

===============  ==================================================  =====================
op               bytes one rank must move (n = per-rank bytes)        at rate
===============  ==================================================  =====================
AllReduce        reduce N pieces of n/N into one: (N + 1) n / N;      reduce, then copy
                 gather the N - 1 others: 2 (N - 1) n / N
ReduceScatter    reduce N pieces of s/N into one: (N + 1) s / N       reduce
AllGather        copy N blocks of s/N into the output: 2 s            copy
AlltoAll         copy N blocks of s/N into the output: 2 s            copy
Broadcast        a non-root copies n: 2 n                             copy
Reduce           the root reduces N buffers of n: (N + 1) n           reduce
Gather, Scatter  the root copies s (gather) / each rank s/N: 2 s      copy
===============  ==================================================  =====================

``s`` is nccl-tests' size (the whole buffer of N blocks). The bound is reached only if every
byte moves at the probe's rate: ``% of bound`` = bound / measured time; data that stays in cache
between calls (small sizes) can beat it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

__all__ = ["Roofline", "measure", "bound_seconds", "bound_bytes"]

_PROBE_BYTES = 16 << 20                 # per array; three a rank (48 MiB) pass a 32 MiB last-level cache
_REPS = 2
_ROUNDS = 5                             # best round counts: a burst of load elsewhere spoils a round


@dataclass(frozen=True)
class Roofline:
    """Per-rank rates, bytes read plus written per second, with every local rank running at once."""

    copy: float
    reduce: float
    nranks: int

    def describe(self) -> str:
        return (f"roofline: copy {self.copy / 1e9:.1f} GB/s, reduce {self.reduce / 1e9:.1f} GB/s per rank "
                f"(bytes read + written, {self.nranks} local ranks at once)")


def measure(comm: MPI.Intracomm, nbytes: int = _PROBE_BYTES) -> Roofline:
    """Probe copy and reduce rates on every rank of ``comm`` at once (collective; every rank gets the same).

    Between barriers every rank copies (then reduces) its arrays a few times; the rate is the bytes all
    ranks moved over the wall time from the first barrier to the last, per rank (ranks that share a core
    get their share), best of five rounds.
    """
    n = max(1, nbytes // 8)
    a = np.arange(n, dtype=np.float64)
    b, c = a.copy(), a.copy()            # every page touched before timing
    best = [float("inf"), float("inf")]
    for _ in range(_ROUNDS):
        for k in (0, 1):
            comm.Barrier()
            t = time.perf_counter()
            for _ in range(_REPS):
                if k == 0:
                    np.copyto(b, a)
                else:
                    np.add(a, b, out=c)
            comm.Barrier()
            best[k] = min(best[k], time.perf_counter() - t)
    t_copy, t_red = (comm.allreduce(best[0], op=MPI.MAX),
                     comm.allreduce(best[1], op=MPI.MAX))
    return Roofline(_REPS * 2 * a.nbytes / t_copy, _REPS * 3 * a.nbytes / t_red, comm.Get_size())


def bound_bytes(op: str, nranks: int, size: int) -> tuple[float, float]:
    """``(bytes at the reduce rate, bytes at the copy rate)`` one rank must move in ``op`` (pyhccl's op name)
    of nccl-tests' ``size`` bytes on ``nranks`` ranks of one host (the table in this module's docstring)."""
    n = nranks
    if n == 1 or op == "barrier":
        return 0.0, 0.0
    if op == "allreduce":
        return (n + 1) * size / n, 2 * (n - 1) * size / n
    if op in ("reduce_scatter", "reduce_scatter_v"):
        return (n + 1) * size / n, 0.0
    if op == "reduce":
        return (n + 1) * size, 0.0
    if op in ("all_gather", "all_gather_v", "alltoall", "alltoallv", "broadcast", "gather"):
        return 0.0, 2.0 * size
    if op == "scatter":
        return 0.0, 2.0 * size / n
    if op == "batch_send_recv":         # each item's bytes read once from the sender, written once at the receiver
        return 0.0, 2.0 * size
    raise ValueError(f"expecting a collective of pyhccl.core.call.OPS, got {op!r}")


def bound_seconds(op: str, nranks: int, size: int, roof: Roofline) -> float:
    """The lower bound on one call's time: :func:`bound_bytes` at the roofline's rates."""
    red, cp = bound_bytes(op, nranks, size)
    return red / roof.reduce + cp / roof.copy
