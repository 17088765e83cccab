"""The registry: names, executors, templates per level, declared attributes and HCCL's checks."""

from dataclasses import replace

import pytest
from select_topos import topo

from pyhccl.algo import HcclDataType, HcclReduceOp, OpCall, check_op, check_topo, get, names, registrations
from pyhccl.algo.registry import with_topo
from pyhccl.topo import Level0Shape


def test_allreduce_has_the_38_registrations_in_order():
    ar = names("AllReduce")
    assert len(ar) == 38 and ar[0] == "AicpuAllReduceSoleMeshOneShot"
    assert ar[-1] == "AicpuAllReduceStrictOrderedGroupMesh"
    assert all(r.declared for r in registrations("AllReduce") if r.name != "CcuSchedAllReduceSequenceMesh2Die")


def test_every_rule_answer_is_registered():
    from pyhccl.select.rules import RULES  # noqa: F401 - rule names are checked by the rule tests
    for op in ("AllGather", "ReduceScatter", "Broadcast", "Reduce", "Scatter", "AllToAll", "AllToAllV", "Barrier"):
        assert names(op)


def test_levels_and_executor():
    r = get("AicpuAllReduceParallelMeshNHR")
    assert r.executor == "InsAllReduceParallelExecutor" and r.topo_match == "TopoMatchTwoLevel"
    assert r.levels == (("InsTempReduceScatterMesh1D", "InsTempAllGatherMesh1D"),
                        ("InsTempReduceScatterNHR", "InsTempAllGatherNHR"))
    assert get("AicpuAllReduceSoleMeshOneShot").levels == (("InsTempAllReduceMesh1DOneShot",),)


def test_unknown_name_lists_close_matches():
    with pytest.raises(ValueError, match="did you mean AicpuAllReduceSoleMeshOneShot"):
        get("AicpuAllReduceSoleMeshOneShott")


def _topo_reason(name, spec, **changes):
    r = get(name)
    t = replace(topo(spec), **changes) if changes else topo(spec)
    return check_topo(r.op, r.engine, r.topo, t)


def test_topo_checks_in_hccl_order():
    assert _topo_reason("AicpuAllReduceSequenceMeshConcurNHR", "1x1x8") == "topoLevelNums 1 < minTopoLevelNum 2"
    assert _topo_reason("AicpuAllReduceSoleMeshOneShot", "1x2x8") == "topoLevelNums 2 > maxTopoLevelNum 1"
    assert _topo_reason("AicpuAllReduceSoleMeshOneShot", "1x1x8;level0=clos").startswith("level0Topo CLOS not in")
    assert _topo_reason("CcuMSAllReduceSoleMesh", "1x1x8;dies=2").startswith("level0MeshType TWO_DIE_REGULAR")
    assert _topo_reason("CcuMSAllReduceSoleMesh", "1x1x8", is_2die_full_mesh=True) == \
        "is2DieFullMesh and not isSupport2DieFullMesh"
    assert _topo_reason("AicpuAllReduceConcurMeshTwoShotNHR", "1x1x4;level0=mesh+clos;pcie=true") == \
        "level0PcieMix and not isSupportLevel0PcieMix"
    assert _topo_reason("AicpuAllReduceParallelMeshNHR", "[[[0,1,2,3],[0,1,2]]]") == \
        "Level1Nhr and not isSupportLevel1Nhr"
    assert _topo_reason("AicpuAllReduceSoleMeshOneShot", "1x1x8;level0=mesh+clos;mesh_size=4;pcie=true").startswith(
        "requireAllMeshConnected")
    assert _topo_reason("CcuMSAllReduceSoleMeshConcur", "1x1x8").startswith("deviceType DEV_TYPE_950")
    assert _topo_reason("DpuAllReduceSequenceMeshNHR", "1x2x8").startswith("isHostDpuOnly True")
    assert _topo_reason("CcuSchedAllReduceSoleNHR", "1x5x16") == "rank size 80 > maxSupportRankSize 64"
    assert _topo_reason("AicpuAllReduceStrictOrderedMesh", "1x1x16") == "topoCustomCheck failed: R <= 8"


def test_level1_nhr_check_skipped_for_alltoall():
    r = with_topo(get("AicpuAllToAllSoleMesh"), support_level0_topos=frozenset(Level0Shape))
    assert check_topo("AllToAll", r.engine, r.topo, topo("[[[0,1,2,3],[0,1,2]]]")) is None


def test_soft_topo_check_skipped():
    r = get("AicpuAllReduceStrictOrderedMesh")
    assert check_topo(r.op, r.engine, r.topo, topo("1x1x16"), soft=False) is None


def test_op_checks_in_hccl_order():
    t = topo("1x1x8")
    ccu = get("CcuMSAllReduceSoleMesh").opattrs
    assert check_op(ccu, OpCall("AllReduce", 8, HcclDataType.INT8), t).startswith("dtype INT8 in unsupported")
    assert check_op(ccu, OpCall("AllReduce", 8, reduce_op=HcclReduceOp.PROD), t) == "reduce op PROD and not isSupportProd"
    assert check_op(ccu, OpCall("AllReduce", 8, inplace=True), t) == "in-place and not isSupportInplace"
    assert check_op(ccu, OpCall("AllReduce", 8, deterministic="strict"), t).startswith("strict order")
    seq = get("AicpuAllReduceSequenceMeshNHRAicpuReduce").opattrs                 # whitelist 64-bit only
    assert check_op(seq, OpCall("AllReduce", 8, HcclDataType.FP32), t).startswith("dtype FP32 not in supported")
    assert check_op(seq, OpCall("AllReduce", 8, HcclDataType.INT64, HcclReduceOp.PROD), t) is None
    mj = get("AicpuAllReduceParallelMeshNHRMultiJetty").opattrs
    assert check_op(mj, OpCall("AllReduce", 8, symmetric_memory=True), t) == "opCustomCheck failed: no symmetric memory"
    assert check_op(mj, OpCall("AllReduce", 8, symmetric_memory=True), t, soft=False) is None
    strict = get("AicpuAllReduceStrictOrderedMesh").opattrs
    assert check_op(strict, OpCall("AllReduce", 8, deterministic="strict"), t) is None
