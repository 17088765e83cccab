"""A call's algorithm: forced or selected on each rank, agreed by all ranks, built into a runnable plan.

Every call into the layers below that depends on the algorithm is made here, at three places:
:meth:`Planner.choose` (``select_for``), :meth:`Planner.build` (``build_plan``, ``compile_shm``,
``compile_plan``) and :meth:`Planner.agree` (the allgather every rank fails or succeeds together on).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from mpi4py import MPI

from ..algo import registry
from ..algo.names import AlgoRef, Runtime, parse_algo_ref
from ..core.call import OPS, Call
from ..plan.api import NotRunnableError, build_plan, flat_names, resolve_name
from ..run.base import Runner
from ..run.mpi import compile_plan
from ..run.timeout import allgather_timed
from ..run.shm import OPS as SHM_OPS
from ..run.shm import HierRunner, OneShotRunner, ShmRunner, compile_hier, compile_shm, node_engine, one_shot, shm_engine
from ..run.shm.engine import CMA_MIN_BYTES
from ..run.shm.oneshot import ONE_SHOT
from ..select import Selection, SelectionError, normalize_op, parse_override, select_for
from ..topo import Topology
from ..select import Profile
from ..tune.auto import AutoProfile
from ..tune.file import NATIVE
from .job import Job, describe, shared_shape

__all__ = ["Planner", "parse_algo"]

log = logging.getLogger("pyhccl")

#: Ops whose in-place flag every rank shares (MPI: IN_PLACE on all ranks or none).
_SHARED_IN_PLACE = frozenset({"allreduce", "all_gather", "reduce_scatter"})
#: pyhccl's template names, every op's, in listing order (AllReduce's first).
_TEMPLATES = tuple(dict.fromkeys(n for op in OPS for n in flat_names(op)))

#: An agreed algorithm: (the algorithm, None for the wrapped MPI; the selection behind it, if any).
Agreed = tuple[AlgoRef | None, Selection | None]


def parse_algo(text: str | None) -> tuple[AlgoRef | None, str | None]:
    """``(pyhccl template, None)`` for a template name (``@shm`` for the shared-memory engine),
    ``(None, text)`` for PYHCCL_ALGO text, ``(AlgoRef(name, SHM), name)`` for an HCCL name with ``@shm``
    (forced for its op, run on the engine; hierarchically on several nodes), ``(None, None)`` for none.

    pyhccl's template names win over HCCL_ALGO's bare template tokens ("NHR" runs the NHR
    template on all ranks); write ``allreduce:nhr`` for HCCL's meaning.

    Raises:
        ValueError: neither a template nor valid PYHCCL_ALGO text; the message lists the templates.
    """
    if not text:
        return None, None
    try:
        ref = parse_algo_ref(text)
    except ValueError:
        ref = None
    for name in _TEMPLATES if ref is not None else ():
        if name.lower() == ref.name.lower():
            return AlgoRef(name, ref.runtime), None
    if ref is not None and ref.shm:         # an HCCL name on the shared-memory engine: forced as PYHCCL_ALGO
        try:
            if parse_override(ref.name).kind == "name":
                return ref, ref.name
        except ValueError:
            pass
    try:
        parse_override(text)
    except ValueError as e:
        every = [str(AlgoRef(n, rt)) for rt in (Runtime.MPI, Runtime.SHM) for n in _TEMPLATES]
        raise ValueError(f"{e}; or one of pyhccl's templates: {', '.join(every)}") from None
    return None, text


class Planner:
    """Chooses, agrees on and builds the algorithm of a call, with one communicator's settings.

    Args:
        comm: the private communicator plans run on (and the shared-memory engine lives on).
        topology: the communicator's place in the machine (:func:`pyhccl.topo.comm_topology`).
        algo: a forced pyhccl template, or None.
        override: PYHCCL_ALGO text for HCCL's selection, or None.
        profile: the measured profile the selection uses (from the tuning file), or None.
        selection: the selector's settings (``mode``, ``expansion_mode``, ``tuner``; :func:`pyhccl.core.settings.selector`).
        ub_transfer_bytes: the largest message a step is sliced into.
        timeout: seconds a step may wait (None: no limit), on either runtime.
        cma: whether the ``@shm`` engine may read peers' arrays with cross-memory attach (PYHCCL_CMA).
    """

    def __init__(self, comm: MPI.Intracomm, topology: Topology, algo: AlgoRef | None, override: str | None,
                 profile: Profile | None, selection: dict, ub_transfer_bytes: int, timeout: float | None,
                 cma: bool = True) -> None:
        self.comm, self.rank, self.topology, self.machine = comm, comm.Get_rank(), topology, topology.machine
        self.algo, self.override, self.profile, self.selection = algo, override, profile, selection
        self.ub_transfer_bytes, self.timeout = ub_transfer_bytes, timeout
        self._several: bool | None = None
        self.cma = cma

    def choose(self, job: Job, shape: Call) -> tuple[AlgoRef, Selection | None, bool]:
        """``(algorithm, selection, forced)``: a forced name valid for the op, else HCCL's selection."""
        op = shape.op
        if self.algo and self.algo.name in flat_names(op):
            return self.algo, None, True
        hccl = shape.spec.hccl
        text = self.override_for(shape)
        if text and parse_override(text).kind == "name":
            hccl = registry.get(text.strip()).op          # AllToAllVC names force AlltoAllv too
        try:
            normalize_op(hccl)
        except ValueError:                                  # no HCCL selector (Gather): pyhccl's first template
            return AlgoRef(flat_names(op)[0]), None, False
        inplace = shape.in_place and op in _SHARED_IN_PLACE
        sel = select_for(hccl, self.topology.info, shape.hccl_nbytes(job.dtype.itemsize), job.dtype, job.reduce_op,
                         root=shape.root, inplace=inplace, algo=text, profile=self.profile, **self.selection)
        ref = parse_algo_ref(sel.algorithm)
        if self.algo is not None and self.algo.shm and sel.source == "override":
            ref = AlgoRef(ref.name, Runtime.SHM)            # "Name@shm": HCCL's name, on the engine
        return ref, sel, sel.source == "override"

    def override_for(self, shape: Call) -> str:
        """PYHCCL_ALGO text for this op: a plain HCCL name only where it names one of the op's algorithms."""
        text = self.override or ""
        if text and parse_override(text).kind == "name":
            try:
                resolve_name(shape.op, text.strip())
            except ValueError:
                return ""
        return text

    def agree(self, job: Job, shape: Call, comm: MPI.Intracomm, refusal: str = "") -> tuple[Agreed, Runner | None]:
        """Choose and build on every rank, then one allgather on ``comm``: same call, same algorithm, or fail
        together. ``refusal``: this rank's rank-local argument error, which every rank then raises.
        Returns the agreed algorithm and, when built here, its plan."""
        call, spec = job.call, job.call.spec
        what = f"{spec.hccl} of {describe(shape)} x {job.dtype}"
        digest = hashlib.blake2b(repr((shape, job.dtype.str, job.reduce_op)).encode(), digest_size=8).hexdigest()
        ref = sel = plan = None
        forced, status, detail = False, "ok", ""
        try:
            ref, sel, forced = self.choose(job, shape)
            plan = None if ref.name == NATIVE or ref.shm else self.build(job, ref)     # shm: after agreeing
        except (NotRunnableError, SelectionError) as e:
            status = "error" if forced or self.override_for(shape) else "fallback"
            detail = f"{type(e).__name__}: {str(e).splitlines()[0]}"
        except Exception as e:              # noqa: BLE001 - any failure must reach every rank, not hang them
            status, detail = "error", f"{type(e).__name__}: {e}"
        name = None if ref is None else str(ref)
        if refusal:
            status, detail = "refused", refusal
        op = f", op {job.reduce_op}" if spec.reduces else ""        # (in the digest: said where ranks disagree)
        outcome = allgather_timed(comm, (digest, what, name, status, detail, op), self.timeout,
                                  f"the algorithm agreement of {what}")
        if len({o[0] for o in outcome}) > 1:
            firsts = {}
            for r, o in enumerate(outcome):
                firsts.setdefault(o[0], f"rank {r}: {o[1]}{o[5]}")
            raise ValueError(f"ranks disagree on the {spec.hccl} call; {'; '.join(firsts.values())}")
        refused: dict[str, list[int]] = {}
        for r, o in enumerate(outcome):
            if o[3] == "refused":
                refused.setdefault(o[4], []).append(r)
        if refused:
            text = "; ".join(f"rank{'s' * (len(rs) > 1)} {', '.join(map(str, rs))}: {d}" for d, rs in refused.items())
            raise ValueError(f"{what}: {text} (every rank raises this; no rank ran the call)")
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
            return (AlgoRef(flat[0]), sel), self.build(job, AlgoRef(flat[0]))
        names = [o[2] for o in outcome]
        if len(set(names)) > 1:
            detail = "; ".join(f"rank {r}: {o}" for r, o in enumerate(names) if o != names[0])
            raise RuntimeError(f"{what} cannot run: ranks chose different algorithms: rank 0: {names[0]}; {detail}")
        if ref and ref.shm:
            self.several_nodes()            # collective on first use: every rank agreed on this name
        log.debug("pyhccl: %s -> %s", what, name)
        return (ref, sel), plan

    def one_shot_max(self, call: Call) -> int | None:
        """The machine profile's crossover for ``call``'s one-step Mesh: inputs of up to that many bytes run on
        the slots, larger ones read the peers' arrays in place (cross-memory attach); None: the default rules
        (slots up to ONE_SHOT_MAX_BYTES, cross-memory attach from CMA_MIN_BYTES)."""
        prof = self.profile
        return prof.one_shot_max(call.spec.hccl) if isinstance(prof, AutoProfile) else None

    def several_nodes(self) -> bool:
        """Whether the ranks span several nodes (``@shm`` then runs hierarchically); collective the first time."""
        if self._several is None:
            try:
                self.engine()
                self._several = False
            except ValueError:              # raised alike on every rank: not all on one node
                self._several = True
                node_engine(self.comm)
        return self._several

    def engine(self):
        """The shared-memory engine of this communicator (collective on first use; ValueError off one node)."""
        return shm_engine(self.comm, self.cma)

    def build(self, job: Job, ref: AlgoRef) -> Runner:
        """The runnable plan of ``ref`` for this rank's part of ``job``."""
        call, rank, name = job.call, self.rank, ref.name
        if ref.shm and call.op == "reduce":     # every rank compiles every rank's plan: out of place on all
            call = shared_shape(call)
        if ref.shm and call.op in SHM_OPS and self.several_nodes():      # level 0 on the node's window, the rest MPI
            ne = node_engine(self.comm)
            plans = [build_plan(call, name, r, self.machine) if ne.node[r] == ne.node[rank] else None
                     for r in range(call.nranks)]
            alias = call.in_place or call.op == "broadcast"
            return HierRunner(compile_hier(plans, rank, ne.node, ne.local, job.dtype.itemsize, alias), ne)
        most = self.one_shot_max(call) if ref.shm else None
        if ref.shm and one_shot(call, name, job.dtype.itemsize, most):
            return OneShotRunner(call, rank, job.dtype.itemsize, self.engine())     # one flag barrier on slots
        if ref.shm and call.op in SHM_OPS:
            plans = [build_plan(call, name, r, self.machine) for r in range(call.nranks)]
            eng = self.engine()
            least = 0 if most is not None and ONE_SHOT.get(call.op) == name else CMA_MIN_BYTES
            return ShmRunner(compile_shm(call, plans, job.dtype.itemsize, rank,
                                         eng.cma_for(call, job.dtype.itemsize, least)), eng)
        # Gather and Scatter (a root's own IN_PLACE gives it another plan) run their plan over MPI also on @shm
        plan = build_plan(call, name, rank, self.machine)
        return compile_plan(plan, job.dtype.itemsize, self.ub_transfer_bytes)

