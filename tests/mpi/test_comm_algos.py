"""Every algorithm of every op, forced through PYHCCL_ALGO, on emulated layouts (run at 8 ranks).

Layouts 1x1x8, 1x2x4 and 2x2x2 use the whole world; the asymmetric 4+2 layout
``[[[0,1,2,3],[0,1]]]`` the first six ranks. A name pyhccl cannot run yet (NotRunnableError)
or whose declared attributes exclude the layout is skipped with the communicator's message,
which every rank raises together; every other name must give the OpSpec reference.
"""

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl
from pyhccl.core.call import OPS, Call
from pyhccl.plan.api import algorithms, flat_names

pytestmark = [pytest.mark.mpi, pytest.mark.slow]   # the every-algorithm x layout matrix: `-m slow`

WORLD = MPI.COMM_WORLD
LAYOUTS = {"1x1x8": 8, "1x2x4": 8, "2x2x2": 8, "[[[0,1,2,3],[0,1]]]": 6}
SUBS = {k: WORLD.Split(0 if WORLD.Get_rank() < k else MPI.UNDEFINED, WORLD.Get_rank())
        for k in sorted(set(LAYOUTS.values()))} if WORLD.Get_size() == 8 else {}
#: The collectives the Communicator runs (its Send/Recv stay mpi4py's: BatchSendRecv plans are checked by the simulator).
COLLECTIVES = [op for op in OPS if op != "batch_send_recv"]
CASES = [(topo, op, name) for topo in LAYOUTS for op in COLLECTIVES for name in algorithms(op)]
SKIPPABLE = ("NotRunnableError", "does not apply here")


def data(count, rank):
    return np.random.default_rng([rank, count]).integers(-3, 4, count).astype(np.float32)


def run_op(c, op, in_place):
    """Run ``op`` once on ``c``; returns ``(got, want, replicated)`` for this rank."""
    r, n = c.Get_rank(), c.Get_size()
    k, root = 5, n // 2 + 1
    counts = tuple((j % 3) + (j == 1) for j in range(n))
    m = tuple(tuple((a + 2 * b) % 3 for b in range(n)) for a in range(n))
    call = {"reduce": Call("reduce", n, k, root), "broadcast": Call("broadcast", n, k, root),
            "gather": Call("gather", n, k, root), "scatter": Call("scatter", n, k, root),
            "all_gather_v": Call("all_gather_v", n, counts=counts),
            "reduce_scatter_v": Call("reduce_scatter_v", n, counts=counts),
            "alltoallv": Call("alltoallv", n, matrix=m)}.get(op) or Call(op, n, k)
    xs = [data(call.input_count(j), j) for j in range(n)]
    want = call.spec.reference(call, xs, np.add)[r]
    x, out = xs[r], np.full(call.output_count(r), 99, np.float32)
    if op == "allreduce":
        c.Allreduce(MPI.IN_PLACE, x) if in_place else c.Allreduce(x, out)
    elif op == "reduce":
        c.Reduce(x, out if r == root else None, MPI.SUM, root)
    elif op == "broadcast":
        out = x.copy() if r == root else out
        c.Bcast(out, root)
    elif op == "all_gather":
        if in_place:
            out[r * k:(r + 1) * k] = x
        c.Allgather(MPI.IN_PLACE if in_place else x, out)
    elif op == "gather":
        c.Gather(x, out if r == root else None, root)
    elif op == "scatter":
        c.Scatter(x if r == root else None, out, root)
    elif op == "reduce_scatter":
        c.Reduce_scatter_block(MPI.IN_PLACE, x) if in_place else c.Reduce_scatter_block(x, out)
        out = x[:k] if in_place else out
    elif op == "all_gather_v":
        c.Allgatherv(x, [out, list(counts)])
    elif op == "reduce_scatter_v":
        c.Reduce_scatter(x, out, list(counts))
    elif op == "alltoall":
        c.Alltoall(x, out)
    elif op == "alltoallv":
        c.Alltoallv([x, list(m[r])], [out, [m[j][r] for j in range(n)]])
    elif op == "barrier":
        c.Barrier()
        out = want = np.ones(1, np.float32)
    else:
        raise AssertionError(f"run_op has no Communicator call for {op!r}")
    got = x if op == "allreduce" and in_place else out
    return got, want, call.spec.replicated


@pytest.mark.skipif(WORLD.Get_size() != 8, reason="the layouts need 8 ranks")
@pytest.mark.parametrize("topo,op,name", CASES, ids=[f"{t}-{o}-{n}" for t, o, n in CASES])
def test_forced_algorithm_runs_on_layout(topo, op, name, monkeypatch):
    sub = SUBS[LAYOUTS[topo]]
    if sub == MPI.COMM_NULL:
        return
    monkeypatch.setenv("PYHCCL_ALGO", name)
    c = pyhccl.Communicator(sub.Dup(), topo=topo)
    try:
        results = []
        for in_place in (False, True) if op in ("allreduce", "all_gather", "reduce_scatter") else (False,):
            try:
                results.append(run_op(c, op, in_place))
            except RuntimeError as e:        # raised on every rank together: skip together
                if not any(s in str(e) for s in SKIPPABLE):
                    raise
                if not in_place:
                    pytest.skip(str(e))
        ok = all(w is None or np.array_equal(g, w) for g, w, _ in results)
        ok &= all(len(set(sub.allgather(g.tobytes()))) == 1 for g, _, rep in results if rep)
        sel = c.last_selection
        ok &= sel is None if name in flat_names(op) else sel.algorithm == name
        ok &= c.fallbacks == 0
        assert sub.allreduce(bool(ok), op=MPI.LAND), [(g.tolist(), None if w is None else w.tolist())
                                                      for g, w, _ in results]
    finally:
        c.Free()
