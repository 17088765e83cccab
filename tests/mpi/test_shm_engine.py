"""The shared-memory runtime (pyhccl.run.shm) against the OpSpec references, under mpiexec.

Every template of AllReduce, AllGather, ReduceScatter, Broadcast, AlltoAll and Reduce, plus HCCL's
multi-level names on emulated layouts, runs over the shared window with counts 0, 1, primes
and 300001, out of place and in place; inputs are small integers so every reduction order
gives the same bits and results compare with ``array_equal``. With a timeout, a rank that never
reaches a node barrier makes the others raise CollectiveTimeoutError.
"""

import time

import numpy as np
import pytest
from mpi4py import MPI

from pyhccl.core.call import OPS, Call
from pyhccl.plan.api import NotRunnableError, build_plan, flat_names
from pyhccl.run.shm import ShmEngine, ShmPlan, ShmRunner, compile_shm, shm_engine
from pyhccl.run.timeout import CollectiveTimeoutError
from pyhccl.topo.machine import machine

pytestmark = pytest.mark.mpi

COMM = MPI.COMM_WORLD
RANK, N = COMM.Get_rank(), COMM.Get_size()
COUNTS = (0, 1, 7, 13)
BIG = 300001
UFUNCS = {"sum": np.add, "max": np.maximum, "prod": np.multiply}
#: HCCL's multi-level names, with the emulated layout they run on (server x die x rank).
HCCL = {"allreduce": ["AicpuAllReduceParallelMeshNHR", "AicpuAllReduceSequenceMeshNHRAicpuReduce",
                      "AicpuAllReducePipeLineMeshNHR", "AicpuAllReduceConcurMeshTwoShotNHR"],
        "all_gather": ["AicpuAllGatherParallelMeshNHR", "AicpuAllGatherPipeLineMeshNHR"],
        "reduce_scatter": ["AicpuReduceScatterParallelMeshNHR", "AicpuReduceScatterPipeLineMeshNHR"]}


def data(count, rank, op="sum"):
    rng = np.random.default_rng([rank, count])
    v = rng.choice([1, -1], count) if op == "prod" else rng.integers(-3, 4, count)
    return v.astype(np.float32)


def plans_for(call, algo, m=None):
    """Every rank's plan of ``call`` (``m``: the Machine whose level groups an HCCL name runs on)."""
    return [build_plan(call, algo, r, m) for r in range(call.nranks)]


def compiled(call, algo, m=None):
    return compile_shm(call, plans_for(call, algo, m), 4, RANK)


def run_case(call, algo, m=None, op="sum", eng=None):
    """This rank's ``(got, want)`` for ``call`` run by the shm engine."""
    r = RANK
    xs = [data(call.input_count(j), j, op) for j in range(call.nranks)]
    want = call.spec.reference(call, xs, UFUNCS[op])[r]
    nout = call.output_count(r)
    if call.in_place:
        sh = call.in_place_offset(r)
        out = np.full(max(nout, sh + len(xs[r])), -99, np.float32)
        out[sh:sh + len(xs[r])] = xs[r]
        inp = out
    else:
        out, inp = np.full(nout, -99, np.float32), xs[r].copy()
    ShmRunner(compiled(call, algo, m), eng or shm_engine(COMM)).run(COMM, (inp, out, None), UFUNCS[op])
    return (None if want is None else out[:len(want)]), want


def check(cases):
    """Run every case; fail on every rank together, listing the first few wrong ones."""
    bad = []
    for label, call, algo, m, op in cases:
        got, want = run_case(call, algo, m, op)
        if want is not None and not np.array_equal(got, want):
            bad.append((label, got[:8].tolist(), want[:8].tolist()))
    everyone = COMM.allgather(bad)
    assert not any(everyone), [b for bs in everyone for b in bs][:6]


def calls(op, counts=COUNTS):
    spec = OPS[op]
    root = N // 2 if spec.rooted else 0
    for count in counts:
        for ip in ((False, True) if spec.in_place_ok else (False,)):
            yield Call(op, N, count, root=root, in_place=ip)


@pytest.mark.parametrize("op", ["allreduce", "all_gather", "reduce_scatter", "broadcast", "alltoall", "reduce"])
def test_templates(op):
    cases = [(f"{op} {algo} {call.count} ip={call.in_place}", call, algo, None, "sum")
             for algo in flat_names(op) for call in calls(op)]
    check(cases)


def test_allreduce_large_count_every_template():
    check([(f"allreduce {algo} {BIG}", Call("allreduce", N, BIG, in_place=ip), algo, None, "sum")
           for algo in flat_names("allreduce") for ip in (False, True)])


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter"])
def test_large_count_other_ops(op):
    check([(f"{op} {algo} {BIG}", Call(op, N, BIG // N + 1), algo, None, "sum") for algo in flat_names(op)])


def test_reduce_ops():
    check([(f"allreduce {algo} {op}", Call("allreduce", N, 29), algo, None, op)
           for algo in ("MeshOneShot", "MeshTwoShot", "Ring", "NHR") for op in ("max", "prod")])


@pytest.mark.skipif(N not in (4, 8), reason="the emulated layouts need 4 or 8 ranks")
@pytest.mark.parametrize("op", sorted(HCCL))
def test_hccl_multilevel(op):
    topo = machine(f"1x2x{N // 2}")
    cases = []
    for name in HCCL[op]:
        for call in calls(op, (1, 13, 1009)):
            try:
                compiled(call, name, topo)
            except NotRunnableError:
                continue
            cases.append((f"{op} {name} {call.count} ip={call.in_place}", call, name, topo, "sum"))
    check(cases)


@pytest.mark.parametrize("algo", ["MeshTwoShot", "NHR", "MeshOneShot"])
def test_allocated_buffers_are_read_in_place(algo):
    """Arrays from ``engine.alloc`` are their window areas: nothing copied, peers bind to each rank's
    header, and ranks mix allocated and ordinary arrays (even ranks allocated input, odd ones ordinary)."""
    eng = shm_engine(COMM)
    xs = [data(1001, j) for j in range(N)]
    want = sum(xs[1:], xs[0])
    inp, out = (eng.alloc(1010 * 4).view(np.float32) for _ in range(2))
    mine = inp[3:1004] if RANK % 2 == 0 else np.empty(1001, np.float32)
    mine[:] = xs[RANK]
    plan = compiled(Call("allreduce", N, 1001), algo)
    runner = ShmRunner(plan, eng)
    for o in (out[:1001], out[9:], np.empty(1001, np.float32)):
        o[:] = 0
        runner.run(COMM, (mine, o, None), np.add)
        assert np.array_equal(o, want) and isinstance(plan, ShmPlan)
    out[:1001] = xs[RANK]                                   # in place
    ShmRunner(compiled(Call("allreduce", N, 1001, in_place=True), algo), eng) \
        .run(COMM, (out[:1001], out[:1001], None), np.add)
    assert np.array_equal(out[:1001], want)
    assert eng.where(inp[:0])[0] and eng.where(inp[5:9]) == (eng.where(inp)[0], 20)
    assert eng.where(np.empty(3)) == (0, 0)
    eng.release(inp)
    eng.release(out[:0])                                    # an empty array at its start names it too
    assert not eng.heaps


def test_alloc_refuses_different_sizes_and_frees():
    eng = shm_engine(COMM)
    if N > 1:
        with pytest.raises(ValueError, match="same number of bytes"):
            eng.alloc(64 + (RANK == 0))
    with pytest.raises(ValueError, match="free the same shared allocation"):
        eng.release(np.empty(4))


def test_engine_and_window_are_cached():
    call = Call("allreduce", N, 4096)
    x = data(4096, RANK)
    out = np.empty_like(x)
    assert compiled(call, "MeshOneShot") is compiled(call, "MeshOneShot")
    ShmRunner(compiled(call, "MeshOneShot"), shm_engine(COMM)).run(COMM, (x, out, None), np.add)
    eng = shm_engine(COMM)
    gen = eng.generation
    ShmRunner(compiled(call, "MeshOneShot"), shm_engine(COMM)).run(COMM, (x, out, None), np.add)
    assert shm_engine(COMM) is eng and eng.generation == gen
    assert np.array_equal(out, sum((data(4096, j) for j in range(N)), np.zeros(4096, np.float32)))


def test_engine_on_a_dup_and_free():
    comm = COMM.Dup()
    eng = ShmEngine(comm)
    got, want = run_case(Call("allreduce", N, 77), "Ring", eng=eng)
    eng.free()
    comm.Free()
    assert np.array_equal(got, want)


class _TwoNodes:
    """A communicator stand-in whose node communicator holds only this rank."""

    def __init__(self, comm):
        self.comm = comm

    def Split_type(self, *args, **kwargs):
        return MPI.COMM_SELF.Dup()

    def __getattr__(self, name):
        return getattr(self.comm, name)


@pytest.mark.skipif(N == 1, reason="one rank is always on one node")
def test_refuses_ranks_on_several_nodes():
    with pytest.raises(ValueError, match="one node .* use the MPI runtime"):
        ShmEngine(_TwoNodes(COMM))


@pytest.mark.skipif(N == 1, reason="a late rank needs a peer")
def test_a_late_rank_times_out_the_others_in_a_named_step():
    """With a timeout, the ranks waiting at a node barrier for a rank that never comes raise
    CollectiveTimeoutError naming the algorithm and step, within the timeout; the late rank then
    reaches the barrier they left pending, so the engine frees cleanly. A timed-out engine is
    unusable: it gets a communicator of its own."""
    comm = COMM.Dup()
    eng = ShmEngine(comm)
    call = Call("allreduce", N, 64)
    runner = ShmRunner(compiled(call, "MeshTwoShot"), eng)
    x, out = data(64, RANK), np.zeros(64, np.float32)
    runner.run(comm, (x, out, None), np.add, timeout=60)          # every rank on time: the window is made
    ok = np.array_equal(out, sum((data(64, j) for j in range(N)), np.zeros(64, np.float32)))
    late, timeout, error, waited = N - 1, 0.5, None, 0.0
    if RANK == late:
        time.sleep(4 * timeout)
        eng.sync(timeout=60)                  # catches up with the pending barrier (an Ibarrier, as theirs)
    else:
        start = time.monotonic()
        try:
            runner.run(comm, (x, out, None), np.add, timeout=timeout)
        except CollectiveTimeoutError as e:
            error = e
        waited = time.monotonic() - start
    COMM.Barrier()
    eng.free()
    comm.Free()
    assert ok
    if RANK != late:
        assert error is not None and timeout <= waited < timeout + 1.5, (error, waited)
        step = error.step
        assert f"rank {RANK} waited 0.5 s (PYHCCL_TIMEOUT) in the node barrier before step {step} (of steps 0.." \
            in str(error)
        assert "of allreduce algorithm MeshTwoShot@shm (count 64, 4-byte elements); still pending: " in str(error)
        assert error.algorithm == "MeshTwoShot@shm" and isinstance(step, int) and len(error.pending) == 1
