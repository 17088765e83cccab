"""Renamed steps: a template's steps for a group of ranks, their transfers made when first read."""

import pickle
from dataclasses import replace

import numpy as np
import pytest

from pyhccl.core.call import Call
from pyhccl.plan import Buf, Plan, Region, Step, build_plan
from pyhccl.plan.ir import recv, reduce, send
from pyhccl.plan.shared import Merged, Renamed, action_count
from pyhccl.topo import machine
from pyhccl.verify.rows import PlanArrays
from pyhccl.verify.sim import SimulationError, simulate

R = Region(Buf.OUTPUT, 0, 4)


def canon():
    return Step((send(1, R), recv(2, Region(Buf.SCRATCH, 0, 4))), (reduce(R, Region(Buf.SCRATCH, 0, 4)),))


def test_a_renamed_step_is_the_step_with_its_peers_renamed():
    s = Renamed(canon(), (10, 11, 12))
    plain = Step((send(11, R), recv(12, Region(Buf.SCRATCH, 0, 4))), canon().local)
    assert s == plain and plain == s
    assert s != Renamed(canon(), (10, 12, 11)) and Renamed(canon(), (10, 12, 11)) != plain
    assert action_count(s) == action_count(plain) == 3 and s._made is None     # counted and compared, not kept
    assert hash(s) == hash(plain) and str(s) == str(plain)
    back = pickle.loads(pickle.dumps(s))
    assert type(back) is Step and back == plain
    assert Renamed(s, tuple(range(100, 113))) == Step((send(111, R), recv(112, Region(Buf.SCRATCH, 0, 4))),
                                                      canon().local)
    assert s.transfers is s.transfers                   # made once, on first read


def test_a_moved_step_is_the_step_with_its_regions_in_that_buffer_moved():
    s = Renamed(canon(), (10, 11, 12), (Buf.OUTPUT, 100))
    assert action_count(s) == 3 and s._made is None and s._made_local is None      # counted, not made
    out = Region(Buf.OUTPUT, 100, 4)
    plain = Step((send(11, out), recv(12, Region(Buf.SCRATCH, 0, 4))), (reduce(out, Region(Buf.SCRATCH, 0, 4)),))
    assert s == plain and plain == s and s.local == plain.local and s.canon_local == canon().local
    assert s != Renamed(canon(), (10, 11, 12), (Buf.OUTPUT, 101)) != plain
    assert s != Renamed(canon(), (10, 11, 12), (Buf.SCRATCH, 100))
    assert hash(s) == hash(plain) and str(s) == str(plain) and pickle.loads(pickle.dumps(s)) == plain
    assert Renamed(canon(), (10, 11, 12), (Buf.OUTPUT, 0)).moved is None
    # nested: groups compose, moves in one buffer add up, a move in another buffer is made at once
    assert Renamed(s, tuple(range(100, 113)), (Buf.OUTPUT, 5)) == Renamed(canon(), (110, 111, 112), (Buf.OUTPUT, 105))
    both = Renamed(s, tuple(range(13)), (Buf.SCRATCH, 8))
    scr = Region(Buf.SCRATCH, 8, 4)
    assert both.moved == (Buf.SCRATCH, 8) and both == Step((send(11, out), recv(12, scr)), (reduce(out, scr),))


def test_a_bounded_move_moves_only_the_regions_that_start_below_its_bound():
    data, own = Region(Buf.SCRATCH, 0, 4), Region(Buf.SCRATCH, 16, 4)        # data in scratch, the template's past 16
    step = Step((send(1, data), recv(2, own)), (reduce(data, own),))
    s = Renamed(step, (10, 11, 12), (Buf.SCRATCH, 8, 16))
    moved = Region(Buf.SCRATCH, 8, 4)
    assert s == Step((send(11, moved), recv(12, own)), (reduce(moved, own),)) and s.moved == (Buf.SCRATCH, 8, 16)
    # nested: a bounded move does not add up with another; the inner one is made at once
    twice = Renamed(s, tuple(range(13)), (Buf.SCRATCH, 2, 16))
    assert twice == Step((send(11, Region(Buf.SCRATCH, 10, 4)), recv(12, own)), (reduce(Region(Buf.SCRATCH, 10, 4), own),))
    assert twice.template is not step
    from pyhccl.plan.executors import scratch_end        # its scratch counted without making it
    for moved in ((Buf.SCRATCH, 8, 16), (Buf.SCRATCH, 30, 16), (Buf.SCRATCH, 8), (Buf.OUTPUT, 8)):
        r = Renamed(step, (10, 11, 12), moved)
        end = scratch_end([r])
        assert r._made is None and end == Plan(0, (Step(r.transfers, r.local),)).scratch_count()
    rows = PlanArrays([replace(build_plan(Call("allreduce", 3, 9), "NHR", 0), steps=(s,))], None)
    assert rows.src.off.tolist() == [8, 0, 16] and rows.dst.off.tolist() == [0, 16, 8] and rows.action(2) == s.local[0]


def test_a_merged_step_is_its_parts_one_after_the_other():
    from pyhccl.plan.executors import merge
    a, b = Renamed(canon(), (10, 11, 12), (Buf.OUTPUT, 100)), Renamed(canon(), (20, 21, 22))
    plain = Step(a.transfers + b.transfers, a.local + b.local)
    [m] = merge([a], [b])
    assert type(m) is Merged and m.parts == (a, b)
    fresh = [Renamed(canon(), (10, 11, 12), (Buf.OUTPUT, 100)), Renamed(canon(), (20, 21, 22))]
    m2 = Merged(tuple(fresh))
    assert action_count(m2) == 6 and m2._made is None and fresh[0]._made is None     # counted, not made
    assert m2 == plain and plain == m2 and m2 == m and m2._made is None and fresh[0]._made is None
    assert hash(m2) == hash(plain) and str(m2) == str(plain) and pickle.loads(pickle.dumps(m2)) == plain
    assert Merged((m2, Step((send(3, R),)))).parts == (*fresh, Step((send(3, R),)))   # nested merges flatten
    assert merge([Step((send(1, R),))], [Step((send(2, R),))]) == [Step((send(1, R), send(2, R)))]
    assert type(merge([Step((send(1, R),))], [Step((send(2, R),))])[0]) is Step      # plain parts: a plain step


@pytest.mark.parametrize("topo, op, algo", [("1x4x4", "allreduce", "AicpuAllReduceSequenceMeshConcurNHR"),
                                           ("2x2x3", "reduce_scatter", "AicpuReduceScatterSequenceMeshConcurNHRNHR"),
                                           ("2x2x3", "all_gather", "AicpuAllGatherSequenceMeshConcurNHRNHR"),
                                           ("1x4x4", "all_gather", "AicpuAllGatherParallelMeshNHR"),
                                           ("1x4x4", "allreduce", "AicpuAllReduceParallelMeshNHR")])
def test_rows_of_renamed_steps_equal_those_of_the_plain_steps(topo, op, algo):
    m = machine(topo)
    plans = [build_plan(Call(op, m.nranks, 10**6 + 7), algo, r, m) for r in range(m.nranks)]
    parts = [q for p in plans for s in p.steps for q in (s.parts if type(s) is Merged else (s,))]
    assert any(type(q) is Renamed for q in parts)
    # a level's block run from offset 0 and moved (the ReduceScatter's in scratch, below the template's own scratch)
    assert any(type(q) is Renamed and q.moved for q in parts)
    assert any(type(q) is Renamed and q.moved and len(q.moved) == 3 for q in parts) == (op == "reduce_scatter")
    assert any(type(s) is Merged for p in plans for s in p.steps) == ("Parallel" in algo)     # two levels at once
    plain = [replace(p, steps=tuple(Step(s.transfers, s.local) for s in p.steps)) for p in plans]
    a, b = PlanArrays(plans, None), PlanArrays(plain, None)
    for col in ("step", "rank", "local", "index", "kind", "peer"):
        assert np.array_equal(getattr(a, col), getattr(b, col)), col
    for side in ("src", "dst"):
        for col in ("buf", "off", "cnt", "rep", "stride"):
            assert np.array_equal(getattr(getattr(a, side), col), getattr(getattr(b, side), col)), (side, col)
    assert all(a.action(i) == b.action(i) for i in range(len(a.step)))


def test_a_renamed_peer_outside_its_group_is_a_bad_peer_named_at_its_rank_and_step():
    n = 4
    plans = [build_plan(Call("allreduce", n, 9), "MeshTwoShot", r) for r in range(n)]
    group = tuple(range(n))
    broken = Step((send(7, R),) + canon().transfers[1:], ())        # position 7 of a group of 4
    plans[2] = replace(plans[2], steps=(Renamed(broken, group),) + plans[2].steps[1:])
    with pytest.raises(SimulationError, match="names peer -1") as e:
        simulate(plans, Call("allreduce", n, 9))
    assert (e.value.rank, e.value.step) == (2, 0)
