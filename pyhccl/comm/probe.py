"""The machine profile of a Communicator: looked up in the cache, else measured (collective, about a second).

pyhccl's fast paths on one node (:data:`FAST`) are the shared-memory engine's: the one-shot Mesh on
double-buffered slots for small calls (:mod:`pyhccl.run.shm.oneshot`) and the plans' programs with
cross-memory attach for large ones. Where an op has more than one, their crossover depends on the
machine, so the candidates are timed here at a few sizes on this very layout (every rank at once,
the slowest rank's mean) and the times kept in a :class:`pyhccl.tune.auto.AutoProfile`, cached in
the user's cache directory (``PYHCCL_CACHE_DIR``) under a key of host, MPI library, layout and
cores. A later Communicator on the same layout reads the file; ``python -m pyhccl.tune --refresh``
measures again.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from datetime import datetime, timezone

import numpy as np
from mpi4py import MPI

from ..algo.names import parse_algo_ref
from ..core import settings
from ..core.call import HCCL_OPS, OPS, Call
from ..plan.api import build_plan
from ..run.shm import OneShotRunner, ShmRunner, compile_shm
from ..run.shm.flags import cores
from ..run.shm.oneshot import ONE_SHOT, ONE_SHOT_MAX_BYTES
from ..topo import Topology
from ..tune.auto import (AutoProfile, Candidate, ProfileError, load_profile, profile_key, profile_path,
                         save_profile)
from .agree import Planner
from .job import Job

__all__ = ["FAST", "SIZES", "ONE_SHOT_SIZES", "auto_profile", "measure", "one_shot_caps"]

log = logging.getLogger("pyhccl")

#: Per HCCL op, pyhccl's fast paths on one node and the largest HCCL data size each takes (0: any).
#: From the @shm engine's comparison on the 2-core machine (benchmarks/results/collectives/flag_barrier/
#: summary.txt, medians of three runs at 2, 4 and 8 ranks from 1 MiB): the one-step Mesh is the
#: best or near it for AllGather, ReduceScatter and AlltoAll; Broadcast's best is MeshTwoShot at 2
#: ranks and Mesh above; Reduce's MeshTwoShot (below 1 MiB its one-step Mesh is measured too: on the
#: slots it is a copy and a flag barrier); AllReduce's crossover from the one-shot to a bandwidth algorithm
#: moves with the machine. Ops with several are measured (:func:`measure`); they are
#: listed in order of preference (a later one must measure PREFERENCE faster per place to be chosen).
FAST: dict[str, tuple[tuple[str, int], ...]] = {
    "AllReduce": (("MeshOneShot@shm", ONE_SHOT_MAX_BYTES), ("MeshTwoShot@shm", 0), ("Ring@shm", 0)),
    "AllGather": (("Mesh@shm", 0),),
    "ReduceScatter": (("Mesh@shm", 0),),
    "Broadcast": (("Mesh@shm", 0), ("MeshTwoShot@shm", 0)),
    "Reduce": (("Mesh@shm", ONE_SHOT_MAX_BYTES), ("MeshTwoShot@shm", 0)),
    "AllToAll": (("Mesh@shm", 0),),
}
#: HCCL data sizes (bytes) the candidates of an op with several are timed at.
SIZES = (1 << 10, 8 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20)
#: Input sizes (bytes per rank) each op's one-step Mesh is timed at on the slots and in place (:func:`one_shot_caps`).
ONE_SHOT_SIZES = (64 << 10, 256 << 10, 512 << 10, ONE_SHOT_MAX_BYTES)
#: Seconds one block of a (size, candidate) measurement aims at, and its bounds on iterations; blocks
#: timed (the fastest block's mean counts: a slow spell of a shared machine spoils one block, not the price).
_BUDGET_S, _MIN_ITERS, _MAX_ITERS, _BLOCKS = 0.004, 3, 200, 3


def auto_profile(pcomm: MPI.Intracomm, planner: Planner, topology: Topology, refresh: bool = False) -> AutoProfile | None:
    """This layout's machine profile: cached, else measured now (collective over ``pcomm``); None when the
    ranks span several nodes (the fast paths need one node; HCCL's selection then)."""
    if planner.several_nodes():
        return None
    host, mpi = MPI.Get_processor_name(), MPI.Get_library_version().splitlines()[0].strip()
    layout = f"{host}, {mpi}, {pcomm.Get_size()} ranks, topology {topology.spec.to_text()}, {cores()} cores"
    cma = "on" if planner.engine().cma else "off"
    key = profile_key(f"{layout}, cross-memory attach {cma}, fast paths {sorted(FAST.items())}")
    path = profile_path(settings.cache_dir(), key)
    cached = None
    if not refresh:
        try:
            cached = load_profile(path, key)
        except ProfileError as e:
            log.warning("pyhccl: %s; measuring again", e)
    if pcomm.allreduce(cached is not None, op=MPI.LAND):
        return cached
    prof = measure(pcomm, planner, key, layout)
    saved = ""
    if pcomm.Get_rank() == 0:
        try:
            saved = save_profile(prof, path).path
        except OSError as e:                # a read-only home: the profile lives in memory only
            log.warning("pyhccl: cannot cache the machine profile at %s (%s)", path, e)
    return dataclasses.replace(prof, path=pcomm.bcast(saved))     # every rank's the same


def measure(pcomm: MPI.Intracomm, planner: Planner, key: str, layout: str) -> AutoProfile:
    """Time every op's candidates at :data:`SIZES` where it has several (collective): the profile.

    First each op's one-step Mesh is timed on the slots and reading the peers' arrays in place
    (:func:`one_shot_caps`); the candidates are then timed with those crossovers in force (up to
    1 MiB, ``MeshOneShot@shm`` runs on the slots below its crossover and reads in place above). At
    each size the candidates are timed in turn, block after block, and each keeps its fastest block:
    a slow spell of a shared machine then spoils a block of each, not one candidate's price. An op whose
    times fall by half from a size to a larger one (:func:`_disturbed`) is timed again, each point keeping
    the faster of its two.
    """
    start = time.perf_counter()
    n, rank = pcomm.Get_size(), pcomm.Get_rank()
    caps = one_shot_caps(pcomm, planner)
    kept, planner.profile = planner.profile, AutoProfile(key, layout, (), one_shot=caps)
    try:
        cands = []
        for op, paths in FAST.items():
            pts = _points(pcomm, planner, op, paths)
            if any(map(_disturbed, pts.values())):      # the same on every rank (the times are the slowest rank's)
                again = _points(pcomm, planner, op, paths)
                pts = {name: [(size, min(t, t2)) for (size, t), (_, t2) in zip(p, again[name])] for name, p in pts.items()}
                if any(map(_disturbed, pts.values())) and rank == 0:
                    log.warning("pyhccl: the machine profile's times of %s fall by half from a size to a larger one, "
                                "measured twice (a busy machine?); `mpiexec -n %d python -m pyhccl.tune --refresh` "
                                "measures them again", op, n)
            cands += [Candidate(op, name, most, tuple(pts[name])) for name, most in paths]
    finally:
        planner.profile = kept
    took = pcomm.allreduce(time.perf_counter() - start, op=MPI.MAX)
    return AutoProfile(key, layout, tuple(cands), round(took, 3), datetime.now(timezone.utc).isoformat(timespec="seconds"),
                       one_shot=caps)


def _points(pcomm: MPI.Intracomm, planner: Planner, op: str, paths: tuple) -> dict[str, list[tuple[int, float]]]:
    """Each candidate of ``op`` timed at :data:`SIZES` (where it has several): ``(size, seconds)`` lists."""
    n = pcomm.Get_size()
    pts: dict[str, list[tuple[int, float]]] = {name: [] for name, _ in paths}
    for size in SIZES if len(paths) > 1 else ():
        timers = {name: _timer(pcomm, planner, _call(op, n, max(1, size // 4)), name) for name, most in paths
                  if not most or size <= most}
        for name, t in _fastest(pcomm, timers).items():
            pts[name].append((size, t))
    return pts


def _disturbed(points: list[tuple[int, float]]) -> bool:
    """Whether a candidate's time fell by more than half from one size to the next (8x or 4x more bytes): no
    cost does that; a slow spell of the machine under the smaller size's blocks does (a 4-rank profile once
    measured MeshOneShot at 882 us for 8 KiB and 109 us for 64 KiB, and priced small calls wrongly)."""
    return any(t > 2 * later for (_, t), (_, later) in zip(points, points[1:]))


def one_shot_caps(pcomm: MPI.Intracomm, planner: Planner) -> tuple[tuple[str, int], ...]:
    """Per HCCL op, the largest input its one-step Mesh runs on the slots (collective): the one-step Mesh is
    timed on the slots and reading the peers' arrays in place at :data:`ONE_SHOT_SIZES`, smallest first, up
    to the first size the slots lose at (at 2 ranks AlltoAll's in-place reads won by 1.6x at 512 KiB and tied at
    1 MiB: a crossover found from the top down stayed at 1 MiB); nothing where cross-memory attach does not work
    (the default rules).

    The slots' copy in and copy out each move the data between cores, which in-place reads do not;
    where that pays depends on the machine (and, on a VM, on the vCPU a rank runs on).
    """
    eng, n, rank = planner.engine(), pcomm.Get_size(), pcomm.Get_rank()
    if n == 1 or not eng.cma:
        return ()
    caps = []
    for kind, name in ONE_SHOT.items():
        spec = OPS[kind]
        wins = [True] * len(ONE_SHOT_SIZES)
        for k, size in enumerate(ONE_SHOT_SIZES):
            call = _call(spec.hccl, n, max(1, size // 4 // _call(spec.hccl, n, 1).input_count(0)))
            plans = [build_plan(call, name, r, planner.machine) for r in range(n)]
            t = _fastest(pcomm, {"slots": _timer(pcomm, planner, call, name, OneShotRunner(call, rank, 4, eng)),
                                 "cma": _timer(pcomm, planner, call, name,
                                               ShmRunner(compile_shm(call, plans, 4, rank, cma=True), eng))})
            wins[k] = t["slots"] <= t["cma"]          # no preference: where the two tie either serves
            if not wins[k]:
                break
        caps.append((spec.hccl, _crossover(wins)))
    return tuple(caps)


def _crossover(wins: list[bool]) -> int:
    """The largest input for the slots, from whether they won at each of :data:`ONE_SHOT_SIZES`: every size up to
    the first they lose at, and half-way (geometrically) to it; all of them: ONE_SHOT_MAX_BYTES."""
    k = wins.index(False) if False in wins else len(wins)
    if k == len(wins):
        return ONE_SHOT_MAX_BYTES
    below = ONE_SHOT_SIZES[k - 1] if k else ONE_SHOT_SIZES[0] // 4
    return int(math.sqrt(below * ONE_SHOT_SIZES[k])) // 64 * 64


def _call(op: str, n: int, count: int) -> Call:
    """HCCL op ``op`` over ``n`` ranks, ``count`` elements (root 0 where rooted)."""
    kind = HCCL_OPS[op]
    return Call(kind, n, count, 0) if OPS[kind].rooted else Call(kind, n, count)


def _fastest(pcomm: MPI.Intracomm, timers: dict) -> dict[str, float]:
    """Each timer's fastest block of :data:`_BLOCKS`, timed in turn, the slowest rank's (the same on every rank)."""
    best = {name: float("inf") for name in timers}
    for _ in range(_BLOCKS):
        for name, t in timers.items():
            best[name] = min(best[name], t())
    return {name: pcomm.allreduce(b, op=MPI.MAX) for name, b in best.items()}


def _timer(pcomm: MPI.Intracomm, planner: Planner, call: Call, name: str, runner=None):
    """A function of no arguments timing a block of ``call`` (float32 sum) with ``name``, or with ``runner`` when
    given: its mean seconds on this rank (the block's iterations are the same on every rank)."""
    rank = pcomm.Get_rank()
    inp = np.ones(call.input_count(rank), np.float32)
    out = np.empty(call.output_count(rank), np.float32)
    if runner is None:
        runner = planner.build(Job(call, np.dtype(np.float32), inp, out, np.add, "sum"), parse_algo_ref(name))
    if hasattr(runner, "bind"):         # as a Communicator's call runs it again on the same arrays (the warm path)
        call_once = runner.bind(inp, out, np.add)
    else:
        bufs = (inp, out, np.empty(runner.scratch_count, np.float32))

        def call_once() -> None:
            runner.run(pcomm, bufs, np.add)

    def go(k: int) -> float:
        pcomm.Barrier()
        t = time.perf_counter()
        for _ in range(k):
            call_once()
        return (time.perf_counter() - t) / k

    go(2)
    once = pcomm.allreduce(go(1), op=MPI.MAX)
    iters = int(min(_MAX_ITERS, max(_MIN_ITERS, _BUDGET_S / max(once, 1e-7))))
    return lambda: go(iters)
