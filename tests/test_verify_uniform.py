"""AlltoAll plan sets built as rank 0's rotated (pyhccl/verify/uniform.py): rank 0 alone decides, and only what
the grid decides.

``build_plan`` makes every rank's AlltoAll Mesh or Pairwise plan as rank 0's moved on by its rank; the
templates built position by position give the very same steps. From QUOTIENT_MIN_RANKS ranks the verifier builds
rank 0's plan alone and runs it; below it (or with the threshold moved) the grid runs every rank's. Both must
agree on every plan set, sound or faulty, and a super pod's AlltoAll (8192 ranks) still names each fault.
"""

import random
import re

import pytest

import pyhccl.plan.templates.alltoall as a2a
import pyhccl.verify.api as api
from pyhccl.core.call import Call
from pyhccl.plan.api import build_plan, clear_caches, hccl_names, rotation_built
from pyhccl.plan.ir import Plan, Region, Step, copy, recv, send
from pyhccl.plan.sole import _alltoall_blocks
from pyhccl.plan.templates import positions
from pyhccl.verify import verify
from pyhccl.verify.api import machine
from pyhccl.verify.uniform import simulate_rank0


@pytest.mark.parametrize("name, kw", [("Mesh", {}), ("Mesh", {"concurrent": 1}), ("Mesh", {"concurrent": 3}),
                                      ("Pairwise", {})])
def test_every_position_is_position_0_moved_on(name, kw):
    fn, rng = a2a.A2A[name], random.Random(7)
    for n in list(range(1, 34)) + [64, 100]:
        for c, lo, w in ((3, 0, 3), (7, 2, 4), (1, 0, 1)):
            send, recv = _alltoall_blocks(n, c, lo, w)
            groups = [positions(n), tuple(rng.sample(range(3 * n), n))]      # (a group of ranks in any order)
            for group in groups:
                first = fn(group, 0, send, recv, scratch=0, **kw)
                for pos in range(n):
                    assert a2a.moved_on(first, group, pos, send, recv) == fn(group, pos, send, recv, scratch=0, **kw)


def test_a_region_that_is_no_block_or_a_peer_outside_the_group_is_refused():
    sb, rb = _alltoall_blocks(4, 3, 0, 3)
    steps = a2a.alltoall_mesh(positions(4), 0, sb, rb) + [Step(local=(copy(Region(rb[0].buf, 1, 2), sb[0]),))]
    with pytest.raises(ValueError, match="one of its blocks, got out\\[1:3\\]"):
        a2a.moved_on(steps, positions(4), 1, sb, rb)
    with pytest.raises(ValueError, match="in its group and every region one of its blocks, got 7"):
        a2a.moved_on([Step((send(7, sb[1]),))], positions(4), 1, sb, rb)


@pytest.mark.parametrize("topo", ["1x1x6", "2x2x3", "1x2x5"])
def test_plans_said_to_be_rotation_built_are_rank_0s_moved_on(topo):
    m = machine(topo)
    n = m.nranks
    said = set()
    call = Call("alltoall", n, 4)
    for name in hccl_names("alltoall") + ["Mesh", "Pairwise"]:
        try:
            plans = [build_plan(call, name, r, m) for r in range(n)]
        except Exception:       # (not runnable on this machine)
            continue
        if not rotation_built(call, name):
            continue
        said.add(name)
        send, recv = _alltoall_blocks(n, 4, 0, 4)
        for r in range(n):
            assert list(plans[r].steps) == a2a.moved_on(plans[0].steps, positions(n), r, send, recv)
    assert {"Mesh", "Pairwise", "AicpuAllToAllSoleMesh"} <= said
    assert not rotation_built(Call("alltoallv", n, 0, matrix=((4,) * n,) * n), "Mesh")
    assert not rotation_built(call, "CcuSchedAllToAllSoleMeshConcurrent")      # (its Mesh is split over links)


def _both(monkeypatch, topo, count, algo):
    """verify()'s results with rank 0 alone and with the grid (the threshold moved each way)."""
    out = []
    for low in (2, 1 << 30):
        monkeypatch.setattr(api, "QUOTIENT_MIN_RANKS", low)
        clear_caches()
        api.forget_plans()
        out.append(verify("alltoall", topo, count=count, **({"algo": algo} if algo else {})))
    return out


@pytest.mark.parametrize("topo", ["1x1x5", "1x1x8", "1x1x13", "2x2x3", "1x3x7"])
@pytest.mark.parametrize("count", [0, 1, 3])
@pytest.mark.parametrize("algo", [None, "Mesh", "Pairwise", "AicpuAllToAllSoleMeshSingleChannel"])
def test_rank_0_alone_agrees_with_the_grid(topo, count, algo, monkeypatch):
    rank0, grid = _both(monkeypatch, topo, count, algo)
    assert (rank0.status, rank0.rounds, rank0.bytes) == (grid.status, grid.rounds, grid.bytes)
    assert grid.status == "ok", grid


def _faults():
    """Faults put into the templates' exchanges or their copy of the own block, as (the function replaced, the
    fault, what rank 0's run says): every rank gets them alike (rank 0's moved on)."""
    ex, rounds = a2a._exchange, a2a.mesh_rounds

    def moved(table, k):
        return [table[(p + k) % len(table)] for p in range(len(table))]

    def exchange(fn):
        return lambda g, to, frm, sb, rb: fn(g, to, frm, sb, rb, ex(g, to, frm, sb, rb))
    return {
        "a send left out": ("_exchange", exchange(lambda g, to, frm, sb, rb, st: Step(st.transfers[1:])),
                            r"meets no send of rank \d+ to rank 0"),
        "a receive left out": ("_exchange", exchange(lambda g, to, frm, sb, rb, st: Step(st.transfers[:-1])),
                               r"meets no receive of rank 0 from"),
        "the wrong block sent": ("_exchange", lambda g, to, frm, sb, rb: ex(g, to, frm, moved(sb, 1), rb),
                                 r"should hold rank 1's element of input index 0; it holds rank 1's of input index"),
        "the wrong slot received": ("_exchange", lambda g, to, frm, sb, rb: ex(g, to, frm, sb, moved(rb, 1)),
                                    r"some of it holds none"),
        "sizes that differ": ("_exchange", lambda g, to, frm, sb, rb: ex(g, to, frm, [
            Region(r.buf, r.offset, r.count - 1) for r in sb], rb), r"receives 3 elements; rank 1 sends 2"),
        "a region past the input": ("_exchange", lambda g, to, frm, sb, rb: ex(g, to, frm, [
            Region(r.buf, r.offset + 1, r.count) for r in sb], rb), r"in\[\d+:\d+\] is out of bounds \(in holds"),
        "a rank sending to itself": ("mesh_rounds", lambda n, pos, c=16: [[pos] + r if not q else r for q, r in
                                                                         enumerate(rounds(n, pos, c))],
                                     r"names peer 0; expecting a rank in range\(\d+\) other than 0"),
        "no copy of the own block": ("_own_copy", lambda pos, sb, rb: (), r"out\[0:3\] should hold rank 0's data"),
        "a send among the local operations": ("_own_copy", lambda pos, sb, rb: (send(1, sb[pos]),),
                                              r"is not a local operation"),
        "a copy of another size": ("_own_copy", lambda pos, sb, rb: (copy(rb[pos], Region(sb[pos].buf, sb[pos].offset,
                                                                                         1)),),
                                   r"has 1 source and 3 destination elements"),
    }


@pytest.mark.parametrize("fault", list(_faults()))
def test_faults_fail_both_ways(fault, monkeypatch):
    where, make, _ = _faults()[fault]
    monkeypatch.setattr(a2a, where, make)
    rank0, grid = _both(monkeypatch, "1x1x9", 3, "Mesh")
    assert rank0.status == grid.status == "failed", (rank0, grid)


@pytest.mark.parametrize("fault", list(_faults()))
def test_a_super_pods_alltoall_runs_on_rank_0_and_each_fault_is_named(fault, monkeypatch):
    clear_caches()
    api.forget_plans()
    ok = verify("alltoall", "1x128x64", count=3)
    assert (ok.status, ok.algorithm, ok.rounds) == ("ok", "AicpuAllToAllSoleMeshSingleChannel", 512), ok
    where, make, text = _faults()[fault]
    monkeypatch.setattr(a2a, where, make)
    clear_caches()
    api.forget_plans()
    bad = verify("alltoall", "1x128x64", count=3)
    assert bad.status == "failed" and "rank 0" in bad.error, bad
    assert re.search(text, bad.error), bad.error


def test_rank_0_alone_takes_only_an_alltoall():
    with pytest.raises(ValueError, match="expecting an alltoall call to simulate on rank 0 alone, got allreduce"):
        simulate_rank0(Plan(0, ()), Call("allreduce", 4, 8))
