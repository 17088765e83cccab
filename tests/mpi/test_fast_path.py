"""The default communicator's fast paths (PYHCCL_PROFILE=auto), under mpiexec.

A Communicator with ``profile="auto"`` on one node measures (or reads) its machine profile and runs
pyhccl's fast paths: the one-shot Mesh on shared slots with one flag barrier for small calls
(pyhccl.run.shm.oneshot), the plans' programs on the shared-memory engine for large ones. Every op
it takes is checked against numpy at counts that take each path, out of place and in place, with
the same arrays called again (the warm path's bound call) and with calls of other sizes and ops in
between (the slots' parity and the engine's barriers interleave). A rank that never comes makes
the others raise CollectiveTimeoutError in the one-shot's barrier.
"""

import dataclasses
import json
import os
import time

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl
from pyhccl.comm.probe import FAST
from pyhccl.run.shm import OneShotRunner, ShmRunner
from pyhccl.run.shm.oneshot import ONE_SHOT_MAX_BYTES, SPLIT_MIN_BYTES
from pyhccl.run.timeout import CollectiveTimeoutError

pytestmark = pytest.mark.mpi

COMM = MPI.COMM_WORLD
RANK, N = COMM.Get_rank(), COMM.Get_size()
#: Counts (elements) that take the one-shot slots (small), the window and cross-memory attach (large).
COUNTS = (1, 7, 1000, 300001)
DTYPES = (np.float32, np.int64, np.float64)


@pytest.fixture(scope="module")
def comm():
    c = pyhccl.Communicator(COMM, profile="auto")
    yield c
    c.release()


def data(count, rank, dtype, salt=0):
    return (np.random.default_rng([rank, count, salt]).integers(-3, 4, count)).astype(dtype)


def total(count, dtype, salt=0, ranks=None):
    return sum(data(count, r, dtype, salt) for r in (range(N) if ranks is None else ranks))


def test_the_profile_prices_the_fast_paths(comm):
    prof = comm.dispatcher.planner.profile
    assert prof is not None and prof.kind == "machine profile" and prof.path and os.path.exists(prof.path)
    with open(prof.path, encoding="utf-8") as f:
        assert json.load(f)["key"] == prof.key
    a = np.zeros(8, np.float32)
    comm.Allreduce(MPI.IN_PLACE, a)
    sel = comm.last_selection
    assert sel.source == "measured" and sel.algorithm in dict(FAST["AllReduce"])     # whichever measured fastest
    assert "machine profile" in str(sel)


def test_a_second_communicator_reads_the_cached_profile(comm):
    again = pyhccl.Communicator(COMM, profile="auto")
    try:
        assert again.dispatcher.planner.profile == comm.dispatcher.planner.profile
    finally:
        again.release()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", COUNTS)
def test_allreduce(comm, count, dtype):
    for salt in range(3):                       # the same arrays again: the warm path's bound call
        x, out = data(count, RANK, dtype, salt), np.empty(count, dtype)
        comm.Allreduce(x, out)
        assert np.array_equal(out, total(count, dtype, salt))
        comm.Allreduce(MPI.IN_PLACE, x, op=MPI.MAX)
        assert np.array_equal(x, np.max([data(count, r, dtype, salt) for r in range(N)], axis=0))
    assert comm.last_selection.algorithm.endswith("@shm")


@pytest.fixture(scope="module")
def one_shot():
    """A communicator whose small calls run on the one-shot slots whatever the profile measured."""
    c = pyhccl.Communicator(COMM, algo="MeshOneShot@shm")
    yield c
    c.release()


@pytest.mark.parametrize("which", ["default", "one-shot"])
def test_the_same_arrays_again_see_new_data(comm, one_shot, which):
    c = comm if which == "default" else one_shot
    x, out = np.empty(5, np.float32), np.empty(5, np.float32)
    for i in range(40):
        x[:] = RANK + i
        c.Allreduce(x, out)
        assert np.array_equal(out, np.full(5, sum(r + i for r in range(N)), np.float32)), i
    if which == "one-shot":
        assert any(isinstance(p, OneShotRunner) for p in c.compiled_plans.values())
        assert c.warm_calls, "the loop's calls took the warm path"


@pytest.fixture(scope="module")
def mesh():
    """A communicator whose small calls of every op but AllReduce run on the one-shot slots."""
    c = pyhccl.Communicator(COMM, algo="Mesh@shm")
    yield c
    c.release()


@pytest.mark.parametrize("count", [1, 1000, SPLIT_MIN_BYTES // 8])
def test_alltoall_again_on_the_same_arrays(mesh, count):
    """The one-shot AlltoAll (blocks from SPLIT_MIN_BYTES: posts only its peers' blocks and copies its own straight
    out): the same arrays called again (the warm path) with new data each time."""
    dt = np.int64
    x, out = np.empty(N * count, dt), np.empty(N * count, dt)
    for salt in range(4):
        x[:] = data(N * count, RANK, dt, salt)
        out[:] = -99
        mesh.Alltoall(x, out)
        want = [data(N * count, r, dt, salt)[RANK * count:(RANK + 1) * count] for r in range(N)]
        assert np.array_equal(out, np.concatenate(want)), salt
    runner = next(reversed(mesh.compiled_plans.values()))
    if N * count * 8 <= ONE_SHOT_MAX_BYTES:         # (larger inputs run the plan's program: up to 16 ranks here)
        assert isinstance(runner, OneShotRunner) and runner.split == (count * 8 >= SPLIT_MIN_BYTES)


@pytest.mark.parametrize("which", ["default", "mesh"])
@pytest.mark.parametrize("count", [1, 5, SPLIT_MIN_BYTES // 8])
def test_every_one_shot_op_again_on_the_same_arrays(comm, mesh, which, count):
    """Each op's bound call on the slots (the warm path: what it reads of the slots is made once per barrier
    parity), called again with new data, in turn with the other ops so that the parities interleave."""
    c = comm if which == "default" else mesh
    dt = np.float64
    x, big = np.empty(count, dt), np.empty(N * count, dt)
    ag, rs, a2a, b, red = (np.empty(N * count, dt), np.empty(count, dt), np.empty(N * count, dt),
                           np.empty(count, dt), np.empty(count, dt))
    root, wrong = N - 1, []     # checked on every rank after the loop: a rank that stopped early would hang the rest
    for salt in range(5):
        x[:], big[:] = data(count, RANK, dt, salt), data(N * count, RANK, dt, salt)
        b[:] = data(count, RANK, dt, salt)
        red[:] = -7
        c.Allgather(x, ag)
        c.Reduce_scatter_block(big, rs)
        c.Alltoall(big, a2a)
        c.Bcast(b, root=root)
        c.Reduce(x, red, root=root)
        want = {"allgather": (ag, np.concatenate([data(count, r, dt, salt) for r in range(N)])),
                "reduce_scatter": (rs, total(N * count, dt, salt)[RANK * count:(RANK + 1) * count]),
                "alltoall": (a2a, np.concatenate([data(N * count, r, dt, salt)[RANK * count:(RANK + 1) * count]
                                                  for r in range(N)])),
                "bcast": (b, data(count, root, dt, salt)),
                "reduce": (red, total(count, dt, salt) if RANK == root else np.full(count, -7, dt))}
        wrong += [(RANK, salt, op) for op, (got, exp) in want.items() if not np.array_equal(got, exp)]
    assert not sum(COMM.allgather(wrong), [])
    if which == "mesh" and N * count * 8 <= ONE_SHOT_MAX_BYTES:
        runners = list(c.compiled_plans.values())[-5:]
        assert all(isinstance(p, OneShotRunner) for p in runners), runners
        assert sum(1 for k in c.warm_calls if k[0] in ("Allgather", "Reduce_scatter_block", "Alltoall", "Bcast",
                                                       "Reduce") and k[1] in map(id, (x, big, b))) == 5


@pytest.mark.parametrize("count", COUNTS)
def test_other_ops(comm, count):
    dt = np.float32
    x = data(count, RANK, dt)
    out = np.empty(N * count, dt)
    comm.Allgather(x, out)
    assert np.array_equal(out, np.concatenate([data(count, r, dt) for r in range(N)]))
    big = data(N * count, RANK, dt)
    rs = np.empty(count, dt)
    comm.Reduce_scatter_block(big, rs)
    assert np.array_equal(rs, total(N * count, dt)[RANK * count:(RANK + 1) * count])
    b = data(count, RANK, dt)
    comm.Bcast(b, root=N - 1)
    assert np.array_equal(b, data(count, N - 1, dt))
    red = np.full(count, -7, dt)
    comm.Reduce(x, red, root=N - 1)
    assert np.array_equal(red, total(count, dt)) if RANK == N - 1 else np.all(red == -7)
    if RANK == 0:                               # the root in place
        mine = x.copy()
        comm.Reduce(MPI.IN_PLACE, mine, root=0)
        assert np.array_equal(mine, total(count, dt))
    else:
        comm.Reduce(x.copy(), None, root=0)
    a2a = np.empty(N * count, dt)
    comm.Alltoall(big, a2a)
    assert np.array_equal(a2a, np.concatenate([data(N * count, r, dt)[RANK * count:(RANK + 1) * count]
                                               for r in range(N)]))


@pytest.mark.skipif(N == 1, reason="one rank runs no engine program")
def test_a_measured_one_shot_crossover_routes_larger_calls_to_in_place_reads():
    """A profile whose one-step Mesh crossover is 4 KiB: inputs of 1000 float32 run on the slots, 3000 read the
    peers' arrays in place (cross-memory attach, where the engine has it; the window otherwise), every op right."""
    c = pyhccl.Communicator(COMM, profile="auto")
    try:
        planner = c.dispatcher.planner
        ops = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "AllToAll")
        planner.profile = dataclasses.replace(planner.profile, one_shot=tuple((op, 4096) for op in ops))
        cma = planner.engine().cma
        for count, small in ((1000 // N, True), (3000, False)):       # AlltoAll's input: N x count
            x = data(count, RANK, np.float32)
            out = np.empty(count, np.float32)
            c.Allreduce(x, out, op=MPI.SUM)
            assert np.array_equal(out, total(count, np.float32))
            g = np.empty(N * count, np.float32)
            c.Allgather(x, g)
            assert np.array_equal(g, np.concatenate([data(count, r, np.float32) for r in range(N)]))
            assert c.last_selection.algorithm == "Mesh@shm"
            ag = list(c.compiled_plans.values())[-1]
            big = data(N * count, RANK, np.float32)
            a2a = np.empty(N * count, np.float32)
            c.Alltoall(big, a2a)
            assert np.array_equal(a2a, np.concatenate([data(N * count, r, np.float32)[RANK * count:(RANK + 1) * count]
                                                       for r in range(N)]))
            aa = list(c.compiled_plans.values())[-1]
            b = x.copy()
            c.Bcast(b, root=N - 1)
            assert np.array_equal(b, data(count, N - 1, np.float32))
            for runner in (ag, aa):         # the lone candidates: the one-step Mesh, on the slots or in place
                assert isinstance(runner, OneShotRunner) if small else \
                    isinstance(runner, ShmRunner) and runner.plan.cma == cma, (count, runner)
    finally:
        c.release()


def test_interleaved_sizes_and_ops(comm):
    """Small one-shot calls between large engine calls and other ops: each sees its own data."""
    small, big = np.empty(3, np.float64), np.empty(300001, np.float32)
    s_out, b_out, g_out = np.empty_like(small), np.empty_like(big), np.empty(N * 3, np.float64)
    for i in range(6):
        small[:] = RANK * 10 + i
        big[:] = RANK - i
        comm.Allreduce(small, s_out)
        comm.Allgather(small, g_out)
        comm.Allreduce(big, b_out)
        comm.Allreduce(small, s_out)
        assert np.array_equal(s_out, np.full(3, sum(r * 10 + i for r in range(N)), np.float64))
        assert np.array_equal(g_out, np.repeat([r * 10.0 + i for r in range(N)], 3))
        assert np.array_equal(b_out, np.full(300001, sum(r - i for r in range(N)), np.float32))


@pytest.mark.skipif(N == 1, reason="a late rank needs a peer")
def test_a_late_rank_times_out_the_one_shot():
    c = pyhccl.Communicator(COMM, algo="MeshOneShot@shm", timeout=1.0, abort_on_timeout=False)
    x, out = np.ones(4, np.float32), np.empty(4, np.float32)
    COMM.Barrier()
    c.Allreduce(x, out)                         # every rank on time
    assert isinstance(c.compiled_plans[next(reversed(c.compiled_plans))], OneShotRunner)
    error, waited = None, 0.0
    if RANK == N - 1:
        time.sleep(4.0)
        c.dispatcher.planner.engine().sync(timeout=60)     # reaches the barrier the others left
    else:
        start = time.monotonic()
        try:
            c.Allreduce(x, out)
        except CollectiveTimeoutError as e:
            error = e
        waited = time.monotonic() - start
    COMM.Barrier()
    if RANK != N - 1:
        assert error is not None and 1.0 <= waited < 4.0, (error, waited)
        assert "in the node barrier of step 0" in str(error) and error.algorithm == "MeshOneShot@shm"


@pytest.mark.parametrize("count", [1, 2, 9])
def test_the_one_shot_reduces_in_rank_order_bit_for_bit(one_shot, count):
    """Random floats: the one-shot AllReduce and ReduceScatter on the slots (bound and not) give the MPI runtime's
    bits, which reduce in rank order. (numpy's reduce adds a one-element column in pairs from 8 rows on.)"""
    mpi = pyhccl.Communicator(COMM, algo="MeshOneShot")
    mesh_mpi, mesh_shm = pyhccl.Communicator(COMM, algo="Mesh"), pyhccl.Communicator(COMM, algo="Mesh@shm")
    x = np.random.default_rng([RANK, count]).standard_normal(count).astype(np.float32)
    big = np.random.default_rng([RANK, count, 1]).standard_normal(N * count).astype(np.float32)
    wrong = []
    for _ in range(3):                          # the first call runs unbound, the later ones bound
        got, want = np.empty(count, np.float32), np.empty(count, np.float32)
        one_shot.Allreduce(x, got)
        mpi.Allreduce(x, want)
        if not np.array_equal(got, want):
            wrong.append("allreduce")
        got_rs, want_rs = np.empty(count, np.float32), np.empty(count, np.float32)
        mesh_shm.Reduce_scatter_block(big, got_rs)
        mesh_mpi.Reduce_scatter_block(big, want_rs)
        if not np.array_equal(got_rs, want_rs):
            wrong.append("reduce_scatter")
    for c in (mpi, mesh_mpi, mesh_shm):
        c.release()
    assert not sum(COMM.allgather(wrong), [])


def test_ops_without_a_fast_path_run_the_wrapped_mpis_own(comm):
    """Alltoallv, Allgatherv, Gather, Scatter and Barrier go to MPI's method unparsed; an uneven Reduce_scatter
    (ReduceScatterV) is selected NativeMPI by the profile. Every result is checked on every rank after the calls."""
    ok, before = True, comm.fallbacks
    k = 3
    counts, displs = [k] * N, [j * k for j in range(N)]
    send = np.arange(N * k, dtype=np.float64) + 100 * RANK
    got = np.zeros(N * k)
    comm.Alltoallv([send, (counts, displs)], [got, (counts, displs)])
    want = np.concatenate([np.arange(RANK * k, (RANK + 1) * k) + 100 * j for j in range(N)])
    ok &= np.array_equal(got, want) and comm.last_selection is None
    vc = [j + 1 for j in range(N)]
    out = np.zeros(sum(vc))
    comm.Allgatherv(np.full(RANK + 1, float(RANK)), [out, vc])
    ok &= np.array_equal(out, np.concatenate([np.full(j + 1, float(j)) for j in range(N)]))
    g = np.zeros(2 * N) if RANK == 0 else None
    comm.Gather(np.full(2, float(RANK)), g, 0)
    ok &= RANK != 0 or np.array_equal(g, np.repeat(np.arange(N, dtype=float), 2))
    s = np.zeros(2)
    comm.Scatter(np.repeat(np.arange(N, dtype=float), 2) if RANK == 0 else None, s, 0)
    ok &= np.array_equal(s, np.full(2, float(RANK)))
    comm.Barrier()
    ok &= comm.last_selection is None and comm.fallbacks == before
    if N > 1:
        rc = [j + 1 for j in range(N)]                  # uneven: ReduceScatterV, which has no fast path
        r = np.zeros(RANK + 1)
        comm.Reduce_scatter(np.ones(sum(rc)), r, rc)
        ok &= np.array_equal(r, np.full(RANK + 1, float(N))) and comm.last_selection.algorithm == "NativeMPI"
    assert COMM.allreduce(bool(ok), op=MPI.LAND)


def test_hccls_selection_still_runs_them_with_profile_hccl():
    c = pyhccl.Communicator(COMM, profile="hccl")
    try:
        k = 2
        counts, displs = [k] * N, [j * k for j in range(N)]
        got = np.zeros(N * k)
        c.Alltoallv([np.full(N * k, float(RANK)), (counts, displs)], [got, (counts, displs)])
        ok = np.array_equal(got, np.repeat(np.arange(N, dtype=float), k)) and c.last_selection is not None
    finally:
        c.release()
    assert COMM.allreduce(bool(ok), op=MPI.LAND)
