"""The simulator at a super pod's size: faults injected into one rank of 8192 are still caught, named by rank and step.

Above 64 ranks the simulator has no exact rank sets; a missing, doubled or foreign contribution
shows in the count of contributions or in the sum of the ranks' random 64-bit keys.
"""

from dataclasses import replace

import pytest

from pyhccl.core.call import Call
from pyhccl.plan import Buf, Region, build_plan
from pyhccl.plan.ir import Kind, copy, reduce, send
from pyhccl.verify.sim import SimulationError, simulate
from test_verify_sim import edit          # one plan's step rewritten (tests/test_verify_sim.py)

pytestmark = pytest.mark.slow

N, COUNT = 8192, 1000
LAST = N - 1            # NHR: rank 8191 receives and reduces a partial sum at steps 1..13


@pytest.fixture(scope="module")
def allreduce():
    call = Call("allreduce", N, COUNT)
    return call, [build_plan(call, "NHR", r) for r in range(N)]


def test_the_plans_pass(allreduce):
    call, plans = allreduce
    rep = simulate(plans, call)
    assert rep.nranks == N and rep.rounds == 26


def test_missing_contribution(allreduce):
    call, plans = allreduce
    assert plans[LAST].steps[3].local[0].kind is Kind.REDUCE
    with pytest.raises(SimulationError, match=r"output ranges wrong.*expected 8192 contributions") as e:
        simulate(edit(plans, LAST, 3, local=lambda ops: ()), call)
    assert e.value.mismatches and all(m.got != m.expected for m in e.value.mismatches)


def test_doubled_contribution(allreduce):
    call, plans = allreduce
    with pytest.raises(SimulationError) as e:
        simulate(edit(plans, LAST, 3, local=lambda ops: ops + ops), call)
    assert "contributions" in str(e.value)


def test_foreign_contribution():
    """A rank that misses its Broadcast receive keeps its own data: the right count, the wrong rank."""
    call = Call("broadcast", N, COUNT, in_place=True)
    plans = [build_plan(call, "NHR", r) for r in range(N)]
    t, rx = next((t, a) for t, s in enumerate(plans[LAST].steps) for a in s.transfers if a.kind is Kind.RECV)
    plans = edit(plans, LAST, t, transfers=lambda xs: [a for a in xs if a is not rx])
    plans = edit(plans, rx.peer, t, transfers=lambda xs: [a for a in xs if not (a.kind is Kind.SEND and a.peer == LAST)])
    with pytest.raises(SimulationError, match=r"expected 1 contributions .* got 1 contributions \(not the right ranks\)"):
        simulate(plans, call)


def test_unmatched_and_mismatched_transfers(allreduce):
    call, plans = allreduce
    with pytest.raises(SimulationError, match="sends and receives must match in number, order and size") as e:
        simulate(edit(plans, LAST, 3, transfers=lambda xs: ()), call)
    assert (e.value.step, e.value.rank) == (3, LAST) and "ERROR HERE (rank 8191)" in str(e.value)
    short = lambda xs: [replace(a, dst=Region(Buf.SCRATCH, 0, COUNT - 1)) for a in xs]   # noqa: E731
    with pytest.raises(SimulationError, match=r"which receives \[scr\[0:999\]\]") as e:
        simulate(edit(plans, LAST, 3, transfers=short), call)
    assert e.value.step == 3


def test_read_before_write_out_of_bounds_and_bad_peer(allreduce):
    call, plans = allreduce
    out, scr = Region(Buf.OUTPUT, 0, COUNT), Region(Buf.SCRATCH, 0, COUNT)
    cases = [
        (edit(plans, 5, 0, local=lambda ops: ops + (reduce(out, scr),)), "holds no data yet", 0),
        (edit(plans, 5, 0, local=lambda ops: (copy(Region(Buf.OUTPUT, 0, COUNT + 1),
                                                   Region(Buf.INPUT, 0, COUNT + 1)),)), "out of bounds", 0),
        (edit(plans, 5, 1, transfers=lambda xs: xs + (send(N, out),)), "names peer 8192", 1),
        (edit(plans, LAST, 3, local=lambda ops: (reduce(Region(Buf.OUTPUT, 0, COUNT - 1),
                                                        Region(Buf.SCRATCH, 1, COUNT - 1)),)),
         "different origin indices", 3),
    ]
    for bad, match, step in cases:
        with pytest.raises(SimulationError, match=match) as e:
            simulate(bad, call)
        assert e.value.step == step and e.value.rank in (5, LAST)
