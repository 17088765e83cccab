"""Renamed steps: a template's steps for a group of ranks, their transfers made when first read."""

import pickle
from dataclasses import replace

import numpy as np
import pytest

from pyhccl.core.call import Call
from pyhccl.plan import Buf, Region, Step, build_plan
from pyhccl.plan.ir import Renamed, action_count, recv, reduce, send
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


@pytest.mark.parametrize("topo, op, algo", [("1x4x4", "allreduce", "AicpuAllReduceSequenceMeshConcurNHR"),
                                           ("2x2x3", "reduce_scatter", "AicpuReduceScatterSequenceMeshConcurNHRNHR"),
                                           ("2x2x3", "all_gather", "AicpuAllGatherSequenceMeshConcurNHRNHR")])
def test_rows_of_renamed_steps_equal_those_of_the_plain_steps(topo, op, algo):
    m = machine(topo)
    plans = [build_plan(Call(op, m.nranks, 10**6 + 7), algo, r, m) for r in range(m.nranks)]
    assert any(type(s) is Renamed for p in plans for s in p.steps)
    # a level's block run from offset 0 and moved (not the ReduceScatter's: its data are in scratch out of place)
    assert any(type(s) is Renamed and s.moved for p in plans for s in p.steps) == (op != "reduce_scatter")
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
