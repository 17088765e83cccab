"""Plan sets built as rank 0's rotated, simulated on rank 0 alone (an AlltoAll of a super pod).

Where :func:`pyhccl.plan.api.rotation_built` says so, ``build_plan`` makes every rank's plan as rank 0's moved
on by its rank: each peer ``p`` read as ``p + r`` and each block ``j`` of the input and the output as block
``j + r`` (HCCL's AlltoAll Mesh and Pairwise over all ranks, :func:`pyhccl.plan.templates.alltoall.moved_on`).
Then no other rank's plan need exist: an AlltoAll of 8192 ranks is 67 M transfers a side, rank 0's 8191.

First the grid's structural checks run on rank 0's rows (:func:`~.checks.static_faults`). By the
construction, rank ``r``'s send to rank ``r + d`` in step ``t`` is rank 0's send to ``d`` in step ``t``,
moved on; so rank ``q``'s send to rank 0 is rank 0's send to ``-q``, and each receive of rank 0 from ``q`` must
meet one such send (the ``k``-th receive from ``q`` of a step the ``k``-th send to ``-q``), of its size. Rank 0
is then run exactly (:class:`~.rank0.Rank0`: its contributors as an N-bit set, each element's input index), what
it receives read from its own state where the sender's rotation puts it; every rank's run is rank 0's, rotated,
so rank 0's faults are every rank's and its output decides the call. A fault is raised as a
:class:`~.sim.SimulationError` naming rank 0 and the step (every rank has it, moved on).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..core.call import Call
from ..plan.ir import Plan
from .rank0 import Rank0, postcondition
from .rotation import ALL, Axes
from .checks import static_faults, static_text
from .rows import RECV, SEND, PlanArrays, counts

__all__ = ["simulate_rank0"]


def simulate_rank0(plan: Plan, call: Call):
    """The report of the plan set whose rank ``r`` plan is ``plan`` (rank 0's) moved on by ``r`` (blocks of the
    call's count in its input and its output; scratch not moved), for AlltoAll ``call``.

    Raises:
        SimulationError: what the grid's structural checks find in rank 0's plan alone (a region past its
            buffer's end, a bad peer, a transfer among the local operations or the reverse, a local operation
            whose sides differ in size), a receive without its send (or of another size), or what rank 0's run
            finds (read before write, two receives into one element, a receive into what the step sends, output
            not the postcondition's).
        ValueError: a call of another op than AlltoAll.
    """
    from .sim import SimReport, SimulationError      # (sim imports the quotient, which shares rank0 with this)
    n, c = call.nranks, call.count
    if call.op != "alltoall":
        raise ValueError(f"expecting an alltoall call to simulate on rank 0 alone, got {call.op}")

    def fault(step: int | None, what: str) -> SimulationError:
        where = "after the last step" if step is None else f"step {step}"
        return SimulationError(f"{where}, rank 0: {what} (every rank's plan is rank 0's moved on by its rank, so "
                               f"every rank has this fault)", step=step, rank=0)

    ops = PlanArrays([plan], None)
    live = [(side.buf == 2) & (side.size > 0) for side in (ops.src, ops.dst)]
    scratch = max(int(side.end[at].max(initial=0)) for side, at in zip((ops.src, ops.dst), live))
    sizes = np.array([call.input_count(0), call.output_count(0), scratch], np.int64)
    f = static_faults(ops, n, sizes)
    bad = np.flatnonzero(f.not_xfer | f.bad_peer | f.not_local | f.bad_size | f.oob[0] | f.oob[1])
    if len(bad):            # (rows come in step order)
        raise fault(int(ops.step[bad[0]]), static_text(ops, f, n, sizes, int(bad[0])))
    s = np.flatnonzero(f.ok_x & (ops.kind == SEND))
    r = np.flatnonzero(f.ok_x & (ops.kind == RECV))
    # the k-th receive from q of a step meets the k-th send to -q (rank q's send to 0, in rank 0's frame)
    s = s[np.lexsort((s, -ops.peer[s] % n, ops.step[s]))]
    r = r[np.lexsort((r, ops.peer[r], ops.step[r]))]
    ks, kr = np.stack([ops.step[s], -ops.peer[s] % n]), np.stack([ops.step[r], ops.peer[r]])
    if ks.shape != kr.shape or not np.array_equal(ks, kr):
        i, j = _first_unmet(ks, kr), _first_unmet(kr, ks)
        if j is None or i is not None and ks[0, i] < kr[0, j]:
            row = int(s[i])
            q = -int(ops.peer[row]) % n
            raise fault(int(ops.step[row]), f"rank {q}'s send to rank 0 (rank 0's '{ops.action(row)}', moved on by "
                                            f"{q}) meets no receive of rank 0 from {q}")
        row = int(r[j])
        raise fault(int(ops.step[row]), f"'{ops.action(row)}' meets no send of rank {int(ops.peer[row])} to rank 0")
    differ = np.flatnonzero(ops.src.size[s] != ops.dst.size[r])
    if len(differ):
        row, srow = int(r[differ[0]]), int(s[differ[0]])
        raise fault(int(ops.step[row]), f"'{ops.action(row)}' receives {int(ops.dst.size[row])} elements; rank "
                                        f"{int(ops.peer[row])} sends {int(ops.src.size[srow])} (rank 0's "
                                        f"'{ops.action(srow)}', moved on)")
    loc = np.flatnonzero((ops.local == 1) & (ops.src.size > 0))
    frame = np.array([[c, c, 0], [ALL, ALL, 0]], np.int64)
    rank0 = Rank0(ops, call, frame, Axes((n,)), sizes, c, n * c, s, r, loc, call.input_count(0), postcondition(call),
                  senders=ops.peer[r])
    atoms = rank0.run()
    if isinstance(atoms, str):
        raise fault(rank0.step, atoms)
    rounds, sent = counts(ops, 1)
    return SimReport(n, rounds, sent, n * atoms, quotient=True)


def _first_unmet(a: np.ndarray, b: np.ndarray) -> int | None:
    """The first column of ``a`` (keys, sorted) past those ``b`` has as often (None: ``b`` has them all)."""
    have = Counter(zip(*b.tolist()))
    for i, key in enumerate(zip(*a.tolist())):
        if not have[key]:
            return i
        have[key] -= 1
    return None
