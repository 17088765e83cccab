"""HCCL's registered AllReduce algorithms as plans: Sole and Sequence executors through the simulator."""

import pytest

from pyhccl.algo import registry
from pyhccl.opspec import get_opspec
from pyhccl.plan.hccl import NotRunnableError, build_hccl_allreduce
from pyhccl.run.sim import simulate
from pyhccl.topo import Layout, parse_topo

AR = get_opspec("allreduce")
RUNNABLE = ["AicpuAllReduceSoleMeshOneShot", "AicpuAllReduceSoleMeshTwoShot", "AicpuAllReduceSoleNHR",
            "AicpuAllReduceSoleMeshChunkTwoShot", "AicpuAllReduceSoleNHRAicpuReduce",
            "CcuMSAllReduceSoleMeshOneShot", "CcuMSAllReduceSoleMesh", "CcuSchedAllReduceSoleMesh",
            "CcuSchedAllReduceSoleNHR", "AivAllReduceSoleMeshTwoShot", "CcuSchedAllReduceSequenceMeshMesh"]


def plans_for(name, spec, count, in_place=False):
    reg = registry.get(name)
    lay = Layout(parse_topo(spec))
    return [build_hccl_allreduce(name, reg.executor, reg.levels, r, lay.algo_groups(r, len(reg.levels)), count,
                                 in_place, uniform=lay.uniform) for r in range(lay.nranks)]


@pytest.mark.parametrize("name", RUNNABLE)
@pytest.mark.parametrize("spec", ["1x1x1", "1x1x5", "1x2x4", "1x3x4", "1x4x2", "2x2x2", "3x2x3"])
def test_registered_allreduce_simulates(name, spec):
    for count in (0, 1, 7, 97, 10_000_000_019):
        simulate(plans_for(name, spec, count), AR, count)
    simulate(plans_for(name, spec, 13, in_place=True), AR, 13, in_place=True)


def test_sequence_orders_levels_like_hccl():
    """RS level 0, RS level 1, AG level 1, AG level 0 (ins_v2_all_reduce_sequence_executor_aicpu.cc)."""
    p = plans_for("CcuSchedAllReduceSequenceMeshMesh", "1x2x4", 64)[5]      # server 1, device 1
    peers = [sorted({a.peer for a in s.transfers}) for s in p.steps if s.transfers]
    assert peers == [[4, 6, 7], [1], [1], [4, 6, 7]]


def test_three_levels_compose():
    levels = (("InsTempReduceScatterMesh1D", "InsTempAllGatherMesh1D"),
              ("InsTempReduceScatterNHR", "InsTempAllGatherNHR"),
              ("InsTempReduceScatterNHR", "InsTempAllGatherNHR"))
    lay = Layout(parse_topo("2x3x2"))
    for count in (0, 5, 101, 10**10):
        plans = [build_hccl_allreduce("three", "InsV2AllReduceSequenceExecutorAicpu3Level", levels, r,
                                      lay.algo_groups(r, 3), count) for r in range(lay.nranks)]
        simulate(plans, AR, count)


def test_not_runnable_names_fail_clearly():
    reg = registry.get("AicpuAllReduceParallelMeshNHR")
    lay = Layout(parse_topo("1x2x4"))
    with pytest.raises(NotRunnableError, match="'AicpuAllReduceParallelMeshNHR' \\(executor "
                                               "InsAllReduceParallelExecutor.*does not run in pyhccl yet"):
        build_hccl_allreduce(reg.name, reg.executor, reg.levels, 0, lay.algo_groups(0, 2), 8)
    reg = registry.get("CcuSchedAllReduceSequenceMeshMesh")
    lay = Layout(parse_topo("[[[0,1,2,3],[0,1]]]"))
    with pytest.raises(NotRunnableError, match="needs 2 levels of equal-size groups.*of unequal sizes"):
        build_hccl_allreduce(reg.name, reg.executor, reg.levels, 0, lay.algo_groups(0, 2), 8, uniform=lay.uniform)
