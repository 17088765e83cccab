"""The rank-rotation quotient (pyhccl/verify/quotient.py) passes only what the grid passes.

Plan sets that are the same on every rank up to a rotation (NHR, Ring, Mesh AllReduce / AllGather /
ReduceScatter of equal blocks; NHR and Ring AllReduce of floor + tail slices, slice by slice) are
simulated on rank 0 alone. Here each is run both ways, and then with
faults injected into one rank (which breaks the symmetry) and into every rank alike (which keeps it): the
quotient must decline every plan set the grid rejects, and the grid then reports it as before.
"""

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from pyhccl.core.call import Call
from pyhccl.plan import build_plan
from pyhccl.plan.ir import Buf, Kind, Region, copy
from pyhccl.verify import quotient, relation, rotation, sim, slots
from pyhccl.verify.rows import COPY, REDUCE, Side
from pyhccl.verify.api import machine
from pyhccl.verify.sim import SimulationError, simulate
from test_verify_sim import edit          # one plan's step rewritten (tests/test_verify_sim.py)

_SYMMETRIC = [("allreduce", "NHR"), ("allreduce", "Ring"), ("allreduce", "MeshChunkTwoShot"),
              ("allreduce:tail", "NHR"), ("allreduce:tail", "Ring"),
              ("all_gather", "NHR"), ("all_gather", "Ring"), ("all_gather", "Mesh"),
              ("reduce_scatter", "NHR"), ("reduce_scatter", "Ring"), ("reduce_scatter", "Mesh"),
              ("reduce_scatter", "MeshChunk")]


def _call(op: str, n: int, in_place: bool = False) -> Call:
    """``allreduce:tail``: a count N does not divide (floor + tail slices: a last slice of 3 more)."""
    if op == "allreduce:tail":
        return Call("allreduce", n, 2 * n + 3, in_place=in_place)
    return Call(op, n, 3 * n if op == "allreduce" else 5, in_place=in_place)


def _quotient(plans, call, levels=()):
    """The quotient's answer: a report, or why it declined."""
    layout = sim._Layout(plans, call)
    return quotient.run(plans, call, layout, levels=levels)


#: HCCL's multi-level AllGathers, alike on every rank up to a rotation of each level: (algorithm, machine, levels)
_LEVELS = [("AicpuAllGatherParallelMeshNHR", "1x4x4", (4, 4)), ("AicpuAllGatherSequenceMeshConcurNHR", "1x4x3", (3, 4)),
           ("AicpuAllGatherSequenceMeshConcurNHRNHR", "2x2x4", (4, 2, 2)),
           ("AicpuAllGatherParallelMeshNHR", "2x2x4", (4, 2, 2))]

#: HCCL's multi-level ReduceScatters: alike up to a rotation of each level once the receive slots are composed away
_RS_LEVELS = [("AicpuReduceScatterParallelMeshNHR", "1x4x4", (4, 4)),
              ("AicpuReduceScatterSequenceMeshConcurNHR", "1x4x3", (3, 4)),
              ("AicpuReduceScatterSequenceMeshConcurNHRNHR", "2x2x4", (4, 2, 2)),
              ("AicpuReduceScatterSequenceMeshConcurNHRNHR", "2x4x2", (2, 4, 2))]


def _machine_plans(algo, topo, call):
    m = machine(topo)
    return [build_plan(call, algo, r, m) for r in range(m.nranks)]


def _grid(plans, call, monkeypatch):
    """The grid's answer: 'ok', or the first line of its error."""
    monkeypatch.setattr(quotient, "QUOTIENT_MIN_RANKS", 1 << 40)
    try:
        simulate(plans, call)
        return "ok"
    except SimulationError as e:
        return str(e).splitlines()[0]
    finally:
        monkeypatch.undo()


@pytest.mark.parametrize("n", [5, 8])
@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("op, algo", _SYMMETRIC)
def test_symmetric_plans_pass_on_rank_0_as_on_the_grid(op, algo, in_place, n, monkeypatch):
    call = _call(op, n, in_place)
    plans = [build_plan(call, algo, r) for r in range(n)]
    got = _quotient(plans, call)
    if op == "reduce_scatter" and in_place:     # the result lands at block 0 of every rank: not a rotation
        assert isinstance(got, str)
        return
    assert not isinstance(got, str), got
    grid = sim._Sim(plans, call, 0).run()
    assert got.quotient and (got.rounds, got.max_elements_sent) == (grid.rounds, grid.max_elements_sent)


@pytest.mark.parametrize("op, algo", [("allreduce", "RHD"), ("allreduce", "MeshTwoShot"),
                                      ("allreduce", "NHRAicpuReduce")])
def test_plans_that_are_not_rotations_are_declined(op, algo):
    call = _call(op, 8)
    got = _quotient([build_plan(call, algo, r) for r in range(8)], call)
    assert isinstance(got, str) and "not rank 0's rotated" in got


_BY_LEVEL = [("all_gather",) + c for c in _LEVELS] + [("reduce_scatter",) + c for c in _RS_LEVELS]


@pytest.mark.parametrize("count", [1, 7, 10**10 + 19])
@pytest.mark.parametrize("op, algo, topo, levels", _BY_LEVEL)
def test_multi_level_plans_pass_on_rank_0_rotating_each_level(op, algo, topo, levels, count):
    call = Call(op, int(np.prod(levels)), count)
    plans = _machine_plans(algo, topo, call)
    got = _quotient(plans, call, levels)
    assert not isinstance(got, str), got
    grid = sim._Sim(plans, call, 0).run()
    assert (got.rounds, got.max_elements_sent) == (grid.rounds, grid.max_elements_sent)
    assert "not rank 0's rotated" in _quotient(plans, call)         # (one rotation of all ranks does not map them)


def test_sides_cut_into_pieces_no_rewrite_can_match_are_told_apart():
    """_alike_pieces: a contiguous side is read as the other side's pieces (and put back); two sides that are both
    in pieces, cut differently, cannot be, and the quotient is told so."""
    def side(cnt, rep, stride):
        a = lambda v: np.array(v, np.int64)
        return Side(a([0] * len(cnt)), a([0] * len(cnt)), a(cnt), a(rep), a(stride))
    rows = np.arange(2)
    # sources: 2 x 2 elements (stride 3), 1 x 4 (stride 2); the contiguous destinations are read as those pieces
    for dst, fixed, read in ((([4, 1], [1, 4], [0, 2]), True, [2, 1]), (([1, 4], [4, 1], [2, 0]), False, [1, 1])):
        ops = SimpleNamespace(src=side([2, 1], [2, 4], [3, 2]), dst=side(*dst))
        undo, alike = quotient._alike_pieces(ops, rows, rows, rows[:0])
        assert alike == fixed and ops.dst.cnt.tolist() == read
        undo()
        assert ops.dst.cnt.tolist() == dst[0] and ops.dst.rep.tolist() == dst[1] and ops.dst.stride.tolist() == dst[2]


@pytest.mark.parametrize("declined", [False, True])
def test_pieces_rewritten_for_the_quotient_are_put_back_for_the_grid(declined, monkeypatch):
    """The quotient reads a contiguous side of a move as its other side's pieces, in the rows themselves; whether it
    passes the set or declines it (and the grid then reads the rows), they are put back as they were."""
    call = Call("reduce_scatter", 16, 10**10 + 19)
    plans = _machine_plans("AicpuReduceScatterParallelMeshNHR", "1x4x4", call)
    layout = sim._Layout(plans, call)

    def columns():
        return [getattr(side, c).copy() for side in (layout.ops.src, layout.ops.dst) for c in ("cnt", "rep", "stride")]

    before, rewritten = columns(), []

    def spy(*args):
        undo = real(*args)
        rewritten.append(any(not np.array_equal(x, y) for x, y in zip(before, columns())))
        return undo
    real = quotient._alike_pieces
    monkeypatch.setattr(quotient, "_alike_pieces", spy)
    if declined:
        monkeypatch.setattr(quotient, "relations_alike", lambda *a: False)
    got = quotient.run(plans, call, layout, levels=(4, 4))
    assert isinstance(got, str) == declined and rewritten == [True]
    assert all(np.array_equal(x, y) for x, y in zip(before, columns()))


@pytest.mark.parametrize("op, algo, topo, levels", _BY_LEVEL)
def test_multi_level_faults_the_grid_reports_are_never_passed(op, algo, topo, levels, monkeypatch):
    call = Call(op, int(np.prod(levels)), 7)
    assert _compare_on_faults(call, algo, monkeypatch, topo, levels) >= 4


@pytest.mark.parametrize("op, algo, topo, levels", [("all_gather", "NHR", None, ()),
                                                     ("reduce_scatter", "MeshChunk", None, ()),
                                                     ("allreduce:tail", "Ring", None, ()),
                                                     ("all_gather", "AicpuAllGatherParallelMeshNHR", "1x4x4", (4, 4))])
def test_relations_hashed_a_few_rows_at_a_time_decide_alike(op, algo, topo, levels, monkeypatch):
    """The relations' sums are taken over chunks of rows (2^16 at scale): in chunks of 8 rows the fault-free plans
    still pass and every fault the grid reports is still declined."""
    _decides_alike_with(relation, "_CHUNK", 8, op, algo, topo, levels, monkeypatch)


@pytest.mark.parametrize("op, algo, topo, levels", [("reduce_scatter", "NHR", None, ()),
                                                     ("reduce_scatter",) + _RS_LEVELS[0],
                                                     ("reduce_scatter",) + _RS_LEVELS[2]])
def test_order_judged_on_every_ranks_hulls_where_rank_0_has_too_many_pieces(op, algo, topo, levels, monkeypatch):
    """Rank 0's local operations are judged element by element up to 2^22 pieces; past that, every rank's hulls
    first (and rank 0's elements where hulls meet): fault-free plans still pass and every fault the grid reports is
    still declined."""
    _decides_alike_with(quotient, "_ORDER_PIECES", 0, op, algo, topo, levels, monkeypatch)


def _decides_alike_with(module, name, value, op, algo, topo, levels, monkeypatch):
    """With ``module.name`` set to ``value``, ``algo``'s plans pass and every fault the grid reports is declined."""
    call = _call(op, 5) if topo is None else Call(op, int(np.prod(levels)), 7)
    plans = _machine_plans(algo, topo, call) if topo else [build_plan(call, algo, r) for r in range(call.nranks)]
    old = getattr(module, name)
    setattr(module, name, value)    # (set by hand: the fault comparison undoes the monkeypatch between its runs)
    try:
        got = _quotient(plans, call, levels)
        assert not isinstance(got, str), got
        assert _compare_on_faults(call, algo, monkeypatch, topo, levels) >= 4
    finally:
        setattr(module, name, old)


@pytest.mark.parametrize("limit", [quotient._ORDER_PIECES, 0])
def test_locals_whose_order_matters_are_declined_though_every_rank_holds_them_alike(limit, monkeypatch):
    """Each rank saves an element of its block to scratch and copies it back in one step: rank 0 in that order,
    rank 2 the other way round (its relation, a multiset, is rank 0's rotated; its result is not). The grid names
    rank 2; the quotient declines the set (rank 0's order does not carry to other ranks), with the order as
    listed on every rank too. Judged on rank 0's elements, or (``limit`` 0) every rank's hulls first."""
    n, c = 5, 7
    call = Call("all_gather", n, c)
    plans = [build_plan(call, "NHR", r) for r in range(n)]
    t = len(plans[0].steps) - 1

    def save_and_restore(plans, r, swap):
        mine, scr = Region(Buf.OUTPUT, r * c, 1), Region(Buf.SCRATCH, r * c, 1)
        ops = (copy(scr, mine), copy(mine, scr))
        return edit(plans, r, t, local=lambda xs: tuple(xs) + (ops[::-1] if swap else ops))
    alike, swapped = plans, plans
    for r in range(n):
        alike, swapped = save_and_restore(alike, r, False), save_and_restore(swapped, r, r == 2)
    assert _grid(alike, call, monkeypatch) == "ok"
    assert "step" in _grid(swapped, call, monkeypatch) and "rank 2" in _grid(swapped, call, monkeypatch)
    monkeypatch.setattr(quotient, "_ORDER_PIECES", limit)
    for bad in (alike, swapped):
        assert "order matters" in _quotient(bad, call)


def _locals(rows):
    """Flat rows of local operations, one rank: (step, kind, (src off, cnt, rep, stride), (dst ...)), in scratch."""
    cols = list(zip(*rows))
    src, dst = (Side(np.full(len(rows), 2), *(np.array(c) for c in zip(*side))) for side in (cols[2], cols[3]))
    return SimpleNamespace(step=np.array(cols[0]), kind=np.array(cols[1]), rank=np.zeros(len(rows), np.int64),
                           src=src, dst=dst, nsteps=max(cols[0]) + 1)


def test_local_operations_are_judged_order_free_element_by_element():
    interleaved = [(0, COPY, (100, 1, 4, 8), (0, 1, 4, 8)), (0, COPY, (200, 1, 4, 8), (4, 1, 4, 8))]  # hulls meet
    assert slots.order_free(_locals(interleaved), np.arange(2))
    chain = [(0, REDUCE, (100, 4, 1, 0), (0, 1, 4, 8)), (0, REDUCE, (104, 4, 1, 0), (0, 1, 4, 8))]
    assert slots.order_free(_locals(chain), np.arange(2))                   # sums commute
    for bad in ([(0, COPY, (100, 4, 1, 0), (0, 1, 4, 8)), (0, REDUCE, (104, 4, 1, 0), (8, 4, 1, 0))],  # copy, reduce
                [(0, COPY, (100, 1, 4, 8), (0, 1, 4, 8)), (0, COPY, (24, 1, 1, 0), (300, 1, 1, 0))],   # read a write
                [(0, COPY, (100, 1, 4, 8), (0, 1, 4, 8)), (0, COPY, (200, 2, 1, 0), (7, 2, 1, 0))]):   # write twice
        assert not slots.order_free(_locals(bad), np.arange(2))
    apart = [(0, COPY, (100, 1, 4, 8), (0, 1, 4, 8)), (1, COPY, (200, 2, 1, 0), (7, 2, 1, 0))]   # other steps
    assert slots.order_free(_locals(apart), np.arange(2))


def test_slot_receives_of_a_step_are_judged_disjoint_piece_by_piece():
    a = np.array
    # group, offset, count, repeat, stride: two strided slots interleaved (hulls meet, pieces do not), then a third
    # that hits the first's second piece; in another group the same offsets again
    assert slots._disjoint(a([0, 0]), a([32, 36]), a([1, 1]), a([2, 2]), a([8, 8]))
    assert not slots._disjoint(a([0, 0, 0]), a([32, 36, 40]), a([1, 1, 1]), a([2, 2, 1]), a([8, 8, 0]))
    assert slots._disjoint(a([0, 1]), a([32, 32]), a([4, 4]), a([1, 1]), a([0, 0]))


def test_slot_receives_read_in_another_order_within_their_step_are_paired_in_place(seed=4):
    """slots._within_groups: where receives and locals come in the same (rank, step) groups, the groups whose
    regions differ in order are sorted by offset, each where it was; a group that differs otherwise stays apart."""
    rng = np.random.default_rng(seed)
    group = np.repeat(np.arange(6), 4)              # (rank, step) groups of four slot receives, in row order
    rank, step = group // 2, group % 2
    off = np.concatenate([rng.permutation(8)[:4] * 10 for _ in range(6)])
    cnt = np.full(24, 3)
    order = np.concatenate([g * 4 + (rng.permutation(4) if g in (1, 4) else np.arange(4)) for g in range(6)])
    r, loc = np.arange(24) + 100, order + 200
    keys = [[rank, step, off.copy(), cnt.copy(), cnt * 0 + 1, cnt * 0],
            [rank[order], step[order], off[order], cnt[order], cnt * 0 + 1, cnt * 0]]      # (sorted in place)
    slots._within_groups(r, loc, keys)
    assert all(np.array_equal(x, y) for x, y in zip(*keys))
    assert np.array_equal(keys[0][2], off[r - 100]) and np.array_equal(keys[1][2], off[loc - 200])
    assert np.array_equal(group[r - 100], group) and np.array_equal(group[loc - 200], group)    # groups in place
    keys[1][3][5] = 4                               # a region cut otherwise: still told apart
    slots._within_groups(r, loc, keys)
    assert not all(np.array_equal(x, y) for x, y in zip(*keys))


def test_rotated_segments_hold_the_elements_rotated(seed=5):
    """rotation.rotate against the element-by-element rule, for regions that run through periods of each axis
    (contiguous, strided, pieces across period ends)."""
    rng = np.random.default_rng(seed)
    axes, unit = rotation.Axes((2, 3, 2)), 2
    period = unit * axes.n
    frame = np.array([[unit, unit, unit], [rotation.ALL] * 3], np.int64)

    def moved(e, r):
        block = axes.sub(e % period // unit, r)
        return e // period * period + block * unit + e % unit

    for _ in range(300):
        cnt, rep = int(rng.integers(1, 13)), int(rng.integers(1, 4))
        stride = int(rng.integers(cnt, 25)) if rep > 1 else 0
        x, y = (int(rng.integers(0, 4 * period - (stride * (rep - 1) + cnt))) for _ in range(2))
        rx, ry = (int(v) for v in rng.integers(0, axes.n, 2))
        one = np.ones(1, np.int64)
        seg = dict(x=x * one, sx=stride * one, bx=0 * one, rx=rx * one, y=y * one, sy=stride * one, by=1 * one,
                   ry=ry * one, i0=0 * one, i1=rep * one, j0=0 * one, j1=cnt * one, key=0 * one, own=0 * one)
        want = sorted((moved(x + i * stride + j, rx), moved(y + i * stride + j, ry))
                      for i in range(rep) for j in range(cnt))
        got = []
        for part in rotation.rotate(seg, "x", frame, axes):
            for q in rotation.rotate(part, "y", frame, axes):
                for k in range(len(q["x"])):
                    got += [(int(q["x"][k] + i * q["sx"][k] + j), int(q["y"][k] + i * q["sy"][k] + j))
                            for i in range(q["i0"][k], q["i1"][k]) for j in range(q["j0"][k], q["j1"][k])]
        assert sorted(got) == want, (x, y, cnt, rep, stride, rx, ry)


def test_segments_a_rotation_only_permutes_are_hashed_unrotated(seed=3):
    """rotation.unmoved against the element-by-element rule: a segment it passes holds the same (x, y) pairs in
    its ranks' rotated frames as it does; whole periods of one piece per block pass, the others need rotating."""
    rng = np.random.default_rng(seed)
    axes, units = rotation.Axes((2, 3)), (3, 5)
    n = axes.n
    frame = np.array([list(units) + [4], [rotation.ALL, 2, 1]], np.int64)

    def moved(e, r, b):
        unit, k = int(frame[0][b]), int(frame[1][b])
        if e // (unit * n) >= k:
            return e
        return e // (unit * n) * unit * n + axes.sub(e % (unit * n) // unit, r) * unit + e % unit

    passed = 0
    for trial in range(400):
        bx, by = (int(v) for v in rng.integers(0, 3, 2))
        ux, uy = int(frame[0][bx]), int(frame[0][by])
        cnt = int(rng.integers(1, min(ux, uy) + 1))
        rep = n * int(rng.integers(1, 3))
        tx, ty = int(rng.integers(0, ux - cnt + 1)), int(rng.integers(0, uy - cnt + 1))
        x, y = tx + ux * n * int(rng.integers(0, 2)), ty + uy * n * int(rng.integers(0, 2))
        sx, sy, rx = ux, uy, int(rng.integers(0, n))
        ry = rx
        fault = trial % 5      # 0: none; else one condition broken
        if fault == 1:
            ry = (rx + 1) % n
        elif fault == 2:
            rep -= 1
        elif fault == 3:
            x += ux
        elif fault == 4:
            sy += 1
        one = np.ones(1, np.int64)
        seg = dict(x=x * one, sx=sx * one, bx=bx * one, rx=rx * one, y=y * one, sy=sy * one, by=by * one,
                   ry=ry * one, i0=0 * one, i1=rep * one, j0=0 * one, j1=cnt * one, key=0 * one, own=0 * one)
        pairs = [(x + i * sx + j, y + i * sy + j) for i in range(rep) for j in range(cnt)]
        same = sorted(pairs) == sorted((moved(a, rx, bx), moved(b, ry, by)) for a, b in pairs)
        if rotation.unmoved(seg, frame, axes)[0]:
            assert same, (trial, seg)
            passed += 1
        else:
            assert fault or frame[1][bx] * ux * n <= x + (rep - 1) * sx or frame[1][by] * uy * n <= y + (rep - 1) * sy
    assert passed >= 40


def test_mixed_radix_rotations():
    axes = rotation.Axes((4, 3, 2))
    for q in (0, 1, 5, 13, 23):
        for x in range(24):
            moved = axes.add(x, q)
            assert axes.sub(moved, q) == x
            assert axes.rel(np.array([moved]), np.array([q]))[0] == x
            digits = [(x // b) % z for b, z in ((1, 4), (4, 3), (12, 2))]
            shift = [(q // b) % z for b, z in ((1, 4), (4, 3), (12, 2))]
            assert moved == sum(((d + g) % z) * b for d, g, z, b in zip(digits, shift, (4, 3, 2), (1, 4, 12)))
            assert axes.rotate_bits(1 << x, q) == 1 << moved
        assert axes.rotate_bits((1 << 24) - 1, q) == (1 << 24) - 1


def test_counts_that_leave_slices_empty_or_cut_unevenly_are_declined():
    call = Call("allreduce", 8, 5)          # fewer elements than ranks: floor slices are empty
    assert "not a rotation" in _quotient([build_plan(call, "NHR", r) for r in range(8)], call)
    call = Call("allreduce", 8, 13)         # MeshChunkTwoShot's chunks cut the floor + tail slices
    assert "not whole slices" in _quotient([build_plan(call, "MeshChunkTwoShot", r) for r in range(8)], call)


def _faults(plans):
    """(name, plans) with faults at every step: in one rank, and in every rank alike."""
    n = len(plans)
    for t, st in enumerate(plans[0].steps):
        edits = []
        if st.local:
            edits += [("drop locals", dict(local=lambda ops: ())),
                      ("double locals", dict(local=lambda ops: ops + ops)),
                      ("reduces as copies", dict(local=lambda ops: [copy(a.dst, a.src) if a.kind is Kind.REDUCE
                                                                     else a for a in ops])),
                      ("shift local sources", dict(local=lambda ops: [
                          replace(a, src=Region(a.src.buf, a.src.offset + 1, a.src.count, a.src.repeat,
                                                a.src.stride)) for a in ops]))]
        if st.transfers:
            edits += [("drop transfers", dict(transfers=lambda xs: ())),
                      ("shift receives", dict(transfers=lambda xs: [
                          replace(a, dst=Region(a.dst.buf, a.dst.offset + 1, a.dst.count, a.dst.repeat,
                                                a.dst.stride)) if a.kind is Kind.RECV else a for a in xs]))]
        for name, kw in edits:
            yield f"{name} at step {t}, rank {t % n}", edit(plans, t % n, t, **kw)
            every = plans
            for r in range(n):
                if t < len(every[r].steps):
                    every = edit(every, r, t, **kw)
            yield f"{name} at step {t}, every rank", every


@pytest.mark.parametrize("op, algo", _SYMMETRIC)
def test_faults_the_grid_reports_are_never_passed_by_the_quotient(op, algo, monkeypatch):
    assert _compare_on_faults(_call(op, 6), algo, monkeypatch) >= 4


@pytest.mark.slow
@pytest.mark.parametrize("n", [12])
@pytest.mark.parametrize("op, algo", [c for c in _SYMMETRIC if "MeshChunk" not in c[1]])     # (N^3 rows: at 6)
def test_faults_at_more_ranks_and_a_large_count(op, algo, n, monkeypatch):
    call = _call(op, n)
    call = Call(call.op, n, 10**10 + 19 if call.op == "allreduce" else 10**6 + 3)
    assert _compare_on_faults(call, algo, monkeypatch) >= 4


def _compare_on_faults(call, algo, monkeypatch, topo=None, levels=()) -> int:
    """Inject every fault of :func:`_faults` into ``algo``'s plans for ``call`` (on machine ``topo``, rotating its
    ``levels``): where the grid reports one, the quotient must decline. Returns how many it declined so."""
    plans = (_machine_plans(algo, topo, call) if topo else [build_plan(call, algo, r) for r in range(call.nranks)])
    declined = 0
    for name, bad in _faults(plans):
        grid = _grid(bad, call, monkeypatch)
        try:
            got = _quotient(bad, call, levels)
        except ValueError:          # (a region the fault moved out of bounds before any check)
            got = "raised"
        if grid != "ok":
            assert isinstance(got, str), f"{name}: the grid says {grid!r}, the quotient passed it"
            declined += 1
    return declined


def test_a_large_symmetric_call_runs_on_rank_0_and_a_fault_is_still_named(monkeypatch):
    """At QUOTIENT_MIN_RANKS ranks and above simulate() takes the quotient; a fault in one rank goes to the grid,
    which names the rank and step."""
    n = quotient.QUOTIENT_MIN_RANKS
    call = Call("all_gather", n, 3)
    plans = [build_plan(call, "NHR", r) for r in range(n)]
    rep = simulate(plans, call)
    assert rep.quotient and rep.nranks == n and rep.atoms >= n * n
    t = next(t for t, s in enumerate(plans[7].steps) if s.transfers)
    bad = edit(plans, 7, t, transfers=lambda xs: [
        replace(a, dst=Region(a.dst.buf, a.dst.offset + 1, a.dst.count, a.dst.repeat, a.dst.stride))
        if a.kind is Kind.RECV else a for a in xs])
    with pytest.raises(SimulationError) as e:
        simulate(bad, call)
    assert e.value.rank is not None


def test_verify_passes_the_machines_levels_to_the_quotient(monkeypatch):
    """Through verify() a multi-level AllGather of 256 ranks runs on rank 0, its machine's levels rotated."""
    from pyhccl.verify import verify
    seen = []
    real = quotient.run
    monkeypatch.setattr(quotient, "run", lambda *a, **k: seen.append(real(*a, **k)) or seen[-1])
    res = verify("AllGather", "1x16x16", count=7, algo="AicpuAllGatherParallelMeshNHR")
    assert res.ok and len(seen) == 1 and not isinstance(seen[0], str) and seen[0].quotient
