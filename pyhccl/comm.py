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

from .ops import as_array, reduce_op_name, reduce_ufunc
from .plan.build import ALLREDUCE_ALGOS, build_allreduce, resolve_algo
from .plan.hccl import build_hccl_allreduce
from .select import Selection, parse_override, select_for
from .run.mpi import CompiledPlan, compile_plan
from .run.mpi import ub_transfer_bytes as _ub_bytes
from .run.pool import ScratchPool
from .topo import comm_topology

__all__ = ["Communicator"]

log = logging.getLogger("pyhccl")

_PLAN_CACHE_SIZE = 64


class Communicator:
    """pyhccl's communicator: mpi4py's methods, HCCL's algorithms.

    Args:
        comm: the mpi4py intracommunicator to wrap (default ``MPI.COMM_WORLD``).
        algo: force an algorithm: one of pyhccl's templates (``MeshOneShot``, ``NHR``, ``Ring``,
            ``RHD``, ...; used as it is), or anything ``PYHCCL_ALGO`` accepts (an HCCL name or
            HCCL_ALGO's grammars; checked against the algorithm's declared attributes by the
            selector). Default ``PYHCCL_ALGO``, else HCCL's selection.
        ub_transfer_bytes: largest message; default ``PYHCCL_UB_TRANSFER_BYTES``, else 512 KiB.
        topo: the machine to emulate (a spec such as ``"1x2x4"``, see :mod:`pyhccl.topo`);
            default ``PYHCCL_TOPO``, else ``PYHCCL_RANK_TABLE``, else detected from MPI.

    Attributes:
        topology: this rank's place in the machine and HCCL's TopoInfo, computed once here.
        last_selection: the :class:`pyhccl.select.Selection` behind the last AllReduce (None
            when a pyhccl template was forced); ``print(comm.last_selection)`` explains it.
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
        algo = (os.environ.get("PYHCCL_ALGO") or None) if algo is None else algo
        self._algo, self._override = _split_algo(algo)
        self._ub = _ub_bytes(ub_transfer_bytes)
        self._comm = comm
        self._pcomm = comm.Dup()
        self._topo = topo
        self.topology = comm_topology(self._pcomm, topo)
        self._plans: OrderedDict[tuple, tuple[CompiledPlan, Selection | None]] = OrderedDict()
        self.last_selection: Selection | None = None
        self._pool = ScratchPool()
        self.fallbacks = 0

    # -- identity and forwarding ---------------------------------------------------------
    @property
    def comm(self) -> MPI.Intracomm:
        """The wrapped mpi4py communicator."""
        return self._comm

    @property
    def algo(self) -> str | None:
        """The forced algorithm (a pyhccl template or PYHCCL_ALGO text), or None for HCCL's selection."""
        return self._algo or self._override

    def __getattr__(self, name: str) -> Any:
        return getattr(self._comm, name)

    def __repr__(self) -> str:
        return f"<pyhccl.Communicator rank {self._comm.Get_rank()} of {self._comm.Get_size()}>"

    def Dup(self, info: MPI.Info | None = None) -> Communicator:
        """Duplicate: a pyhccl communicator over a duplicate of the wrapped one."""
        dup = self._comm.Dup() if info is None else self._comm.Dup(info)
        return Communicator(dup, algo=self.algo or "", ub_transfer_bytes=self._ub, topo=self._topo)

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

    def _compiled(self, count: int, dtype: np.dtype, in_place: bool, op: MPI.Op) -> CompiledPlan:
        """The AllReduce plan for this call shape: selected and built once, then cached."""
        key = (count, dtype.str, in_place, op.py2f())
        hit = self._plans.get(key)
        if hit is None:
            hit = self._plans[key] = self._plan_allreduce(count, dtype, in_place, op)
            if len(self._plans) > _PLAN_CACHE_SIZE:
                self._plans.popitem(last=False)
        else:
            self._plans.move_to_end(key)
        self.last_selection = hit[1]
        return hit[0]

    def _plan_allreduce(self, count: int, dtype: np.dtype, in_place: bool,
                        op: MPI.Op) -> tuple[CompiledPlan, Selection | None]:
        rank, size = self._comm.Get_rank(), self._comm.Get_size()
        if self._algo:
            plan = build_allreduce(self._algo, rank, size, count, in_place)
            return compile_plan(plan, dtype.itemsize, self._ub), None
        sel, error = None, ""
        try:
            sel = select_for("AllReduce", self.topology.info, count * dtype.itemsize, dtype,
                             reduce_op_name(op), inplace=in_place, algo=self._override or "")
            reg = sel.registration
            layout = self.topology.layout
            plan = build_hccl_allreduce(sel.algorithm, reg.executor, reg.levels, rank,
                                        layout.algo_groups(rank, len(reg.levels)), count, in_place,
                                        uniform=layout.uniform)
        except (ValueError, NotImplementedError) as e:
            error = f"{type(e).__name__}: {e}"
        # every rank must run the same algorithm: agree once per call shape, fail together
        outcome = self._pcomm.allgather(error or sel.algorithm)
        if len(set(outcome)) > 1 or error:
            detail = error or "; ".join(f"rank {r}: {o}" for r, o in enumerate(outcome) if o != outcome[0])
            raise RuntimeError(f"AllReduce of {count} x {dtype} cannot run: {detail}")
        log.debug("pyhccl: AllReduce %d x %s -> %s", count, dtype, sel.algorithm)
        return compile_plan(plan, dtype.itemsize, self._ub), sel


def _split_algo(algo: str | None) -> tuple[str | None, str | None]:
    """``(pyhccl template, None)`` for a template name, ``(None, override)`` for PYHCCL_ALGO text.

    pyhccl's template names win over HCCL_ALGO's bare template tokens ("NHR" runs the NHR
    template on all ranks); write ``allreduce:nhr`` for HCCL's meaning.
    """
    if not algo:
        return None, None
    if algo.lower() in {a.lower() for a in ALLREDUCE_ALGOS}:
        return resolve_algo(algo), None
    try:
        parse_override(algo)
    except ValueError as e:
        raise ValueError(f"{e}; or one of pyhccl's templates: {', '.join(ALLREDUCE_ALGOS)}") from None
    return None, algo


def _allreduce(c: Communicator, sendbuf: Any, recvbuf: Any, op: MPI.Op) -> None:
    args = (sendbuf, recvbuf, op)
    ufunc = reduce_ufunc(op)
    if ufunc is None:
        return c._fallback("Allreduce", "reduce op not one of SUM, PROD, MAX, MIN", *args)
    rb = as_array(recvbuf)
    in_place = sendbuf is MPI.IN_PLACE
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
    plan = c._compiled(count, src.dtype, in_place, op)
    plan.run(c._pcomm, (src, dst, c._pool.get(src.dtype, plan.scratch_count)), ufunc)
    if rb.device is not None:                    # a GPU array: copy the result back to it
        rb.device.ravel(order="A")[:count].set(dst)
    return None
