"""The dispatcher: runs a Communicator's collectives and owns its caches.

One call: the warm path (the same argument objects as a recent call: straight to the plan), else
parse -> (check) -> algorithm (agreed once per call shape) -> plan (built once per Call) -> run.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any, Callable

from mpi4py import MPI

from ..run.base import Runner
from ..run.timeout import CollectiveTimeoutError
from ..run.pool import ScratchPool
from ..select import Selection
from ..tune.auto import AutoProfile
from ..tune.file import NATIVE
from .agree import Agreed, Planner
from .buffers import SUPPORTED_DTYPES, SUPPORTED_OPS
from .check import CheckError, Checker, abort
from .job import Env, Job, job_key, shared_shape
from .nonblocking import Starter
from .parsers import PARSERS
from .placed import Placed
from .warm import WarmCache

__all__ = ["Dispatcher"]

log = logging.getLogger("pyhccl")

#: Agreed algorithms and compiled plans kept (least recently used go first).
PLAN_CACHE_SIZE = 64
#: Methods that always run one HCCL op: where the machine profile has no fast path for it, the wrapped MPI's own
#: method runs the call, unparsed (parsing Alltoallv gathers every rank's counts: more than MPICH's whole call).
_ONE_OP = {"Alltoallv": "AllToAllV", "Allgatherv": "AllGatherV", "Scatter": "Scatter", "Gather": "Gather",
           "Barrier": "Barrier"}


class Dispatcher:
    """Runs collectives for one Communicator: its caches, its settings, the path of a call.

    Args:
        comm: the wrapped communicator (native MPI: fallbacks, the profile's native choice, the abort).
        pcomm: the private duplicate pyhccl's plans run on, in HCCL's numbering (``placed``).
        planner: chooses, agrees on and builds algorithms (:class:`pyhccl.comm.agree.Planner`).
        gcomm: the private duplicate in ``comm``'s rank order the library's own gathers run on (the
            check, the parsers' count exchange, the agreement); default ``pcomm``.
        placed: relabels a call into HCCL's numbering when the launcher placed the ranks of a node
            apart (:class:`pyhccl.comm.placed.Placed`); None under block placement.
        check: run the consistency check before every collective.
        timeout: seconds a step may wait (None: no limit).
        abort_on_timeout: abort the job after a timeout instead of raising.

    Attributes:
        agree_comm: the communicator the algorithm agreement gathers on (``gcomm``); a test may put a
            stand-in there to play the other ranks' answers.
        last_selection: the selection behind the last collective.
        fallbacks: calls handed to the wrapped communicator.
        pool: scratch space of the plans (``Communicator.share_scratch`` shares one between communicators).
    """

    def __init__(self, comm: MPI.Intracomm, pcomm: MPI.Intracomm, planner: Planner, *, check: bool,
                 timeout: float | None, abort_on_timeout: bool, gcomm: MPI.Intracomm | None = None,
                 placed: Placed | None = None) -> None:
        gcomm = pcomm if gcomm is None else gcomm
        self.comm, self.pcomm, self.agree_comm, self.planner, self.placed = comm, pcomm, gcomm, planner, placed
        self.check, self.timeout, self.abort_on_timeout = check, timeout, abort_on_timeout
        self.agreed: OrderedDict[tuple, Agreed] = OrderedDict()
        self.plans: OrderedDict[tuple, Runner] = OrderedDict()
        self.warm = WarmCache()
        self.last_selection: Selection | None = None
        self.fallbacks = 0
        self.pool = ScratchPool()
        self.stage = ScratchPool()
        self.checker = Checker(gcomm, comm.Get_rank(), check, timeout)
        gather = gcomm.allgather if not (check or timeout) else self.checker.allgather
        self.env = Env(comm.Get_rank(), comm.Get_size(), self.stage.get, gather)
        self.starter = Starter(self)

    def run(self, method: str, *args: Any) -> None:
        """Run ``method`` (a Communicator method's name) on its mpi4py arguments."""
        warm = self.warm.last           # WarmCache.lookup, inline (None while checking: nothing is remembered then)
        if warm is None or not warm.same(method, args):
            warm = None if self.check else self.warm.find(method, args)
            if warm is None:
                return self._full(method, args)
        self.last_selection = warm.selection
        if warm.go is not None:         # the plan bound to these very arrays
            return warm.go()
        if warm.native is not None:     # the measured profile chose native MPI
            return warm.native(*args)
        job, plan = warm.job, warm.plan
        try:
            plan.run(self.pcomm, (job.inp, job.out, self.pool.get(job.dtype, plan.scratch_count)), job.ufunc,
                     self.timeout)
        except CollectiveTimeoutError as e:
            if self.abort_on_timeout:
                abort(self.comm, self.env.rank, e, depth=1)
            raise
        return None

    def start(self, method: str, *args: Any) -> MPI.Request:
        """Start ``method`` (a blocking method's name) as a nonblocking collective; its request."""
        return self.starter.start(method, args, False)

    def init(self, method: str, *args: Any) -> MPI.Prequest:
        """``method`` as a persistent collective (plan compiled and arrays bound now); its inactive request."""
        return self.starter.start(method, args, True)

    def _full(self, method: str, args: tuple) -> None:
        """Parse -> (check) -> Call -> algorithm -> plan -> run; remembers the call for the warm path."""
        self.warm.last = None           # the full path sets last_selection and may remember a call
        prof, op = self.planner.profile, _ONE_OP.get(method)
        if op and not self.check and type(prof) is AutoProfile and not prof.has_fast_path(op):
            self.last_selection = None          # the machine profile's choice for the op: MPI's own, as mpi4py runs it
            return getattr(self.comm, method)(*args)
        refused = self.env.refused      # rank-local refusals of this call (pyhccl.comm.job.refuse)
        refused.clear()
        self.env.after.clear()
        try:
            job = self._parse_checked(method, args) if self.check else PARSERS[method](self.env, *args)
            if isinstance(job, str):
                return self.fallback(method, job, args)
            call = job.call
            if call.data_count == 0 and call.op != "barrier":
                if refused:
                    raise refused[0]
                return None
            key = job_key(job)          # in the communicator's ranks, as the check compared it
            job, finish = (job, None) if self.placed is None else self.placed(job)
            plan = self._compiled(job, key, refused)
            native = plan is None and self.last_selection is not None and self.last_selection.algorithm == NATIVE
            if refused:                 # an agreed shape: the others run it; so does this rank, then it raises
                if plan is not None:
                    self._execute(job, plan, finish)
                raise ValueError(f"rank {self.env.rank} refused {method}: {refused[0]} (the other ranks "
                                 "finished the call)") from refused[0]
            if (plan is not None or native) and not job.device and not self.check and finish is None:
                self.warm.remember(method, args, job, plan, self.last_selection,
                                   getattr(self.comm, method) if plan is None else None, self.timeout is None)
            if native:
                return getattr(self.comm, method)(*args)          # the measured profile chose native MPI
            if plan is None:
                return self.fallback(method, "no pyhccl algorithm runs it", args)
            self._execute(job, plan, finish)
            for write_back in self.env.after:
                write_back()
        except CollectiveTimeoutError as e:
            if self.abort_on_timeout:
                abort(self.comm, self.env.rank, e, depth=2)
            raise
        return None

    def _execute(self, job: Job, plan: Runner, finish: Callable[[], None] | None = None) -> None:
        if job.device is None:
            plan.run(self.pcomm, (job.inp, job.out, self.pool.get(job.dtype, plan.scratch_count)), job.ufunc,
                     self.timeout)
        else:
            job.device.run(plan, self.pcomm, job, self.timeout)         # on the device: pyhccl/gpu.py
        if finish is not None:
            finish()                    # staged blocks back to the user's order (pyhccl.comm.placed)

    def _parse_checked(self, method: str, args: tuple, env: Env | None = None) -> Job | str:
        """The parser under the check: an argument error on some ranks fails every rank, not a hang."""
        checker = self.checker
        checker.begin(method)
        try:
            job = PARSERS[method](env or self.env, *args)
        except (CollectiveTimeoutError, CheckError):
            raise
        except Exception as e:
            checker.check(method, e)
            raise
        if not isinstance(job, Job):
            checker.check(method, job)
            return job
        key = job_key(job)
        hit = self.agreed.get(key)
        if not checker.check(method, job, key, hit) and hit is not None:
            del self.agreed[key]        # some rank has not agreed on this shape: all agree afresh
        return job

    def _compiled(self, job: Job, key: tuple, refused: list | None = None) -> Runner | None:
        """The compiled plan for this call: algorithm agreed once per shape, plan built once per Call.

        ``job`` is in HCCL's numbering, ``key`` the agreement key in the communicator's (:func:`job_key`
        before relabelling); ``refused``: this rank's refusals of the call; the agreement makes every rank
        raise them.
        """
        hit = self.agreed.get(key)
        if hit is None:
            hit, plan = self.planner.agree(job, shared_shape(job.call), self.agree_comm,
                                           str(refused[0]) if refused else "")
            _remember(self.agreed, key, hit)
        else:
            self.agreed.move_to_end(key)
            plan = None
        ref, self.last_selection = hit
        if ref is None or ref.name == NATIVE:
            return None
        pkey = (job.call, job.dtype.str, ref)
        compiled = self.plans.get(pkey)
        if compiled is None:
            compiled = _remember(self.plans, pkey, plan or self.planner.build(job, ref))
        else:
            self.plans.move_to_end(pkey)
        return compiled

    def fallback(self, method: str, reason: str, args: tuple) -> Any:
        """Hand the call to the wrapped communicator, counted in ``fallbacks``; returns what it returns."""
        self.fallbacks += 1
        log.debug("pyhccl: %s goes to the wrapped communicator: %s", method, reason)
        try:
            return getattr(self.comm, method)(*args)
        except Exception as e:
            e.add_note(f"pyhccl handed {method} to the wrapped MPI communicator: {reason}. pyhccl runs "
                       f"{', '.join(SUPPORTED_OPS)} on contiguous buffers of predefined numeric datatypes "
                       f"({', '.join(SUPPORTED_DTYPES)}); the wrapped MPI runs the rest when it supports it, "
                       "and this error is MPI's")
            raise


def _remember(cache: OrderedDict, key: tuple, value: Any) -> Any:
    cache[key] = value
    if len(cache) > PLAN_CACHE_SIZE:
        cache.popitem(last=False)
    return value
