"""A shared-memory engine runner bound to its arrays (the warm path's call, ``ShmRunner.bind``), under mpiexec.

The bound call skips the per-call lookups; it must still see new values, peers whose arrays move
between calls, a window that grew, and shared allocations made or released since it was bound, on
engines with and without cross-memory attach.
"""

import numpy as np
import pytest
from mpi4py import MPI

from pyhccl.core.call import Call
from pyhccl.plan.api import build_plan
from pyhccl.run.shm import ShmEngine, ShmRunner, compile_shm

pytestmark = pytest.mark.mpi

COMM = MPI.COMM_WORLD
RANK, N = COMM.Get_rank(), COMM.Get_size()


def runner(call, algo, eng, itemsize=8):
    plans = [build_plan(call, algo, r) for r in range(N)]
    return ShmRunner(compile_shm(call, plans, itemsize, RANK, eng.cma), eng)


@pytest.fixture(params=[True, False], ids=["cma", "window"], scope="module")
def eng(request):
    e = ShmEngine(COMM.Dup(), cma=request.param)
    yield e
    e.free()


@pytest.mark.parametrize("op, algo", [("allreduce", "MeshTwoShot"), ("all_gather", "Mesh"), ("alltoall", "Mesh")])
def test_bound_calls_see_new_values_and_peers_that_move(eng, op, algo):
    """Even ranks call one bound function on fixed arrays; odd ranks alternate between two input arrays (a
    peer's places change between calls, as a bound call reads them after its first barrier)."""
    call = Call(op, N, 3001)
    run = runner(call, algo, eng)
    nin, nout = call.input_count(RANK), call.output_count(RANK)
    xs = [np.empty(nin), np.empty(nin)]
    out = np.empty(nout)
    bound = [run.bind(x, out, np.add) for x in xs]
    for i in range(6):
        vals = [np.arange(call.input_count(r), dtype=np.float64) * (r + 1) + 7 * i for r in range(N)]
        k = i % 2 if RANK % 2 else 0
        xs[k][:] = vals[RANK]
        out[:] = -1
        bound[k]()
        if op == "allreduce":
            want = sum(vals[1:], vals[0])
        elif op == "all_gather":
            want = np.concatenate(vals)
        else:
            c = call.count
            want = np.concatenate([v[RANK * c:(RANK + 1) * c] for v in vals])
        assert np.array_equal(out, want), (op, i)


@pytest.mark.skipif(N == 1, reason="no peer: nothing crosses the window")
def test_bound_calls_follow_a_grown_window_and_shared_allocations(eng):
    call = Call("allreduce", N, 2001)
    run = runner(call, "MeshTwoShot", eng)
    x, out = np.empty(2001), np.empty(2001)
    go = run.bind(x, out, np.add)

    def check(i):
        x[:] = RANK + i
        go()
        assert (out == N * i + N * (N - 1) // 2).all(), i

    check(0)
    check(1)
    big = Call("allreduce", N, 1 << 20)             # the window grows for it: every binding is made again
    bx = np.full(1 << 20, 1.0)
    bout = np.empty_like(bx)
    runner(big, "MeshTwoShot", eng).run(COMM, (bx, bout, None), np.add)
    assert (bout == N).all()
    check(2)
    mem = eng.alloc(2001 * 8)                       # shared memory allocated: every rank writes where its arrays are
    other = mem.view(np.float64)
    other[:] = RANK + 3
    run.run(COMM, (other, out, None), np.add)       # every rank's header names its part of it
    assert (out == N * 3 + N * (N - 1) // 2).all()
    for i in (4, 5):                                # odd ranks' input still there, read in place by their peers;
        if RANK % 2:                                # the even ranks' bound calls beside them, on ordinary arrays
            other[:] = RANK + i
            run.run(COMM, (other, out, None), np.add)
            assert (out == N * i + N * (N - 1) // 2).all(), i
        else:
            other[:] = -1000
            check(i)
    eng.release(mem)
    check(6)
