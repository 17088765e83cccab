"""HCCL's registered algorithms as plans: every executor through the simulator, and HCCL's orders."""

import pytest

from pyhccl.algo import registry
from pyhccl.core.call import Call
from pyhccl.plan import executors as ex
from pyhccl.plan.api import NotRunnableError, build_plan, hccl_names
from pyhccl.plan.hccl import executor_kind, not_runnable_reason, template_form
from pyhccl.verify.sim import simulate
from pyhccl.topo import Layout, machine, parse_topo

OPS = ["allreduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "scatter", "alltoall", "barrier"]
BIG = 10_000_000_019


def plans_for(name, spec, call):
    m = machine(spec)
    return [build_plan(call, name, r, m) for r in range(m.nranks)]


def calls(op, n):
    if op == "alltoallv":
        return [Call(op, n, matrix=tuple(tuple((3 * i + 5 * j) % 4 for j in range(n)) for i in range(n)))]
    if op.endswith("_v"):
        return [Call(op, n, counts=tuple((5 * i) % 4 for i in range(n)))]
    out = [Call(op, n, c, root=root) for c, root in ((0, 0), (1, n - 1), (37, n // 2), (BIG, 0))]
    if Call(op, n).spec.in_place_ok:
        out.append(Call(op, n, 13, in_place=True, root=n - 1))
    return out


@pytest.mark.parametrize("spec", ["1x1x1", "1x1x5", "1x2x4", "2x2x2", "1x3x2"])
@pytest.mark.parametrize("op", OPS + ["alltoallv", "all_gather_v", "reduce_scatter_v"])
def test_every_registered_name_simulates(op, spec):
    n = Layout(parse_topo(spec)).nranks
    for name in hccl_names(op):
        assert not_runnable_reason(name) is None, name
        for call in calls(op, n):
            simulate(plans_for(name, spec, call), call)


def test_every_collective_template_class_maps_to_a_pyhccl_template():
    for reg in registry.registrations():
        if executor_kind(reg.executor) == "p2p":
            reason = not_runnable_reason(reg.name)      # BatchSendRecv's template-free executor runs (templates/p2p.py)
            assert reason is None if reg.name == "AicpuBatchSendRecvSoleMesh" else "point-to-point" in reason
            continue
        for level in reg.levels:
            for t in level:
                assert template_form(t) is not None, t


def test_all_reduce_sequence_orders_levels_like_hccl():
    """RS level 0, RS level 1, AG level 1, AG level 0 (ins_v2_all_reduce_sequence_executor_aicpu.cc)."""
    p = plans_for("CcuSchedAllReduceSequenceMeshMesh", "1x2x4", Call("allreduce", 8, 64))[5]
    peers = [sorted({a.peer for a in s.transfers}) for s in p.steps if s.transfers]
    assert peers == [[4, 6, 7], [1], [1], [4, 6, 7]]


def test_reduce_scatter_intra_first_and_all_gather_inter_first():
    """The code's order, not the doc's (hccl-templates.md §3.2 "Ordering rules")."""
    rs = plans_for("AicpuReduceScatterSequenceMeshConcurNHR", "1x2x4", Call("reduce_scatter", 8, 64))[5]
    ag = plans_for("AicpuAllGatherSequenceMeshConcurNHR", "1x2x4", Call("all_gather", 8, 64))[5]
    first = lambda p: sorted({a.peer for a in next(s for s in p.steps if s.transfers).transfers})
    assert first(rs) == [4, 6, 7] and first(ag) == [1]


def test_parallel_keeps_both_link_classes_busy_in_every_phase():
    p = plans_for("AicpuAllReduceParallelMeshNHR", "1x2x4", Call("allreduce", 8, 800))[5]
    for s in p.steps:
        if s.transfers:
            peers = {a.peer for a in s.transfers}
            assert peers & {4, 6, 7} and peers & {1}, s


def test_parallel_ratio_follows_hccl_formula():
    # RS-with-local-reduce, L0 = 4, L1 = 2: mesh = 21*3/(20*4*3), clos = 1/2 -> R = 0.655.. -> 5/8
    assert ex.parallel_ratio("allreduce", (4, 2)) == 5 / 8
    assert ex.parallel_ratio("scatter", (4, 2)) == 0.5
    assert ex.parallel_ratio("all_gather", (4, 2)) <= 0.5


def test_concur_splits_by_hccl_weights():
    p = plans_for("AicpuAllGatherConcurMeshNHR", "1x1x4", Call("all_gather", 4, 62))[0]
    sent = [a.src.size for s in p.steps for a in s.transfers if a.src is not None]
    assert sum(sent[:3]) == 3 * (62 * 37 // 62)          # mesh part: 37 of every 62 elements to each peer
    assert ex.concur_weights("allreduce", "Other", 4) == (3, 4)


def test_pipeline_overlaps_levels():
    p = plans_for("AicpuAllReducePipeLineMeshNHR", "1x2x4", Call("allreduce", 8, 1000))[5]
    assert any({a.peer for a in s.transfers} >= {1, 4} for s in p.steps)
    assert ex.omnipipe_slice_count(2) == 2 and ex.omnipipe_slice_count(1) == 1


def test_detour_splits_each_peer_transfer_with_hccl_share():
    p = plans_for("AicpuAllGatherSoleMeshConcur", "1x1x2", Call("all_gather", 2, 100))[0]
    sizes = sorted(a.src.size for s in p.steps for a in s.transfers if a.src is not None)
    assert sizes == [25, 75]                # level0DataRatio 0.25 for 2 ranks


def test_not_runnable_layouts_fail_clearly():
    call = Call("allreduce", 6, 8)
    with pytest.raises(NotRunnableError, match="needs 3 levels of equal-size groups"):
        plans_for("AicpuAllReduceSequenceMeshConcurNHRNHR", "[[[0,1,2,3],[0,1]]]", call)
    with pytest.raises(ValueError, match="unknown algorithm 'AicpuAllReduceSoleNHR' for all_gather"):
        build_plan(Call("all_gather", 2, 1), "AicpuAllReduceSoleNHR", 0)
    assert "point-to-point" in not_runnable_reason("AicpuSendSoleMesh")


def test_two_levels_on_unequal_servers_cut_level0_to_the_gcd():
    """4+2 devices: level-0 groups of gcd(4, 2) = 2 ranks, level 1 the same index (TopoMatchMultilevel)."""
    lay = Layout(parse_topo("[[[0,1,2,3],[0,1]]]"))
    assert lay.algo_groups(3, 2) == ((2, 3), (1, 3, 5))
    call = Call("allreduce", 6, 101)
    simulate(plans_for("CcuSchedAllReduceSequenceMeshMesh", "[[[0,1,2,3],[0,1]]]", call), call)


def test_levels_need_hccls_numbering():
    """Groups whose ranks are not numbered level 0 fastest are refused, naming the rank and its groups."""
    lv = ex.Levels.of(5, [(4, 5, 6, 7), (1, 5, 9)], 12, True, "X")
    assert (lv.dims, lv.me, lv.mult, lv.coords(10)) == ((4, 3), (1, 1), (1, 4), (2, 2))
    with pytest.raises(ex.LayoutError, match=r"level 0 fastest.*rank 5 has groups \(\(4, 5, 6, 7\), \(1, 5, 8\)\)"):
        ex.Levels.of(5, [(4, 5, 6, 7), (1, 5, 8)], 12, True, "X")
    with pytest.raises(ex.LayoutError, match="level 0 fastest"):
        ex.Levels.of(1, [(0, 1), (1, 2)], 4, True, "X")
