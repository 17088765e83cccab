"""Communicator: a drop-in wrapper of an mpi4py intracommunicator that runs HCCL's algorithms.

The mpi4py wrapper pattern (mpi4py src/mpi4py/util/pkl5.py): the library's own traffic runs
on a private ``Dup()`` of the user's communicator. The Communicator is an ``MPI.Intracomm`` over the
wrapped communicator's handle (mpi4py's ``Intracomm(comm)``), so every method pyhccl does not
implement is mpi4py's own on that handle, and mpi4py takes it wherever it takes an intracommunicator.
Each collective method is one call into the :class:`~pyhccl.comm.dispatch.Dispatcher`.
"""

from __future__ import annotations

import os
from types import MappingProxyType
from typing import Any, Mapping, Sequence

import numpy as np
from mpi4py import MPI
from mpi4py.typing import BufSpec, BufSpecB, BufSpecV, InPlace

from ..core import settings
from ..run.shm import KEYVAL as SHM_KEY
from ..run.shm import ShmEngine, adopt_engine, release_engine, shm_engine
from ..select import Selection, check_settings
from ..topo import Topology, comm_topology
from ..tune.file import Tuning, TuningError, load_tuning_cached
from ..tune.profile import measured_profile
from .probe import auto_profile
from .agree import Planner, parse_algo
from .dispatch import Dispatcher
from .placed import Placed
from .nonblocking import NonblockingMethods
from .warm import WarmCall

__all__ = ["Communicator"]


class Communicator(NonblockingMethods, MPI.Intracomm):
    """pyhccl's communicator: mpi4py's methods, HCCL's algorithms.

    Allreduce, Reduce, Bcast, Allgather, Allgatherv, Gather, Scatter, Reduce_scatter_block,
    Reduce_scatter (uneven ``recvcounts`` run HCCL's ReduceScatterV), Alltoall, Alltoallv and
    Barrier run pyhccl's plans, with mpi4py's names, signatures and buffer forms; so do their
    nonblocking (``Iallreduce``, ...) and persistent (``Allreduce_init``, ...) forms, whose requests
    MPI's Wait/Test/Waitall/... take mixed with its own (:class:`NonblockingMethods`). Everything
    else (Scan, Exscan, Gatherv, Scatterv, Alltoallw, the
    lower-case pickle methods, neighbourhood collectives, point-to-point, ...) is the wrapped
    communicator's, forwarded unchanged; so are calls pyhccl cannot run (derived datatypes,
    user-defined or logical ops, unsupported dtypes, non-contiguous buffers), counted in
    ``fallbacks``. It is an ``MPI.Intracomm`` over the wrapped communicator's handle, so mpi4py takes it
    wherever it takes one (``Create_intercomm``'s peer, ``MPI.Win.Create``, ...); ``Dup`` and ``Split`` give
    pyhccl communicators. See docs/communicator.md.

    Args:
        comm: the mpi4py intracommunicator to wrap (default ``MPI.COMM_WORLD``).
        algo: force an algorithm: one of pyhccl's templates (``NHR``, ``Mesh``, ``Ring``,
            ``MeshOneShot``, ...; used by the ops that have it), an HCCL name (used by its op),
            or HCCL_ALGO's grammars. Ops the name does not belong to use HCCL's selection.
            Default ``PYHCCL_ALGO``, else HCCL's selection.
        ub_transfer_bytes: largest message; default ``PYHCCL_UB_TRANSFER_BYTES``, else the size the
            tuning file was measured with, else 512 KiB.
        topo: the machine to emulate (a spec such as ``"1x2x4"``, see :mod:`pyhccl.topo`);
            default ``PYHCCL_TOPO``, else ``PYHCCL_RANK_TABLE``, else detected from MPI.
        tuning: a tuning file (path or :class:`pyhccl.tune.Tuning`) measured on this machine:
            selection uses its measured profile (docs/tuning.md); default ``PYHCCL_TUNING_FILE``,
            "" for none. A file of another topology or rank count raises TuningError on every rank.
        profile: how selection prices algorithms when no tuning file is given: ``"auto"`` (pyhccl's fast
            paths on one node, priced by a machine profile measured once per layout and cached,
            :mod:`pyhccl.comm.probe`; docs/performance.md) or ``"hccl"`` (HCCL's own selection and
            pricing). Default ``PYHCCL_PROFILE``, else ``"auto"``. Ranks on several nodes, a forced
            algorithm or PYHCCL_ALGO text select as with ``"hccl"``.
        check: before every collective, one small allreduce checks that all ranks make the same
            call (method, dtype, count, root, reduce op, algorithm); a difference raises ValueError
            on every rank naming the ranks and their values. Default ``PYHCCL_CHECK`` (1/0), else off.
        timeout: seconds a step (or the library's own agreement) may wait before raising
            :class:`pyhccl.CollectiveTimeoutError` on the waiting rank; default ``PYHCCL_TIMEOUT``,
            else none (0 or "": none).
        abort_on_timeout: after a timeout, print the error and ``Abort`` the wrapped communicator so
            a batch job ends; False raises the error instead. Default ``PYHCCL_TIMEOUT_ABORT``, else on.

    Attributes:
        topology: this rank's place in the machine and HCCL's TopoInfo, computed once here, in HCCL's numbering
            (server by server); ``topology.order`` maps it to this communicator's ranks (docs/hosts.md).
        last_selection: the :class:`pyhccl.select.Selection` behind the last collective (None
            when a pyhccl template was forced or the op has no HCCL selector);
            ``print(comm.last_selection)`` explains it.
        fallbacks: calls handed to the wrapped communicator because pyhccl cannot run them.

    The collectives run through :attr:`dispatcher` (:class:`pyhccl.comm.dispatch.Dispatcher`), which
    owns the caches; :attr:`warm_calls`, :attr:`compiled_plans` and :attr:`scratch_allocations` show
    them, :meth:`share_scratch` and :meth:`share_window` share resources between communicators.
    """

    def __new__(cls, comm: MPI.Intracomm | None = None, **settings_: Any) -> Communicator:
        comm = _wrapped(comm)
        return super().__new__(cls, comm)           # the same MPI handle (mpi4py's Intracomm(comm))

    def __init__(self, comm: MPI.Intracomm | None = None, *, algo: str | None = None,
                 ub_transfer_bytes: int | None = None, topo: Any = None, tuning: Any = None,
                 profile: str | None = None, check: bool | None = None, timeout: float | None = None,
                 abort_on_timeout: bool | None = None) -> None:
        comm = _wrapped(comm)
        self._mode = mode = settings.profile_mode(profile)
        forced, override = parse_algo(settings.algo(algo))
        ub = settings.ub_transfer_bytes(ub_transfer_bytes)
        check = settings.flag(check, "check", "PYHCCL_CHECK", False)
        timeout = settings.timeout_seconds(timeout)
        abort_on_timeout = settings.flag(abort_on_timeout, "abort_on_timeout", "PYHCCL_TIMEOUT_ABORT", True)
        selection = settings.selector()
        check_settings(**selection)     # the PYHCCL_* the selector reads: raised now, on every rank, not at a call
        self._comm = comm
        self._gcomm = self._pcomm = comm.Dup()    # gathers in comm's rank order; plans in HCCL's (pyhccl.comm.placed)
        self._topo = topo
        self._topology = comm_topology(self._pcomm, topo)
        if not self._topology.identity:  # ranks of a node placed apart: plans run ordered server by server
            self._pcomm = self._gcomm.Split(0, self._topology.rank)
        self._tuning = _load_tuning(self._pcomm, settings.tuning_file(tuning), self._topology)
        if ub_transfer_bytes is None and not settings.ub_transfer_bytes_set() and self._tuning:
            ub = self._tuning.ub_transfer_bytes      # its prices hold for the message size it ran with
        self._planner = Planner(self._pcomm, self._topology, forced, override, measured_profile(self._tuning),
                                selection, ub, timeout, settings.cma())
        if self._tuning is None and forced is None and override is None and mode == "auto":
            self._planner.profile = auto_profile(self._pcomm, self._planner, self._topology)
        self._dispatch = Dispatcher(comm, self._pcomm, self._planner, check=check, timeout=timeout,
                                    abort_on_timeout=abort_on_timeout, gcomm=self._gcomm,
                                    placed=None if self._topology.identity else Placed(self._topology))
        self._run = self._dispatch.run
        self._off_node = False          # alloc_shared gave ordinary arrays: ranks on several nodes

    # -- identity, settings and forwarding ----------------------------------------------------
    @property
    def comm(self) -> MPI.Intracomm:
        """The wrapped mpi4py communicator."""
        return self._comm

    @property
    def topology(self) -> Topology:  # type: ignore[override]  # MPI.Comm.topology (the MPI topology kind) is hidden
        """This rank's place in the machine and HCCL's TopoInfo, computed once at construction."""
        return self._topology

    @property
    def algo(self) -> str | None:
        """The forced algorithm (a pyhccl template or PYHCCL_ALGO text), or None for HCCL's selection."""
        forced = self._planner.algo
        return str(forced) if forced else self._planner.override

    @property
    def ub_transfer_bytes(self) -> int:
        """The largest message a step is sliced into (the argument, PYHCCL_UB_TRANSFER_BYTES, the tuning file's, 512 KiB)."""
        return self._planner.ub_transfer_bytes

    @property
    def check(self) -> bool:
        """Whether every collective is checked first (``check=`` / PYHCCL_CHECK)."""
        return self._dispatch.check

    @property
    def timeout(self) -> float | None:
        """Seconds a step may wait (``timeout=`` / PYHCCL_TIMEOUT); None for no limit."""
        return self._dispatch.timeout

    @property
    def abort_on_timeout(self) -> bool:
        """Whether a timeout aborts the job (``abort_on_timeout=`` / PYHCCL_TIMEOUT_ABORT) rather than raising."""
        return self._dispatch.abort_on_timeout

    @property
    def last_selection(self) -> Selection | None:
        """The selection behind the last collective (None: a forced template, or an op without HCCL selector)."""
        return self._dispatch.last_selection

    @property
    def fallbacks(self) -> int:
        """Calls handed to the wrapped communicator because pyhccl cannot run them."""
        return self._dispatch.fallbacks

    @property
    def dispatcher(self) -> Dispatcher:
        """The object that runs this communicator's collectives and owns its caches."""
        return self._dispatch

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):        # not set up (an object mpi4py made without __init__): no forwarding
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(self._comm, name)

    def __repr__(self) -> str:
        return f"<pyhccl.Communicator rank {self._comm.Get_rank()} of {self._comm.Get_size()}>"

    def Dup(self, info: MPI.Info | None = None) -> Communicator:
        """Duplicate: a pyhccl communicator over a duplicate of the wrapped one, with this one's settings."""
        return self._like(self._comm.Dup() if info is None else self._comm.Dup(info))

    def Clone(self) -> Communicator:
        """Duplicate (mpi4py's Clone): as :meth:`Dup`."""
        return self._like(self._comm.Clone())

    def Dup_with_info(self, info: MPI.Info) -> Communicator:
        """Duplicate with ``info``: as :meth:`Dup`."""
        return self._like(self._comm.Dup_with_info(info))

    def Idup(self, info: MPI.Info | None = None) -> tuple[MPI.Intracomm, MPI.Request]:
        """Nonblocking duplicate of the wrapped communicator: a plain mpi4py one (a pyhccl communicator is made
        collectively; wrap it once the request completes)."""
        return self._comm.Idup() if info is None else self._comm.Idup(info)

    def Idup_with_info(self, info: MPI.Info) -> tuple[MPI.Intracomm, MPI.Request]:
        """Nonblocking duplicate with ``info``: as :meth:`Idup`."""
        return self._comm.Idup_with_info(info)

    def Split(self, color: int = 0, key: int = 0) -> Communicator | MPI.Intracomm:
        """Split (collective): a pyhccl communicator over the wrapped one's split, with this one's settings;
        ``MPI.COMM_NULL`` where ``color`` is ``MPI.UNDEFINED``."""
        part = self._comm.Split(color, key)
        return part if part == MPI.COMM_NULL else self._like(part)

    def _like(self, comm: MPI.Intracomm) -> Communicator:
        """A pyhccl communicator over ``comm`` with this one's settings (collective over ``comm``)."""
        return Communicator(comm, algo=self.algo or "", ub_transfer_bytes=self.ub_transfer_bytes, topo=self._topo,
                            tuning=self._tuning or "", profile=self._mode, check=self.check, timeout=self.timeout or 0,
                            abort_on_timeout=self.abort_on_timeout)

    def release(self) -> None:
        """Free what pyhccl made (the private duplicate and its shared window, if any; collective) and leave the
        wrapped communicator alone: for a communicator over one the caller keeps, such as ``MPI.COMM_WORLD``."""
        if self._pcomm != MPI.COMM_NULL:
            release_engine(self._pcomm)
            if self._gcomm is not self._pcomm:
                self._gcomm.Free()
            self._pcomm.Free()

    def Free(self) -> None:
        """Free the private duplicate (and its shared window, if any), then the wrapped communicator's handle:
        this object becomes ``MPI.COMM_NULL`` (the wrapped object still names the freed handle)."""
        self.release()
        MPI.Intracomm.Free(self)

    # -- caches and shared resources ------------------------------------------------------------
    @property
    def warm_calls(self) -> Mapping[tuple, WarmCall]:
        """The calls the warm path remembers (read-only), keyed by ``(method, id(arg), ...)``; an entry's ``plan``
        is None when the measured profile chose native MPI, its ``arrays`` are ``(index, shape, dtype)``."""
        return self._dispatch.warm.entries

    @property
    def compiled_plans(self) -> Mapping[tuple, Any]:
        """The compiled plans (read-only), each a :class:`pyhccl.run.base.Runner` (MPI or shared-memory runtime)."""
        return MappingProxyType(self._dispatch.plans)

    @property
    def scratch_allocations(self) -> int:
        """How many times the plans' scratch space has been allocated (a warm call allocates none)."""
        return self._dispatch.pool.allocations

    def share_scratch(self, other: Communicator) -> None:
        """Use ``other``'s scratch space from now on: for communicators that never run at the same time
        (the benchmark's, one per algorithm: 30 scratch spaces of 64 MiB would not fit)."""
        self._dispatch.pool = other._dispatch.pool

    def share_window(self, other: Communicator) -> None:
        """Use ``other``'s shared-memory window for the ``@shm`` engine (collective; same ranks, never running at
        the same time); the window lives until the last communicator using it is freed. On several nodes it does
        nothing (``@shm`` then runs hierarchically, with a node window per communicator)."""
        try:
            engine = shm_engine(other._pcomm, other._planner.cma)
        except ValueError:              # raised alike on every rank: not all on one node
            return
        adopt_engine(self._pcomm, engine)

    def shm_engine(self) -> ShmEngine:
        """The ``@shm`` engine (its shared window) of this communicator, made on first use (collective).

        Raises:
            ValueError: ranks on several nodes (no shared memory spans them).
        """
        return shm_engine(self._pcomm, self._planner.cma)

    # -- shared memory ---------------------------------------------------------------------
    def alloc_shared(self, shape: int | Sequence[int], dtype: Any = np.float64) -> np.ndarray:
        """A new array (like ``numpy.empty``) in memory the ``@shm`` engine's peers load from in place.

        Collective: every rank passes the same shape and dtype (ValueError on every rank otherwise).
        A collective on the ``@shm`` engine whose buffers lie in such arrays copies nothing into or
        out of the shared window (NCCL's ``ncclMemAlloc``, torch's symmetric memory). Any collective
        takes these arrays, and ranks may mix them with ordinary arrays. On a communicator over
        several nodes the result is an ordinary array. The memory lives until :meth:`free_shared`
        or :meth:`Free`; an array used after that reads freed memory.
        """
        dt = np.dtype(dtype)
        dims = (int(shape),) if np.isscalar(shape) else tuple(int(x) for x in shape)
        if any(x < 0 for x in dims):
            raise ValueError(f"shape: expecting sizes >= 0, got {dims}")
        try:
            eng = shm_engine(self._pcomm, self._planner.cma)
        except ValueError:
            self._off_node = True
            return np.empty(dims, dt)
        mem = eng.alloc(int(np.prod(dims, dtype=np.int64)) * dt.itemsize)
        return mem.view(dt).reshape(dims)

    def free_shared(self, array: np.ndarray) -> None:
        """Free the memory of an array from :meth:`alloc_shared` (collective; every rank passes its array of the
        same allocation). An ordinary array (the result on several nodes) is left to the garbage collector."""
        eng = self._pcomm.Get_attr(SHM_KEY) if self._pcomm != MPI.COMM_NULL else None
        if eng is not None:
            eng.release(np.asarray(array))
        elif not self._off_node:
            raise ValueError("array: expecting an array from alloc_shared of this communicator, got one outside "
                             "any shared allocation; free each alloc_shared array once, on every rank together")

    # -- collectives: mpi4py's signatures --------------------------------------------------
    def Allreduce(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpec, op: MPI.Op = MPI.SUM) -> None:
        """Reduce ``sendbuf`` over all ranks with ``op`` into every rank's ``recvbuf`` (AllReduce)."""
        self._run("Allreduce", sendbuf, recvbuf, op)

    def Reduce(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpec | None, op: MPI.Op = MPI.SUM,
               root: int = 0) -> None:
        """Reduce ``sendbuf`` over all ranks with ``op`` into the root's ``recvbuf`` (Reduce)."""
        self._run("Reduce", sendbuf, recvbuf, op, root)

    def Bcast(self, buf: BufSpec, root: int = 0) -> None:
        """Copy the root's ``buf`` into every rank's ``buf`` (Broadcast)."""
        self._run("Bcast", buf, root)

    def Allgather(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpecB) -> None:
        """Gather every rank's ``sendbuf`` into block ``rank`` of every ``recvbuf`` (AllGather)."""
        self._run("Allgather", sendbuf, recvbuf)

    def Allgatherv(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpecV) -> None:
        """Gather every rank's ``sendbuf`` into ``recvbuf``'s ``[counts, displs]`` blocks (AllGatherV)."""
        self._run("Allgatherv", sendbuf, recvbuf)

    def Gather(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpecB | None, root: int = 0) -> None:
        """Gather every rank's ``sendbuf`` into block ``rank`` of the root's ``recvbuf`` (Gather)."""
        self._run("Gather", sendbuf, recvbuf, root)

    def Scatter(self, sendbuf: BufSpecB | None, recvbuf: BufSpec | InPlace, root: int = 0) -> None:
        """Send block ``rank`` of the root's ``sendbuf`` to every rank's ``recvbuf`` (Scatter)."""
        self._run("Scatter", sendbuf, recvbuf, root)

    def Reduce_scatter_block(self, sendbuf: BufSpecB | InPlace, recvbuf: BufSpec | BufSpecB,
                             op: MPI.Op = MPI.SUM) -> None:
        """Reduce ``sendbuf`` over all ranks; rank r gets block r in ``recvbuf`` (ReduceScatter)."""
        self._run("Reduce_scatter_block", sendbuf, recvbuf, op)

    def Reduce_scatter(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpec, recvcounts: Sequence[int] | None = None,
                       op: MPI.Op = MPI.SUM) -> None:
        """Reduce ``sendbuf`` over all ranks; rank r gets ``recvcounts[r]`` elements (ReduceScatter(V))."""
        self._run("Reduce_scatter", sendbuf, recvbuf, recvcounts, op)

    def Alltoall(self, sendbuf: BufSpecB | InPlace, recvbuf: BufSpecB) -> None:
        """Send block j of ``sendbuf`` to rank j, into its ``recvbuf`` block ``rank`` (AllToAll)."""
        self._run("Alltoall", sendbuf, recvbuf)

    def Alltoallv(self, sendbuf: BufSpecV | InPlace, recvbuf: BufSpecV) -> None:
        """Alltoall with per-peer ``[counts, displs]`` on both sides (AllToAllV)."""
        self._run("Alltoallv", sendbuf, recvbuf)

    def Barrier(self) -> None:
        """Return once every rank has entered (Barrier)."""
        self._run("Barrier")


def _wrapped(comm: Any) -> MPI.Intracomm:
    """The mpi4py intracommunicator a Communicator wraps (``MPI.COMM_WORLD`` for None; a Communicator's own)."""
    comm = MPI.COMM_WORLD if comm is None else comm
    if isinstance(comm, Communicator):
        comm = comm.comm
    if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:
        raise TypeError(f"expecting an mpi4py intracommunicator, got {type(comm).__name__}")
    return comm


def _load_tuning(comm: MPI.Intracomm, tuning: Any, topology: Topology) -> Tuning | None:
    """The tuning file checked against this machine; a failure on any rank raises on every rank."""
    if isinstance(tuning, (str, os.PathLike)) and not str(tuning):
        return None
    error = ""
    try:
        if not isinstance(tuning, Tuning):
            tuning = load_tuning_cached(os.fspath(tuning))
        tuning.check_machine(topology.spec.to_text(), comm.Get_size())
    except (TuningError, TypeError) as e:
        error = str(e)
    errors = comm.allgather(error)
    bad = [(r, e) for r, e in enumerate(errors) if e]
    if bad:
        raise TuningError(error or f"rank {bad[0][0]}: {bad[0][1]}")
    return tuning
