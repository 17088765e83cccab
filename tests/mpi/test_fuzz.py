"""Hypothesis fuzz of every Communicator collective under mpiexec, against numpy references.

Each example draws a call (counts with 0, 1 and primes, every supported dtype and reduce op, a
random root, MPI.IN_PLACE where the method has it), an emulated layout valid for the rank count
(``1x1xN``, ``1xAxB``, ``PxSxD``, uneven TopoMeta lists, link options), a forced algorithm
(pyhccl's templates, ``<template>@shm``, HCCL names eligible for the call, now and then any
HCCL name, or none: HCCL's selection), a message size, the check, and a repeat on the warm path.
Inputs are small integers (+-1, +-2 for PROD) wherever the op reduces, so every reduction order
gives the same bits; results are compared element by element with the numpy reference computed
here, gaps and slack after the result must keep their values, send buffers must be unchanged.
A forced HCCL name must run exactly when the simulator's verifier says it can
(:func:`pyhccl.verify.check`); otherwise every rank must raise RuntimeError naming it.

MPI + hypothesis: every rank draws the same examples (derandomized per method, no database, no
deadline, no shrinking). Before each example the ranks compare a hash of it; after it they
gather every rank's outcome, so all raise together with the failing rank's message and no rank
is left waiting. ``PYHCCL_FUZZ_EXAMPLES`` sets the examples per method (default 4: CI's
budget); ``PYHCCL_FUZZ_REPORT=FILE`` appends one JSON line per method with the cases run
(benchmarks/fuzz.py runs the big budget).
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from mpi4py import MPI

import pyhccl
from pyhccl.algo import registry
from pyhccl.algo.attrs import check_op, check_topo
from pyhccl.algo.dtypes import parse_dtype, parse_reduce_op
from pyhccl.algo.predicates import OpCall
from pyhccl.comm import SUPPORTED_DTYPES
from pyhccl.core.call import Call
from pyhccl.plan.api import flat_names, hccl_names
from pyhccl.verify import check as sim_check
from pyhccl.verify import machine

from fuzz_common import draw_layout, run_reported  # tests/fuzz_common.py

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
N, RANK = WORLD.Get_size(), WORLD.Get_rank()
EXAMPLES = int(os.environ.get("PYHCCL_FUZZ_EXAMPLES") or 4)
REPORT = os.environ.get("PYHCCL_FUZZ_REPORT")

OP_OF = {"Allreduce": "allreduce", "Reduce": "reduce", "Bcast": "broadcast", "Allgather": "all_gather",
         "Allgatherv": "all_gather_v", "Gather": "gather", "Scatter": "scatter",
         "Reduce_scatter_block": "reduce_scatter", "Reduce_scatter": "reduce_scatter_v",
         "Alltoall": "alltoall", "Alltoallv": "alltoallv", "Barrier": "barrier"}
REDUCING = {"Allreduce", "Reduce", "Reduce_scatter_block", "Reduce_scatter"}
ROOTED = {"Reduce", "Bcast", "Gather", "Scatter"}
# recvbuf may be longer than the result, given with the result's count as [buf, count] (mpi4py refuses a longer bare
# buffer for a reduction: "mismatch in send count and receive count"; tests/test_comm.py checks pyhccl does too)
SLACK = {"Allreduce", "Reduce", "Scatter", "Reduce_scatter_block", "Reduce_scatter"}
ROPS = {"sum": (MPI.SUM, np.add), "prod": (MPI.PROD, np.multiply),
        "max": (MPI.MAX, np.maximum), "min": (MPI.MIN, np.minimum)}
PRIMES = [2, 3, 5, 7, 11, 13, 31, 61, 127, 257, 521, 1031]
COUNT = st.one_of(st.sampled_from([0, 1] + PRIMES), st.integers(0, 300))
SMALL = st.one_of(st.sampled_from([0, 1, 2, 3, 5, 7, 13]), st.integers(0, 40))
#: Link options; some fail on some layouts (a mesh_size that does not span a server): creating the
#: communicator must then raise ValueError on every rank, as machine() does.
OPTIONS = ["", "", "", ";level0=clos", ";level0=mesh+clos", ";dies=2", ";pcie=true", ";level1=roce", ";dpu=true",
           ";pod=true", ";level0=mesh+clos;mesh_size=2", ";mesh_size=3", ";level1=uboe;level2=ub_rtp", ";clos_ports=4"]
SENTINEL = 99


@dataclass(frozen=True)
class Case:
    """One drawn example: everything every rank needs to run and check it."""

    method: str
    op: str                                 # pyhccl's op the call runs
    topo: str
    algo: str                               # "" = HCCL's selection
    dtype: str
    rop: str
    count: int = 0
    counts: tuple[int, ...] | None = None   # Allgatherv, Reduce_scatter
    displs: tuple[int, ...] | None = None
    matrix: tuple[tuple[int, ...], ...] | None = None
    sdispls: tuple[tuple[int, ...], ...] | None = None
    rdispls: tuple[tuple[int, ...], ...] | None = None
    root: int = 0
    in_place: bool = False
    slack: int = 0
    recvcounts: bool = True                 # Reduce_scatter: pass recvcounts (else gathered from recvbuf sizes)
    ub: int | None = None
    checked: bool = False
    repeat: bool = False
    seed: int = 0


# -- drawing --------------------------------------------------------------------------------------------

def draw_topo(draw, n: int) -> str:
    return draw_layout(draw, n, max_cuts=3) + draw(st.sampled_from(OPTIONS))


def placed(draw, counts: list[int]) -> tuple[int, ...]:
    """Displacements: blocks in a drawn order with drawn gaps (no overlap)."""
    order = draw(st.permutations(range(len(counts))))
    gaps = draw(st.lists(st.integers(0, 2), min_size=len(counts), max_size=len(counts)))
    displs, at = [0] * len(counts), 0
    for j, gap in zip(order, gaps):
        displs[j], at = at + gap, at + gap + counts[j]
    return tuple(displs)


def eligible(op: str, topo: str, call: Call, dtype: str, rop: str) -> list[str]:
    """HCCL's names for ``op`` whose declared attributes admit this call on every rank (as verify checks)."""
    m = machine(topo)
    nbytes = call.hccl_nbytes(np.dtype(SUPPORTED_DTYPES[dtype]).itemsize)
    inplace = call.in_place and op in ("allreduce", "all_gather", "reduce_scatter")
    out = []
    for name in hccl_names(op):
        reg = registry.get(name)
        opcall = OpCall(reg.op, nbytes, parse_dtype(dtype), parse_reduce_op(rop), inplace, root=call.root)
        if not any(check_topo(reg.op, reg.engine, reg.topo, info, soft=False)
                   or check_op(reg.opattrs, opcall, info, soft=False) for info in m.infos):
            out.append(name)
    return out


def topo_ok(topo: str) -> bool:
    try:
        machine(topo)
    except ValueError:
        return False
    return True


@st.composite
def cases(draw, method: str) -> Case:
    n = N
    topo = draw_topo(draw, n)
    dtype = draw(st.sampled_from(list(SUPPORTED_DTYPES)))
    rop = draw(st.sampled_from(list(ROPS))) if method in REDUCING else "sum"
    root = draw(st.integers(0, n - 1)) if method in ROOTED else 0
    kw: dict = {"count": draw(COUNT)} if method not in ("Allgatherv", "Reduce_scatter", "Alltoallv", "Barrier") else {}
    op = OP_OF[method]
    in_place = method != "Barrier" and draw(st.booleans())
    if method == "Allgatherv":
        counts = draw(st.lists(SMALL, min_size=n, max_size=n))
        kw.update(counts=tuple(counts), displs=placed(draw, counts) if draw(st.booleans()) else None)
    elif method == "Reduce_scatter":
        even = draw(st.booleans())
        counts = [draw(SMALL)] * n if even else draw(st.lists(SMALL, min_size=n, max_size=n))
        op = "reduce_scatter" if len(set(counts)) == 1 else "reduce_scatter_v"
        kw.update(counts=tuple(counts))
    elif method == "Alltoallv":
        if in_place:                        # in place needs a symmetric matrix
            half = [[draw(SMALL) for _ in range(n)] for _ in range(n)]
            m = [[half[min(i, j)][max(i, j)] for j in range(n)] for i in range(n)]
        else:
            m = [draw(st.lists(SMALL, min_size=n, max_size=n)) for _ in range(n)]
        sd = [placed(draw, row) for row in m] if draw(st.booleans()) else None
        rd = [placed(draw, [m[i][j] for i in range(n)]) for j in range(n)] if not in_place and sd else None
        if in_place and sd:
            rd = sd                         # one buffer: the same displacements for both
        kw.update(matrix=tuple(map(tuple, m)), sdispls=sd and tuple(sd), rdispls=rd and tuple(rd))
    call = shape_call(op, n, kw, root, in_place)
    algo = draw_algo(draw, op, topo, call, dtype, rop)
    itemsize = np.dtype(SUPPORTED_DTYPES[dtype]).itemsize
    ub = draw(st.sampled_from([None, None, 16, 256, 4096]))
    if ub and biggest(kw) * itemsize > 64 * ub:
        ub = None                           # keep the message count small
    recvcounts = method != "Reduce_scatter" or in_place or draw(st.booleans())
    slack = draw(st.integers(0, 2)) if method in SLACK and not in_place and recvcounts else 0
    return Case(method, op, topo, algo, dtype, rop, root=root, in_place=in_place, ub=ub, slack=slack,
                recvcounts=recvcounts, checked=draw(st.integers(0, 5)) == 0, repeat=draw(st.booleans()),
                seed=draw(st.integers(0, 2**31)), **kw)


def biggest(kw: dict) -> int:
    return max([kw.get("count", 0), *(kw.get("counts") or ()), *(x for row in kw.get("matrix") or () for x in row)])


def draw_algo(draw, op: str, topo: str, call: Call, dtype: str, rop: str) -> str:
    kind = draw(st.sampled_from(["auto", "template", "template", "shm", "hccl", "hccl", "hccl", "any"]))
    hccl = hccl_names(op)
    if kind in ("hccl", "any") and hccl and topo_ok(topo):
        ok = eligible(op, topo, call, dtype, rop) if kind == "hccl" else hccl
        if ok:
            return draw(st.sampled_from(ok))
    if kind == "auto":
        return ""
    return draw(st.sampled_from(flat_names(op))) + ("@shm" if kind == "shm" else "")


def shape_call(op: str, n: int, kw: dict, root: int, in_place: bool) -> Call:
    """The call as every rank shares it (a root's own IN_PLACE and Allgatherv's displs left out)."""
    if op in ("all_gather_v", "reduce_scatter_v"):
        return Call(op, n, counts=kw["counts"])
    if op == "reduce_scatter" and "counts" in kw:
        return Call(op, n, kw["counts"][0], in_place=in_place)
    if op == "alltoallv":
        return Call(op, n, matrix=kw["matrix"], sdispls=kw["sdispls"], rdispls=kw["rdispls"])
    if op == "barrier":
        return Call(op, n)
    shared = in_place and op in ("allreduce", "all_gather", "reduce_scatter")
    return Call(op, n, kw["count"], root=root, in_place=shared)


# -- data and references --------------------------------------------------------------------------------

def values(case: Case, rank: int, size: int) -> np.ndarray:
    """Rank ``rank``'s input: exact in every reduction order for reducing methods, anything otherwise."""
    dt = SUPPORTED_DTYPES[case.dtype]
    rng = np.random.default_rng([case.seed, rank, size])
    signed = dt.kind != "u"
    if case.method not in REDUCING:
        if dt.kind in "iu":
            info = np.iinfo(dt)
            return rng.integers(info.min, info.max, size, dtype=dt, endpoint=True)
        return (rng.standard_normal(size) * 1000).astype(dt)
    if case.rop == "sum":
        v = rng.integers(-3, 4, size) if signed else rng.integers(0, 7, size)
    elif case.rop == "prod":
        v = rng.choice([-2, -1, 1, 2] if signed else [1, 2, 3], size)
    else:
        v = rng.integers(-100, 101, size) if signed else rng.integers(0, 201, size)
    return v.astype(dt)


def fold(xs: list[np.ndarray], ufunc) -> np.ndarray:
    acc = xs[0].copy()
    for x in xs[1:]:
        ufunc(acc, x, out=acc)
    return acc


def input_size(case: Case, r: int) -> int:
    n, k = N, case.count
    if case.method in ("Allreduce", "Reduce", "Bcast", "Allgather", "Gather"):
        return k
    if case.method in ("Scatter", "Reduce_scatter_block", "Alltoall"):
        return n * k
    if case.method == "Allgatherv":
        return case.counts[r]
    if case.method == "Reduce_scatter":
        return sum(case.counts)
    if case.method == "Alltoallv":
        sd = case.sdispls[r] if case.sdispls else np.cumsum((0,) + case.matrix[r][:-1])
        return max((d + c for d, c in zip(sd, case.matrix[r])), default=0)
    return 0


# -- running one example --------------------------------------------------------------------------------
# Each runner calls its method once and returns (label, got, want) triples. ``keep`` holds the arrays
# across the calls of one example: a repeated call passes the very same objects (the warm path).

def fresh(keep: dict, init: np.ndarray) -> np.ndarray:
    """The example's receive buffer (the same object on every call), reset to ``init``."""
    buf = keep.get("buf")
    if buf is None:
        buf = keep["buf"] = init.copy()
    else:
        buf[...] = init
    return buf


def blank(dt: np.dtype, size: int) -> np.ndarray:
    return np.full(size, SENTINEL, dt)


def padded(want: np.ndarray, size: int) -> np.ndarray:
    """The result followed by untouched slack."""
    return np.concatenate([want, blank(want.dtype, size - want.size)])


def packed(counts) -> tuple[int, ...]:
    return tuple(int(v) for v in np.cumsum([0, *counts])[:-1])


def run_allreduce(c, case, xs, keep):
    x, mop, uf = xs[RANK], *ROPS[case.rop]
    want = fold(xs, uf)
    buf = fresh(keep, x if case.in_place else blank(x.dtype, case.count + case.slack))
    c.Allreduce(MPI.IN_PLACE if case.in_place else x, [buf, case.count] if case.slack else buf, mop)
    return [("", buf, padded(want, buf.size))]


def run_reduce(c, case, xs, keep):
    x, (mop, uf), root = xs[RANK], ROPS[case.rop], case.root
    if RANK != root:
        c.Reduce(x, None, mop, root)
        return []
    ip = case.in_place
    buf = fresh(keep, x if ip else blank(x.dtype, case.count + case.slack))
    c.Reduce(MPI.IN_PLACE if ip else x, [buf, case.count] if case.slack else buf, mop, root)
    return [("", buf, padded(fold(xs, uf), buf.size))]


def run_bcast(c, case, xs, keep):
    root = case.root
    buf = fresh(keep, xs[root] if RANK == root else blank(xs[root].dtype, case.count))
    c.Bcast(buf, root)
    return [("", buf, xs[root])]


def run_gather(c, case, xs, keep, method="Gather"):
    x, k = xs[RANK], case.count
    if method == "Gather" and RANK != case.root:
        c.Gather(x, None, case.root)
        return []
    init = blank(x.dtype, N * k)
    if case.in_place:
        init[RANK * k:(RANK + 1) * k] = x
    buf = fresh(keep, init)
    getattr(c, method)(MPI.IN_PLACE if case.in_place else x, buf, *([case.root] if method == "Gather" else []))
    return [("", buf, np.concatenate(xs))]


def run_allgather(c, case, xs, keep):
    return run_gather(c, case, xs, keep, "Allgather")


def run_allgatherv(c, case, xs, keep):
    x, counts = xs[RANK], list(case.counts)
    displs = case.displs or packed(counts)
    init = blank(x.dtype, max((d + q for d, q in zip(displs, counts)), default=0))
    want = init.copy()
    for j in range(N):
        want[displs[j]:displs[j] + counts[j]] = xs[j]
    if case.in_place:
        init[displs[RANK]:displs[RANK] + counts[RANK]] = x
    buf = fresh(keep, init)
    spec = [buf, (counts, list(displs))] if case.displs else [buf, counts]
    c.Allgatherv(MPI.IN_PLACE if case.in_place else x, spec)
    return [("", buf, want)]


def run_scatter(c, case, xs, keep):
    x, k, root = xs[RANK], case.count, case.root
    send = x if RANK == root else None
    if case.in_place and RANK == root:          # the root's block stays in sendbuf
        c.Scatter(send, MPI.IN_PLACE, root)
        return []
    buf = fresh(keep, blank(xs[root].dtype, k + case.slack))
    # a non-root rank knows the count only from recvbuf: a longer one gives it as [buf, count]
    c.Scatter(send, [buf, k] if case.slack and RANK != root else buf, root)
    return [("", buf, padded(xs[root][RANK * k:(RANK + 1) * k], buf.size))]


def run_reduce_scatter_block(c, case, xs, keep):
    x, k, (mop, uf) = xs[RANK], case.count, ROPS[case.rop]
    want = fold(xs, uf)[RANK * k:(RANK + 1) * k]
    if case.in_place:                           # the result lands at the start of the input
        buf = fresh(keep, x)
        c.Reduce_scatter_block(MPI.IN_PLACE, buf, mop)
        return [("", buf[:k], want)]
    buf = fresh(keep, blank(x.dtype, k + case.slack))
    c.Reduce_scatter_block(x, [buf, k] if case.slack else buf, mop)
    return [("", buf, padded(want, buf.size))]


def run_reduce_scatter(c, case, xs, keep):
    x, counts, (mop, uf) = xs[RANK], list(case.counts), ROPS[case.rop]
    lo, mine = sum(counts[:RANK]), counts[RANK]
    want = fold(xs, uf)[lo:lo + mine]
    if case.in_place:
        buf = fresh(keep, x)
        c.Reduce_scatter(MPI.IN_PLACE, buf, counts, mop)
        return [("", buf[:mine], want)]
    buf = fresh(keep, blank(x.dtype, mine + case.slack))
    c.Reduce_scatter(x, [buf, mine] if case.slack else buf, counts if case.recvcounts else None, mop)
    return [("", buf, padded(want, buf.size))]


def run_alltoall(c, case, xs, keep):
    x, k = xs[RANK], case.count
    want = np.concatenate([xs[j][RANK * k:(RANK + 1) * k] for j in range(N)])
    buf = fresh(keep, x if case.in_place else blank(x.dtype, N * k))
    c.Alltoall(MPI.IN_PLACE if case.in_place else x, buf)
    return [("", buf, want)]


def run_alltoallv(c, case, xs, keep):
    x, mat = xs[RANK], case.matrix
    sd = case.sdispls or tuple(packed(row) for row in mat)
    rd = case.rdispls or tuple(packed([mat[i][j] for i in range(N)]) for j in range(N))
    rcounts = [mat[i][RANK] for i in range(N)]
    if case.in_place:
        init = x
    else:
        init = blank(x.dtype, max((d + q for d, q in zip(rd[RANK], rcounts)), default=0))
    want = init.copy()
    for i in range(N):
        want[rd[RANK][i]:rd[RANK][i] + rcounts[i]] = xs[i][sd[i][RANK]:sd[i][RANK] + rcounts[i]]
    buf = fresh(keep, init)
    recv = [buf, (rcounts, list(rd[RANK]))] if case.rdispls else [buf, rcounts]
    if case.in_place:
        c.Alltoallv(MPI.IN_PLACE, recv)
    else:
        c.Alltoallv([x, (list(mat[RANK]), list(sd[RANK]))] if case.sdispls else [x, list(mat[RANK])], recv)
    return [("", buf, want)]


def run_barrier(c, case, xs, keep):
    c.Barrier()
    return []


RUN = {m: globals()["run_" + m.lower()] for m in OP_OF}


def run_case(c: pyhccl.Communicator, case: Case) -> list[str]:
    """Run the case's method (twice when ``repeat``: the warm path); the mismatches found on this rank."""
    xs = [values(case, j, input_size(case, j)) for j in range(N)]
    sent = xs[RANK].copy()
    keep: dict = {}
    bad = []
    for call_no in range(1 + case.repeat):
        for label, got, want in RUN[case.method](c, case, xs, keep):
            if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
                diff = np.flatnonzero(got != want)[:8] if got.shape == want.shape else "shape"
                bad.append(f"call {call_no + 1}{label}: {got.dtype}{got.shape} != {want.dtype}{want.shape} at {diff}: "
                           f"got {got[:12].tolist()} want {want[:12].tolist()}")
    if not np.array_equal(xs[RANK], sent):
        bad.append("the send buffer changed")
    if c.fallbacks:
        bad.append(f"{c.fallbacks} calls went to the wrapped MPI")
    return bad


def expectation(case: Case) -> str:
    """"ok", "topo" (creating the communicator must fail) or "refused" (a RuntimeError naming the algorithm)."""
    if not topo_ok(case.topo):
        return "topo"
    name = case.algo
    if not name or name.split("@")[0] in flat_names(case.op):
        return "ok"
    call = shape_call(case.op, N, case_kw(case), case.root, case.in_place)
    if call.data_count == 0 and case.op != "barrier":
        return "ok"                         # counts of 0 return at once: no selection
    res = sim_check(call, name, machine(case.topo), dtype=case.dtype, reduce_op=case.rop)
    assert res.status != "failed", f"the simulator rejects {name} for {call}: {res.error}"
    return "ok" if res.ok else "refused"


def case_kw(case: Case) -> dict:
    if case.counts is not None:
        return {"counts": case.counts}
    if case.matrix is not None:
        return {"matrix": case.matrix, "sdispls": case.sdispls, "rdispls": case.rdispls}
    return {"count": case.count}


def one_example(case: Case, stats: Counter) -> None:
    """Run ``case`` on every rank; all ranks raise together when any rank fails."""
    digest = hashlib.sha256(repr(case).encode()).hexdigest()
    digests = WORLD.allgather(digest)
    if len(set(digests)) != 1:
        raise AssertionError(f"ranks drew different examples (hashes {digests}); rank {RANK} drew {case}")
    stats["cases"] += 1
    stats[kind(case)] += 1
    error = None
    try:
        want = expectation(case)
        error = attempt(case, want)
    except Exception as e:  # noqa: BLE001 - any failure must reach every rank
        error = f"{type(e).__name__}: {e}"
    errors = WORLD.allgather(error)
    failed = [(r, e) for r, e in enumerate(errors) if e]
    if failed:
        r, e = failed[0]
        raise AssertionError(f"{len(failed)} of {N} ranks failed; rank {r}: {e}\n{case}")
    stats[want] += 1


def attempt(case: Case, want: str) -> str | None:
    """This rank's verdict on the example: None when it behaved as expected, else what went wrong."""
    dup = WORLD.Dup()
    try:
        c = pyhccl.Communicator(dup, topo=case.topo, algo=case.algo, ub_transfer_bytes=case.ub,
                                check=case.checked, tuning="")
    except ValueError as e:
        dup.Free()
        return None if want == "topo" else f"creating the communicator raised {type(e).__name__}: {e}"
    try:
        if want == "topo":
            return f"topology {case.topo} was accepted, but machine() rejects it"
        try:
            bad = run_case(c, case)
        except RuntimeError as e:
            if want == "refused" and case.algo in str(e):
                return None
            raise
        if want == "refused":
            return f"{case.algo} ran, but the verifier says it cannot run here"
        sel = c.last_selection
        ran = case.op == "barrier" or shape_call(case.op, N, case_kw(case), case.root, case.in_place).data_count
        if ran and case.algo in hccl_names(case.op) and (sel is None or sel.algorithm != case.algo):
            bad.append(f"ran {sel and sel.algorithm}, not the forced {case.algo}")
        return "; ".join(bad) or None
    finally:
        c.Free()


def kind(case: Case) -> str:
    if not case.algo:
        return "selection"
    if case.algo.endswith("@shm"):
        return "shm"
    return "template" if case.algo in flat_names(case.op) else "hccl"


def report(method: str, stats: Counter, failure: str | None) -> None:
    """One JSON line per method for benchmarks/fuzz.py: cases run, how they were expected to end, the failure."""
    if REPORT and RANK == 0:
        with open(REPORT, "a") as f:
            f.write(json.dumps({"part": "mpi", "ranks": N, "test": method, **stats, "failure": failure}) + "\n")


@pytest.mark.parametrize("method", list(OP_OF))
def test_fuzz_collective(method):
    stats: Counter = Counter()

    @seed(zlib.crc32(method.encode()))
    @settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
              phases=(Phase.explicit, Phase.generate), suppress_health_check=list(HealthCheck), print_blob=False)
    @given(case=cases(method))
    def fuzz(case):
        one_example(case, stats)

    run_reported(fuzz, lambda failure: report(method, stats, failure))
