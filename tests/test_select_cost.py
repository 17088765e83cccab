"""Cost model: terms against hand-computed values, the §6.8 worked example, UB lookup, D floor, ties."""

import pytest
from select_topos import KiB, MiB, topo

from pyhccl.algo import CostEngine, HcclDataType, OpCall
from pyhccl.algo.names import OpExecuteConfig as E
from pyhccl.select import select
from pyhccl.select.cost import params as p
from pyhccl.select.cost.executors import NetMeta
from pyhccl.select.cost.model import CostRow, alg_cost, engine_priority, run_cost_model, select_min_cost
from pyhccl.select.cost.templates import Seg, template_coeff
from pyhccl.topo import CommTopo


def _row(res, name):
    return next(r for r in res.rows if r.name == name)


def test_worked_example_6_8():
    t = topo("1x1x8")
    big = run_cost_model("AllReduce", t, OpCall("AllReduce", 16 * MiB, HcclDataType.FP16), E.AICPU_TS)
    two, one = _row(big, "AicpuAllReduceSoleMeshTwoShot"), _row(big, "AicpuAllReduceSoleMeshOneShot")
    n = 1 / 8
    assert two.A == pytest.approx(2 * n / 56e9) and two.A == pytest.approx(4.464e-12, rel=1e-3)
    assert two.B == pytest.approx(n / 1400e9 + 7 * n / 900e9) and two.B == pytest.approx(1.0615e-12, rel=1e-3)
    assert (two.C, two.D) == (pytest.approx(40e-6), pytest.approx(61e-6))
    assert one.A == pytest.approx(1 / 56e9) and one.B == pytest.approx(1 / 1400e9 + 7 / 900e9)
    assert (one.C, one.D) == (pytest.approx(2e-6), pytest.approx(35e-6))
    assert two.cost == pytest.approx((4.464e-12 / 0.8112 + 1.0615e-12) * 16 * MiB + 40e-6, rel=1e-3)
    assert two.cost == pytest.approx(150.1e-6, rel=1e-3) and one.cost == pytest.approx(513.8e-6, rel=1e-3)
    assert big.winner.name == "AicpuAllReduceSoleMeshTwoShot"
    small = run_cost_model("AllReduce", t, OpCall("AllReduce", 64 * KiB, HcclDataType.FP16), E.AICPU_TS)
    two, one = _row(small, "AicpuAllReduceSoleMeshTwoShot"), _row(small, "AicpuAllReduceSoleMeshOneShot")
    assert two.body == pytest.approx(40.5e-6, rel=1e-2) and two.cost == pytest.approx(61e-6)     # D floor
    assert one.body == pytest.approx(4.2e-6, rel=1e-2) and one.cost == pytest.approx(35e-6)
    assert small.winner.name == "AicpuAllReduceSoleMeshOneShot"


def test_terms():
    assert p.mesh_a(1.0, CommTopo.MESH_1D, 4, 8, False) == pytest.approx(1 / 56e9)
    assert p.mesh_a(1.0, CommTopo.CLOS, 4, 8, False) == pytest.approx(7 / (4 * 56e9))
    assert p.mesh_a(1.0, CommTopo.CLOS, 4, 8, True) == pytest.approx(7 / (2 * 56e9))      # pod halves CLOS ports
    assert p.nhr_a(1.0, CommTopo.MESH_1D, 2, 8, True) == pytest.approx(7 / (2 * 56e9))    # MESH: no halving
    assert p.nhr_a(1.0, CommTopo.CLOS, 3, 8, True) == pytest.approx(7 / (1.5 * 56e9))     # N3: real halving
    assert p.copy_b(1.0, CostEngine.CCU) == pytest.approx(1 / 200e9)
    assert p.reduce_b(1.0, CostEngine.CCU) == pytest.approx(1 / 35e9)
    assert p.reduce_b(1.0, CostEngine.AIV) == pytest.approx(1 / 900e9)
    assert p.latency_c(3, CostEngine.AIV) == pytest.approx(3e-6)
    assert p.latency_c(3, CostEngine.CPU) == 0
    assert p.launch_d(10, CostEngine.AICPU) == pytest.approx(5e-6)
    assert p.launch_d(10, CostEngine.CCU) == 0 and p.launch_d(10, CostEngine.AIV) == 0
    assert (p.trans_tasks(8), p.sync_tasks(8)) == (35, 14)


def test_ub_lookup_first_bound_strictly_greater():
    mesh = lambda s: p.ub_util(s, 1.0, 8, CommTopo.MESH_1D, "Mesh", CostEngine.AICPU, "AllReduce")  # noqa: E731
    assert mesh(1 * MiB - 1) == 0.7135 and mesh(1 * MiB) == 0.7758 and mesh(1 << 40) == 0.8494
    clos = lambda s, a="NHR", op="AllReduce": p.ub_util(s, 1.0, 2, CommTopo.CLOS, a, CostEngine.AICPU, op)  # noqa: E731
    assert clos(100 * KiB) == 0.10388 and clos(1 * MiB) == 0.3
    assert clos(100 * KiB, "Mesh") == 0.217                                 # one-jetty-one-port table
    assert clos(100 * KiB, "Mesh", "AllGather") == 0.3453                   # AllGather looks up >= 1 MiB
    assert p.ub_util(1 * MiB, 0.25, 8, CommTopo.MESH_1D, "Mesh", CostEngine.AICPU, "AllReduce") == 0.7135
    assert p.ub_util(1 * MiB, 0.25, 8, CommTopo.MESH_1D, "NHR", CostEngine.AICPU, "AllReduce") == 0.7758  # x R/2 = 1 MiB
    assert p.ub_util(1, 1.0, 8, CommTopo.MESH_1D, "Mesh", CostEngine.AIV, "AllReduce") == pytest.approx(0.7135 * 0.65)


def test_nhr_templates_set_d_directly():
    c = template_coeff(Seg("InsTempAllReduceNHR", 8, 1 / 8))
    assert c.D == pytest.approx(8 * 7 * 1e-6) and c.C == pytest.approx(20e-6)
    assert template_coeff(Seg("InsTempAllReduceMesh1DOneShot", 9, 1 / 9)) is None          # R > 8 guard
    assert template_coeff(Seg("InsTempReduceScatterMesh1D", 16, 1.0)) is not None          # guard commented out
    assert template_coeff(Seg("NoSuchTemplate", 8, 1.0)) is None


def test_group_sum_max_and_d_floor():
    c1, c2 = p.Coeff(0.0, 0.0, 10e-6, 30e-6), p.Coeff(0.0, 0.0, 20e-6, 30e-6)
    meta = lambda mode, groups: NetMeta((CommTopo.MESH_1D,) * 2, (1.0, 1.0), (8, 8), ("Mesh", "Mesh"), mode, groups)  # noqa
    assert alg_cost((c1, c2), meta("SUM", (2,)), 1, E.AICPU_TS, "AllReduce") == pytest.approx((30e-6, 60e-6))
    assert alg_cost((c1, c2), meta("MAX", (2,)), 1, E.AICPU_TS, "AllReduce") == pytest.approx((20e-6, 60e-6))
    assert alg_cost((c1, c2), meta("MAX", (1, 1)), 1, E.AICPU_TS, "AllReduce") == pytest.approx((30e-6, 60e-6))


def test_parallel_executor_segments_and_meta():
    res = run_cost_model("AllReduce", topo("1x2x8"), OpCall("AllReduce", 64 * MiB), E.AICPU_TS)
    row = _row(res, "AicpuAllReduceParallelMeshNHR")
    assert not row.filtered and len(row.coeffs) == 8
    # segment 0: RS mesh on level 0 (8 ranks, MESH), dataRatio r/L0 = 0.5/8
    n = 0.5 / 8
    assert row.coeffs[0].A == pytest.approx(n / 56e9)
    assert row.coeffs[0].D == pytest.approx(0.5e-6 * (35 + 28 + 1))
    # segment 1: RS NHR on level 1 (2 ranks, CLOS, 1 port), dataRatio (1-r)/L1 = 0.25
    assert row.coeffs[1].A == pytest.approx(0.25 * 1 / 56e9)


def test_engine_priority_and_filter():
    assert engine_priority(E.CCU_MS) == (E.CCU_MS, E.CCU_SCHED, E.AICPU_TS, E.HOSTCPU)
    assert engine_priority(E.AIV_ONLY) == (E.AIV,)
    assert engine_priority(E.CCU_FAIL) == (E.AICPU_TS, E.HOSTCPU)
    res = run_cost_model("AllReduce", topo("1x1x8"), OpCall("AllReduce", 1 * KiB), E.AIV_ONLY)
    assert _row(res, "AicpuAllReduceSoleMeshOneShot").filtered == "engine AICPU_TS not in AIV"
    assert res.winner.name == "AivAllReduceSoleMeshOneShot"


def test_select_min_cost_ties_and_negatives():
    rows = [CostRow("a", "X", cost=2.0), CostRow("b", "X", cost=1.0), CostRow("c", "X", cost=1.0),
            CostRow("d", "X", cost=-1.0), CostRow("e", "X", filtered="why")]
    best, ties = select_min_cost(rows)
    assert best.name == "b" and ties == ["c"]
    assert select_min_cost([CostRow("d", "X", cost=-1.0)]) == (None, [])


def test_cost_mode_matches_rules_where_d_decides():
    t = topo("1x1x8")
    assert select("AllReduce", t, 64 * KiB, "fp16", mode="cost", expansion_mode="AI_CPU", algo="").algorithm == \
        "AicpuAllReduceSoleMeshOneShot"
    sel = select("AllReduce", t, 16 * MiB, "fp16", mode="cost", expansion_mode="AI_CPU", algo="")
    assert sel.algorithm == "AicpuAllReduceSoleMeshTwoShot" and sel.source == "cost"
