"""AlltoAll(V), Barrier, and the extra ReduceScatter / AllGather / AllReduce forms through the simulator."""

import random
from collections import defaultdict

import pytest

from pyhccl.core.call import Call
from pyhccl.plan.ir import Buf, Kind, Plan, Region, Step, copy
from pyhccl.plan.slices import Slices, VSlices
from pyhccl.plan.templates.alltoall import A2A, mesh_rounds
from pyhccl.plan.templates.barrier import BARRIER
from pyhccl.plan.templates.mesh import (all_gather_mesh, mesh_chunk_sizes, reduce_scatter_mesh,
                                        reduce_scatter_mesh_chunk)
from pyhccl.plan.templates.nb import all_gather_nb, allreduce_nb, reduce_scatter_nb
from pyhccl.plan.templates.nhr import (all_gather_nhr, nhr_step_count, reduce_scatter_nhr,
                                       reduce_scatter_nhr_aicpu_reduce)
from pyhccl.plan.templates.ordered import (allreduce_ordered, reduce_scatter_ordered_group,
                                           reduce_scatter_ordered_level1, tree_reduce_pairs)
from pyhccl.plan.templates.rhd import all_gather_rhd, reduce_scatter_rhd
from pyhccl.plan.templates.ring import all_gather_ring, reduce_scatter_ring
from pyhccl.verify.sim import simulate

IN, OUT, SCR = Buf.INPUT, Buf.OUTPUT, Buf.SCRATCH
RANKS = list(range(1, 18)) + [32, 33]
PRIME = 7919
BIG = 10_000_000_019

RS_FORMS = {
    "MeshChunk": reduce_scatter_mesh_chunk,
    "NHRAicpuReduce": reduce_scatter_nhr_aicpu_reduce,
    "NB": reduce_scatter_nb,
    "RHD": reduce_scatter_rhd,
    "OrderedLevel1": reduce_scatter_ordered_level1,
    "OrderedGroup": reduce_scatter_ordered_group,
}
AG_FORMS = {"NB": all_gather_nb, "RHD": all_gather_rhd,
            "Mesh": all_gather_mesh, "NHR": all_gather_nhr, "Ring": all_gather_ring}
AR_FORMS = {"NB": allreduce_nb, "Ordered": allreduce_ordered}


def counts(n):
    return sorted({0, 1, n + 1, PRIME, BIG})


# -- whole-op wrappers ----------------------------------------------------------------------

def _plans(n, build):
    return [Plan(r, tuple(build(r))) for r in range(n)]


def _cp(dst, src):
    """A copy step; an empty step when there is nothing to copy, so that ranks stay step-aligned."""
    return [Step(local=(copy(dst, src),) if dst.count else ())]


def alltoall_plans(template, call):
    n, c = call.nranks, call.count

    def build(r):
        send = [Region(IN, j * c, c) if c else None for j in range(n)]
        recv = [Region(OUT, j * c, c) if c else None for j in range(n)]
        return template(tuple(range(n)), r, send, recv, scratch=0)
    return _plans(n, build)


def alltoallv_plans(template, call):
    n, m = call.nranks, call.matrix

    def build(r):
        send = [Region(IN, call.sdispls[r][j], m[r][j]) if m[r][j] else None for j in range(n)]
        recv = [Region(OUT, call.rdispls[r][j], m[j][r]) if m[j][r] else None for j in range(n)]
        return template(tuple(range(n)), r, send, recv, scratch=0)
    return _plans(n, build)


def barrier_plans(template, call):
    n = call.nranks
    tok = Region(OUT, 0, 1)
    return _plans(n, lambda r: _cp(tok, Region(IN, 0, 1)) + template(tuple(range(n)), r, tok, scratch=0))


def rs_plans(template, call):
    n = call.nranks
    if call.counts is None:
        c = call.count
        sl, total, mine = Slices(0, n, c, n, 0), n * c, [c] * n
    else:
        sl = VSlices(call.displs, call.counts)
        total, mine = call.input_count(0), call.counts

    def build(r):
        steps = _cp(Region(SCR, 0, total), Region(IN, 0, total))
        steps += template(tuple(range(n)), r, sl, buf=SCR, scratch=total)
        reg = sl.region(SCR, r)
        return steps + (_cp(Region(OUT, 0, mine[r]), reg) if reg is not None else [])
    return _plans(n, build)


def ag_plans(template, call):
    n = call.nranks
    if call.counts is None:
        c = call.count
        sl = Slices(0, n, c, n, 0)
    else:
        sl = VSlices(call.displs, call.counts)

    def build(r):
        reg = sl.region(OUT, r)
        steps = _cp(reg, Region(IN, 0, reg.count)) if reg is not None else [Step()]
        return steps + template(tuple(range(n)), r, sl, buf=OUT, scratch=0)
    return _plans(n, build)


def ar_plans(template, call):
    n, c = call.nranks, call.count
    data = Region(OUT, 0, c)
    return _plans(n, lambda r: _cp(data, Region(IN, 0, c)) + template(tuple(range(n)), r, data, scratch=0))


def sent_per_step(plan):
    """Elements sent in each communication step."""
    return [sum(a.src.size for a in s.transfers if a.kind is Kind.SEND) for s in plan.steps if s.transfers]


def random_counts(rng, n, hi=9):
    return tuple(rng.choice([0, 0, 1, rng.randrange(hi), rng.randrange(hi * 10)]) for _ in range(n))


def scattered_displs(rng, cnts):
    """Blocks placed in a random order with random gaps."""
    order = list(range(len(cnts)))
    rng.shuffle(order)
    displs, off = [0] * len(cnts), 0
    for j in order:
        off += rng.randrange(3)
        displs[j] = off
        off += cnts[j]
    return tuple(displs)


# -- AlltoAll(V) ----------------------------------------------------------------------------

def test_mesh_rounds_cover_every_peer_once():
    for n in range(1, 131):
        for cap in (16, 31, 3, 1):
            rounds = [[set(rnd) for rnd in mesh_rounds(n, p, cap)] for p in range(n)]
            c = min(cap, n - 1)
            for p in range(n):
                met = sorted(q for rnd in rounds[p] for q in rnd)
                assert met == [q for q in range(n) if q != p], (n, cap, p)
                assert all(len(rnd) <= max(c, 2) for rnd in rounds[p])
                for k, rnd in enumerate(rounds[p]):
                    assert all(p in rounds[q][k] for q in rnd)          # both ends in the same round
            if n > 1 and cap == 16:
                assert len(rounds[0]) == -(-(n - 1) // c)                 # HCCL CalcCommLoops


@pytest.mark.parametrize("name", list(A2A))
def test_alltoall_simulates(name):
    for n in RANKS + ([64] if name == "Mesh" else []):
        for c in counts(n):
            call = Call("alltoall", n, c)
            plans = alltoall_plans(A2A[name], call)
            simulate(plans, call)
            if c and n > 1:
                rounds = -(-(n - 1) // min(16, n - 1)) if name == "Mesh" else n - 1
                assert all(p.step_count == rounds for p in plans), (n, c)
                assert all(p.count_sent() == (n - 1) * c for p in plans)


def test_alltoall_mesh_n64_groups_of_16():
    plans = alltoall_plans(A2A["Mesh"], Call("alltoall", 64, 3))
    p = plans[5]
    assert p.step_count == 4
    peers = [sorted({a.peer for a in s.transfers if a.kind is Kind.SEND}) for s in p.steps]
    assert [len(x) for x in peers] == [16, 16, 16, 15]
    assert peers[0] == sorted({(5 + i) % 64 for i in range(1, 9)} | {(5 - i) % 64 for i in range(1, 9)})
    assert peers[3] == sorted({(5 + i) % 64 for i in range(25, 33)} | {(5 - i) % 64 for i in range(25, 32)})


def test_pairwise_one_peer_each_way_per_step():
    for p in alltoall_plans(A2A["Pairwise"], Call("alltoall", 7, 2)):
        for k, s in enumerate(p.steps, 1):
            assert {(a.kind, a.peer) for a in s.transfers} == {(Kind.SEND, (p.rank + k) % 7),
                                                               (Kind.RECV, (p.rank - k) % 7)}


@pytest.mark.parametrize("name", list(A2A))
def test_alltoallv_simulates(name):
    rng = random.Random(7)
    for n in RANKS + ([64] if name == "Mesh" else []):
        for trial in range(3):
            m = tuple(random_counts(rng, n) for _ in range(n))
            if trial == 2:                                            # a rank with nothing at all
                m = tuple(tuple(0 if 0 in (i, j) else x for j, x in enumerate(row)) for i, row in enumerate(m))
            call = Call("alltoallv", n, matrix=m)
            simulate(alltoallv_plans(A2A[name], call), call)
        # scattered displacements with gaps
        m = tuple(random_counts(rng, n) for _ in range(n))
        sd = tuple(scattered_displs(rng, row) for row in m)
        rd = tuple(scattered_displs(rng, [m[i][j] for i in range(n)]) for j in range(n))
        call = Call("alltoallv", n, matrix=m, sdispls=sd, rdispls=rd)
        simulate(alltoallv_plans(A2A[name], call), call)


# -- Barrier --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(BARRIER))
def test_barrier_simulates(name):
    for n in RANKS + [64]:
        call = Call("barrier", n)
        plans = barrier_plans(BARRIER[name], call)
        simulate(plans, call)
        want = 0 if n == 1 else (nhr_step_count(n) if name == "NHR" else 1)
        assert all(p.step_count == want for p in plans)
        assert all(p.count_sent() == (n - 1 if name == "NHR" else n - 1) for p in plans)


def test_barrier_nhr_peers_follow_hccl():
    """InsTempBarrierNHRDPU: step s sends to pos + 2^(S-1-s), receives from pos - 2^(S-1-s)."""
    n = 11
    s_total = nhr_step_count(n)
    for p in barrier_plans(BARRIER["NHR"], Call("barrier", n)):
        comm = [s for s in p.steps if s.transfers]
        for s, st in enumerate(comm):
            d = 1 << (s_total - 1 - s)
            assert {a.peer for a in st.transfers if a.kind is Kind.SEND} == {(p.rank + d) % n}
            assert {a.peer for a in st.transfers if a.kind is Kind.RECV} == {(p.rank - d) % n}


# -- ReduceScatter / AllGather / AllReduce ----------------------------------------------------

@pytest.mark.parametrize("name", list(RS_FORMS))
def test_reduce_scatter_simulates(name):
    for n in RANKS:
        # MeshChunk and NHRAicpuReduce plans grow as N^3 actions: one large count past 17 ranks
        heavy = name in ("MeshChunk", "NHRAicpuReduce") and n > 17
        for c in [BIG] if heavy else counts(n):
            call = Call("reduce_scatter", n, c)
            plans = rs_plans(RS_FORMS[name], call)
            simulate(plans, call)
            if c and n > 1:
                _check_rs_counts(name, n, c, plans)


def _check_rs_counts(name, n, c, plans):
    s = nhr_step_count(n)
    p2 = 1 << (n.bit_length() - 1)
    if name == "MeshChunk":
        assert all(p.step_count == n - 1 and p.count_sent() == (n - 1) * c for p in plans)
    elif name == "NHRAicpuReduce":
        assert all(p.step_count == n * s and p.count_sent() == (n - 1) * n * c for p in plans)
    elif name == "NB":
        assert all(p.step_count == s and p.count_sent() == (n - 1) * c for p in plans)
        assert sent_per_step(plans[0]) == [(n - 1 + (1 << k)) // (2 << k) * c for k in range(s)]
    elif name == "RHD":
        if p2 == n:
            assert all(p.step_count == s and p.count_sent() == (n - 1) * c for p in plans)
        else:
            k, extra = p2.bit_length() - 1, n - p2
            for p in plans:
                if p.rank < 2 * extra and p.rank % 2:
                    assert (p.step_count, p.count_sent()) == (2, n * c)
                else:
                    assert p.step_count == k + (2 if p.rank < 2 * extra else 0)
    elif name == "OrderedLevel1":
        assert all(p.step_count == 1 and p.count_sent() == (n - 1) * c for p in plans)
    elif name == "OrderedGroup":
        rounds = 1 if n <= 32 else -(-(n // 2) // 15)
        assert all(p.step_count == rounds and p.count_sent() == (n - 1) * c for p in plans)


@pytest.mark.parametrize("name", list(RS_FORMS))
def test_reduce_scatter_v_simulates(name):
    rng = random.Random(11)
    for n in RANKS:
        heavy = name in ("MeshChunk", "NHRAicpuReduce") and n > 17
        for trial in (1,) if heavy else range(3):
            cnts = random_counts(rng, n) if trial < 2 else (0,) * (n - 1) + (5,)
            displs = scattered_displs(rng, cnts) if trial == 1 else None
            call = Call("reduce_scatter_v", n, counts=cnts, displs=displs)
            simulate(rs_plans(RS_FORMS[name], call), call)


@pytest.mark.parametrize("name", ["NB", "RHD"])
def test_all_gather_simulates(name):
    for n in RANKS:
        for c in counts(n):
            call = Call("all_gather", n, c)
            plans = ag_plans(AG_FORMS[name], call)
            simulate(plans, call)
            if c and n > 1 and name in ("NB", "RHD"):
                s = nhr_step_count(n)
                if name == "NB" or n & (n - 1) == 0:
                    assert all(p.step_count == s and p.count_sent() == (n - 1) * c for p in plans)


def test_all_gather_nb_is_bruck():
    """NB.md: slices per step 1, 2, 4, ..., the last N - 2^floor(log2 N) (N=5: 1,2,1; N=6: 1,2,2)."""
    for n, want in ((5, [1, 2, 1]), (6, [1, 2, 2]), (8, [1, 2, 4]), (13, [1, 2, 4, 5])):
        for p in ag_plans(all_gather_nb, Call("all_gather", n, 3)):
            assert sent_per_step(p) == [3 * k for k in want]
            first = next(s for s in p.steps if s.transfers)
            assert {a.peer for a in first.transfers if a.kind is Kind.SEND} == {(p.rank - 1) % n}


def _strided(n, c, repeat):
    """Slice j = ``repeat`` pieces of c/repeat elements, interleaved n*c/repeat apart (a Sequence level-0 layout)."""
    piece = c // repeat
    return VSlices(tuple(j * piece for j in range(n)), (piece,) * n, repeat, n * piece)


def rs_strided_plans(template, call, repeat):
    n, c = call.nranks, call.count
    sl = _strided(n, c, repeat)

    def build(r):
        steps = [Step(local=tuple(copy(sl.region(SCR, j), Region(IN, j * c, c)) for j in range(n)))]
        steps += template(tuple(range(n)), r, sl, buf=SCR, scratch=n * c)
        return steps + _cp(Region(OUT, 0, c), sl.region(SCR, r))
    return _plans(n, build)


def ag_strided_plans(template, call, repeat):
    n, c = call.nranks, call.count
    sl = _strided(n, c, repeat)

    def build(r):
        steps = _cp(sl.region(SCR, r), Region(IN, 0, c))
        steps += template(tuple(range(n)), r, sl, buf=SCR, scratch=n * c)
        return steps + [Step(local=tuple(copy(Region(OUT, j * c, c), sl.region(SCR, j)) for j in range(n)))]
    return _plans(n, build)


@pytest.mark.parametrize("role", ["RS", "AG"])
def test_strided_slices_simulate(role):
    """VSlices with repeat > 1 (the Sequence executors' strided level-0 slices)."""
    forms = RS_FORMS if role == "RS" else {k: AG_FORMS[k] for k in ("NB", "RHD")}
    for name, template in forms.items():
        for n in list(range(1, 10)) + [16, 17]:
            for piece, repeat in ((1, 2), (3, 3), (5, 2)):
                c = piece * repeat
                if role == "RS":
                    call = Call("reduce_scatter", n, c)
                    simulate(rs_strided_plans(template, call, repeat), call)
                else:
                    call = Call("all_gather", n, c)
                    simulate(ag_strided_plans(template, call, repeat), call)


@pytest.mark.parametrize("name", list(AG_FORMS))
def test_all_gather_v_simulates(name):
    rng = random.Random(13)
    for n in RANKS:
        for trial in range(3):
            cnts = random_counts(rng, n) if trial < 2 else (0,) * (n - 1) + (4,)
            displs = scattered_displs(rng, cnts) if trial == 1 else None
            call = Call("all_gather_v", n, counts=cnts, displs=displs)
            simulate(ag_plans(AG_FORMS[name], call), call)


@pytest.mark.parametrize("name", list(AR_FORMS))
def test_allreduce_simulates(name):
    for n in RANKS:
        for c in counts(n):
            call = Call("allreduce", n, c)
            plans = ar_plans(AR_FORMS[name], call)
            simulate(plans, call)
    n, c = 12, 12 * 16
    plans = ar_plans(AR_FORMS[name], Call("allreduce", n, c))
    s = nhr_step_count(n)
    rounds = 2 * s if name == "NB" else 1 + s
    assert all(p.step_count == rounds and p.count_sent() == 2 * (n - 1) * c // n for p in plans)
    plans = ar_plans(AR_FORMS[name], Call("allreduce", 6, 60))
    assert all(p.step_count == (2 * 3 if name == "NB" else 2) for p in plans)


def test_mesh_chunk_sizes_follow_hccl():
    assert mesh_chunk_sizes(10, 3) == [3, 3, 4]           # k-1 chunks of floor(10/3), the last the rest
    assert mesh_chunk_sizes(2, 3) == [1, 1, 0]            # too small: big chunks first
    assert mesh_chunk_sizes(7, 1) == [7]
    assert mesh_chunk_sizes(10_000, 3, align=1024) == [3072, 3072, 3856]
    assert mesh_chunk_sizes(1000, 3, align=1024) == [334, 333, 333]


def test_mesh_chunk_every_round_touches_every_peer():
    n = 6
    for p in rs_plans(reduce_scatter_mesh_chunk, Call("reduce_scatter", n, 50)):
        for s in (s for s in p.steps if s.transfers):
            assert {a.peer for a in s.transfers if a.kind is Kind.SEND} == set(range(n)) - {p.rank}
            assert {a.peer for a in s.transfers if a.kind is Kind.RECV} == set(range(n)) - {p.rank}


# -- strict order preservation ----------------------------------------------------------------

def test_tree_reduce_pairs():
    assert tree_reduce_pairs(1) == []
    assert tree_reduce_pairs(6) == [(0, 4), (1, 5), (0, 2), (1, 3), (0, 1)]
    for n in range(2, 70):
        pairs = tree_reduce_pairs(n)
        assert sorted(s for _, s in pairs) == list(range(1, n))


def _evaluate(plans, inputs):
    """Run plans on strings: every element is an expression over 'x<rank>.<index>', reduce = '(a+b)'."""
    n = len(plans)
    bufs = [{IN: dict(enumerate(inputs[r])), OUT: {}, SCR: {}} for r in range(n)]

    def read(r, reg):
        return [bufs[r][reg.buf][o + i] for o, c in reg.pieces() for i in range(c)]

    def write(r, reg, vals):
        it = iter(vals)
        for o, c in reg.pieces():
            for i in range(c):
                bufs[r][reg.buf][o + i] = next(it)

    for t in range(max(len(p.steps) for p in plans)):
        queues = defaultdict(list)
        for p in plans:
            if t < len(p.steps):
                for a in p.steps[t].transfers:
                    if a.kind is Kind.SEND:
                        queues[(p.rank, a.peer)].append(read(p.rank, a.src))
        for p in plans:
            if t < len(p.steps):
                for a in p.steps[t].transfers:
                    if a.kind is Kind.RECV:
                        write(p.rank, a.dst, queues[(a.peer, p.rank)].pop(0))
        for p in plans:
            if t < len(p.steps):
                for a in p.steps[t].local:
                    src = read(p.rank, a.src)
                    if a.kind is Kind.REDUCE:
                        src = [f"({x}+{y})" for x, y in zip(read(p.rank, a.dst), src)]
                    write(p.rank, a.dst, src)
    return bufs


@pytest.mark.parametrize("n", [3, 5, 8, 9, 12])
def test_ordered_allreduce_same_bracketing_everywhere(n):
    c = 2 * n + 1
    plans = ar_plans(allreduce_ordered, Call("allreduce", n, c))
    bufs = _evaluate(plans, [[f"x{r}" for _ in range(c)] for r in range(n)])
    outs = [[bufs[r][OUT][i] for i in range(c)] for r in range(n)]
    assert all(o == outs[0] for o in outs)                               # bitwise identical on every rank
    expect = [f"x{t}" for t in range(n)]                                  # the fixed tree over contributors
    for d, s in tree_reduce_pairs(n):
        expect[d] = f"({expect[d]}+{expect[s]})"
    assert set(outs[0]) == {expect[0]}


def test_ordered_rs_group_bounded_rounds():
    plans = rs_plans(reduce_scatter_ordered_group, Call("reduce_scatter", 40, 2))
    for p in plans:
        comm = [s for s in p.steps if s.transfers]
        assert len(comm) == 2
        assert max(len({a.peer for a in s.transfers if a.kind is Kind.SEND}) for s in comm) <= 31


def test_ag_templates_accept_scratch():
    for f in (all_gather_mesh, all_gather_nhr, all_gather_ring, all_gather_nb, all_gather_rhd):
        assert f((0, 1), 0, Slices(0, 2, 1, 2, 0), buf=OUT, scratch=5)
    for f in (reduce_scatter_mesh, reduce_scatter_nhr, reduce_scatter_ring):
        assert f((0, 1), 0, Slices(0, 2, 1, 2, 0), buf=OUT, scratch=5)
