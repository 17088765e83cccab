"""The simulator runs a rank's chain of reduces into one destination as one batch; a fault in a chain
is still reported at its own op, as running the ops one at a time reports it."""

import pytest

from pyhccl.core.call import Call
from pyhccl.plan import build_plan
from pyhccl.plan.ir import Kind
from pyhccl.verify.sim import SimulationError, simulate
from test_verify_sim import edit          # one plan's step rewritten (tests/test_verify_sim.py)


def one_shot(n):
    call = Call("allreduce", n, 11)
    plans = [build_plan(call, "MeshOneShot", r) for r in range(n)]
    # rank 3, step 1: two copies, then out[0:11] += each other rank's slot, in rank order
    assert [a.kind for a in plans[3].steps[1].local] == [Kind.COPY, Kind.COPY] + [Kind.REDUCE] * (n - 1)
    return call, plans


def test_chain_passes():
    call, plans = one_shot(5)
    assert simulate(plans, call).nranks == 5


def test_doubled_source_in_a_chain_is_named():
    call, plans = one_shot(5)
    bad = edit(plans, 3, 1, local=lambda ops: ops[:4] + ops[3:])      # out[0:11] += scr[22:33] twice
    with pytest.raises(SimulationError, match=r"step 1, rank 3: 'out\[0:11\] \+= scr\[22:33\]' counts the "
                                              r"contribution of ranks \{2\} twice"):
        simulate(bad, call)


def test_doubled_source_above_64_ranks():
    call, plans = one_shot(70)
    bad = edit(plans, 3, 1, local=lambda ops: ops + ops[-1:])
    with pytest.raises(SimulationError, match=r"step 1, rank 3: .* gives more than 70 contributions"):
        simulate(bad, call)


def test_unwritten_source_in_a_chain():
    call, plans = one_shot(5)
    bad = edit(plans, 3, 1, transfers=lambda xs: [a for a in xs if (a.kind, a.peer) != (Kind.RECV, 1)])
    bad = edit(bad, 1, 1, transfers=lambda xs: [a for a in xs if (a.kind, a.peer) != (Kind.SEND, 3)])
    with pytest.raises(SimulationError, match=r"step 1, rank 3: reads scr\[11:22\], which holds no data yet"):
        simulate(bad, call)


def test_the_earlier_op_of_two_faulty_chains_is_reported():
    call, plans = one_shot(5)
    bad = edit(plans, 1, 1, local=lambda ops: ops + ops[-1:])         # rank 1: fault at op 4 of the step
    bad = edit(bad, 3, 1, local=lambda ops: ops[:3] + ops[2:])         # rank 3: fault at op 3
    with pytest.raises(SimulationError, match=r"step 1, rank 3: .* twice"):
        simulate(bad, call)
