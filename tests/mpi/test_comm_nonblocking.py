"""Nonblocking (``I*``) and persistent (``*_init``) collectives run pyhccl's plans, as MPI requests.

Run by tests/test_mpi_launch.py under mpiexec at 1-4 ranks, and at 5 and 8 in the slow runs.
Results are compared with plain mpi4py's own call on the wrapped communicator and with numpy;
inputs are small integers, so every reduction order gives the same bits.
"""

import time

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
RANK, N = WORLD.Get_rank(), WORLD.Get_size()


def ints(count, rank=RANK, seed=0, dtype=np.float64):
    return np.random.default_rng([seed, rank, count]).integers(-3, 4, count).astype(dtype)


@pytest.fixture
def comm():
    c = pyhccl.Communicator(WORLD)
    yield c
    c.release()


def calls(count=5, seed=0):
    """``(name, pyhccl's arguments, mpi4py's arguments, the outputs to compare)`` of every op pyhccl runs."""
    x = ints(count, seed=seed)
    blocks = ints(count * N, seed=seed)
    vcounts = [(r % 3) + 1 for r in range(N)]
    vdispls = np.cumsum([0] + vcounts[:-1]).tolist()
    out = {}

    def both(name, mk):
        a, b = mk(), mk()               # pyhccl's buffers, plain mpi4py's
        out[name] = (a, b)

    root = N - 1
    both("Allreduce", lambda: (x.copy(), np.zeros(count)))
    both("Reduce", lambda: (x.copy(), np.zeros(count), MPI.MAX, root))
    both("Bcast", lambda: (x.copy() if RANK == root else np.zeros(count), root))
    both("Allgather", lambda: (x.copy(), np.zeros(count * N)))
    both("Allgatherv", lambda: (ints(vcounts[RANK], seed=seed), [np.zeros(sum(vcounts)), (vcounts, vdispls), MPI.DOUBLE]))
    both("Gather", lambda: (x.copy(), np.zeros(count * N), 0))
    both("Scatter", lambda: (blocks.copy(), np.zeros(count), 0))
    both("Reduce_scatter_block", lambda: (blocks.copy(), np.zeros(count)))
    both("Reduce_scatter", lambda: (ints(sum(vcounts), seed=seed), np.zeros(vcounts[RANK]), vcounts))
    both("Alltoall", lambda: (blocks.copy(), np.zeros(count * N)))
    both("Alltoallv", lambda: ([ints(sum(vcounts), seed=seed), (vcounts, vdispls), MPI.DOUBLE],
                               [np.zeros(vcounts[RANK] * N), ([vcounts[RANK]] * N, [vcounts[RANK] * j for j in range(N)]),
                                MPI.DOUBLE]))
    return out


def outputs(args):
    """The arrays a call writes: its last buffer argument (its only one for Bcast)."""
    bufs = [a for a in args if isinstance(a, (np.ndarray, list))]
    last = bufs[-1]
    return last[0] if isinstance(last, list) else last


def nb_name(name):
    return f"I{name[0].lower()}{name[1:]}"


def test_every_nonblocking_form_matches_mpi4py(comm):
    cases = calls()
    mine = [getattr(comm, nb_name(n))(*a) for n, (a, _) in cases.items()]
    theirs = [getattr(WORLD, nb_name(n))(*b) for n, (_, b) in cases.items()]
    assert all(isinstance(r, MPI.Request) for r in mine)
    MPI.Request.Waitall(mine + theirs)              # one list: pyhccl's requests and MPI's
    for (name, (a, b)) in cases.items():
        assert np.array_equal(outputs(a), outputs(b)), name
    assert comm.fallbacks == 0
    comm.Ibarrier().Wait()


def test_allreduce_against_numpy_every_dtype_and_op(comm):
    for dtype in (np.float32, np.float64, np.int32, np.int64):
        for op, ref in ((MPI.SUM, np.add), (MPI.MAX, np.maximum), (MPI.MIN, np.minimum), (MPI.PROD, np.multiply)):
            for count in (1, 33, 1000):
                x = ints(count, dtype=dtype)
                y = np.empty_like(x)
                req = comm.Iallreduce(x, y, op)
                while not req.Test():
                    pass
                want = ref.reduce([ints(count, r, dtype=dtype) for r in range(N)])
                assert np.array_equal(y, want), (dtype, op, count)


def test_requests_mixed_with_mpi4py_requests_in_every_completion_call(comm):
    right, left = (RANK + 1) % N, (RANK - 1) % N
    for complete in ("Waitall", "Testall", "Waitany", "Testany", "Waitsome", "Testsome"):
        x, y = ints(64), np.empty(64)
        got = np.empty(3)
        reqs = [WORLD.Irecv(got, left, 7), comm.Iallreduce(x, y), WORLD.Isend(np.arange(3.0) + RANK, right, 7),
                WORLD.Iallreduce(x, z := np.empty(64))]
        fn = getattr(MPI.Request, complete)
        if complete == "Waitall":
            fn(reqs)
        elif complete == "Testall":
            while not fn(reqs):
                pass
        else:
            pending = list(reqs)
            while any(r != MPI.REQUEST_NULL for r in pending):
                out = fn(pending)
                if complete == "Testany":
                    assert isinstance(out[1], bool)
        assert np.array_equal(y, z) and np.array_equal(got, np.arange(3.0) + left), complete


def test_overlapping_requests_on_one_communicator_completed_out_of_order(comm):
    xs = [ints(40, seed=s) for s in range(6)]
    ys = [np.empty(40) for _ in xs]
    reqs = [comm.Iallreduce(x, y) for x, y in zip(xs, ys)]
    g = np.empty(40 * N)
    reqs.append(comm.Iallgather(xs[0], g))
    between = ints(9)
    comm.Allreduce(MPI.IN_PLACE, between)           # a blocking call while they are outstanding
    for r in reversed(reqs):
        r.Wait()
    for s, y in enumerate(ys):
        assert np.array_equal(y, sum(ints(40, r, seed=s) for r in range(N))), s
    assert np.array_equal(g, np.concatenate([ints(40, r) for r in range(N)]))
    assert np.array_equal(between, sum(ints(9, r) for r in range(N)))


def test_selection_trace_names_the_plan(comm):
    x, y = ints(100), np.empty(100)
    comm.Allreduce(x, y)
    blocking = comm.last_selection.algorithm
    req = comm.Iallreduce(x, y)
    assert req.algorithm == blocking and req.selection.algorithm == blocking
    assert comm.last_selection.algorithm == blocking
    req.Wait()
    forced = pyhccl.Communicator(WORLD, algo="Ring")
    try:
        r = forced.Iallreduce(x, y)
        r.Wait()
        assert r.algorithm == "Ring" and r.selection is None
        assert np.array_equal(y, sum(ints(100, k) for k in range(N)))
    finally:
        forced.release()


def first_array(arg):
    return arg[0] if isinstance(arg, list) else arg


def test_persistent_forms_replay_with_new_data(comm):
    mine = {n: a for n, (a, _) in calls().items()}
    reqs = [getattr(comm, f"{n}_init")(*a) for n, a in mine.items()]
    assert all(isinstance(r, MPI.Prequest) for r in reqs)
    plans = len(comm.compiled_plans)
    for seed in range(1, 4):
        fresh = calls(seed=seed)
        for n, a in mine.items():       # new data in the bound send buffers (Bcast: the root's)
            first_array(a[0])[:] = first_array(fresh[n][1][0])
        pyhccl.Prequest.Startall(reqs)
        MPI.Request.Waitall(reqs)
        for n, (_, b) in fresh.items():
            getattr(WORLD, n)(*b)
            assert np.array_equal(outputs(mine[n]), outputs(b)), (n, seed)
        assert len(comm.compiled_plans) == plans        # compiled once, at init
    assert comm.fallbacks == 0


def test_persistent_start_mixed_with_mpi4py_persistent_requests(comm):
    x, y, z = ints(20), np.empty(20), np.empty(20)
    mine, theirs = comm.Allreduce_init(x, y), WORLD.Allreduce_init(x, z)
    for it in range(4):
        x[:] = ints(20, seed=it)
        pyhccl.Prequest.Startall([mine, theirs])
        MPI.Request.Waitall([theirs, mine])         # (MPICH 5.0.2's Testall fails on its own persistent collectives)
        assert np.array_equal(y, z) and np.array_equal(y, sum(ints(20, r, seed=it) for r in range(N)))
    theirs.Free()


@pytest.mark.skipif(N < 2, reason="a request stays active only while it waits for another rank")
def test_start_of_an_active_persistent_request_raises(comm):
    x, y = ints(20), np.empty(20)
    req = comm.Allreduce_init(x, y)
    if RANK == 0:
        req.Start()                     # cannot complete before rank 1 starts (after the barrier)
        with pytest.raises(ValueError, match="Start: the request is active"):
            req.Start()
    WORLD.Barrier()
    if RANK != 0:
        req.Start()
    req.Wait()
    assert np.array_equal(y, sum(ints(20, r) for r in range(N)))


@pytest.mark.skipif(N < 2, reason="a request stays active only while it waits for another rank")
@pytest.mark.parametrize("persistent", [False, True])
def test_free_of_an_active_request_raises_and_the_call_still_completes(comm, persistent):
    """MPI calls freeing a running collective's request erroneous; freed, nothing would advance its plan (rank 0's
    result never written, the others' parts waiting on its messages)."""
    x, y = ints(20), np.empty(20)
    if persistent:
        req = comm.Allreduce_init(x, y)
    else:
        comm.Iallreduce(x, y).Wait()    # the shape agreed (a collective step): rank 0's start below is its own
    if RANK == 0:
        req = req if persistent else comm.Iallreduce(x, y)
        if persistent:
            req.Start()                 # cannot complete before rank 1 starts (after the barrier)
        with pytest.raises(ValueError, match="Free: the collective of this request is still running"):
            req.Free()
    WORLD.Barrier()
    if RANK != 0:
        req = req if persistent else comm.Iallreduce(x, y)
        if persistent:
            req.Start()
    req.Wait()
    assert np.array_equal(y, sum(ints(20, r) for r in range(N)))
    if persistent:
        req.Free()                      # inactive now: freed (a waited nonblocking request is MPI.REQUEST_NULL)


def test_shared_argument_error_raises_on_every_rank(comm):
    with pytest.raises(ValueError, match="root"):
        comm.Ibcast(np.zeros(3), root=N)
    with pytest.raises(ValueError, match="root"):
        comm.Bcast_init(np.zeros(3), root=-1)


@pytest.mark.skipif(N < 2, reason="a rank-local refusal needs another rank")
def test_rank_local_refusal_on_an_agreed_shape(comm):
    x, y = ints(8), np.empty(8)
    comm.Iallreduce(x, y).Wait()                    # the shape is agreed
    out = np.empty(8)
    if RANK == 1:
        out.flags.writeable = False
        with pytest.raises(ValueError, match="rank 1 refused Iallreduce: expecting a writable recvbuf"):
            comm.Iallreduce(x, out)
    else:
        comm.Iallreduce(x, out).Wait()
        assert np.array_equal(out, sum(ints(8, r) for r in range(N)))
    comm.Barrier()


@pytest.mark.skipif(N < 2, reason="a rank-local refusal needs another rank")
def test_persistent_init_refusal_raises_on_every_rank(comm):
    x, out = ints(8), np.empty(8)
    comm.Allreduce(x, out)                          # the shape is agreed
    out.flags.writeable = RANK != 1
    with pytest.raises(ValueError, match=r"Allreduce_init: rank 1: expecting a writable recvbuf, got a read-only buffer \(every rank raises"):
        comm.Allreduce_init(x, out)
    ro = ints(6) if RANK == 0 else np.zeros(6)
    ro.flags.writeable = RANK != 0                  # a read-only root copies its data at each call: MPI's own
    req = comm.Bcast_init(ro, 0)
    assert not isinstance(req, pyhccl.Prequest)
    req.Start()
    req.Wait()
    assert np.array_equal(ro, ints(6, 0))
    req.Free()


@pytest.mark.skipif(N != 2, reason="one rank stays away: two ranks")
def test_timeout_raises_from_wait_not_hang():
    c = pyhccl.Communicator(WORLD, timeout=0.5, abort_on_timeout=False)
    x, y = np.ones(4), np.empty(4)
    c.Iallreduce(x, y).Wait()                       # agreed: the next call sends before it waits
    if RANK == 0:
        req = c.Iallreduce(x, y)
        t = time.monotonic()
        with pytest.raises(pyhccl.CollectiveTimeoutError, match="waited 0.5 s"):
            req.Wait()
        assert time.monotonic() - t < 30
        req2 = c.Iallreduce(x, y)
        with pytest.raises(MPI.Exception):           # MPI's own Waitall reports the failure, no hang
            MPI.Request.Waitall([req2, WORLD.Ibarrier()])
    else:
        WORLD.Ibarrier().Wait()
    WORLD.Barrier()


def test_shm_algorithm_runs_on_the_mpi_runtime():
    c = pyhccl.Communicator(WORLD, algo="MeshTwoShot@shm")
    try:
        x, y = ints(100), np.empty(100)
        req = c.Iallreduce(x, y)
        req.Wait()
        assert req.algorithm == "MeshTwoShot" and c.fallbacks == 0
        assert np.array_equal(y, sum(ints(100, r) for r in range(N)))
    finally:
        c.release()


def test_repeated_calls_with_the_same_arrays_take_new_data(comm):
    x, y = np.empty(30), np.empty(30)
    for it in range(4):                             # the second call on is warm: no parse, same plan
        x[:] = ints(30, seed=it)
        req = comm.Iallreduce(x, y)
        MPI.Request.Waitall([req])
        assert np.array_equal(y, sum(ints(30, r, seed=it) for r in range(N))), it
    y.flags.writeable = False                       # read-only since: the full path refuses it
    with pytest.raises(ValueError, match="expecting a writable recvbuf"):
        comm.Iallreduce(x, y)
