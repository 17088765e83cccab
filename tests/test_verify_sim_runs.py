"""The simulator runs a rank's locals of a step that touch disjoint data, and a rank's chain of reduces
into one destination, as one batch; a fault in a batch is still reported at its own op, as running the
ops one at a time reports it."""

import re

import numpy as np
import pytest

from pyhccl.core.call import Call
from pyhccl.plan import build_plan
from pyhccl.plan.ir import Buf, Kind, Plan, Region, Step, copy, reduce
from pyhccl.verify.sim import SimulationError, _Sim, simulate
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


def batches(plans, call, step):
    """The row groups the simulator runs together in ``step``, and whether each runs merged."""
    sim = _Sim(plans, call, 0)          # (its checks hold it weakly)
    return [(len(b[0]), b[5]) for b in sim.checks.local_batches(step)]


def mesh_chunk(n):
    call = Call("reduce_scatter", n, 7)
    return call, [build_plan(call, "MeshChunk", r) for r in range(n)]


@pytest.fixture(params=["keys", "ranks of the ends", "groups two at a time", "every group sorted"])
def keyed(request, monkeypatch):
    """Every way the lead is found: hulls keyed by (rank's step, key), by their ranks among the ends (in groups one
    at a time), or by key in chunks of two (rank's step) groups (as a super pod's huge buffers are); the groups
    whose hulls come in order and apart left unsorted, or every group sorted."""
    if request.param == "ranks of the ends":
        monkeypatch.setattr("pyhccl.verify.checks._KEY_LIMIT", 0)
    elif request.param == "groups two at a time":
        monkeypatch.setattr("pyhccl.verify.checks._GROUPS", 2)
    elif request.param == "every group sorted":
        monkeypatch.setattr("pyhccl.verify.checks._tangled", lambda lo, hi, is_dst, g, ngroups: np.ones(ngroups, bool))


def test_disjoint_locals_of_a_step_run_as_one_batch(keyed):
    call, plans = mesh_chunk(5)
    # steps 1-4: every rank reduces the 4 chunks of its slice, each from its own scratch chunk
    assert [batches(plans, call, t) for t in range(1, 5)] == [[(5 * 4, True)]] * 4
    assert simulate(plans, call).nranks == 5


def test_a_fault_in_a_disjoint_batch_is_named():
    call, plans = mesh_chunk(5)
    bad = edit(plans, 2, 1, local=lambda ops: ops[:2] + ops[1:])        # rank 2 reduces a chunk twice
    twice = re.escape(f"step 1, rank 2: '{plans[2].steps[1].local[1]}' counts the contribution of ranks")
    with pytest.raises(SimulationError, match=twice + r" \{\d\} twice"):
        simulate(bad, call)


R = lambda buf, off: Region(buf, off, 4)                                 # noqa: E731


def local_only(ops):
    """A 2-rank AllReduce of 4 elements whose step 0 runs ``ops`` locally on each rank (no transfers)."""
    call = Call("allreduce", 2, 4)
    return call, [Plan(r, (Step((), tuple(ops)),)) for r in range(2)]


def test_locals_that_touch_disjoint_data_merge(keyed):
    call, plans = local_only([copy(R(Buf.SCRATCH, 0), R(Buf.INPUT, 0)), copy(R(Buf.SCRATCH, 4), R(Buf.INPUT, 0)),
                              copy(R(Buf.OUTPUT, 0), R(Buf.INPUT, 0))])
    assert batches(plans, call, 0) == [(6, True)]
    # a source between two destinations (their ranges meet, their hulls do not)
    call, plans = local_only([copy(R(Buf.SCRATCH, 0), R(Buf.INPUT, 0)), copy(R(Buf.SCRATCH, 8), R(Buf.SCRATCH, 4)),
                              copy(R(Buf.SCRATCH, 12), R(Buf.INPUT, 0))])
    assert batches(plans, call, 0) == [(6, True)]


@pytest.mark.parametrize("ops", [
    # the third reads what the first writes
    [copy(R(Buf.SCRATCH, 0), R(Buf.INPUT, 0)), copy(R(Buf.SCRATCH, 4), R(Buf.INPUT, 0)),
     copy(R(Buf.OUTPUT, 0), R(Buf.SCRATCH, 0))],
    # the second writes what the first reads
    [copy(R(Buf.SCRATCH, 0), R(Buf.INPUT, 0)), copy(R(Buf.OUTPUT, 0), R(Buf.SCRATCH, 0)),
     copy(R(Buf.SCRATCH, 0), R(Buf.INPUT, 0))],
    # both write one region, not as a chain of reduces
    [copy(R(Buf.OUTPUT, 0), R(Buf.INPUT, 0)), copy(R(Buf.SCRATCH, 0), R(Buf.INPUT, 0)),
     reduce(R(Buf.OUTPUT, 0), R(Buf.SCRATCH, 0))],
    # two destinations that meet, their sources apart from them
    [copy(R(Buf.SCRATCH, 0), R(Buf.INPUT, 0)), copy(R(Buf.SCRATCH, 2), R(Buf.INPUT, 0)),
     copy(R(Buf.SCRATCH, 12), R(Buf.INPUT, 0))],
    # destinations in order one after another, the second's source inside the first's destination
    [copy(R(Buf.SCRATCH, 0), R(Buf.INPUT, 0)), copy(R(Buf.SCRATCH, 8), R(Buf.SCRATCH, 2)),
     copy(R(Buf.SCRATCH, 12), R(Buf.INPUT, 0))],
])
def test_locals_that_depend_on_each_other_run_in_order(ops, keyed):
    call, plans = local_only(ops)
    assert [m for _, m in batches(plans, call, 0)] == [False] * 3


def test_a_simulation_leaves_no_cyclic_garbage():
    """A finished simulation, passed or failed, is freed by reference counting alone: a sweep promotes what it
    allocates past the cycle collector's young passes (verify/api.py), so a cycle would hold its arrays."""
    import gc
    call, plans = one_shot(6)
    bad = edit(plans, 3, 1, local=lambda loc: loc[:-1])             # one reduce lost
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        simulate(plans, call)
        with pytest.raises(SimulationError):
            simulate(bad, call)
        assert gc.collect() == 0
    finally:
        if was:
            gc.enable()
