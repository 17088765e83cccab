"""Rooted templates (Scatter, Gather, Broadcast, Reduce) through the simulator, and their step/byte counts."""

import random

import pytest

from pyhccl.core.call import Call
from pyhccl.plan.ir import Buf, Kind, Plan, Region, Step, copy
from pyhccl.plan.slices import Slices, VSlices
from pyhccl.plan.templates import BCAST, GATHER, REDUCE, SCATTER, all_gather_mesh, nhr_step_count, reduce_scatter_mesh
from pyhccl.verify.sim import simulate

RANKS = list(range(1, 18)) + [32, 33]
BIG = 10_000_000_019


def counts(n):
    """0, 1, N-1, N+1, a prime, a prime above ten billion."""
    return sorted({0, 1, max(n - 1, 0), n + 1, 7919, BIG})


def roots(n):
    return sorted({0, n // 2, n - 1})


def shuffled(n):
    """A fixed non-identity order of the ranks: positions differ from ranks."""
    g = list(range(n))
    random.Random(n).shuffle(g)
    return tuple(g)


def _slices(group, c):
    """One slice of ``c`` per position, placed at its rank's block (rank r's block at r*c)."""
    n = len(group)
    if group == tuple(range(n)):
        return Slices(0, n, c, n, 0)
    return VSlices(tuple(g * c for g in group), (c,) * n)


def _local(*acts):
    return Step(local=tuple(a for a in acts if a.src.size))


def _plan(r, steps, op, name, n, c):
    return Plan(r, tuple(steps), (("op", op), ("algo", name), ("nranks", n), ("count", c), ("in_place", False)))


# -- whole-op wrappers (buffer conventions of pyhccl/core/call.py) ---------------------------

def scatter_plans(name, n, c, root, group=None):
    """Root stages INPUT in SCRATCH[0:n*c], the template scatters there, everyone copies its block out."""
    group = group or tuple(range(n))
    sl, total = _slices(group, c), n * c
    plans = []
    for r in range(n):
        pre = _local(copy(Region(Buf.SCRATCH, 0, total), Region(Buf.INPUT, 0, total))) if r == root else Step()
        body = SCATTER[name](group, group.index(r), group.index(root), sl, buf=Buf.SCRATCH, scratch=total)
        post = _local(copy(Region(Buf.OUTPUT, 0, c), Region(Buf.SCRATCH, r * c, c)))
        plans.append(_plan(r, [pre] + body + [post], "scatter", name, n, c))
    return Call("scatter", n, c, root=root), plans


def gather_plans(name, n, c, root, group=None):
    """Everyone stages its INPUT at its block of SCRATCH, the template gathers there, the root copies out."""
    group = group or tuple(range(n))
    sl, total = _slices(group, c), n * c
    plans = []
    for r in range(n):
        pre = _local(copy(Region(Buf.SCRATCH, r * c, c), Region(Buf.INPUT, 0, c)))
        body = GATHER[name](group, group.index(r), group.index(root), sl, buf=Buf.SCRATCH, scratch=total)
        post = _local(copy(Region(Buf.OUTPUT, 0, total), Region(Buf.SCRATCH, 0, total))) if r == root else Step()
        plans.append(_plan(r, [pre] + body + [post], "gather", name, n, c))
    return Call("gather", n, c, root=root), plans


def bcast_plans(name, n, c, root, group=None):
    """Broadcast is always in place: the data is OUTPUT[0:c] on every rank."""
    group = group or tuple(range(n))
    data = Region(Buf.OUTPUT, 0, c)
    plans = [_plan(r, BCAST[name](group, group.index(r), group.index(root), data, scratch=0), "broadcast", name, n, c)
             for r in range(n)]
    return Call("broadcast", n, c, root=root), plans


def reduce_plans(name, n, c, root, group=None, in_place=False):
    """INPUT[0:c] -> OUTPUT[0:c] (unless in place), then the template on OUTPUT[0:c] (scratch from 7)."""
    group = group or tuple(range(n))
    data = Region(Buf.OUTPUT, 0, c)
    plans = []
    for r in range(n):
        pre = [] if in_place else [_local(copy(data, Region(Buf.INPUT, 0, c)))]
        body = REDUCE[name](group, group.index(r), group.index(root), data, scratch=7)
        plans.append(_plan(r, pre + body, "reduce", name, n, c))
    return Call("reduce", n, c, root=root, in_place=in_place), plans


BUILDERS = {"scatter": (SCATTER, scatter_plans), "gather": (GATHER, gather_plans),
            "broadcast": (BCAST, bcast_plans), "reduce": (REDUCE, reduce_plans)}
CASES = [(op, name) for op, (table, _) in BUILDERS.items() for name in table]


def _check(op, name, n, c, root, group=None):
    call, plans = BUILDERS[op][1](name, n, c, root, group)
    assert len({len(p.steps) for p in plans}) == 1, "every rank must have the same number of steps"
    simulate(plans, call)
    return plans


# -- simulation sweep ---------------------------------------------------------------------

def test_tables_hold_the_expected_names():
    assert list(SCATTER) == ["Mesh", "NHR", "NB", "Ring"]
    assert list(GATHER) == ["Mesh", "NHR", "Ring"]
    assert list(BCAST) == ["Mesh", "MeshTwoShot", "NHR", "Ring", "RHD"]
    assert list(REDUCE) == ["Mesh", "MeshTwoShot", "NHR", "NHRAicpuReduce", "Ring"]
    for table in (SCATTER, GATHER, BCAST, REDUCE):
        for fn in table.values():
            assert "HCCL: " in fn.__doc__


@pytest.mark.parametrize("op,name", CASES)
def test_simulates(op, name):
    for n in RANKS:
        for root in roots(n):
            for c in counts(n):
                _check(op, name, n, c, root)
        if n > 2:       # positions differ from ranks: group[p] must name the peer, VSlices for Scatter/Gather
            for root in (0, n - 2):
                for c in (n + 1, 7919):
                    _check(op, name, n, c, root, shuffled(n))


@pytest.mark.parametrize("name", list(REDUCE))
def test_reduce_in_place(name):
    for n in (1, 2, 5, 8, 13):
        for root in roots(n):
            call, plans = reduce_plans(name, n, 3 * n + 2, root, in_place=True)
            simulate(plans, call)


@pytest.mark.parametrize("op,name", CASES)
def test_nothing_to_move(op, name):
    table = BUILDERS[op][0]
    for n in (1, 4):
        arg = _slices(tuple(range(n)), 0) if op in ("scatter", "gather") else Region(Buf.OUTPUT, 0, 0)
        for pos in range(n):
            assert table[name](tuple(range(n)), pos, 0, arg, scratch=0) == []
    arg = _slices((0,), 7) if op in ("scatter", "gather") else Region(Buf.OUTPUT, 0, 7)
    assert table[name]((0,), 0, 0, arg, scratch=0) == []


def _uneven(n, c, rng):
    """VSlices cutting [0, c) into n pieces of random sizes (some empty), placed in a random order."""
    cuts = sorted(rng.randint(0, c) for _ in range(n - 1))
    sizes = [b - a for a, b in zip([0] + cuts, cuts + [c])]
    order = list(range(n))
    rng.shuffle(order)                  # slice order[i] is the i-th piece of the buffer
    offs = [0] * n
    at = 0
    for j in order:
        offs[j] = at
        at += sizes[j]
    return VSlices(tuple(offs), tuple(sizes))


@pytest.mark.parametrize("name", list(SCATTER))
def test_scatter_uneven_vslices(name):
    """Broadcast = Scatter of uneven VSlices (some empty) + mesh AllGather of the same slices."""
    rng = random.Random(1)
    for n in (2, 3, 5, 7, 8, 11, 16):
        for c in (0, 1, n - 1, 3 * n + 1, 10 * n):
            for root in roots(n):
                sl = _uneven(n, c, rng)
                plans = [Plan(r, tuple(SCATTER[name](tuple(range(n)), r, root, sl, buf=Buf.OUTPUT)
                                       + all_gather_mesh(tuple(range(n)), r, sl, buf=Buf.OUTPUT)))
                         for r in range(n)]
                simulate(plans, Call("broadcast", n, c, root=root))


@pytest.mark.parametrize("name", list(GATHER))
def test_gather_uneven_vslices(name):
    """Reduce = mesh ReduceScatter of uneven VSlices (some empty) + Gather of the same slices."""
    rng = random.Random(2)
    for n in (2, 3, 5, 7, 8, 11, 16):
        for c in (0, 1, n - 1, 3 * n + 1, 10 * n):
            for root in roots(n):
                sl = _uneven(n, c, rng)
                plans = [Plan(r, tuple(reduce_scatter_mesh(tuple(range(n)), r, sl, buf=Buf.OUTPUT, scratch=0)
                                       + GATHER[name](tuple(range(n)), r, root, sl, buf=Buf.OUTPUT)))
                         for r in range(n)]
                simulate(plans, Call("reduce", n, c, root=root, in_place=True))


# -- step and byte counts -----------------------------------------------------------------

def _rounds(p):
    return p.step_count


def _sent(p):
    return p.count_sent()


def _received(p):
    return sum(a.dst.size for s in p.steps for a in s.transfers if a.kind is Kind.RECV)


NS = [2, 3, 4, 5, 6, 7, 8, 12, 16, 17, 33]


@pytest.mark.parametrize("n", NS)
def test_scatter_gather_counts(n):
    s, c = nhr_step_count(n), 11
    for root in roots(n):
        dist = [(r - root) % n for r in range(n)]
        for name in SCATTER:
            plans = _check("scatter", name, n, c, root)
            assert _sent(plans[root]) == (n - 1) * c                  # (N-1)/N of the data leaves the root
            assert all(_received(p) == (0 if p.rank == root else c) + (_sent(p) if p.rank != root else 0)
                       for p in plans)                                  # non-roots keep exactly one slice
            rounds = {"Mesh": 1, "NHR": s, "NB": s, "Ring": n - 1}[name]
            assert _rounds(plans[root]) == rounds
            assert max(_rounds(p) for p in plans) == rounds
            if name == "Mesh":
                assert all(_sent(p) == 0 for p in plans if p.rank != root)
            if name == "Ring":
                assert [_sent(p) for p in plans] == [(n - 1 - e) * c if e else (n - 1) * c for e in dist]
        for name in GATHER:
            plans = _check("gather", name, n, c, root)
            assert _received(plans[root]) == (n - 1) * c and _sent(plans[root]) == 0
            rounds = {"Mesh": 1, "NHR": s, "Ring": n - 1}[name]
            assert _rounds(plans[root]) == rounds
            assert max(_rounds(p) for p in plans) == rounds
            if name == "Ring":
                assert [_sent(p) for p in plans] == [(n - e) * c if e else 0 for e in dist]
        # Gather is the time-reversal of Scatter: same volume per rank, sent and received swapped
        for name in GATHER:
            sc = scatter_plans(name, n, c, root)[1]
            ga = gather_plans(name, n, c, root)[1]
            assert [_sent(p) for p in sc] == [_received(p) for p in ga]


@pytest.mark.parametrize("n", NS)
def test_broadcast_counts(n):
    s = nhr_step_count(n)
    c = n * 24                              # divisible by N: equal chunks
    for root in roots(n):
        plans = {name: _check("broadcast", name, n, c, root) for name in BCAST}
        for name in ("Mesh", "Ring", "RHD"):           # whole vectors: every non-root receives it once
            assert all(_received(p) == (0 if p.rank == root else c) for p in plans[name])
        assert [_rounds(p) for p in plans["Mesh"]] == [1] * n
        assert _sent(plans["Mesh"][root]) == (n - 1) * c
        two = plans["MeshTwoShot"]
        assert max(_rounds(p) for p in two) == (2 if n > 2 else 1)
        assert _sent(two[root]) == 2 * (n - 1) * (c // n)
        assert all(_sent(p) == (n - 2) * (c // n) for p in two if p.rank != root)
        nhr = plans["NHR"]
        assert len(nhr[root].steps) == 2 * s
        assert _sent(nhr[root]) == 2 * (n - 1) * c // n          # doc: 2(p-1)/p n for Scatter + AllGather
        assert max(_sent(p) for p in nhr) == 2 * (n - 1) * c // n
        assert len(plans["Ring"][root].steps) == n - 1
        assert sorted(_sent(p) for p in plans["Ring"]) == [0] + [c] * (n - 1)
        assert len(plans["RHD"][root].steps) == s                # ceil(log2 N)(α + nβ)
        assert sum(_sent(p) for p in plans["RHD"]) == (n - 1) * c


@pytest.mark.parametrize("n", NS)
def test_reduce_counts(n):
    s = nhr_step_count(n)
    c = n * 24
    for root in roots(n):
        plans = {name: _check("reduce", name, n, c, root) for name in REDUCE}
        one = plans["Mesh"]
        assert max(_rounds(p) for p in one) == 1
        assert [_sent(p) for p in one] == [0 if r == root else c for r in range(n)]
        assert _received(one[root]) == (n - 1) * c
        two = plans["MeshTwoShot"]
        assert max(_rounds(p) for p in two) == 2
        assert [_sent(p) for p in two] == [(n - 1) * c // n if r == root else c for r in range(n)]
        assert [_sent(p) for p in plans["NHR"]] == [2 * (n - 1) * c // n] * n
        assert max(_rounds(p) for p in plans["NHR"]) == 2 * s
        aic = plans["NHRAicpuReduce"]
        assert [_sent(p) for p in aic] == [(n - 1) * c] * n
        assert max(_rounds(p) for p in aic) == s
        ring = plans["Ring"]
        assert len(ring[root].steps) == 1 + n - 1 and _rounds(ring[root]) == 1   # each rank is busy in <= 2 steps
        assert [_sent(p) for p in ring] == [0 if r == root else c for r in range(n)]


# -- worked examples from the reference ---------------------------------------------------

def _sends(p):
    """Per step: {peer: sorted slice indices} (one element per slice)."""
    out = []
    for st in p.steps:
        d = {}
        for a in st.transfers:
            if a.kind is Kind.SEND:
                d.setdefault(a.peer, []).extend(o for o, _ in a.src.pieces())
        out.append({k: sorted(v) for k, v in d.items()})
    return out


def _template_sends(table, name, n, root):
    sl = Slices(0, n, 1, n, 0)          # one element per slice: offset = slice index
    steps = {r: table[name](tuple(range(n)), r, root, sl, buf=Buf.SCRATCH, scratch=n) for r in range(n)}
    return {r: _sends(Plan(r, tuple(st))) for r, st in steps.items()}


def test_nhr_scatter_worked_example_n5():
    """hccl-templates.md 1.2, N = 5, root 0: s0: 0->4 {4,2}; s1: 0->3 {3}, 4->2 {2}; s2: 0->1 {1}."""
    got = _template_sends(SCATTER, "NHR", 5, 0)
    assert got[0] == [{4: [2, 4]}, {3: [3]}, {1: [1]}]
    assert got[4] == [{}, {2: [2]}, {}]
    assert all(got[r] == [{}, {}, {}] for r in (1, 2, 3))


def test_nhr_scatter_sends_no_junk_n7():
    """N = 7, root 0, step 1: HCCL's rank 6 sends {4, 0} holding only 4; here only {4}."""
    got = _template_sends(SCATTER, "NHR", 7, 0)
    assert got[6][1] == {4: [4]}
    assert got[0] == [{6: [2, 4, 6]}, {5: [1, 5]}, {3: [3]}]


def test_nb_scatter_grows_upward_n5():
    """NB: tree toward higher indices: s0: 0->1 {1,3}; s1: 0->2 {2}, 1->3 {3}; s2: 0->4 {4}."""
    got = _template_sends(SCATTER, "NB", 5, 0)
    assert got[0] == [{1: [1, 3]}, {2: [2]}, {4: [4]}]
    assert got[1] == [{}, {3: [3]}, {}]


def test_ring_scatter_sends_farthest_first():
    """scatter_ring.cc: the root sends the slices of root-1, root-2, ..., root+1 to root+1."""
    got = _template_sends(SCATTER, "Ring", 5, 2)
    assert got[2] == [{3: [1]}, {3: [0]}, {3: [4]}, {3: [3]}]
    assert got[3] == [{}, {4: [1]}, {4: [0]}, {4: [4]}]
    assert got[1] == [{}, {}, {}, {}]


def test_mesh_two_shot_broadcast_phases():
    """Phase 1: root sends chunk j and its own chunk to each j; phase 2: non-roots' mesh AllGather."""
    n, root = 4, 1
    data = Region(Buf.OUTPUT, 0, 4)          # ceil chunks of one element: offset = chunk index
    steps = {r: BCAST["MeshTwoShot"](tuple(range(n)), r, root, data) for r in range(n)}
    assert _sends(Plan(root, tuple(steps[root]))) == [{0: [0, 1], 2: [1, 2], 3: [1, 3]}, {}]
    assert _sends(Plan(0, tuple(steps[0]))) == [{}, {2: [0], 3: [0]}]


def test_rhd_broadcast_left_out_ranks():
    """N = 6: x = 2 pairs (0,1), (2,3); root 3 is odd, so 1 and 3 join; 0 and 2 get it in the last step."""
    n, root = 6, 3
    data = Region(Buf.OUTPUT, 0, 10)
    steps = {r: BCAST["RHD"](tuple(range(n)), r, root, data) for r in range(n)}
    assert [len(s) for s in steps.values()] == [3] * n
    last = {r: [a.peer for a in steps[r][-1].transfers if a.kind is Kind.SEND] for r in range(n)}
    assert last == {0: [], 1: [0], 2: [], 3: [2], 4: [], 5: []}
    call, plans = bcast_plans("RHD", n, 10, root)
    simulate(plans, call)
