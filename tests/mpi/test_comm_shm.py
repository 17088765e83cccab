"""Communicator on the shared-memory engine: forced "<template>@shm" names and the measured profile's choice."""

import os
import tempfile

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl
from pyhccl.run.shm import ShmRunner
from pyhccl.tune import Point, Tuning

pytestmark = pytest.mark.mpi
W = MPI.COMM_WORLD


def runners(c):
    return {type(p).__name__ for p in c.compiled_plans.values()}


@pytest.mark.parametrize("algo", ["MeshTwoShot@shm", "NHR@shm", "Ring@shm"])
def test_forced_shm_allreduce_and_friends(algo):
    n, r = W.Get_size(), W.Get_rank()
    c = pyhccl.Communicator(W, algo=algo)
    for count in (1, 13, 4099):
        a = (np.arange(count) % 7 + r).astype(np.float64)
        b = np.empty_like(a)
        c.Allreduce(a, b)
        np.testing.assert_array_equal(b, n * (np.arange(count) % 7) + n * (n - 1) / 2)
        c.Allreduce(MPI.IN_PLACE, a, op=MPI.MAX)
        np.testing.assert_array_equal(a, np.arange(count) % 7 + n - 1)
    assert runners(c) == {"ShmRunner"}
    g = np.empty(3 * n, np.int32)
    pyhccl.Communicator(W, algo="Mesh@shm").Allgather(np.full(3, r, np.int32), g)
    np.testing.assert_array_equal(g, np.repeat(np.arange(n), 3))


def test_gather_runs_its_plan_over_mpi_reduce_on_the_engine():
    """Gather's root IN_PLACE gives it another plan than its peers: over MPI. Reduce runs on the engine (a small
    one: its one-step Mesh on the shared slots)."""
    n, r = W.Get_size(), W.Get_rank()
    c = pyhccl.Communicator(W, algo="Mesh@shm")
    g = np.zeros(2 * n, np.int64)
    c.Gather(np.full(2, r, np.int64), g if r == 0 else None, root=0)
    if r == 0:
        assert (g == np.repeat(np.arange(n), 2)).all()
    assert not any(isinstance(p, ShmRunner) for p in c.compiled_plans.values())
    x = np.full(5, r + 1, np.int64)
    y = np.zeros(5, np.int64)
    c.Reduce(x, y if r == 0 else None, root=0)
    if r == 0:
        assert (y == n * (n + 1) // 2).all()
    assert runners(c) == {"CompiledPlan", "OneShotRunner"}        # Gather over MPI; Reduce on the shared slots


@pytest.mark.parametrize("algo", ["Mesh", "MeshTwoShot", "NHR", "Ring"])
def test_reduce_on_the_engine_is_the_mpi_runtimes_bit_for_bit(algo):
    """Random floats, every root, the root in place or not, counts not divisible by the ranks, below and
    above CMA_MIN_BYTES: the engine's Reduce is bit for bit the MPI runtime's, and leaves a non-root's
    sendbuf and an in-place root's peers alone."""
    n, r = W.Get_size(), W.Get_rank()
    shm, mpi = pyhccl.Communicator(W, algo=algo + "@shm"), pyhccl.Communicator(W, algo=algo)
    bad = []
    for count in (1, 7, 1001, 600_007):
        x = np.random.default_rng([r, count]).standard_normal(count).astype(np.float32)
        for root in sorted({0, n - 1}):
            for ip in (False, True):
                got = []
                for c in (shm, mpi):
                    y = np.full(count, -9.0, np.float32)
                    if ip and r == root:
                        y[:] = x
                        c.Reduce(MPI.IN_PLACE, y, root=root)
                    else:
                        xc = x.copy()
                        c.Reduce(xc, y if r == root else None, root=root)
                        if not np.array_equal(xc, x) or (r != root and not (y == -9.0).all()):
                            bad.append(f"{type(c).__name__} touched a buffer: {count} root {root}")
                    got.append(y)
                if r == root and not np.array_equal(got[0], got[1]):
                    bad.append(f"{algo} {count} root {root} in place {ip}")
    assert runners(shm) == ({"OneShotRunner", "ShmRunner"} if algo == "Mesh" else {"ShmRunner"})    # small: the slots
    everyone = W.allgather(bad)
    assert not any(everyone), [b for bs in everyone for b in bs][:6]


def test_measured_profile_can_choose_shm():
    n = W.Get_size()
    path = W.bcast(tempfile.mktemp(suffix=".json") if W.Get_rank() == 0 else None)
    if W.Get_rank() == 0:
        pts = [Point("AllReduce", a, nb, t) for a, t in (("NHR", 50.0), ("Ring@shm", 5.0), ("NativeMPI", 40.0))
               for nb in (8, 1 << 20)]
        Tuning(f"1x1x{n}", n, 512 * 1024, tuple(pts)).save(path)
    W.Barrier()
    c = pyhccl.Communicator(W, topo=f"1x1x{n}", tuning=path)
    a = np.ones(1000, np.float32)
    b = np.empty_like(a)
    c.Allreduce(a, b)
    assert (b == n).all() and c.last_selection.algorithm == "Ring@shm"
    assert runners(c) == {"ShmRunner"}
    W.Barrier()
    if W.Get_rank() == 0:
        os.remove(path)


def test_free_releases_the_shared_window():
    """Free() frees the engine's window and node communicator (they leaked: about 1000 communicators created
    and freed crashed MPICH); an engine several communicators share (the benchmark's) lives until the last goes."""
    n = W.Get_size()
    a = np.arange(7, dtype=np.float64)
    b = np.empty_like(a)
    c = pyhccl.Communicator(W.Dup(), algo="NHR@shm")
    c.Allreduce(a, b)
    eng = c.shm_engine()
    d = pyhccl.Communicator(W.Dup(), algo="NHR@shm")
    d.share_window(c)
    c.Free()
    assert eng.win is not None and eng.users == 1
    d.Allreduce(a, b)
    assert (b == n * a).all() and d.shm_engine() is eng
    d.Free()
    assert eng.win is None and eng.comm == MPI.COMM_NULL
    e = pyhccl.Communicator(W.Dup(), algo="NHR@shm")      # the same plan, the same arrays, a new window
    b[:] = 0
    e.Allreduce(a, b)
    assert (b == n * a).all() and e.shm_engine() is not eng
    e.Free()


@pytest.mark.parametrize("algo", ["MeshTwoShot@shm", "Mesh@shm", ""])
def test_alloc_shared_arrays_run_every_collective(algo):
    """alloc_shared arrays are read in place by the @shm engine; odd ranks pass ordinary arrays."""
    n, r = W.Get_size(), W.Get_rank()
    c = pyhccl.Communicator(W.Dup(), algo=algo)
    x = c.alloc_shared((2, 3000), np.float32)
    y = c.alloc_shared(6000, np.float32)
    assert x.shape == (2, 3000) and x.dtype == np.float32 and y.shape == (6000,)
    src = x if r % 2 == 0 else np.empty((2, 3000), np.float32)
    src[...] = r + 1
    c.Allreduce(src, y)
    np.testing.assert_array_equal(y, n * (n + 1) / 2)
    y[...] = r
    c.Allreduce(MPI.IN_PLACE, y, op=MPI.MAX)
    np.testing.assert_array_equal(y, n - 1)
    g = c.alloc_shared(7 * n, np.int32)
    c.Allgather(np.full(7, r, np.int32), g)
    np.testing.assert_array_equal(g, np.repeat(np.arange(n), 7))
    rs = np.empty(7, np.int32)
    c.Reduce_scatter_block(g, rs)
    np.testing.assert_array_equal(rs, n * np.arange(n).repeat(7)[r * 7:(r + 1) * 7])
    for a in (x, y, g):
        c.free_shared(a)
    assert not c.shm_engine().heaps
    c.Free()


def test_alloc_shared_refuses_different_shapes_on_every_rank():
    n = W.Get_size()
    c = pyhccl.Communicator(W.Dup())
    if n > 1:
        with pytest.raises(ValueError, match="same number of bytes"):
            c.alloc_shared(10 + W.Get_rank(), np.float64)
    with pytest.raises(ValueError, match="shape"):
        c.alloc_shared((-1,))
    with pytest.raises(ValueError, match="outside any shared allocation"):
        c.free_shared(np.empty(3))
    c.Free()
