"""verify(): one collective call on one emulated machine, every rank's plan through the simulator.

The algorithm is the one HCCL selects for the machine (:mod:`pyhccl.select`) or a name given
by the caller; a name whose declared attributes exclude the machine is "not-eligible", one
whose executor pyhccl cannot build is "not-runnable", and only a plan set the simulator
rejects (or a builder that crashes) is "failed".
"""

from __future__ import annotations

import gc
import signal
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Sequence

from ..algo import registry
from ..algo.attrs import check_op, check_topo
from ..algo.dtypes import DATATYPE_SIZE, parse_dtype, parse_reduce_op
from ..algo.predicates import op_call
from ..core.call import OPS, Call, canonical_op, hccl_op
from ..core.call import make_call as core_make_call
from ..plan.api import (NotRunnableError, build_plan, clear_caches as clear_plan_caches, flat_names, resolve_name,
                        rotation_built)
from .memory import BuildGuard, MemoryBudgetError, require_matrices, task
from .quotient import QUOTIENT_MIN_RANKS
from .sim import SimReport, SimulationError, simulate
from .uniform import simulate_rank0
from ..select import SelectionError, select_for
from ..topo.machine import Machine, machine
from .cases import uneven_counts, uneven_matrix

__all__ = ["VerifyResult", "STATUSES", "DEFAULT_COUNT", "verify", "make_call", "check", "machine", "Machine",
           "hccl_op_name", "no_call", "forget_plans"]

#: What a result can say: passed, the simulator (or a builder) found a fault, the attributes (or
#: HCCL's selection) exclude the call, pyhccl cannot build the algorithm.
STATUSES = ("ok", "failed", "not-eligible", "not-runnable")
#: The count verify() uses when none is given (a prime: uneven slices everywhere).
DEFAULT_COUNT = 1_000_003


@dataclass(frozen=True)
class VerifyResult:
    """The outcome of one verified call.

    Attributes:
        status: one of :data:`STATUSES`; ``ok`` is ``status == "ok"``.
        algorithm: the name that ran (or would have), None when selection found none.
        error: why it is not ok: the simulator's report (with the plan grid), the attribute
            that excludes the machine, or the builder's reason.
        rounds: communication rounds of the slowest rank; bytes: most bytes one rank sends.
        seconds: building and simulating, wall clock.
        selected: the algorithm is HCCL's selection (``algo=None``).
        notes: remarks that do not change the status (a soft check HCCL's policy would apply,
            a selection whose attributes would reject it).
    """

    status: str
    op: str
    topo: str
    nranks: int
    algorithm: str | None
    call: Call | None = None
    error: str = ""
    rounds: int | None = None
    bytes: int | None = None
    seconds: float = 0.0
    selected: bool = False
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def __str__(self) -> str:
        head = f"{self.op} {self.algorithm or '-'} on {self.topo} ({self.nranks} ranks): {self.status}"
        if self.ok:
            return f"{head}, {self.rounds} rounds, {self.bytes} bytes sent by the busiest rank"
        return f"{head}: {self.error.splitlines()[0] if self.error else ''}"


def hccl_op_name(op: str) -> str | None:
    """HCCL's op type for ``op`` (:func:`~pyhccl.core.call.hccl_op`); None where HCCL registers none (Gather)."""
    name = hccl_op(op)
    return name if registry.names(name) else None


def make_call(op: str, nranks: int, *, count: int | None = None, root: int | None = None,
              counts: Sequence[int] | None = None, displs: Sequence[int] | None = None,
              send_count_matrix: Sequence[Sequence[int]] | None = None, in_place: bool = False,
              items: Sequence[Sequence[tuple[str, int, int]]] | None = None) -> Call:
    """:func:`pyhccl.core.call.make_call` with verify()'s defaults: :data:`DEFAULT_COUNT`, uneven V counts.

    Raises:
        ValueError: an argument the op does not take, or a bad value (from :class:`Call`).
        MemoryBudgetError: an AlltoAllV's N x N send-count matrix, made here, would not fit in the memory available.
    """
    vector = OPS[canonical_op(op)].vector
    if count is None and vector == "counts" and counts is None:
        counts = uneven_counts(nranks, canonical_op(op))
    if vector == "matrix" and send_count_matrix is None:
        require_matrices(canonical_op(op), nranks, 1)
        if count is None:
            send_count_matrix = uneven_matrix(nranks, canonical_op(op))
    return core_make_call(op, nranks, count=DEFAULT_COUNT if count is None else count, root=root, counts=counts,
                          displs=displs, send_count_matrix=send_count_matrix, in_place=in_place, items=items)


def verify(op: str, topo: Any, *, count: int | None = None, dtype: str = "FP32", reduce_op: str | None = None,
           root: int | None = None, algo: str | None = None, expansion_mode: str | None = None,
           counts: Sequence[int] | None = None, displs: Sequence[int] | None = None,
           send_count_matrix: Sequence[Sequence[int]] | None = None, in_place: bool = False,
           items: Sequence[Sequence[tuple[str, int, int]]] | None = None, device: str = "950",
           timeout: float | None = None) -> VerifyResult:
    """Verify one collective call on an emulated machine in the simulator.

    Args:
        op: HCCL's op name ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce",
            "Scatter", "AllToAll", "AllToAllV", "AllToAllVC", "AllGatherV", "ReduceScatterV",
            "Barrier") or pyhccl's ("allreduce", "all_gather", "gather", ...).
        topo: the machine: a spec such as ``"4x8x8"`` or ``"1x1x8;level0=mesh+clos"``, or
            TopoMeta lists such as ``[[[0,1,2,3],[0,1]]]``.
        count: HCCL's count (per-rank input of AllReduce, AllGather, Broadcast, Reduce; per-rank
            output of ReduceScatter and Scatter; per-peer block of AllToAll); default
            :data:`DEFAULT_COUNT`, and for the V ops uneven pseudo-random counts.
        dtype: an HCCL dtype name ("FP32", "BFP16", "HIF8", "FP8E4M3", ...); only its size and
            the attribute checks matter.
        reduce_op: "sum" (default), "prod", "max" or "min".
        root: the root of Broadcast, Reduce, Gather, Scatter (default 0).
        algo: an HCCL algorithm name or one of pyhccl's templates for the op; None runs what
            HCCL's selection picks for this machine and call.
        expansion_mode: HCCL_OP_EXPANSION_MODE for the selection ("AI_CPU", "AIV", "CCU_MS", ...).
        counts, displs: AllGatherV / ReduceScatterV per-rank counts and offsets.
        send_count_matrix: AllToAllV(C): ``[i][j]`` elements from rank i to rank j.
        items: BatchSendRecv: per rank a list of ``("send" | "recv", peer, count)`` (a pair may
            repeat; :func:`~pyhccl.core.p2p.pair_items` gives a Send/Recv pair); default: SendRecv,
            every rank sends ``count`` to the next rank and receives it from the previous one.
        in_place: the in-place form (HCCL's sendBuf == recvBuf).
        device: the emulated device for the selection ("950", "960", "910_93").
        timeout: give up after this many seconds with status "failed" (None: no limit).

    Returns:
        a :class:`VerifyResult`; only bad arguments raise.

    Raises:
        ValueError: unknown op, dtype, reduce op or algorithm name; a malformed topology; counts
            the op does not take.
    """
    m = machine(topo)
    try:
        call = make_call(op, m.nranks, count=count, root=root, counts=counts, displs=displs,
                         send_count_matrix=send_count_matrix, in_place=in_place, items=items)
    except MemoryBudgetError as e:          # (the default AlltoAllV matrix at thousands of ranks)
        return no_call(canonical_op(op), m, algo, e)
    if algo is not None:
        algo = resolve_name(call.op, algo)
    return check(call, algo, m, dtype=dtype, reduce_op=reduce_op or "sum", expansion_mode=expansion_mode,
                 hccl_op=hccl_op_name(op), device=device, timeout=timeout)


def no_call(op: str, m: Machine, algo: str | None, e: MemoryBudgetError) -> VerifyResult:
    """The failure of ``op`` on ``m`` whose call could not be made (its AlltoAllV matrices past the memory)."""
    return VerifyResult("failed", op, m.text, m.nranks, algo, error=str(e))


def check(call: Call, algo: str | None, m: Machine, *, dtype: str = "FP32", reduce_op: str = "sum",
          expansion_mode: str | None = None, hccl_op: str | None = None, device: str = "950",
          timeout: float | None = None) -> VerifyResult:
    """:func:`verify` for a built :class:`Call` and a resolved ``algo`` (the sweep's entry point).

    ``timeout``: seconds after which building and simulating stop with status "failed" (main
    thread only; a plan set that takes that long is a fault to look at, or needs more time).
    """
    t0 = time.perf_counter()
    named: list[str] = []          # the algorithm, once known (a timeout reports it)
    if _KEPT_FOR[0] != (call.op, m.text):       # the kept plans serve one op on one machine
        forget_plans()
        _KEPT_FOR[0] = (call.op, m.text)
    try:
        with _deadline(timeout):
            return _check(call, algo, m, dtype, reduce_op, expansion_mode, hccl_op, device, t0, named)
    except _Timeout:
        return VerifyResult("failed", call.op, m.text, m.nranks, named[-1] if named else algo, call,
                            f"no result in {timeout:g} s: building and simulating ran too long (slices that never "
                            f"align, or a very large plan set; raise the timeout to wait longer)",
                            seconds=time.perf_counter() - t0, selected=algo is None)


class _Timeout(BaseException):
    """The deadline of :func:`check` passed (a BaseException, so that no ``except Exception`` eats it)."""


@contextmanager
def _no_cycle_collection():
    """Python's cycle collector paused: plans are acyclic frozen data, and at thousands of ranks
    its full passes over the millions of plan objects built so far cost as much as building them.

    On exit what was allocated meanwhile moves to the oldest generation unscanned (``gc.freeze`` then
    ``unfreeze``), where the next full pass still sees it; else the first young pass after re-enabling
    walks every object of the plans and of the simulate-once cache (about a tenth of a sweep's time).
    Not done when the caller has frozen objects (its freeze would be undone).
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


@contextmanager
def _deadline(seconds: float | None):
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _check(call: Call, algo: str | None, m: Machine, dtype: str, reduce_op: str, expansion_mode: str | None,
           hccl_op: str | None, device: str, t0: float, named: list[str]) -> VerifyResult:
    dt = parse_dtype(dtype)
    itemsize = DATATYPE_SIZE[dt]
    rop = parse_reduce_op(reduce_op)
    nbytes = call.hccl_nbytes(itemsize)     # ReduceScatterV: the total, as the Communicator selects it
    # pyhccl's Call marks Broadcast in place (its one buffer); HCCL's in-place flag does not apply to it
    inplace = call.in_place and call.op != "broadcast"
    base = dict(op=call.op, topo=m.text, nranks=m.nranks, call=call)
    notes: list[str] = []

    def done(status: str, name: str | None, error: str = "", **kw) -> VerifyResult:
        return VerifyResult(status, algorithm=name, error=error, seconds=time.perf_counter() - t0,
                            selected=algo is None, notes=tuple(notes), **base, **kw)

    if algo is None:
        if hccl_op is None:
            return done("not-eligible", None, f"HCCL has no {OPS[call.op].hccl} algorithms to select; "
                                              f"pass algo= one of {', '.join(flat_names(call.op))}")
        picks = {}
        for info in m.infos:
            try:
                sel = select_for(hccl_op, info, nbytes, dt, rop, root=call.root, expansion_mode=expansion_mode,
                                 inplace=inplace, algo="", device=device)
            except SelectionError as e:
                return done("not-eligible", None, str(e).splitlines()[0])
            picks.setdefault(sel.algorithm, info.user_rank)
            notes += [n for n in sel.notes if n not in notes]
        if len(picks) > 1:
            return done("failed", next(iter(picks)), "ranks select different algorithms: "
                        + ", ".join(f"rank {r} {a}" for a, r in picks.items()))
        name = next(iter(picks))
        if name not in registry.names():
            return done("not-runnable", name, f"HCCL's selection returns {name}, which pyhccl's registry lacks")
    else:
        name = algo
        if name not in flat_names(call.op):
            reg = registry.get(name)
            opcall = op_call(reg.op, nbytes, dt, rop, inplace=inplace, root=call.root)
            for info in m.infos:
                hard = (check_topo(reg.op, reg.engine, reg.topo, info, soft=False)
                        or check_op(reg.opattrs, opcall, info, soft=False))
                if hard:
                    return done("not-eligible", name, f"{name}'s attributes exclude this call: {hard}")
                soft = check_topo(reg.op, reg.engine, reg.topo, info) or check_op(reg.opattrs, opcall, info)
                if soft and not notes:
                    notes.append(f"HCCL's soft policy would skip it unless forced: {soft}")
    named.append(name)
    return _run(call, name, m, itemsize, done)


def rank0_alone(call: Call, name: str, m: Machine) -> bool:
    """Whether :func:`verify` builds and runs rank 0's plan alone for ``call`` with ``name`` on ``m``: from
    ``QUOTIENT_MIN_RANKS`` ranks, where every rank's plan is rank 0's rotated by construction
    (:func:`~pyhccl.plan.api.rotation_built`, :mod:`.uniform`)."""
    return m.nranks >= QUOTIENT_MIN_RANKS and rotation_built(call, name)


def _run(call: Call, name: str, m: Machine, itemsize: int, done) -> VerifyResult:
    """Build every rank's plan and simulate them (or rank 0's alone, where it stands for every rank's)."""
    rank0 = rank0_alone(call, name, m)
    plans = []
    guard = BuildGuard(task("building and simulating", call), m.nranks)
    with _no_cycle_collection():
        for r in range(1 if rank0 else m.nranks):
            try:
                plans.append(build_plan(call, name, r, m))
                guard.built(r + 1, plans[-1])
            except NotRunnableError as e:
                return done("not-runnable", name, str(e))
            except MemoryBudgetError as e:
                return _refused(done("failed", name, str(e)))
            except MemoryError as e:                # (an allocation past the machine's memory: before any look)
                return _refused(done("failed", name, f"{guard.what}: building rank {r}'s plan ran out of memory "
                                                     f"({e or 'MemoryError'}): use fewer ranks or another algorithm"))
            except Exception as e:  # noqa: BLE001 - a builder that crashes is a failure to report, not to raise
                return done("failed", name, f"building rank {r}'s plan raised {type(e).__name__}: {e}\n"
                                            + "".join(traceback.format_exc(limit=-4)))
    try:
        levels = tuple(len(level[0]) for level in m.layout.levels) if m.uniform else ()
        rep = simulate_rank0(plans[0], call) if rank0 else _simulate_once(plans, call, guard.actions, levels)
    except MemoryBudgetError as e:
        return _refused(done("failed", name, str(e)))
    except SimulationError as e:
        return done("failed", name, str(e))
    except Exception as e:  # noqa: BLE001
        return done("failed", name, f"the simulator raised {type(e).__name__}: {e}\n"
                                    + "".join(traceback.format_exc(limit=-4)))
    return done("ok", name, rounds=rep.rounds, bytes=rep.max_elements_sent * itemsize)


def _refused(result: VerifyResult) -> VerifyResult:
    """``result``, with every plan this process keeps dropped: a call refused for memory would otherwise leave
    its built plans in the caches, and a sweep's next call (HCCL's next name for the op, as large) start on top
    of them before the guard's first look (:data:`~pyhccl.verify.memory.BUILD_CHECK_RANKS` ranks in). A super
    pod's AicpuAllReduceStrictOrderedMesh, refused at 11.7 GiB, left the process 11.67 GiB resident."""
    forget_plans()
    return result


#: Plan sets the simulator passed in this process, by (call, steps per rank, actions): a sweep's
#: names that build the very same plans (HCCL's Aicpu, Aiv and Ccu names over one template,
#: pyhccl's template of the same name, HCCL's selection and its pick) are simulated once.
_PASSED: dict[tuple, list[tuple[tuple, SimReport]]] = {}
#: Actions the plan sets in :data:`_PASSED` may hold before the oldest are dropped.
_PASSED_MAX_ACTIONS = 48_000_000


#: The (op, machine) the kept plans are of: :func:`check` drops them when it changes.
_KEPT_FOR: list = [None]


def forget_plans() -> None:
    """Drop the plans this process keeps: the plan sets that passed (:data:`_PASSED`), the built plans and the
    templates' memoised results. :func:`check` does so when the op or the machine changes (a sweep's next group):
    they share nothing with the next calls, and a sweep's worker that kept them grew by every group it ran."""
    _PASSED.clear()
    clear_plan_caches()


def _simulate_once(plans: list, call: Call, size: int, levels: tuple[int, ...] = ()) -> SimReport:
    """:func:`simulate`, or the report of an equal plan set (every rank's steps equal, ``size`` actions in all)
    that passed (``levels``: the machine's group sizes, for the simulator's rotations)."""
    steps = tuple(p.steps for p in plans)
    key = (call, tuple(map(len, steps)), size)
    for seen, rep in _PASSED.get(key, ()):
        if seen == steps:
            return rep
    rep = simulate(plans, call, levels=levels)
    if size <= _PASSED_MAX_ACTIONS:
        while _PASSED and sum(k[2] * len(v) for k, v in _PASSED.items()) + size > _PASSED_MAX_ACTIONS:
            del _PASSED[next(iter(_PASSED))]                # the oldest call's plan sets
        _PASSED.setdefault(key, []).append((steps, rep))
    return rep
