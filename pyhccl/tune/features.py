"""What a plan costs, counted: per level the steps, the bytes moved and reduced; copies and tasks.

These are the regressors of the measured cost model (:mod:`pyhccl.tune.fit`): HCCL's C (latency
per step), A (time per byte over a link), B (time per byte of local reduce / copy) and D (launch
per task), counted from the same plans the MPI runtime runs. A transfer's level is where its two
ranks differ in the emulated layout: 0 within a server, 1 across servers of a super pod, 2
across super pods. Ranks run in bulk-synchronous steps, so each count is the largest over the
ranks (the slowest rank sets the time).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from ..algo.names import parse_algo_ref
from ..core.call import OPS, canonical_op, make_call
from ..plan.api import NotRunnableError, build_plan
from ..plan.ir import Kind
from ..topo.machine import machine
from .file import LEVELS

__all__ = ["FEATURES", "features", "call_for", "signature", "pool_identical"]

#: Column names of the feature vector, in order.
FEATURES = (tuple(f"steps_L{lv}" for lv in range(LEVELS)) + tuple(f"moved_L{lv}" for lv in range(LEVELS))
            + tuple(f"reduced_L{lv}" for lv in range(LEVELS)) + ("copied", "tasks", "calls"))


def call_for(op: str, nranks: int, nbytes: int, itemsize: int, root: int = 0, in_place: bool = False):
    """The :class:`~pyhccl.core.call.Call` whose HCCL data size D is ``nbytes`` (V ops: even counts)."""
    op = canonical_op(op)
    count = max(1, nbytes // itemsize)
    if op == "reduce_scatter_v":
        count = max(1, count // nranks)
    spec = OPS[op]
    return make_call(op, nranks, count=count, root=root if spec.rooted else None,
                     in_place=in_place and spec.in_place_ok and not spec.vector)


def _plans(op: str, algorithm: str, topo: str, nbytes: int, itemsize: int, root: int, in_place: bool) -> list:
    """Every rank's plan of ``algorithm`` for HCCL data size ``nbytes`` on ``topo``."""
    m = machine(topo)
    call = call_for(op, m.nranks, nbytes, itemsize, root, in_place)
    return [build_plan(call, algorithm, r, m) for r in range(m.nranks)]


@lru_cache(maxsize=8192)
def signature(op: str, algorithm: str, topo: str, nbytes: int, itemsize: int, root: int = 0,
              in_place: bool = False) -> Any:
    """What ``algorithm`` runs for this call: names with equal signatures run the very same plans.

    HCCL registers one schedule under several names (``AivAllReduceSoleMeshOneShot``,
    ``CcuMSAllReduceSoleMeshOneShot`` and pyhccl's ``MeshOneShot`` on one flat level); their
    measurements are measurements of one thing. An engine suffix (``@shm``) or a name that does
    not build here gives a signature of its own.
    """
    try:
        ref = parse_algo_ref(algorithm)
        plans = _plans(op, ref.name, topo, nbytes, itemsize, root, in_place)
    except (NotRunnableError, ValueError):
        return algorithm
    return ref.runtime, tuple(p.steps for p in plans)


def pool_identical(op: str, times: dict[str, float], topo: str, nbytes: int, itemsize: int, root: int = 0,
                   in_place: bool = False) -> dict[str, float]:
    """``times`` with every name priced at the mean of the names that run the same plans."""
    groups: dict[Any, list[str]] = {}
    for name in times:
        groups.setdefault(signature(op, name, topo, nbytes, itemsize, root, in_place), []).append(name)
    return {name: sum(times[m] for m in members) / len(members)
            for members in groups.values() for name in members}


@lru_cache(maxsize=8192)
def features(op: str, algorithm: str, topo: str, nbytes: int, itemsize: int, ub_bytes: int, root: int = 0,
             in_place: bool = False) -> np.ndarray:
    """The feature vector (:data:`FEATURES`) of ``algorithm`` for HCCL data size ``nbytes`` on ``topo``.

    Raises:
        pyhccl.plan.NotRunnableError: the algorithm does not run on this layout.
    """
    coords = machine(topo).layout.coords

    def level(a: int, b: int) -> int:
        ca, cb = coords[a], coords[b]
        return 0 if ca.server == cb.server else 1 if ca.super_pod == cb.super_pod else 2

    per_msg = max(1, ub_bytes // itemsize)
    worst = np.zeros(len(FEATURES))
    for r, plan in enumerate(_plans(op, algorithm, topo, nbytes, itemsize, root, in_place)):
        f = np.zeros(len(FEATURES))
        f[-1] = 1.0
        for step in plan.steps:
            sent, got = [0] * LEVELS, [0] * LEVELS
            top = 0
            for a in step.transfers:
                size = (a.src if a.kind is Kind.SEND else a.dst).size
                if not size:
                    continue
                lv = level(r, a.peer)
                top = max(top, lv)
                (sent if a.kind is Kind.SEND else got)[lv] += size
                f[-2] += -(-size // per_msg)
            for lv in range(LEVELS):
                if sent[lv] or got[lv]:
                    f[lv] += 1
                    f[LEVELS + lv] += max(sent[lv], got[lv]) * itemsize
            for a in step.local:
                if not a.src.size:
                    continue
                f[-2] += 1
                if a.kind is Kind.REDUCE:
                    f[2 * LEVELS + top] += a.src.size * itemsize
                else:
                    f[3 * LEVELS] += a.src.size * itemsize
        worst = np.maximum(worst, f)
    worst.setflags(write=False)
    return worst
