"""The shared-memory engine with cross-memory attach (peers' ordinary arrays read in place), under mpiexec.

Every template of the engine's ops runs on an engine with ``cma=True`` against numpy (small
integers: every order gives the same bits) and, with random floats, against the MPI runtime
bit for bit; buffers that move, are freed and reallocated between calls are read afresh; a
read refused on one rank makes every rank fall back; PYHCCL_CMA=0 keeps the window path.
"""

import ctypes
import os

import numpy as np
import pytest
from mpi4py import MPI

from pyhccl import Communicator
from pyhccl.core.call import OPS, Call
from pyhccl.plan.api import NotRunnableError, build_plan, flat_names
from pyhccl.run.mpi import compile_plan
from pyhccl.run.shm import ShmEngine, ShmRunner, compile_shm
from pyhccl.run.shm.program import COPY, PEER, SYNC, UFUNC, WIN
from pyhccl.run.shm import cma

pytestmark = pytest.mark.mpi

COMM = MPI.COMM_WORLD
RANK, N = COMM.Get_rank(), COMM.Get_size()
_ENGINE = []


def engine():
    """One engine with cross-memory attach for the module (made on first use, collective)."""
    if not _ENGINE:
        _ENGINE.append(ShmEngine(COMM.Dup(), cma=True))
    return _ENGINE[0]


def buffers(call, x, fill=-99.0):
    """``(inp, out)`` of this rank for ``call`` with input values ``x``."""
    nout = call.output_count(RANK)
    if call.in_place:
        sh = call.in_place_offset(RANK)
        out = np.full(max(nout, sh + len(x)), fill, x.dtype)
        out[sh:sh + len(x)] = x
        return out, out
    return x.copy(), np.full(nout, fill, x.dtype)


def ints(call, r):
    return np.random.default_rng([r, call.count]).integers(-3, 4, call.input_count(r)).astype(np.float32)


def run_cma(call, algo, x, eng=None):
    eng = eng or engine()
    plans = [build_plan(call, algo, r) for r in range(N)]
    inp, out = buffers(call, x)
    ShmRunner(compile_shm(call, plans, x.dtype.itemsize, RANK, eng.cma), eng).run(COMM, (inp, out, None), np.add)
    return out


def agree_ok(bad):
    everyone = COMM.allgather(bad)
    assert not any(everyone), [b for bs in everyone for b in bs][:6]


@pytest.mark.skipif(N == 1, reason="a peer to read from")
def test_probe_finds_cma_here():
    """The machines this project runs on allow it (machine-facts.md); every rank agrees."""
    eng = engine()
    assert eng.cma and COMM.allgather(eng.cma) == [True] * N and len(eng.pids) == N


@pytest.mark.parametrize("op", ["allreduce", "all_gather", "reduce_scatter", "broadcast", "alltoall", "reduce"])
def test_every_template_against_numpy(op):
    spec, bad = OPS[op], []
    for algo in flat_names(op):
        for count in (0, 1, 7, 13, 30011):
            for ip in ((False, True) if spec.in_place_ok else (False,)):
                call = Call(op, N, count, root=0, in_place=ip)
                try:
                    got = run_cma(call, algo, ints(call, RANK))
                except NotRunnableError:
                    continue
                want = spec.reference(call, [ints(call, r) for r in range(N)], np.add)[RANK]
                if want is not None and not np.array_equal(got[:len(want)], want):
                    bad.append(f"{op} {algo} {count} ip={ip}")
    agree_ok(bad)


@pytest.mark.parametrize("op", ["allreduce", "reduce_scatter", "reduce"])
def test_bitwise_identical_to_the_mpi_runtime(op):
    """Random floats: the order of every addition matters; the engine's must be the MPI runtime's (a Reduce's at
    its root)."""
    bad = []
    for algo in flat_names(op):
        for count, ip in ((1001, False), (300007, False), (300007, True)):
            call = Call(op, N, count, in_place=ip)
            x = np.random.default_rng([RANK, count]).standard_normal(call.input_count(RANK)).astype(np.float32)
            try:
                plan = build_plan(call, algo, RANK)
            except NotRunnableError:
                continue
            got = run_cma(call, algo, x)
            runner = compile_plan(plan, 4)
            inp, out = buffers(call, x)
            runner.run(COMM, (inp, out, np.empty(runner.scratch_count, np.float32)), np.add)
            if op == "reduce" and RANK != call.root:    # a non-root's output is work space: what it holds is no result
                continue
            if not np.array_equal(got, out):
                bad.append(f"{op} {algo} {count} ip={ip}")
    agree_ok(bad)


@pytest.mark.parametrize("op, algo", [("allreduce", "MeshTwoShot"), ("allreduce", "Ring"),
                                      ("reduce_scatter", "Mesh"), ("all_gather", "NB")])
def test_reads_of_several_pieces(op, algo):
    """Peers' pieces over CHUNK_BYTES (256 KiB) are read and reduced piece by piece: bit for bit the MPI
    runtime's result, in place and out of place."""
    bad = []
    for ip in (False, True):
        call = Call(op, N, 1_000_003 if op == "allreduce" else 700_001, in_place=ip)
        x = np.random.default_rng([RANK, 5]).standard_normal(call.input_count(RANK)).astype(np.float32)
        got = run_cma(call, algo, x)
        runner = compile_plan(build_plan(call, algo, RANK), 4)
        inp, out = buffers(call, x)
        runner.run(COMM, (inp, out, np.empty(runner.scratch_count, np.float32)), np.add)
        if not np.array_equal(got, out):
            bad.append(f"{op} {algo} ip={ip}")
    agree_ok(bad)


@pytest.mark.parametrize("n", [2, 4])
def test_the_one_shot_reads_peers_inputs_between_two_barriers(n):
    """MeshOneShot in place: every load of a peer's copy of its input reads the input itself, so no step writes
    what a peer loads in it: no barrier between the loads and the reduce, each load fused into the reduce (no
    scratch in the window), two barriers in all."""
    call = Call("allreduce", n, 4096)
    plans = [build_plan(call, "MeshOneShot", r) for r in range(n)]
    sp = compile_shm(call, plans, 4, 1, cma=True)
    assert sp.syncs == 2
    loads = [e for e in sp.program if e[0] != SYNC]
    assert len(loads) == n - 1 and all(e[3][0] == PEER and e[3][2].value == "in" for e in loads), loads


@pytest.mark.parametrize("n", [4, 8])
def test_the_two_shot_reads_each_input_once_and_copies_nothing(n):
    """MeshTwoShot's plan keeps a rank's own slice in scratch while it loads the lower ranks' slices into its
    output (the rank-order reduce). Compiled, no rank copies its slice anywhere: every rank's program is n - 1
    reduces (the first of a rank above 1 reads two peers) and n - 1 pushes, none in the window."""
    call = Call("allreduce", n, 1 << 16)
    plans = [build_plan(call, "MeshTwoShot", r) for r in range(n)]
    for r in range(n):
        prog = [e for e in compile_shm(call, plans, 4, r, cma=True).program if e[0] != SYNC]
        assert [e[0] for e in prog] == [UFUNC] * (n - 1) + [COPY] * (n - 1), (r, prog)
        assert not [loc for e in prog for loc in e[1:] if loc is not None and loc[0] == WIN], (r, prog)


def test_a_non_root_reduce_copies_nothing_into_its_work_space():
    """A non-root Reduce's output is the templates' work space: MeshTwoShot's copy of the input into it (HCCL's
    first step) is left out where no peer reads the copy; the root's reduced slices still come from there."""
    call = Call("reduce", 4, 1 << 16, root=1)
    plans = [build_plan(call, "MeshTwoShot", r) for r in range(4)]
    for r in range(4):
        prog = [e for e in compile_shm(call, plans, 4, r, cma=True).program if e[0] != SYNC]
        assert [e[0] for e in prog] == [UFUNC] * 3 + [COPY] * 3 * (r == 1), (r, prog)


def test_moving_freed_and_reallocated_buffers_are_read_afresh():
    """Addresses are published every call: a buffer freed and another allocated (maybe at the same address)
    with other values, or one that moves on some ranks only, is never read stale."""
    call = Call("allreduce", N, 50021)
    plans = [build_plan(call, "MeshTwoShot", r) for r in range(N)]
    runner = ShmRunner(compile_shm(call, plans, 8, RANK, True), engine())
    keep = np.empty(50021)
    for i in range(6):
        vals = [np.full(50021, float(r + 10 * i)) for r in range(N)]
        if i % 2 and RANK % 2:
            x = keep
            x[:] = vals[RANK]
        else:
            x = vals[RANK].copy()           # a fresh array: freed after the call, its address reused
        out = np.empty(50021)
        runner.run(COMM, (x, out, None), np.add)
        assert np.array_equal(out, sum(vals[1:], vals[0])), i
        del x, out


def test_mixed_with_allocated_memory():
    """Ranks whose arrays are alloc() memory are loaded from in place; the others' read with CMA."""
    eng = engine()
    xs = [ints(Call("allreduce", N, 1001), r) for r in range(N)]
    mem = eng.alloc(1001 * 4).view(np.float32)
    mine = mem if RANK % 2 == 0 else np.empty(1001, np.float32)
    mine[:] = xs[RANK]
    for algo in ("MeshTwoShot", "MeshOneShot", "Ring"):
        out = run_cma(Call("allreduce", N, 1001), algo, mine)
        assert np.array_equal(out, sum(xs[1:], xs[0])), algo
    eng.release(mem)


def pushes(call, algo):
    """Entries of this rank's program that write a peer's memory (a load shared with its source)."""
    plan = compile_shm(call, [build_plan(call, algo, r) for r in range(N)], 4, RANK, True)
    return [e for e in plan.program if e[0] != SYNC and e[1][0] == PEER]


@pytest.mark.parametrize("op, algo", [("broadcast", "Mesh"), ("broadcast", "MeshTwoShot"), ("reduce", "MeshTwoShot"),
                                      ("reduce", "Mesh"), ("all_gather", "NB"), ("alltoall", "Pairwise"),
                                      ("all_gather", "Mesh"), ("alltoall", "Mesh"), ("allreduce", "MeshTwoShot")])
def test_loads_shared_with_an_idle_source(op, algo):
    """A rank with less work in a step pushes part of a peer's load (process_vm_writev) into the peer's
    buffer: Broadcast's root does at 2 ranks and more. Odd counts, every root, in place, and a peer's
    output in alloc() memory: bit for bit the MPI runtime's."""
    bad = []
    eng = engine()
    for count, root, ip in ((300_007, 0, False), (300_007, N - 1, True), (1_000_003, N // 2, False)):
        call = Call(op, N, count if op not in ("all_gather", "alltoall") else count // N + 1, root=root,
                    in_place=ip and OPS[op].in_place_ok)
        x = np.random.default_rng([RANK, count]).standard_normal(call.input_count(RANK)).astype(np.float32)
        got = run_cma(call, algo, x)
        runner = compile_plan(build_plan(call, algo, RANK), 4)
        inp, out = buffers(call, x)
        runner.run(COMM, (inp, out, np.empty(runner.scratch_count, np.float32)), np.add)
        k = call.output_count(RANK) if op != "reduce" or RANK == root else 0    # a non-root Reduce's: work space
        if k and not np.array_equal(got[:k], out[:k]):
            bad.append(f"{op} {algo} {count} root {root} ip={call.in_place}")
    if op == "broadcast" and N > 1:
        call = Call(op, N, 300_007, root=0)
        mem = eng.alloc(300_007 * 4).view(np.float32)
        buf = mem if RANK % 2 else np.empty(300_007, np.float32)
        want = np.random.default_rng(3).standard_normal(300_007).astype(np.float32)
        buf[:] = want if RANK == 0 else -1
        ShmRunner(compile_shm(call, [build_plan(call, algo, r) for r in range(N)], 4, RANK, True), eng).run(
            COMM, (buf, buf, None), None)
        if not np.array_equal(buf, want):
            bad.append(f"{op} {algo} into alloc() memory")
        eng.release(mem)
        if RANK == 0 and algo == "Mesh" and not pushes(call, algo):
            bad.append("the root of a Mesh Broadcast pushes nothing")
    agree_ok(bad)


@pytest.mark.skipif(N == 1, reason="one rank reads no peer")
def test_symmetric_loads_are_pushed_whole():
    """Where every rank would push as much as it loads (AllGather, AlltoAll, the gather of MeshTwoShot), each
    source writes its whole block into the loaders' buffers and the loaders read none of it."""
    for op, algo, count in (("all_gather", "Mesh", 1 << 20), ("alltoall", "Mesh", N << 18),
                            ("allreduce", "MeshTwoShot", N << 20)):
        call = Call(op, N, count)
        plan = compile_shm(call, [build_plan(call, algo, r) for r in range(N)], 4, RANK, True)
        syncs = [i for i, e in enumerate(plan.program) if e[0] == SYNC]
        reads = [e for e in plan.program[syncs[-2]:syncs[-1]] if e[0] != SYNC and e[2][0] == PEER]  # last step's
        assert not reads, (op, reads)
        # each rank writes to the ranks after it first: not every rank into rank 0 at once
        assert [e[1][1] for e in pushes(call, algo)] == [(RANK + k) % N for k in range(1, N)], op


def test_copies_with_a_peer_stay_whole_and_reduces_go_by_pieces():
    """A run of same-length ops is executed piece by piece where a piece then stays in cache (a reduce reading
    a peer's piece from the bounce buffer); a copy from or into a peer's memory is one system call whole."""
    from pyhccl.run.shm.execute import BLOCK, CHUNK_BYTES, _blocked
    k = CHUNK_BYTES                         # elements: a run of four pieces of k // 4
    mine = [np.zeros(k, np.float32) for _ in range(3)]
    far = [cma.Remote(1, 4096 * (j + 1), k, 4) for j in range(3)]
    copies = [(COPY, far[j], mine[j], None) for j in range(3)] + [(COPY, mine[j], far[j], None) for j in range(3)]
    assert _blocked(copies, k // 4) == copies
    reduces = [(UFUNC, mine[0], mine[0], far[j]) for j in range(3)]
    (code, pieces, _, _), = _blocked(reduces, k // 4)
    assert code == BLOCK and len(pieces) == 12 and all(p[1].size == k // 4 for p in pieces)


@pytest.mark.skipif(N == 1, reason="one rank reads no peer")
def test_refused_read_on_one_rank_makes_every_rank_fall_back(monkeypatch):
    """Rank 0's reads fail as under Yama's ptrace_scope: the probe says no on every rank, and the engine runs
    the window path (copy-in, copy-out) with the same results."""
    if RANK == 0:
        def refuse(*args):
            ctypes.set_errno(1)             # EPERM
            return -1
        monkeypatch.setattr(cma, "_READV", refuse)
    comm = COMM.Dup()
    eng = ShmEngine(comm, cma=True)
    monkeypatch.undo()
    try:
        assert not eng.cma and COMM.allgather(eng.cma) == [False] * N
        call = Call("allreduce", N, 10007)
        got = run_cma(call, "MeshTwoShot", ints(call, RANK), eng)
        assert np.array_equal(got, sum((ints(call, r) for r in range(N))))
        with pytest.raises(ValueError, match="compile_shm.*cma=engine.cma"):
            ShmRunner(compile_shm(call, [build_plan(call, "Ring", r) for r in range(N)], 4, RANK, True), eng)
    finally:
        eng.free()
        comm.Free()


def test_setting_turns_it_off(monkeypatch):
    monkeypatch.setenv("PYHCCL_CMA", "0")
    c = Communicator(COMM.Dup(), algo="MeshTwoShot@shm")
    x = np.arange(4099, dtype=np.float64) + RANK
    y = np.empty_like(x)
    c.Allreduce(x, y)
    assert not c.shm_engine().cma and np.array_equal(y, N * np.arange(4099.0) + N * (N - 1) / 2)
    c.Free()
    monkeypatch.setenv("PYHCCL_CMA", "maybe")
    with pytest.raises(ValueError, match="PYHCCL_CMA"):
        Communicator(COMM)


def test_communicator_uses_it():
    c = Communicator(COMM.Dup(), algo="NHR@shm")
    for count in (70001, 600001):            # the window below CMA_MIN_BYTES, cross-memory attach above
        x = np.arange(count, dtype=np.float32) % 7 + RANK
        y = np.empty_like(x)
        c.Allreduce(x, y)
        want = sum(np.arange(count, dtype=np.float32) % 7 + r for r in range(N))
        assert np.array_equal(y, want)
    eng = c.shm_engine()
    assert eng.cma == engine().cma
    assert not eng.cma_for(Call("allreduce", N, 70001), 4) and eng.cma_for(Call("allreduce", N, 600001), 4) == eng.cma
    c.Free()


def test_a_failed_read_names_the_fallback():
    dst = np.empty(4, np.float32)
    with pytest.raises(OSError, match="PYHCCL_CMA=0"):
        cma.reader(cma.Remote(os.getpid(), 8, 4, 4), dst)()          # address 8: never mapped
    with pytest.raises(ValueError, match="contiguous destination of 16 bytes"):
        cma.reader(cma.Remote(os.getpid(), 8, 4, 4), np.empty(8, np.float32)[::2])
