"""The warm path: calls repeated with the very same argument objects skip parsing and stay right."""

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl

pytestmark = pytest.mark.mpi


@pytest.fixture(scope="module")
def comm():
    return pyhccl.Communicator(MPI.COMM_WORLD)


def test_repeated_allreduce_sees_new_data_and_shapes(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    a = np.zeros(12, np.float64)
    b = np.empty_like(a)
    for step in range(5):
        a[...] = r + step
        comm.Allreduce(a, b)
        assert (b == sum(range(n)) + n * step).all()
        comm.Allreduce(MPI.IN_PLACE, a, op=MPI.MAX)
        assert (a == n - 1 + step).all()
    a.shape = (3, 4)                                     # same object, other shape: the full path again
    b.shape = (3, 4)
    a[...] = 1
    comm.Allreduce(a, b)
    assert (b == n).all()
    assert len(comm.warm_calls) >= 2


def test_staged_in_place_forms_repeat_right(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    buf = np.empty(2 * n, np.int32)
    for step in range(3):
        buf[...] = np.arange(2 * n) + 100 * r + step
        comm.Alltoall(MPI.IN_PLACE, buf)
        want = np.array([[100 * p + 2 * r + j + step for j in range(2)] for p in range(n)]).ravel()
        np.testing.assert_array_equal(buf, want)


def test_repeated_reduce_and_bcast(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    x = np.empty(7, np.int64)
    y = np.zeros(7, np.int64)
    for step in range(3):
        root = step % n
        x[...] = r * step
        comm.Reduce(x, y if r == root else None, root=root)
        if r == root:
            assert (y == step * n * (n - 1) // 2).all()
        x[...] = step if r == root else -1
        comm.Bcast(x, root=root)
        assert (x == step).all()


def test_fresh_array_calls_do_not_evict_a_loops_arrays(comm):
    n = comm.Get_size()
    grad, out = np.ones(16, np.float32), np.empty(16, np.float32)
    for step in range(3):
        comm.Allreduce(grad, out)                        # the training loop's arrays, used again and again
        assert (out == n).all()
        for _ in range(12):                              # more fresh calls than the warm cache holds
            comm.Allreduce(np.ones(3, np.float32), np.empty(3, np.float32))
            assert any(k[1:3] == (id(grad), id(out)) for k in comm.warm_calls)
            comm.Allreduce(grad, out)


def test_last_selection_follows_each_warm_call(comm):
    """Two loops' arrays in turn, and fresh calls between them: last_selection is always this call's."""
    n = comm.Get_size()
    small, small_out = np.ones(2, np.float32), np.empty(2, np.float32)
    big, big_out = np.ones(1 << 20, np.float32), np.empty(1 << 20, np.float32)
    comm.Allreduce(small, small_out)
    first = comm.last_selection
    comm.Allreduce(big, big_out)
    second = comm.last_selection
    assert first is not None and second is not None and first is not second
    for step in range(3):
        comm.Allreduce(small, small_out)
        assert comm.last_selection is first and (small_out == n).all()
        comm.Allreduce(small, small_out)
        assert comm.last_selection is first
        comm.Allreduce(big, big_out)
        assert comm.last_selection is second and (big_out == n).all()
        comm.Allreduce(np.ones(5, np.float32), np.empty(5, np.float32))      # the full path, in between
        assert comm.last_selection is not second
        comm.Allreduce(big, big_out)
        assert comm.last_selection is second


def test_native_choice_is_warm_and_right(tmp_path_factory):
    """A tuning file that makes native MPI the cheapest: repeats go straight to it, and stay right."""
    from pyhccl.tune import NATIVE, Point, Tuning
    world = MPI.COMM_WORLD
    n, r = world.Get_size(), world.Get_rank()
    path = world.bcast(str(tmp_path_factory.mktemp("warm") / "t.json") if r == 0 else None)
    if r == 0:
        pts = tuple(Point("AllReduce", a, nb, us) for a, us in ((NATIVE, 1.0), ("Ring", 500.0)) for nb in (8, 4096))
        Tuning(f"1x1x{n}", n, 512 * 1024, pts).save(path)
    world.Barrier()
    c = pyhccl.Communicator(world, topo=f"1x1x{n}", tuning=path)
    a = np.zeros(7, np.float32)
    b = np.empty_like(a)
    for step in range(4):
        a[...] = r + step
        c.Allreduce(a, b)
        assert c.last_selection.algorithm == NATIVE
        assert (b == sum(range(n)) + n * step).all()
    key = ("Allreduce", id(a), id(b), id(MPI.SUM))
    assert key in c.warm_calls and c.warm_calls[key].plan is None        # remembered, with no plan: native MPI
    a.dtype = np.int32                                              # same objects, other dtype: the full path again
    b.dtype = np.int32
    a[...] = 2
    c.Allreduce(a, b)
    assert (b == 2 * n).all()
    assert c.warm_calls[key].job.dtype == np.int32


def test_a_warm_output_made_read_only_is_refused_then_runs_again(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    x, out = np.full(4, r, np.float32), np.empty(4 * n, np.float32)
    for _ in range(3):
        comm.Allgather(x, out)                           # warm: the same objects every time
    out.flags.writeable = False
    with pytest.raises(ValueError, match="writable recvbuf"):
        comm.Allgather(x, out)
    out.flags.writeable = True
    out[...] = -1
    comm.Allgather(x, out)
    np.testing.assert_array_equal(out, np.repeat(np.arange(n, dtype=np.float32), 4))


def test_a_warm_input_made_read_only_still_runs(comm):
    n, r = comm.Get_size(), comm.Get_rank()
    x, out = np.full(3, r + 1, np.int64), np.empty(3, np.int64)
    comm.Allreduce(x, out)
    entry = comm.warm_calls[("Allreduce", id(x), id(out), id(MPI.SUM))]
    x.flags.writeable = False                            # an input may be read-only
    for _ in range(2):
        out[...] = 0
        comm.Allreduce(x, out)
        assert (out == n * (n + 1) // 2).all()
    assert comm.warm_calls[("Allreduce", id(x), id(out), id(MPI.SUM))] is entry      # the warm path: not remembered anew


def test_an_equal_dtype_object_set_again_takes_the_full_path_and_stays_right(comm):
    n = comm.Get_size()
    a, b = np.ones(5, np.float64), np.empty(5, np.float64)
    comm.Allreduce(a, b)
    a.dtype, b.dtype = np.dtype("<f8"), np.dtype("<f8")   # equal to the old dtype, perhaps another object
    comm.Allreduce(a, b)
    assert (b == n).all()
    a.dtype, b.dtype = np.int64, np.int64                 # same bytes read as another type
    a[...] = 2
    comm.Allreduce(a, b)
    assert (b == 2 * n).all() and b.dtype == np.int64
