"""Communicator: a drop-in wrapper of an mpi4py intracommunicator that runs HCCL's algorithms.

The mpi4py wrapper pattern (mpi4py src/mpi4py/util/pkl5.py): the library's own traffic runs
on a private ``Dup()`` of the user's communicator; every attribute pyhccl does not implement
forwards to the wrapped communicator unchanged.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import operator
import os
import sys
import time
import traceback
from collections import OrderedDict
from types import MappingProxyType
from typing import Any, Mapping, Sequence

import numpy as np
from mpi4py import MPI
from mpi4py.typing import BufSpec, BufSpecB, BufSpecV, InPlace

from .algo import registry
from .algo.names import AlgoRef, Runtime, parse_algo_ref
from .core import settings
from .ops import PARSERS, SUPPORTED_DTYPES, SUPPORTED_OPS, Env, Job
from .core.call import OPS, Call
from .plan.api import NotRunnableError, build_plan, flat_names, resolve_name
from .run.base import Runner
from .run.mpi import compile_plan
from .run.timeout import CollectiveTimeoutError, allgather_timed, wait_pending
from .run.pool import ScratchPool
from .select import Selection, SelectionError, normalize_op, parse_override, select_for
from .topo import comm_topology
from .run.shm import OPS as SHM_OPS
from .run.shm import KEYVAL as _SHM_KEY
from .run.shm import ShmRunner, compile_shm, release_engine, shm_engine
from .tune.file import NATIVE, Tuning, TuningError, load_tuning_cached

__all__ = ["Communicator", "CheckError"]

log = logging.getLogger("pyhccl")

_PLAN_CACHE_SIZE = 64
#: Ops whose in-place flag every rank shares (MPI: IN_PLACE on all ranks or none).
_SHARED_IN_PLACE = frozenset({"allreduce", "all_gather", "reduce_scatter"})
#: pyhccl's template names, every op's, in listing order (AllReduce's first).
_FLAT_NAMES = tuple(dict.fromkeys(n for op in OPS for n in flat_names(op)))
_FLAT_NAMES += tuple(str(AlgoRef(n, Runtime.SHM)) for n in _FLAT_NAMES)          # the same on the shared-memory engine


class CheckError(ValueError):
    """Ranks disagree on a collective call (``check=True`` / ``PYHCCL_CHECK=1``); raised alike on every rank."""


class Communicator:
    """pyhccl's communicator: mpi4py's methods, HCCL's algorithms.

    Allreduce, Reduce, Bcast, Allgather, Allgatherv, Gather, Scatter, Reduce_scatter_block,
    Reduce_scatter (uneven ``recvcounts`` run HCCL's ReduceScatterV), Alltoall, Alltoallv and
    Barrier run pyhccl's plans, with mpi4py's names, signatures and buffer forms. Everything
    else (Scan, Exscan, the non-blocking ``I*`` methods, Gatherv, Scatterv, Alltoallw, the
    lower-case pickle methods, neighbourhood collectives, point-to-point, ...) is the wrapped
    communicator's, forwarded unchanged; so are calls pyhccl cannot run (derived datatypes,
    user-defined or logical ops, unsupported dtypes, non-contiguous buffers), counted in
    ``fallbacks``. See docs/communicator.md.

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
        check: before every collective, one small allreduce checks that all ranks make the same
            call (method, dtype, count, root, reduce op, algorithm); a difference raises ValueError
            on every rank naming the ranks and their values. Default ``PYHCCL_CHECK`` (1/0), else off.
        timeout: seconds a step (or the library's own agreement) may wait before raising
            :class:`pyhccl.CollectiveTimeoutError` on the waiting rank; default ``PYHCCL_TIMEOUT``,
            else none (0 or "": none).
        abort_on_timeout: after a timeout, print the error and ``Abort`` the wrapped communicator so
            a batch job ends; False raises the error instead. Default ``PYHCCL_TIMEOUT_ABORT``, else on.

    Attributes:
        topology: this rank's place in the machine and HCCL's TopoInfo, computed once here.
        last_selection: the :class:`pyhccl.select.Selection` behind the last collective (None
            when a pyhccl template was forced or the op has no HCCL selector);
            ``print(comm.last_selection)`` explains it.
        fallbacks: calls handed to the wrapped communicator because pyhccl cannot run them.
    """

    def __init__(self, comm: MPI.Intracomm | None = None, *, algo: str | None = None,
                 ub_transfer_bytes: int | None = None, topo: Any = None, tuning: Any = None,
                 check: bool | None = None, timeout: float | None = None, abort_on_timeout: bool | None = None) -> None:
        comm = MPI.COMM_WORLD if comm is None else comm
        if isinstance(comm, Communicator):
            comm = comm.comm
        if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:
            raise TypeError(f"expecting an mpi4py intracommunicator, got {type(comm).__name__}")
        algo = (os.environ.get("PYHCCL_ALGO") or None) if algo is None else algo
        self._algo, self._override = _split_algo(algo)
        self._ub = settings.ub_transfer_bytes(ub_transfer_bytes)
        self._check = _flag(check, "check", "PYHCCL_CHECK", False)
        self._timeout = settings.timeout_seconds(timeout)
        self._abort = _flag(abort_on_timeout, "abort_on_timeout", "PYHCCL_TIMEOUT_ABORT", True)
        self._seq = 0                   # collectives called, for the check
        self._method = ""               # the method being parsed, for the check of the parsers' allgathers
        self._comm = comm
        self._pcomm = comm.Dup()
        self._topo = topo
        self.topology = comm_topology(self._pcomm, topo)
        self._tuning = _load_tuning(self._pcomm, tuning, self.topology)
        if ub_transfer_bytes is None and not os.environ.get("PYHCCL_UB_TRANSFER_BYTES") and self._tuning:
            self._ub = self._tuning.ub_transfer_bytes      # its prices hold for the message size it ran with
        self._agreed: OrderedDict[tuple, tuple[str, Selection | None]] = OrderedDict()
        self._plans: OrderedDict[tuple, Runner] = OrderedDict()
        self._recent: OrderedDict[tuple, _Warm] = OrderedDict()     # the warm path: see _warm
        self._last: _Warm | None = None     # the warm call made last, if no call took the full path since
        self.last_selection: Selection | None = None
        self._pool = ScratchPool()
        self._stage = ScratchPool()
        gather = self._pcomm.allgather if not (self._check or self._timeout) else self._parser_allgather
        self._env = Env(comm.Get_rank(), comm.Get_size(), self._stage.get, gather)
        self.fallbacks = 0
        self._off_node = False          # alloc_shared gave ordinary arrays: ranks on several nodes

    # -- identity and forwarding ---------------------------------------------------------
    @property
    def comm(self) -> MPI.Intracomm:
        """The wrapped mpi4py communicator."""
        return self._comm

    @property
    def algo(self) -> str | None:
        """The forced algorithm (a pyhccl template or PYHCCL_ALGO text), or None for HCCL's selection."""
        return self._algo or self._override

    @property
    def ub_transfer_bytes(self) -> int:
        """The largest message a step is sliced into (the argument, PYHCCL_UB_TRANSFER_BYTES, the tuning file's, 512 KiB)."""
        return self._ub

    def __getattr__(self, name: str) -> Any:
        return getattr(self._comm, name)

    def __repr__(self) -> str:
        return f"<pyhccl.Communicator rank {self._comm.Get_rank()} of {self._comm.Get_size()}>"

    def Dup(self, info: MPI.Info | None = None) -> Communicator:
        """Duplicate: a pyhccl communicator over a duplicate of the wrapped one."""
        dup = self._comm.Dup() if info is None else self._comm.Dup(info)
        return Communicator(dup, algo=self.algo or "", ub_transfer_bytes=self._ub, topo=self._topo,
                            tuning=self._tuning or "", check=self._check, timeout=self._timeout or 0,
                            abort_on_timeout=self._abort)

    @property
    def comm(self) -> MPI.Intracomm:
        """The wrapped mpi4py communicator."""
        return self._comm

    @property
    def compiled_plans(self) -> Mapping[tuple, Runner]:
        """The compiled plans (read-only): :class:`pyhccl.run.mpi.CompiledPlan` or :class:`pyhccl.run.shm.ShmRunner`."""
        return MappingProxyType(self._plans)

    def release(self) -> None:
        """Free what pyhccl made (the private duplicate and its shared window, if any; collective) and leave the
        wrapped communicator alone: for a communicator over one the caller keeps, such as ``MPI.COMM_WORLD``."""
        if self._pcomm != MPI.COMM_NULL:
            release_engine(self._pcomm)
            self._pcomm.Free()

    def Free(self) -> None:
        """Free the private duplicate (and its shared window, if any), then the wrapped communicator."""
        self.release()
        self._comm.Free()

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
            eng = shm_engine(self._pcomm)
        except ValueError:
            self._off_node = True
            return np.empty(dims, dt)
        mem = eng.alloc(int(np.prod(dims, dtype=np.int64)) * dt.itemsize)
        return mem.view(dt).reshape(dims)

    def free_shared(self, array: np.ndarray) -> None:
        """Free the memory of an array from :meth:`alloc_shared` (collective; every rank passes its array of the
        same allocation). An ordinary array (the result on several nodes) is left to the garbage collector."""
        eng = self._pcomm.Get_attr(_SHM_KEY) if self._pcomm != MPI.COMM_NULL else None
        if eng is not None:
            eng.release(np.asarray(array))
        elif not self._off_node:
            raise ValueError("array: expecting an array from alloc_shared of this communicator, got one outside "
                             "any shared allocation; free each alloc_shared array once, on every rank together")

    # -- collectives: mpi4py's signatures --------------------------------------------------
    def Allreduce(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpec, op: MPI.Op = MPI.SUM) -> None:
        """Reduce ``sendbuf`` over all ranks with ``op`` into every rank's ``recvbuf`` (AllReduce)."""
        _collective(self, "Allreduce", sendbuf, recvbuf, op)

    def Reduce(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpec | None, op: MPI.Op = MPI.SUM,
               root: int = 0) -> None:
        """Reduce ``sendbuf`` over all ranks with ``op`` into the root's ``recvbuf`` (Reduce)."""
        _collective(self, "Reduce", sendbuf, recvbuf, op, root)

    def Bcast(self, buf: BufSpec, root: int = 0) -> None:
        """Copy the root's ``buf`` into every rank's ``buf`` (Broadcast)."""
        _collective(self, "Bcast", buf, root)

    def Allgather(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpecB) -> None:
        """Gather every rank's ``sendbuf`` into block ``rank`` of every ``recvbuf`` (AllGather)."""
        _collective(self, "Allgather", sendbuf, recvbuf)

    def Allgatherv(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpecV) -> None:
        """Gather every rank's ``sendbuf`` into ``recvbuf``'s ``[counts, displs]`` blocks (AllGatherV)."""
        _collective(self, "Allgatherv", sendbuf, recvbuf)

    def Gather(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpecB | None, root: int = 0) -> None:
        """Gather every rank's ``sendbuf`` into block ``rank`` of the root's ``recvbuf`` (Gather)."""
        _collective(self, "Gather", sendbuf, recvbuf, root)

    def Scatter(self, sendbuf: BufSpecB | None, recvbuf: BufSpec | InPlace, root: int = 0) -> None:
        """Send block ``rank`` of the root's ``sendbuf`` to every rank's ``recvbuf`` (Scatter)."""
        _collective(self, "Scatter", sendbuf, recvbuf, root)

    def Reduce_scatter_block(self, sendbuf: BufSpecB | InPlace, recvbuf: BufSpec | BufSpecB,
                             op: MPI.Op = MPI.SUM) -> None:
        """Reduce ``sendbuf`` over all ranks; rank r gets block r in ``recvbuf`` (ReduceScatter)."""
        _collective(self, "Reduce_scatter_block", sendbuf, recvbuf, op)

    def Reduce_scatter(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpec, recvcounts: Sequence[int] | None = None,
                       op: MPI.Op = MPI.SUM) -> None:
        """Reduce ``sendbuf`` over all ranks; rank r gets ``recvcounts[r]`` elements (ReduceScatter(V))."""
        _collective(self, "Reduce_scatter", sendbuf, recvbuf, recvcounts, op)

    def Alltoall(self, sendbuf: BufSpecB | InPlace, recvbuf: BufSpecB) -> None:
        """Send block j of ``sendbuf`` to rank j, into its ``recvbuf`` block ``rank`` (AllToAll)."""
        _collective(self, "Alltoall", sendbuf, recvbuf)

    def Alltoallv(self, sendbuf: BufSpecV | InPlace, recvbuf: BufSpecV) -> None:
        """Alltoall with per-peer ``[counts, displs]`` on both sides (AllToAllV)."""
        _collective(self, "Alltoallv", sendbuf, recvbuf)

    def Barrier(self) -> None:
        """Return once every rank has entered (Barrier)."""
        _collective(self, "Barrier")

    # -- internals -----------------------------------------------------------------------
    def _fallback(self, method: str, reason: str, *args: Any) -> None:
        self.fallbacks += 1
        log.debug("pyhccl: %s goes to the wrapped communicator: %s", method, reason)
        try:
            getattr(self._comm, method)(*args)
        except Exception as e:
            e.add_note(f"pyhccl handed {method} to the wrapped MPI communicator: {reason}. pyhccl runs "
                       f"{', '.join(SUPPORTED_OPS)} on contiguous buffers of predefined numeric datatypes "
                       f"({', '.join(SUPPORTED_DTYPES)}); the wrapped MPI runs the rest when it supports it, "
                       "and this error is MPI's")
            raise

    def _parser_allgather(self, obj: Any) -> list:
        """The parsers' allgather (Reduce_scatter's counts, Alltoallv's matrix): checked first, timed."""
        if self._check:
            _check(self, self._method, None)
        return allgather_timed(self._pcomm, obj, self._timeout, f"the count exchange of {self._method}")


def _flag(value: Any, name: str, var: str, default: bool) -> bool:
    """A boolean setting: ``value``, else the variable (1/0, true/false, yes/no, on/off), else ``default``."""
    if value is not None:
        if not isinstance(value, (bool, int)):
            raise TypeError(f"expecting {name} as a bool, got {type(value).__name__}")
        return bool(value)
    text = os.environ.get(var, "").strip().lower()
    if not text:
        return default
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expecting {var} to be 1 or 0 (true/false, yes/no, on/off), got {text!r}")


def _split_algo(algo: str | None) -> tuple[str | None, str | None]:
    """``(pyhccl template, None)`` for a template name, ``(None, override)`` for PYHCCL_ALGO text.

    pyhccl's template names win over HCCL_ALGO's bare template tokens ("NHR" runs the NHR
    template on all ranks); write ``allreduce:nhr`` for HCCL's meaning.
    """
    if not algo:
        return None, None
    for name in _FLAT_NAMES:
        if name.lower() == algo.lower():
            return name, None
    try:
        parse_override(algo)
    except ValueError as e:
        raise ValueError(f"{e}; or one of pyhccl's templates: {', '.join(_FLAT_NAMES)}") from None
    return None, algo


def _load_tuning(comm: MPI.Intracomm, tuning: Any, topology: Any) -> Tuning | None:
    """The tuning file checked against this machine; a failure on any rank raises on every rank."""
    tuning = os.environ.get("PYHCCL_TUNING_FILE", "") if tuning is None else tuning
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


#: Calls remembered for the warm path (each entry holds its arguments alive).
_RECENT = 8


class _Warm:
    """A remembered call: its argument objects (held alive, so their ids cannot be reused), the
    shape and dtype of each array among them, the parsed job, the plan (None: native MPI, then
    ``native`` is the wrapped communicator's bound method) and the selection."""

    __slots__ = ("method", "args", "arrays", "job", "plan", "selection", "native", "key")

    def __init__(self, c: Communicator, method: str, args: tuple, job: Job, plan: Any) -> None:
        self.method, self.args, self.job, self.plan, self.selection = method, args, job, plan, c.last_selection
        self.arrays = tuple((i, a.shape, a.dtype) for i, a in enumerate(args) if type(a) is np.ndarray)
        self.native = getattr(c._comm, method) if plan is None else None
        self.key = (method, *map(id, args))


def _warm(c: Communicator, method: str, args: tuple) -> _Warm | None:
    """The remembered call made again with the very same argument objects, or None.

    A training loop calls ``Allreduce(grad, out)`` with the same arrays every step: a repeat
    skips parsing and every lookup. Anything else (new objects, a changed shape, the check on,
    device buffers) takes the full path. The call used last is tried first, by identity, before
    the lookup by ids.
    """
    hit = c._last
    if hit is None or hit.method != method or len(hit.args) != len(args) or not all(map(operator.is_, hit.args, args)):
        hit = c._recent.get((method, *map(id, args)))
        if hit is None:
            return None
        c._recent.move_to_end(hit.key)  # least recently used goes first: fresh-array calls do not evict a loop's arrays
        c._last = hit
        c.last_selection = hit.selection
    for i, shape, dtype in hit.arrays:
        a = args[i]
        if a.shape != shape or (a.dtype is not dtype and a.dtype != dtype):
            return None
    return hit


def _remember_warm(c: Communicator, method: str, args: tuple, job: Job, plan: Any) -> None:
    """Remember a call whose arguments are arrays, IN_PLACE, ints or ops, and whose job works on them.

    Calls whose parser copies into staging space (in-place forms of AlltoAll(V), Allgatherv,
    ReduceScatter(V)), or runs on a staged output, always take the full path.
    """
    arrays = [a for a in args if type(a) is np.ndarray]
    if any(b.size and not any(np.may_share_memory(b, a) for a in arrays) for b in (job.inp, job.out)):
        return
    if all(type(a) is np.ndarray or a is MPI.IN_PLACE or isinstance(a, (int, MPI.Op)) for a in args):
        warm = _Warm(c, method, args, job, plan)
        _remember(c._recent, warm.key, warm, _RECENT)


def _collective(c: Communicator, method: str, *args: Any) -> None:
    """Parse -> (check) -> Call -> algorithm (agreed once per call shape) -> plan (cached) -> run."""
    warm = None if c._check else _warm(c, method, args)
    if warm is not None:
        if warm.native is not None:     # the measured profile chose native MPI
            return warm.native(*args)
        job, plan = warm.job, warm.plan
        try:
            plan.run(c._pcomm, (job.inp, job.out, c._pool.get(job.dtype, plan.scratch_count)), job.ufunc, c._timeout)
        except CollectiveTimeoutError as e:
            if c._abort:
                _abort(c, e)
            raise
        return None
    c._last = None                      # the full path sets last_selection and may remember a call
    try:
        if c._check:
            job = _parse_checked(c, method, args)
        else:
            job = PARSERS[method](c._env, *args)
        if isinstance(job, str):
            return c._fallback(method, job, *args)
        call = job.call
        if call.data_count == 0 and call.op != "barrier":
            return None
        plan = _compiled(c, job)
        native = plan is None and c.last_selection is not None and c.last_selection.algorithm == NATIVE
        if (plan is not None or native) and not job.device and not c._check:
            _remember_warm(c, method, args, job, plan)
        if native:
            return getattr(c._comm, method)(*args)          # the measured profile chose native MPI
        if plan is None:
            return c._fallback(method, "no pyhccl algorithm runs it", *args)
        if job.device is None:
            plan.run(c._pcomm, (job.inp, job.out, c._pool.get(job.dtype, plan.scratch_count)), job.ufunc, c._timeout)
        else:
            job.device.run(plan, c._pcomm, job, c._timeout)         # on the device: pyhccl/gpu.py
    except CollectiveTimeoutError as e:
        if c._abort:
            _abort(c, e)
        raise
    return None


def _abort(c: Communicator, e: CollectiveTimeoutError) -> None:
    """Print the timeout error and abort the wrapped communicator's job (MPI_Abort: mpiexec ends every rank)."""
    where = traceback.format_stack(sys._getframe(2))          # the user's call, above the method
    # one write, then a moment for the launcher to forward it: mpiexec stops forwarding once it sees the abort
    sys.stderr.write("Traceback (most recent call last):\n" + "".join(where + traceback.format_exception(e)[1:])
                     + f"pyhccl: rank {c._env.rank} aborts the job after a timeout (PYHCCL_TIMEOUT); "
                     "set PYHCCL_TIMEOUT_ABORT=0 or abort_on_timeout=False to raise instead\n")
    sys.stderr.flush()
    time.sleep(_ABORT_GRACE)
    c._comm.Abort(_ABORT_CODE)


# -- the consistency check (PYHCCL_CHECK) ---------------------------------------------------------

#: Exit code of a job aborted after a timeout.
_ABORT_CODE = 14
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


def _parse_checked(c: Communicator, method: str, args: tuple) -> Job | str:
    """The parser under the check: an argument error on some ranks fails every rank, not a hang."""
    c._seq += 1
    c._method = method
    try:
        job = PARSERS[method](c._env, *args)
    except (CollectiveTimeoutError, CheckError):
        raise
    except Exception as e:
        _check(c, method, e)
        raise
    _check(c, method, job)
    return job


def _check(c: Communicator, method: str, what: Job | str | BaseException | None) -> None:
    """One allreduce of a fixed-size int64 vector (max of v and -v): every rank's call must match.

    ``what``: the parsed job, a fallback reason, the argument error, or None before a parser's own
    allgather. A difference raises the same CheckError on every rank, naming ranks and values.
    """
    key = hit = None
    vec = [c._seq, _METHOD_ID[method], _PYHCCL, -1, -1, -1, -1, 0, 0, 1]
    if isinstance(what, Job):
        shape = _shape(what.call)
        key = (shape, what.dtype.str, what.reduce_op)
        hit = c._agreed.get(key)
        vec[3:10] = (_DTYPE_ID.get(what.dtype, -2), _total(shape), shape.root if shape.spec.rooted else -1,
                     _REDUCE_ID.get(what.reduce_op, -2) if what.ufunc is not None else -1, _digest(key),
                     _digest(hit[0]) if hit else 0, 1 if hit else 0)
    else:
        vec[2] = _FALLBACK if isinstance(what, str) else _ERROR if what is not None else _EXCHANGE
    both = np.array(vec + [-v for v in vec], np.int64)
    if c._timeout is None:
        c._pcomm.Allreduce(MPI.IN_PLACE, both, MPI.MAX)
    else:
        req = c._pcomm.Iallreduce(MPI.IN_PLACE, both, MPI.MAX)
        if wait_pending([req], c._timeout):
            raise CollectiveTimeoutError(
                f"rank {c._env.rank} waited {c._timeout:g} s (PYHCCL_TIMEOUT) in the check (PYHCCL_CHECK) of "
                f"{method}: some rank has not joined (stalled, or calling another collective)", algorithm="check")
    hi, lo = both[:_NCHECK], -both[_NCHECK:]
    agreed = lo[9] == 1
    if (hi[:8] == lo[:8]).all() and (not agreed or hi[8] == lo[8]):
        if not agreed and hit is not None:      # some rank has not agreed on this shape: all agree afresh
            del c._agreed[key]
        return
    rows = allgather_timed(c._pcomm, _describe_call(method, what, hit, c._seq), c._timeout,
                           f"the check (PYHCCL_CHECK) of {method}")
    raise CheckError(_disagreement(rows)) from (what if isinstance(what, BaseException) else None)


def _describe_call(method: str, what: Any, hit: Any, seq: int) -> dict[str, str]:
    """This rank's call in words, field by field, for the check's error."""
    d = {"call number": str(seq), "method": method, "runs": "pyhccl", "dtype": "-", "count": "-",
         "root": "-", "reduce op": "-", "algorithm": hit[0] if hit else "", "arguments": ""}
    if isinstance(what, Job):
        shape = _shape(what.call)
        d.update(dtype=str(what.dtype), count=_describe(shape, root=False),
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


def _disagreement(rows: list[dict[str, str]]) -> str:
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


def _total(call: Call) -> int:
    """Elements of the call: count, the sum of counts, or of the matrix."""
    if call.counts is not None:
        return sum(call.counts)
    if call.matrix is not None:
        return sum(map(sum, call.matrix))
    return call.count


@functools.lru_cache(maxsize=256)
def _digest(value: Any) -> int:
    """A 56-bit digest of ``value``'s repr (it and its negation fit in int64)."""
    return int.from_bytes(hashlib.blake2b(repr(value).encode(), digest_size=7).digest(), "little")


def _shape(call: Call) -> Call:
    """The part of ``call`` every rank shares: a root's IN_PLACE and Allgatherv's displs are its own."""
    if call.op in ("reduce", "gather") and call.in_place:
        return dataclasses.replace(call, in_place=False)
    if call.op == "all_gather_v":
        return dataclasses.replace(call, displs=None)
    return call


def _compiled(c: Communicator, job: Job) -> Runner | None:
    """The compiled plan for this call: algorithm agreed once per shape, plan built once per Call."""
    key = (_shape(job.call), job.dtype.str, job.reduce_op)
    hit = c._agreed.get(key)
    if hit is None:
        hit, plan = _agree(c, job, key[0])
        _remember(c._agreed, key, hit)
    else:
        c._agreed.move_to_end(key)
        plan = None
    name, c.last_selection = hit
    if name is None or name == NATIVE:
        return None
    pkey = (job.call, job.dtype.str, name)
    compiled = c._plans.get(pkey)
    if compiled is None:
        compiled = _remember(c._plans, pkey, plan or _build(c, job, name))
    else:
        c._plans.move_to_end(pkey)
    return compiled


def _remember(cache: OrderedDict, key: tuple, value: Any, size: int = _PLAN_CACHE_SIZE) -> Any:
    cache[key] = value
    if len(cache) > size:
        cache.popitem(last=False)
    return value


def _agree(c: Communicator, job: Job, shape: Call) -> tuple[tuple[str | None, Selection | None], Runner | None]:
    """Choose and build on every rank, then one allgather: same call, same algorithm, or fail together."""
    call, spec = job.call, job.call.spec
    what = f"{spec.hccl} of {_describe(shape)} x {job.dtype}"
    digest = hashlib.blake2b(repr((shape, job.dtype.str, job.reduce_op)).encode(), digest_size=8).hexdigest()
    name = sel = plan = None
    forced, status, detail = False, "ok", ""
    try:
        name, sel, forced = _choose(c, job, shape)
        plan = None if name == NATIVE or (name and parse_algo_ref(name).shm) else _build(c, job, name)   # shm: after agreeing
    except (NotRunnableError, SelectionError) as e:
        status = "error" if forced or _override_for(c, shape) else "fallback"
        detail = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    except Exception as e:              # noqa: BLE001 - any failure must reach every rank, not hang them
        status, detail = "error", f"{type(e).__name__}: {e}"
    outcome = allgather_timed(c._pcomm, (digest, what, name, status, detail), c._timeout,
                              f"the algorithm agreement of {what}")
    if len({o[0] for o in outcome}) > 1:
        firsts = {}
        for r, o in enumerate(outcome):
            firsts.setdefault(o[0], f"rank {r}: {o[1]}")
        raise ValueError(f"ranks disagree on the {spec.hccl} call; {'; '.join(firsts.values())}")
    failed = [(r, o[4]) for r, o in enumerate(outcome) if o[3] == "error"]
    if failed:
        mine = detail if status == "error" else f"rank {failed[0][0]}: {failed[0][1]}"
        raise RuntimeError(f"{what} cannot run: {mine}")
    falls = [(r, o[2], o[4]) for r, o in enumerate(outcome) if o[3] == "fallback"]
    if falls:                           # a selected name that does not run somewhere: everyone's template
        flat = flat_names(call.op)
        r, chosen, reason = falls[0]
        why = f"{chosen or 'the selection'} does not run (rank {r}: {reason})"
        if not flat:
            log.info("pyhccl: %s goes to the wrapped communicator: %s", what, why)
            return (None, sel), None
        log.info("pyhccl: %s runs pyhccl's %s template: %s", what, flat[0], why)
        if sel is not None:
            sel = dataclasses.replace(sel, notes=sel.notes + (f"pyhccl runs its {flat[0]} template: {why}",))
        return (flat[0], sel), _build(c, job, flat[0])
    names = [o[2] for o in outcome]
    if len(set(names)) > 1:
        detail = "; ".join(f"rank {r}: {o}" for r, o in enumerate(names) if o != names[0])
        raise RuntimeError(f"{what} cannot run: ranks chose different algorithms: rank 0: {names[0]}; {detail}")
    if name and parse_algo_ref(name).shm:
        shm_engine(c._pcomm)                # collective on first use: every rank agreed on this name
    log.debug("pyhccl: %s -> %s", what, name)
    return (name, sel), plan


def _choose(c: Communicator, job: Job, shape: Call) -> tuple[str, Selection | None, bool]:
    """``(algorithm, selection, forced)``: a forced name valid for the op, else HCCL's selection."""
    op = shape.op
    if c._algo and parse_algo_ref(c._algo).name in flat_names(op):
        return c._algo, None, True
    hccl = shape.spec.hccl
    text = _override_for(c, shape)
    if text and parse_override(text).kind == "name":
        hccl = registry.get(text.strip()).op          # AllToAllVC names force AlltoAllv too
    try:
        normalize_op(hccl)
    except ValueError:                                  # no HCCL selector (Gather): pyhccl's first template
        return flat_names(op)[0], None, False
    inplace = shape.in_place and op in _SHARED_IN_PLACE
    sel = select_for(hccl, c.topology.info, _nbytes(shape, job.dtype), job.dtype, job.reduce_op, root=shape.root,
                     inplace=inplace, algo=text, tuning=c._tuning or "")
    return sel.algorithm, sel, sel.source == "override"


def _override_for(c: Communicator, shape: Call) -> str:
    """PYHCCL_ALGO text for this op: a plain HCCL name only where it names one of the op's algorithms."""
    text = c._override or ""
    if text and parse_override(text).kind == "name":
        try:
            resolve_name(shape.op, text.strip())
        except ValueError:
            return ""
    return text


def _build(c: Communicator, job: Job, name: str) -> Runner:
    call = job.call
    rank = c._env.rank
    ref = parse_algo_ref(name)
    name = ref.name
    if ref.shm and call.op in SHM_OPS:
        groups = [None] * call.nranks
        if name not in flat_names(call.op):
            layout, nlev = c.topology.layout, len(registry.get(name).levels)
            groups = [layout.algo_groups(r, nlev) for r in range(call.nranks)]
        plans = [build_plan(call, name, r, groups[r], uniform=c.topology.layout.uniform) for r in range(call.nranks)]
        return ShmRunner(compile_shm(call, plans, job.dtype.itemsize, rank), shm_engine(c._pcomm))
    # no rooted ops on the shared-memory engine (a root's own IN_PLACE): the same plan over MPI
    if name in flat_names(call.op):
        plan = build_plan(call, name, rank)
    else:
        layout = c.topology.layout
        groups = layout.algo_groups(rank, len(registry.get(name).levels))
        plan = build_plan(call, name, rank, groups, uniform=layout.uniform)
    return compile_plan(plan, job.dtype.itemsize, c._ub)


def _nbytes(call: Call, dtype: np.dtype) -> int:
    """HCCL's data size D: the per-rank (per-peer) block; ReduceScatterV's total; AllToAllV's largest block."""
    if call.op == "reduce_scatter_v":
        return sum(call.counts) * dtype.itemsize
    return max(call.data_count, 1 if call.op == "barrier" else 0) * dtype.itemsize


def _describe(call: Call, root: bool = True) -> str:
    if call.counts is not None:
        text = f"counts {list(call.counts)}"
    elif call.matrix is not None:
        text = f"matrix {[list(r) for r in call.matrix]}"
    else:
        text = str(call.count)
    text = text if len(text) < 80 else text[:76] + " ..."
    root = f" root {call.root}" if call.spec.rooted and root else ""
    return text + root + (" in place" if call.in_place and call.op != "broadcast" else "")
