"""Communicator: a drop-in wrapper of an mpi4py intracommunicator that runs HCCL's algorithms.

The mpi4py wrapper pattern (mpi4py src/mpi4py/util/pkl5.py): the library's own traffic runs
on a private ``Dup()`` of the user's communicator; every attribute pyhccl does not implement
forwards to the wrapped communicator unchanged.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from typing import Any

import numpy as np
from mpi4py import MPI

from .ops import as_array, reduce_ufunc
from .plan.build import build_allreduce, resolve_algo
from .run.mpi import CompiledPlan, compile_plan, ub_transfer_bytes
from .run.pool import ScratchPool
from .topo import comm_topology

__all__ = ["Communicator", "default_allreduce_algo"]

log = logging.getLogger("pyhccl")

#: Up to this many bytes the one-shot mesh wins on shared-memory MPI here (benchmarks/results/).
ONE_SHOT_MAX_BYTES = 16 * 1024

_PLAN_CACHE_SIZE = 64


def default_allreduce_algo(nbytes: int, nranks: int) -> str:
    """The size rule used until the selector lands: one-shot mesh for small data, two-shot above.

    Measured, not HCCL's rule (HCCL's AICPU mesh selector switches at 8 MiB): on shared-memory
    MPI the two-shot mesh moves contiguous slices and beats NHR's strided ones.
    """
    return "MeshOneShot" if nbytes <= ONE_SHOT_MAX_BYTES else "MeshTwoShot"


class Communicator:
    """pyhccl's communicator: mpi4py's methods, HCCL's algorithms.

    Args:
        comm: the mpi4py intracommunicator to wrap (default ``MPI.COMM_WORLD``).
        algo: AllReduce algorithm for every call (short or HCCL name); default
            ``PYHCCL_ALGO``, else a size rule.
        ub_transfer_bytes: largest message; default ``PYHCCL_UB_TRANSFER_BYTES``, else 512 KiB.
        topo: the machine to emulate (a spec such as ``"1x2x4"``, see :mod:`pyhccl.topo`);
            default ``PYHCCL_TOPO``, else ``PYHCCL_RANK_TABLE``, else detected from MPI.

    Attributes:
        topology: this rank's place in the machine and HCCL's TopoInfo, computed once here.
        fallbacks: calls handed to the wrapped communicator because pyhccl cannot run them
            (derived datatypes, user-defined ops, unsupported dtypes, non-contiguous buffers).
    """

    def __init__(self, comm: MPI.Intracomm | None = None, *, algo: str | None = None,
                 ub_transfer_bytes: int | None = None, topo: Any = None) -> None:
        comm = MPI.COMM_WORLD if comm is None else comm
        if isinstance(comm, Communicator):
            comm = comm.comm
        if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:
            raise TypeError(f"expecting an mpi4py intracommunicator, got {type(comm).__name__}")
        algo = os.environ.get("PYHCCL_ALGO") or None if algo is None else algo
        self._algo = resolve_algo(algo) if algo else None
        self._ub = _ub(ub_transfer_bytes)
        self._comm = comm
        self._pcomm = comm.Dup()
        self._topo = topo
        self.topology = comm_topology(self._pcomm, topo)
        self._plans: OrderedDict[tuple, CompiledPlan] = OrderedDict()
        self._pool = ScratchPool()
        self.fallbacks = 0

    # -- identity and forwarding ---------------------------------------------------------
    @property
    def comm(self) -> MPI.Intracomm:
        """The wrapped mpi4py communicator."""
        return self._comm

    @property
    def algo(self) -> str | None:
        """The AllReduce algorithm forced for every call, or None for the size rule."""
        return self._algo

    def __getattr__(self, name: str) -> Any:
        return getattr(self._comm, name)

    def __repr__(self) -> str:
        return f"<pyhccl.Communicator rank {self._comm.Get_rank()} of {self._comm.Get_size()}>"

    def Dup(self, info: MPI.Info | None = None) -> Communicator:
        """Duplicate: a pyhccl communicator over a duplicate of the wrapped one."""
        dup = self._comm.Dup() if info is None else self._comm.Dup(info)
        return Communicator(dup, algo=self._algo, ub_transfer_bytes=self._ub, topo=self._topo)

    def Free(self) -> None:
        """Free the private duplicate, then the wrapped communicator."""
        if self._pcomm != MPI.COMM_NULL:
            self._pcomm.Free()
        self._comm.Free()

    # -- collectives ---------------------------------------------------------------------
    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM) -> None:
        """Reduce ``sendbuf`` over all ranks with ``op`` into every rank's ``recvbuf``.

        mpi4py's signature and buffer forms; ``sendbuf`` may be ``MPI.IN_PLACE``.
        """
        _allreduce(self, sendbuf, recvbuf, op)

    # -- internals -----------------------------------------------------------------------
    def _fallback(self, method: str, reason: str, *args: Any) -> None:
        self.fallbacks += 1
        log.debug("pyhccl: %s goes to the wrapped communicator: %s", method, reason)
        getattr(self._comm, method)(*args)

    def _compiled(self, algo: str, count: int, in_place: bool, itemsize: int) -> CompiledPlan:
        key = (algo, count, in_place, itemsize)
        hit = self._plans.get(key)
        if hit is None:
            plan = build_allreduce(algo, self._comm.Get_rank(), self._comm.Get_size(), count, in_place)
            hit = self._plans[key] = compile_plan(plan, itemsize, self._ub)
            if len(self._plans) > _PLAN_CACHE_SIZE:
                self._plans.popitem(last=False)
        else:
            self._plans.move_to_end(key)
        return hit


def _ub(value: int | None) -> int:
    return ub_transfer_bytes(value)


def _allreduce(c: Communicator, sendbuf: Any, recvbuf: Any, op: MPI.Op) -> None:
    args = (sendbuf, recvbuf, op)
    ufunc = reduce_ufunc(op)
    if ufunc is None:
        return c._fallback("Allreduce", "reduce op not one of SUM, PROD, MAX, MIN", *args)
    rb = as_array(recvbuf)
    in_place = sendbuf is MPI.IN_PLACE or (isinstance(sendbuf, int) and sendbuf == MPI.IN_PLACE)
    sb = rb if in_place else as_array(sendbuf)
    if rb is None or sb is None:
        return c._fallback("Allreduce", "buffer form, datatype or dtype pyhccl does not run", *args)
    src, dst = sb.array, rb.array
    if src.dtype != dst.dtype:
        return c._fallback("Allreduce", f"send dtype {src.dtype} differs from receive dtype {dst.dtype}", *args)
    count = src.size
    if dst.size < count:
        raise ValueError(f"expecting recvbuf to hold at least {count} elements (the send count), got {dst.size}")
    if not dst.flags.writeable:
        raise ValueError("expecting a writable recvbuf, got a read-only buffer")
    dst = dst[:count]
    if not in_place and np.may_share_memory(src, dst):
        raise ValueError("sendbuf and recvbuf overlap; pass MPI.IN_PLACE as sendbuf to reduce in place")
    if count == 0:
        return None
    algo = c._algo or default_allreduce_algo(count * src.itemsize, c._comm.Get_size())
    plan = c._compiled(algo, count, in_place, src.itemsize)
    plan.run(c._pcomm, (src, dst, c._pool.get(src.dtype, plan.scratch_count)), ufunc)
    if rb.device is not None:
        rb.device.ravel(order="A")[:count].set(dst) if hasattr(rb.device, "set") else None
    return None
