"""The device path (pyhccl/gpu.py, CompiledPlan.run_device) under mpiexec, on emulated device arrays.

Run by tests/test_mpi_launch.py as ``mpiexec -n K python -m pytest --with-mpi tests/mpi``. An
:class:`EmulatedDevice` plays the GPU with host memory behind arrays that neither numpy nor MPI
can read, so every op runs the device runner exactly as with cupy: staged through "pinned"
pieces of at most the UB transfer size, or direct (a CUDA-aware MPI). Each op runs once on
device arrays through pyhccl and once on host arrays through the wrapped MPI communicator; the
results must be equal and stay in the device arrays passed in. The host runner is switched
off while these tests run, so any host shortcut fails.

``exercise`` is also run on real cupy arrays by tests/mpi/test_gpu_cupy.py.
"""

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl
from pyhccl import gpu
from pyhccl.run.mpi import CompiledPlan

pytestmark = pytest.mark.mpi

COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()
UB = 64                     # bytes per message: a 37-element float32 block is 3 pieces
REDUCE = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}


def data(dtype, count, rank, seed=0, op="sum"):
    """Small integers (+-1 for PROD): exact in any reduction order."""
    rng = np.random.default_rng([seed, rank, count])
    v = rng.choice([1, -1], count) if op == "prod" else rng.integers(-3, 4, count)
    return v.astype(dtype)


def exercise(c, wrap, unwrap, k=37, dtypes=("float32", "int64")):
    """Every op on device arrays (``wrap``: host -> device) against the wrapped communicator on host arrays.

    Returns the mismatches as ``(label, got, want)``; each device output must come back from
    ``unwrap`` equal to the host result.
    """
    bad = []
    n, r = c.Get_size(), c.Get_rank()
    native = c.comm

    def both(label, method, build):
        h_args, h_outs = build(lambda a: a.copy())
        d_args, d_outs = build(wrap)
        getattr(native, method)(*h_args)
        getattr(c, method)(*d_args)
        for i, (h, d) in enumerate(zip(h_outs, d_outs)):
            got = unwrap(d)
            if got.dtype != h.dtype or not np.array_equal(got, h):
                bad.append(((method, *label, i), got.tolist()[:8], h.tolist()[:8]))

    counts = [(3 * j + 1) % 4 + (k if j % 2 else 0) for j in range(n)]           # uneven, some small
    sends = [[(i + 2 * j) % 3 + k // 4 for j in range(n)] for i in range(n)]    # Alltoallv matrix
    for dt in map(np.dtype, dtypes):
        x = data(dt, k, r)
        blocks = data(dt, n * k, r, 1)
        for op, mop in REDUCE.items():
            v = data(dt, k, r, 2, op)
            both((dt.name, op), "Allreduce", lambda mk: ((mk(v), o := mk(np.zeros(k, dt)), mop), [o]))
            both((dt.name, op, "in place"), "Allreduce", lambda mk: ((MPI.IN_PLACE, o := mk(v), mop), [o]))
        for root in sorted({0, n - 1}):
            at = r == root
            both((dt.name, root), "Reduce",
                 lambda mk: ((mk(x), o := mk(np.zeros(k, dt)) if at else None, MPI.SUM, root), [o] if at else []))
            both((dt.name, root), "Bcast", lambda mk: ((o := mk(x if at else np.zeros(k, dt)), root), [o]))
            both((dt.name, root), "Gather",
                 lambda mk: ((mk(x), o := mk(np.zeros(n * k, dt)) if at else None, root), [o] if at else []))
            both((dt.name, root), "Scatter",
                 lambda mk: ((mk(blocks) if at else None, o := mk(np.zeros(k, dt)), root), [o]))
        both((dt.name,), "Allgather", lambda mk: ((mk(x), o := mk(np.zeros(n * k, dt))), [o]))
        both((dt.name, "in place"), "Allgather",
             lambda mk: ((MPI.IN_PLACE, o := mk(np.where(np.arange(n * k) // k == r, np.resize(x, n * k), 0)
                                                  .astype(dt))), [o]))
        both((dt.name,), "Allgatherv",
             lambda mk: ((mk(data(dt, counts[r], r)), [o := mk(np.zeros(sum(counts), dt)), counts]), [o]))
        both((dt.name,), "Reduce_scatter_block", lambda mk: ((mk(blocks), o := mk(np.zeros(k, dt))), [o]))
        both((dt.name, "in place"), "Reduce_scatter_block", lambda mk: ((MPI.IN_PLACE, o := mk(blocks)), [o[:k]]))
        both((dt.name,), "Reduce_scatter",
             lambda mk: ((mk(data(dt, sum(counts), r)), o := mk(np.zeros(counts[r], dt)), counts), [o]))
        both((dt.name, "in place"), "Reduce_scatter",
             lambda mk: ((MPI.IN_PLACE, o := mk(data(dt, sum(counts), r)), counts), [o[:counts[r]]]))
        both((dt.name,), "Alltoall", lambda mk: ((mk(blocks), o := mk(np.zeros(n * k, dt))), [o]))
        both((dt.name, "in place"), "Alltoall", lambda mk: ((MPI.IN_PLACE, o := mk(blocks)), [o]))
        sc, rc = sends[r], [sends[i][r] for i in range(n)]
        both((dt.name,), "Alltoallv",
             lambda mk: (([mk(data(dt, sum(sc), r)), sc], [o := mk(np.zeros(sum(rc), dt)), rc]), [o]))
    return bad


def forbid_host_runner(monkeypatch, direct, what):
    """Make ``CompiledPlan.run`` (the host runner) raise, except for the one case the device path hands it:
    a staged (not ``direct()``) call with messages whose buffers fit in one piece."""
    host_run = CompiledPlan.run

    def host_runner(plan, comm, bufs, *args, **kwargs):
        if direct() or not plan.step_nbytes or max(bufs[0].nbytes, bufs[1].nbytes) > plan.per_msg:
            raise AssertionError(f"CompiledPlan.run (the host runner) used for {what}")
        return host_run(plan, comm, bufs, *args, **kwargs)
    monkeypatch.setattr(CompiledPlan, "run", host_runner)


@pytest.fixture
def device(request, monkeypatch):
    """An EmulatedDevice (``request.param``: direct or staged), registered; the host runner switched off
    (staged: except for a call whose buffers fit in one piece, which runs on host copies)."""
    dev = gpu.EmulatedDevice(direct=request.param == "direct")
    forbid_host_runner(monkeypatch, dev.direct, "device buffers")
    gpu.register(dev)
    yield dev
    gpu.unregister(dev)


def wrap(a):
    return gpu.EmulatedArray(a, device_id=3)


def unwrap(d):
    assert isinstance(d, gpu.EmulatedArray) and d.device_id == 3, f"result left the device: {type(d).__name__}"
    return d.get()


def expect_all(ok):
    assert COMM.allreduce(ok, op=MPI.LAND)


@pytest.mark.parametrize("device", ["staged", "direct"], indirect=True)
def test_every_op_on_the_device(device):
    c = pyhccl.Communicator(COMM, ub_transfer_bytes=UB)
    bad = exercise(c, wrap, unwrap)
    msgs = sum(len(s[0]) for p in c.compiled_plans.values() if isinstance(p, CompiledPlan) for s in p.steps)
    c.release()
    assert c.fallbacks == 0
    expect_all(not bad)
    assert not bad, bad[:4]
    if SIZE > 1:
        assert device.kernels > 0 and device.syncs > 0          # reduces and copies ran as device kernels
        assert msgs > 0
    if device.direct():
        assert device.pieces == [] and device.staged_pieces == 0
    else:
        assert device.staged_pieces == len(device.pieces) >= msgs * (SIZE > 1)
        assert max(device.pieces, default=0) <= UB


@pytest.mark.parametrize("device", ["staged"], indirect=True)
def test_staged_call_in_one_piece_runs_on_host_copies(device):
    """A staged call whose buffers fit in one piece: one copy each way (and the output's), no device kernel."""
    c = pyhccl.Communicator(COMM, ub_transfer_bytes=UB)
    x = wrap(np.arange(8, dtype=np.float32) + RANK)
    out = wrap(np.zeros(8, np.float32))
    c.Allreduce(x, out)
    c.release()
    assert np.array_equal(unwrap(out), SIZE * np.arange(8, dtype=np.float32) + SIZE * (SIZE - 1) / 2)
    if SIZE == 1:                   # no message: the plan's local copy runs on the device, nothing staged
        assert device.pieces == [] and device.kernels > 0 and device.staged_pieces == 0
    else:
        assert device.pieces == [32, 32, 32] and device.kernels == 0 and device.syncs == 2
        assert device.staged_pieces == 3


@pytest.mark.parametrize("device", ["staged"], indirect=True)
def test_staged_pieces_are_the_plans_messages(device):
    """One Allreduce: one pinned piece per message of the compiled plan, none over the UB size."""
    c = pyhccl.Communicator(COMM, ub_transfer_bytes=UB)
    k = 1000                                         # 4000 bytes: at least 4000 / 64 pieces per rank's share
    out = wrap(np.zeros(k, np.float32))
    c.Allreduce(wrap(np.ones(k, np.float32)), out)
    (plan,) = c.compiled_plans.values()
    c.release()
    assert device.staged_pieces == sum(len(s[0]) for s in plan.steps) == len(device.pieces)
    assert all(0 < p <= UB for p in device.pieces)
    assert (SIZE == 1) == (device.staged_pieces == 0)
    assert SIZE == 1 or device.staged_pieces >= 2 * (k * 4 // SIZE) // UB      # this rank's share, out and in
    assert np.array_equal(unwrap(out), np.full(k, SIZE, np.float32))


@pytest.mark.parametrize("device", ["staged", "direct"], indirect=True)
def test_timed_loop_on_the_device(device):
    c = pyhccl.Communicator(COMM, ub_transfer_bytes=UB, timeout=60)
    out = wrap(np.zeros(50, np.int32))
    c.Allreduce(wrap(np.arange(50, dtype=np.int32)), out, MPI.MAX)
    c.release()
    assert np.array_equal(unwrap(out), np.arange(50, dtype=np.int32))


@pytest.mark.parametrize("device", ["staged"], indirect=True)
def test_mixed_host_and_device_raises(device):
    c = pyhccl.Communicator(COMM)
    with pytest.raises(ValueError, match="expecting sendbuf and recvbuf in the same memory, got sendbuf on "
                                         "the host and recvbuf on emulated device 3"):
        c.Allreduce(np.ones(4, np.float32), wrap(np.zeros(4, np.float32)))
    with pytest.raises(ValueError, match="got sendbuf on emulated device 3 and recvbuf on the host"):
        c.Allgather(wrap(np.ones(4, np.float32)), np.zeros(4 * SIZE, np.float32))
    c.release()
