"""Nonblocking and persistent collectives: the same parse -> agree -> plan as the blocking call, run by a request.

``Iallreduce(...)`` parses and checks its arguments, agrees on the algorithm (the first call of a
shape, as the blocking call does) and compiles the plan exactly like ``Allreduce(...)``; instead of
running the plan it returns a :class:`pyhccl.comm.requests.Request` whose progress runs it step by
step. ``Allreduce_init(...)`` does all of that once and returns a :class:`pyhccl.comm.requests.Prequest`
that replays the plan, with its arrays and scratch bound, at every ``Start``.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from mpi4py import MPI
from mpi4py.typing import BufSpec, BufSpecB, BufSpecV, InPlace

from ..algo.names import AlgoRef
from ..run.mpi import CompiledPlan
from ..run.progress import Progress
from ..run.timeout import CollectiveTimeoutError
from ..tune.file import NATIVE
from .check import abort
from .job import Env, job_key
from .parsers import PARSERS
from .placed import RENAMES_ONLY
from .requests import AVAILABLE, start
from .warm import WarmCache

if TYPE_CHECKING:
    from .dispatch import Dispatcher

__all__ = ["Starter", "NonblockingMethods"]

#: Tags of nonblocking runs (one per start, cycling) and of persistent requests (one per request, cycling):
#: apart from each other and from the blocking calls' (``pyhccl.run.transport.TAG``); MPI's tag bound is >= 32767.
NB_TAGS, PERSISTENT_TAGS, TAG_CYCLE = 0x5000, 0x6000, 0x1000
#: MPI-runtime builds of ``@shm`` algorithms kept for nonblocking calls.
MPI_PLANS_KEPT = 64


def _fresh(dtype: np.dtype, count: int) -> np.ndarray:
    return np.empty(count, dtype)


class Starter:
    """Starts one Dispatcher's nonblocking and persistent collectives.

    Staging space and scratch are the request's own (fresh arrays, not the dispatcher's pools), so
    requests outstanding together never share memory; each start gets its own tag.
    """

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.d = dispatcher
        env = dispatcher.env
        self.env = Env(env.rank, env.size, _fresh, env.allgather)
        self.starts = itertools.count()
        self.inits = itertools.count()
        self.mpi_plans: dict[tuple, CompiledPlan] = {}
        self.warm = WarmCache()         # nonblocking calls made again with the same objects: straight to the plan
        self.names: dict[tuple, str] = {}

    def start(self, method: str, args: tuple, persistent: bool) -> MPI.Request:
        """The request of ``method`` (a blocking method's name) on ``args``: started, or persistent and inactive."""
        d = self.d
        native = f"{method}_init" if persistent else f"I{method[0].lower()}{method[1:]}"
        if not AVAILABLE:
            return d.fallback(native, "this MPI has no MPIX_Grequest_class_create (MPICH's extended generalized "
                                      "requests), which pyhccl's requests need", args)
        hit = None if persistent or d.check else self.warm.lookup(method, args)
        if hit is not None:
            d.last_selection = hit.selection
            return self._run(hit.plan, hit.job, self.names[hit.key], hit.selection, False)
        env = self.env
        refused = env.refused
        refused.clear()
        env.after.clear()
        try:
            job = d._parse_checked(method, args, env) if d.check else PARSERS[method](env, *args)
            if isinstance(job, str):
                return d.fallback(native, job, args)
            if env.after or _derived(args):     # packed by MPI: the write-back needs the blocking call
                env.after.clear()
                return d.fallback(native, "a derived datatype is packed and written back around a blocking "
                                          "call only", args)
            if job.call.data_count == 0 and job.call.op != "barrier":
                if refused:
                    raise refused[0]
                return getattr(d.comm, native)(*args)               # nothing to move: MPI's empty request
            key = job_key(job)          # in the communicator's ranks, as the check compared it
            if d.placed is not None:    # a non-block placement: plans run in HCCL's numbering
                if job.call.op not in RENAMES_ONLY:
                    return d.fallback(native, "under this placement the op's blocks are staged into HCCL's "
                                              "order around each call, which a request does not do", args)
                job, _ = d.placed(job)
            plan = d._compiled(job, key, refused)
            ref, sel = d.agreed[key]
            copies = False
            if persistent:              # init is collective: a refusal anywhere fails every rank's init
                copies = _agree_init(env, native, refused, plan is not None and job.device is None
                                     and job.inp.size > 0 and not _holds(args, job.inp))
            elif plan is None and refused:
                raise refused[0]
            if plan is None and sel is not None and sel.algorithm == NATIVE:
                return getattr(d.comm, native)(*args)               # the measured profile chose native MPI
            if plan is None:
                return d.fallback(native, "no pyhccl algorithm runs it", args)
            if job.device is not None:
                return d.fallback(native, "device arrays: pyhccl's requests run host arrays", args)
            if copies:
                return d.fallback(native, "this form copies its input at each call (an in-place or read-only "
                                          "form HCCL has no plan for)", args)
            runner = plan if isinstance(plan, CompiledPlan) else self._over_mpi(job, ref)
            name = str(AlgoRef(ref.name)) if runner is not plan else str(ref)
            if refused:                 # the others run the call: so does this rank, then it raises (as blocking)
                self._progress(runner, job, False).wait()
                raise ValueError(f"rank {env.rank} refused {native}: {refused[0]} (the other ranks finished "
                                 "the call)") from refused[0]
            if not persistent:
                self._remember(method, args, job, runner, sel, name)
            return self._run(runner, job, name, sel, persistent)
        except CollectiveTimeoutError as e:
            if d.abort_on_timeout:
                abort(d.comm, env.rank, e, depth=2)
            raise

    def _progress(self, runner: CompiledPlan, job: Any, persistent: bool) -> Progress:
        """A run of ``runner`` on the job's arrays with scratch of its own and the next tag."""
        tag = (PERSISTENT_TAGS + next(self.inits) % TAG_CYCLE) if persistent else \
            (NB_TAGS + next(self.starts) % TAG_CYCLE)
        bufs = (job.inp, job.out, np.empty(runner.scratch_count, job.dtype))
        return Progress(runner, self.d.pcomm, bufs, job.ufunc, tag, self.d.timeout)

    def _run(self, runner: CompiledPlan, job: Any, name: str, sel: Any, persistent: bool) -> MPI.Request:
        return start(self._progress(runner, job, persistent), name, sel, self._failed, persistent)

    def _remember(self, method: str, args: tuple, job: Any, runner: CompiledPlan, sel: Any, name: str) -> None:
        """Remember a started call for the warm path (:class:`pyhccl.comm.warm.WarmCache`: same rules as blocking)."""
        self.warm.remember(method, args, job, runner, sel, None)
        key = (method, *map(id, args))
        if key in self.warm.entries:
            self.names[key] = name
            if len(self.names) > 2 * len(self.warm.entries):
                self.names = {k: v for k, v in self.names.items() if k in self.warm.entries}

    def _over_mpi(self, job: Any, ref: AlgoRef) -> CompiledPlan:
        """The algorithm of an ``@shm`` agreement on the MPI runtime: the window engine runs a call to its end."""
        key = (job.call, job.dtype.str, ref.name)
        plan = self.mpi_plans.get(key)
        if plan is None:
            if len(self.mpi_plans) >= MPI_PLANS_KEPT:
                del self.mpi_plans[next(iter(self.mpi_plans))]        # the oldest goes first
            plan = self.mpi_plans[key] = self.d.planner.build(job, AlgoRef(ref.name))
        return plan

    def _failed(self, e: BaseException) -> None:
        """A run's progress raised (inside a test or wait): a timeout aborts the job when asked to."""
        if isinstance(e, CollectiveTimeoutError) and self.d.abort_on_timeout:
            abort(self.d.comm, self.env.rank, e, depth=0)


def _agree_init(env: Env, method: str, refused: list, copies: bool) -> bool:
    """A persistent init's one allgather: any rank's refusal makes every rank raise (no request is made);
    returns whether some rank's form copies its input at each call (then every rank hands the init to MPI)."""
    mine = (str(refused[0]) if refused else "", copies)
    every = env.allgather(mine)
    bad = [(r, e) for r, (e, _) in enumerate(every) if e]
    if bad:
        text = "; ".join(f"rank {r}: {e}" for r, e in bad)
        raise ValueError(f"{method}: {text} (every rank raises this; no request was made)")
    return any(c for _, c in every)


def _derived(args: tuple) -> bool:
    """Whether a buffer spec in ``args`` names a derived (not predefined) datatype."""
    return any(isinstance(x, MPI.Datatype) and x != MPI.DATATYPE_NULL and not x.is_predefined
               for a in args for x in (a if isinstance(a, (list, tuple)) else (a,)))


def _holds(args: tuple, arr: np.ndarray) -> bool:
    """Whether ``arr`` lies in memory of one of the user's arguments (not in a copy the parser made)."""
    for a in args:
        for x in (a if isinstance(a, (list, tuple)) else (a,)):
            if x is None or x is MPI.IN_PLACE or isinstance(x, (int, MPI.Op, MPI.Datatype)):
                continue
            try:
                if np.may_share_memory(np.asarray(x), arr):
                    return True
            except (TypeError, ValueError, BufferError):
                continue
    return False


class NonblockingMethods:
    """mpi4py's nonblocking (``I*``) and persistent (``*_init``) collectives of the ops pyhccl runs.

    Each returns an ``MPI.Request`` (persistent: ``MPI.Prequest``) that MPI's own ``Wait``/``Test``/
    ``Waitall``/``Testall``/``Waitany``/``Testany`` take in lists with any other request; see
    docs/communicator.md "Nonblocking and persistent collectives".
    """

    _dispatch: Dispatcher

    def Iallreduce(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpec, op: MPI.Op = MPI.SUM) -> MPI.Request:
        return self._dispatch.start("Allreduce", sendbuf, recvbuf, op)

    def Ireduce(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpec | None, op: MPI.Op = MPI.SUM,
                root: int = 0) -> MPI.Request:
        return self._dispatch.start("Reduce", sendbuf, recvbuf, op, root)

    def Ibcast(self, buf: BufSpec, root: int = 0) -> MPI.Request:
        return self._dispatch.start("Bcast", buf, root)

    def Iallgather(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpecB) -> MPI.Request:
        return self._dispatch.start("Allgather", sendbuf, recvbuf)

    def Iallgatherv(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpecV) -> MPI.Request:
        return self._dispatch.start("Allgatherv", sendbuf, recvbuf)

    def Igather(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpecB | None, root: int = 0) -> MPI.Request:
        return self._dispatch.start("Gather", sendbuf, recvbuf, root)

    def Iscatter(self, sendbuf: BufSpecB | None, recvbuf: BufSpec | InPlace, root: int = 0) -> MPI.Request:
        return self._dispatch.start("Scatter", sendbuf, recvbuf, root)

    def Ireduce_scatter_block(self, sendbuf: BufSpecB | InPlace, recvbuf: BufSpec | BufSpecB,
                              op: MPI.Op = MPI.SUM) -> MPI.Request:
        return self._dispatch.start("Reduce_scatter_block", sendbuf, recvbuf, op)

    def Ireduce_scatter(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpec, recvcounts: Sequence[int] | None = None,
                        op: MPI.Op = MPI.SUM) -> MPI.Request:
        return self._dispatch.start("Reduce_scatter", sendbuf, recvbuf, recvcounts, op)

    def Ialltoall(self, sendbuf: BufSpecB | InPlace, recvbuf: BufSpecB) -> MPI.Request:
        return self._dispatch.start("Alltoall", sendbuf, recvbuf)

    def Ialltoallv(self, sendbuf: BufSpecV | InPlace, recvbuf: BufSpecV) -> MPI.Request:
        return self._dispatch.start("Alltoallv", sendbuf, recvbuf)

    def Ibarrier(self) -> MPI.Request:
        return self._dispatch.start("Barrier")

    def Allreduce_init(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpec, op: MPI.Op = MPI.SUM,
                       info: MPI.Info = MPI.INFO_NULL) -> MPI.Prequest:
        return self._dispatch.init("Allreduce", sendbuf, recvbuf, op)

    def Reduce_init(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpec | None, op: MPI.Op = MPI.SUM, root: int = 0,
                    info: MPI.Info = MPI.INFO_NULL) -> MPI.Prequest:
        return self._dispatch.init("Reduce", sendbuf, recvbuf, op, root)

    def Bcast_init(self, buf: BufSpec, root: int = 0, info: MPI.Info = MPI.INFO_NULL) -> MPI.Prequest:
        return self._dispatch.init("Bcast", buf, root)

    def Allgather_init(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpecB,
                       info: MPI.Info = MPI.INFO_NULL) -> MPI.Prequest:
        return self._dispatch.init("Allgather", sendbuf, recvbuf)

    def Allgatherv_init(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpecV,
                        info: MPI.Info = MPI.INFO_NULL) -> MPI.Prequest:
        return self._dispatch.init("Allgatherv", sendbuf, recvbuf)

    def Gather_init(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpecB | None, root: int = 0,
                    info: MPI.Info = MPI.INFO_NULL) -> MPI.Prequest:
        return self._dispatch.init("Gather", sendbuf, recvbuf, root)

    def Scatter_init(self, sendbuf: BufSpecB | None, recvbuf: BufSpec | InPlace, root: int = 0,
                     info: MPI.Info = MPI.INFO_NULL) -> MPI.Prequest:
        return self._dispatch.init("Scatter", sendbuf, recvbuf, root)

    def Reduce_scatter_block_init(self, sendbuf: BufSpecB | InPlace, recvbuf: BufSpec | BufSpecB,
                                  op: MPI.Op = MPI.SUM, info: MPI.Info = MPI.INFO_NULL) -> MPI.Prequest:
        return self._dispatch.init("Reduce_scatter_block", sendbuf, recvbuf, op)

    def Reduce_scatter_init(self, sendbuf: BufSpec | InPlace, recvbuf: BufSpec,
                            recvcounts: Sequence[int] | None = None, op: MPI.Op = MPI.SUM,
                            info: MPI.Info = MPI.INFO_NULL) -> MPI.Prequest:
        return self._dispatch.init("Reduce_scatter", sendbuf, recvbuf, recvcounts, op)

    def Alltoall_init(self, sendbuf: BufSpecB | InPlace, recvbuf: BufSpecB,
                      info: MPI.Info = MPI.INFO_NULL) -> MPI.Prequest:
        return self._dispatch.init("Alltoall", sendbuf, recvbuf)

    def Alltoallv_init(self, sendbuf: BufSpecV | InPlace, recvbuf: BufSpecV,
                       info: MPI.Info = MPI.INFO_NULL) -> MPI.Prequest:
        return self._dispatch.init("Alltoallv", sendbuf, recvbuf)

    def Barrier_init(self, info: MPI.Info = MPI.INFO_NULL) -> MPI.Prequest:
        return self._dispatch.init("Barrier")
