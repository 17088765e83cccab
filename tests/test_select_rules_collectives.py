"""AllGather and ReduceScatter rule selectors: branches on both sides of their thresholds (§5.2, §5.3)."""

import pytest
from select_topos import KiB, MiB, detour, not_regular, rule, topo

M8, M2, TWO, CLOS8 = "1x1x8", "1x1x2", "1x2x8", "1x1x8;level0=clos"
UBX4, UBX8, MULT8 = "1x1x4;level0=mesh+clos", "1x1x8;level0=mesh+clos", "1x1x8;level0=mesh+clos;mesh_size=4"
PCIE_ALL, PCIE_NOT = "1x1x8;level0=mesh+clos;pcie=true", "1x1x8;level0=mesh+clos;mesh_size=4;pcie=true"
DIE2, ASYM, L01 = "1x1x8;dies=2", "[[[0,1,2,3],[0,1,2]]]", "1x4x1"

AG = [
    (M8, 1 * KiB, "CCU_MS", {}, "CcuMSAllGatherSoleMesh"),
    (M8, 1 * KiB, "CCU_MS", {"inplace": True}, "NOT_MATCH"),
    (DIE2, 1 * KiB, "CCU_MS", {}, "CcuMSAllGatherSoleMesh2Die"),
    (UBX8, 512 * KiB, "CCU_MS", {}, "CcuMSAllGatherSoleMesh"),
    (UBX8, 512 * KiB + 1, "CCU_MS", {}, "NOT_MATCH"),
    (PCIE_NOT, 1 * KiB, "CCU_MS", {}, "NOT_MATCH"),
    (TWO, 1 * KiB, "CCU_MS", {}, "NOT_MATCH"),
    (CLOS8, 1 * KiB, "CCU_MS", {}, "NOT_MATCH"),
    (M8, 1 * KiB, "CCU_SCHED", {}, "CcuSchedAllGatherSoleMesh"),
    (DIE2, 1 * KiB, "CCU_SCHED", {}, "CcuSchedAllGatherSoleMesh2Die"),
    (UBX4, 512 * KiB + 1, "CCU_SCHED", {}, "CcuSchedAllGatherConcurMeshNHRMultiLink"),
    (UBX4, 512 * KiB, "CCU_SCHED", {}, "CcuSchedAllGatherSoleMesh"),
    (MULT8, 16 * MiB - 1, "CCU_SCHED", {}, "CcuSchedAllGatherParallelMeshNHRMultiLink"),
    (MULT8, 16 * MiB, "CCU_SCHED", {}, "CcuSchedAllGatherPipeLineMeshNHR"),
    (UBX8, 1 * MiB, "CCU_SCHED", {}, "CcuSchedAllGatherSoleNHRMultiLink"),
    (CLOS8, 1 * KiB, "CCU_SCHED", {}, "CcuSchedAllGatherSoleNHR"),
    ("1x1x4;level0=clos;pcie=true", 1 * KiB, "CCU_SCHED", {}, "NOT_MATCH"),
    ("1x2x4", 1 * MiB, "CCU_SCHED", {}, "CcuSchedAllGatherSoleMesh"),                # R <= 8, D <= 1 MiB
    ("1x2x4", 1 * MiB + 1, "CCU_SCHED", {}, "CcuSchedAllGatherParallelMeshNHR"),
    (TWO, 128 * KiB - 1, "CCU_SCHED", {}, "CcuSchedAllGatherSoleMesh"),
    (TWO, 128 * KiB, "CCU_SCHED", {}, "CcuSchedAllGatherSequenceMeshMesh"),
    (TWO, 4 * MiB - 1, "CCU_SCHED", {}, "CcuSchedAllGatherSequenceMeshMesh"),
    (TWO, 4 * MiB, "CCU_SCHED", {}, "CcuSchedAllGatherParallelMeshNHR"),
    ("1x8x8", 1 * KiB, "CCU_SCHED", {}, "CcuSchedAllGatherSequenceMeshMesh"),       # R 64 > 32
    ("1x9x8", 1 * KiB, "CCU_SCHED", {}, "NOT_MATCH"),                               # R > 64
    ("1x17x2", 4 * MiB, "CCU_SCHED", {}, "CcuSchedAllGatherSoleNHR"),               # frames 17 > 16
    (ASYM, 1 * KiB, "CCU_SCHED", {}, "CcuSchedAllGatherSoleNHR"),
    (L01, 1 * KiB, "CCU_SCHED", {}, "CcuSchedAllGatherSoleNHR"),
    (M8, 8 * MiB - 1, "AIV", {}, "AivAllGatherSoleMesh"),                           # D x R < 8 MiB x R
    (M8, 8 * MiB, "AIV", {}, "NOT_MATCH"),
    (UBX8, 8 * MiB, "AIV", {}, "AivAllGatherSoleMesh"),                             # UBX 4 < R <= 8 waiver
    (UBX4, 8 * MiB, "AIV", {}, "NOT_MATCH"),
    (M8, 1 * KiB, "AICPU", {}, "AicpuAllGatherSoleMesh"),
    (CLOS8, 1 * KiB, "AICPU", {}, "AicpuAllGatherSoleNHRMultiLink"),
    (PCIE_ALL, 1 * KiB, "AICPU", {}, "AicpuAllGatherSoleMesh"),
    (PCIE_NOT, 4 * MiB - 1, "AICPU", {}, "AicpuAllGatherParallelMeshNHR"),
    (PCIE_NOT, 4 * MiB, "AICPU", {}, "AicpuAllGatherPipeLineMeshNHR"),
    (UBX4, 512 * KiB, "AICPU", {}, "AicpuAllGatherSoleMesh"),
    (UBX4, 512 * KiB + 1, "AICPU", {}, "AicpuAllGatherConcurMeshNHR"),
    (MULT8, 512 * KiB + 1, "AICPU", {}, "AicpuAllGatherParallelMeshNHRMultiJetty"),
    (MULT8, 4 * MiB, "AICPU", {}, "AicpuAllGatherPipeLineMeshNHR"),
    (MULT8, 512 * KiB, "AICPU", {}, "AicpuAllGatherSoleNHR"),
    (TWO, 1 * MiB, "AICPU", {}, "AicpuAllGatherSoleNHR"),
    (TWO, 1 * MiB + 1, "AICPU", {}, "AicpuAllGatherParallelMeshNHR"),
    (TWO, 256 * MiB + 1, "AICPU", {}, "AicpuAllGatherSequenceMeshConcurNHR"),        # D x 16 > 4 GiB
    ("1x2x8;level1=uboe", 1 * KiB, "AICPU", {}, "AicpuAllGatherPipeLineMeshNHR"),
    ("2x2x8;level2=uboe", 1 * KiB, "AICPU", {}, "AicpuAllGatherPipeLineMeshNHRNHR"),
    ("2x2x4;level2=uboe", 1 * KiB, "AICPU", {}, "AicpuAllGatherParallelNHRNHR"),
    ("2x2x4", 1 * KiB, "AICPU", {}, "AicpuAllGatherSequenceMeshConcurNHRNHR"),
    (ASYM, 1 * KiB, "AICPU", {}, "AicpuAllGatherSoleNHR"),
    ("1x2x8;level0=clos", 1 * KiB, "AICPU", {}, "AicpuAllGatherSoleNHRMultiLink"),
    ("1x2x8;level0=mesh+clos", 1 * KiB, "AICPU", {}, "NOT_MATCH"),
    (M8, 1 * KiB, "DPU", {}, "NOT_MATCH"),
    ("1x2x8;dpu=true", 1 * KiB, "DPU", {}, "DpuAllGatherSequenceMeshNHR"),
    ("1x2x8;dpu=true;level0=mesh+clos", 1 * KiB, "DPU", {}, "DpuAllGatherPipeLineMeshNHRNHR"),
]

RS = [
    (M8, 1 * KiB, "CCU_MS", {}, "CcuMSReduceScatterSoleMesh"),
    (M8, 1 * KiB, "CCU_MS", {"dtype": "int8"}, "NOT_MATCH"),
    (DIE2, 1 * KiB, "CCU_MS", {}, "CcuMSReduceScatterSoleMesh2Die"),
    (UBX4, 256 * KiB, "CCU_MS", {}, "CcuMSReduceScatterSoleMesh"),
    (UBX4, 512 * KiB, "CCU_MS", {}, "CcuMSReduceScatterConcurMeshNHRMultiLink"),
    (MULT8, 2 * MiB - 1, "CCU_MS", {}, "NOT_MATCH"),
    (MULT8, 2 * MiB, "CCU_MS", {}, "CcuMSReduceScatterPipeLineMeshNHR"),
    (M8, 8 * MiB - 1, "CCU_SCHED", {}, "CcuSchedReduceScatterSoleMesh"),            # D x 8/R < 8 MiB
    (M8, 8 * MiB, "CCU_SCHED", {}, "NOT_MATCH"),
    (M8, 1 * KiB, "CCU_SCHED", {"inplace": True}, "NOT_MATCH"),
    (MULT8, 4 * MiB - 1, "CCU_SCHED", {}, "CcuSchedReduceScatterParallelMeshNHRMultiLink"),
    (MULT8, 4 * MiB, "CCU_SCHED", {}, "CcuSchedReduceScatterPipeLineMeshNHR"),
    (TWO, 32 * KiB - 1, "CCU_SCHED", {}, "CcuSchedReduceScatterSoleMesh"),            # D x R < 512 KiB
    (TWO, 32 * KiB, "CCU_SCHED", {}, "CcuSchedReduceScatterSequenceMeshMesh"),
    (TWO, 256 * KiB - 1, "CCU_SCHED", {}, "CcuSchedReduceScatterSequenceMeshMesh"),   # D x R < 4 MiB: no 2-die
    (TWO, 256 * KiB, "CCU_SCHED", {}, "CcuSchedReduceScatterSoleMesh2Die"),          # R 16, 2 frames, 4 MiB
    ("1x4x4", 1 * MiB - 1, "CCU_SCHED", {}, "CcuSchedReduceScatterSequenceMeshMesh"),  # D x R < 16 MiB
    (TWO, 1 * MiB, "CCU_SCHED", {}, "CcuSchedReduceScatterSoleMesh2Die"),            # R 16, 2 frames, 16 MiB
    ("1x4x4", 1 * MiB, "CCU_SCHED", {}, "NOT_MATCH"),                                # 4 frames: no 2-die
    (TWO, 32 * MiB, "CCU_SCHED", {}, "NOT_MATCH"),
    ("1x8x8", 256 * KiB, "CCU_SCHED", {}, "CcuSchedReduceScatterSequenceMeshMesh"),   # R == 64, 16 MiB
    ("1x8x8", 2 * MiB, "CCU_SCHED", {}, "CcuSchedReduceScatterParallelMeshNHR"),      # 128 MiB
    ("1x8x8", 2 * MiB + 1, "CCU_SCHED", {}, "NOT_MATCH"),
    (M8, 1 * KiB, "AIV", {}, "AivReduceScatterSoleMesh"),
    (M8, 1 * KiB, "AIV", {"dtype": "fp64"}, "NOT_MATCH"),
    (M8, 16 * MiB, "AICPU", {}, "AicpuReduceScatterSoleMesh"),                      # D x 1 <= 16 MiB
    (M8, 16 * MiB + 1, "AICPU", {}, "AicpuReduceScatterSoleMeshChunk"),
    (M8, 32 * MiB, "AICPU", {"dtype": "int64"}, "AicpuReduceScatterSoleMesh"),
    (CLOS8, 1 * KiB, "AICPU", {}, "AicpuReduceScatterSoleNHRMultiLink"),
    (PCIE_NOT, 4 * MiB - 1, "AICPU", {}, "AicpuReduceScatterParallelMeshNHR"),
    (PCIE_NOT, 4 * MiB, "AICPU", {}, "AicpuReduceScatterPipeLineMeshNHR"),
    (PCIE_NOT, 1 * KiB, "AICPU", {"reduce_op": "prod"}, "AicpuReduceScatterSequenceMeshNHRAicpuReduce"),
    (UBX8, 512 * KiB - 1, "AICPU", {}, "AicpuReduceScatterSoleMesh"),
    (UBX8, 512 * KiB, "AICPU", {}, "AicpuReduceScatterConcurMeshNHR"),
    (MULT8, 1 * MiB, "AICPU", {}, "AicpuReduceScatterParallelMeshNHRMultiJetty"),
    (MULT8, 1 * MiB - 1, "AICPU", {}, "AicpuReduceScatterSoleNHR"),
    (TWO, 4 * MiB, "AICPU", {}, "AicpuReduceScatterSoleNHR"),
    (TWO, 4 * MiB + 1, "AICPU", {}, "AicpuReduceScatterParallelMeshNHR"),
    (TWO, 1 * KiB, "AICPU", {"dtype": "uint64"}, "AicpuReduceScatterSoleNHRAicpuReduce"),
    (M8, 1 * KiB, "AICPU", {"deterministic": "strict"}, "AicpuReduceScatterStrictOrderedMesh"),
    ("1x1x9", 1 * KiB, "AICPU", {"deterministic": "strict"}, "AicpuReduceScatterStrictOrderedGroupMesh"),
    ("2x2x8;level2=uboe", 1 * KiB, "AICPU", {}, "AicpuReduceScatterPipeLineMeshNHRMesh"),
    ("1x2x8;dpu=true", 1 * KiB, "DPU", {}, "DpuReduceScatterSequenceMeshMesh"),
    ("1x2x8;dpu=true;level0=mesh+clos", 1 * KiB, "DPU", {}, "DpuReduceScatterPipeLineMeshNHRMesh"),
]


@pytest.mark.parametrize("spec, nbytes, engine, kw, expected", AG)
def test_allgather_rule(spec, nbytes, engine, kw, expected):
    assert rule("AllGather", topo(spec), nbytes, engine, **kw) == expected


@pytest.mark.parametrize("spec, nbytes, engine, kw, expected", RS)
def test_reducescatter_rule(spec, nbytes, engine, kw, expected):
    assert rule("ReduceScatter", topo(spec), nbytes, engine, **kw) == expected


def test_detour_and_960_branches():
    assert rule("AllGather", detour(2), 4 * MiB, "CCU_MS") == "NOT_MATCH"
    assert rule("AllGather", detour(2), 4 * MiB - 1, "CCU_MS") == "CcuMSAllGatherSoleMesh"
    assert rule("AllGather", detour(2), 4 * MiB, "AICPU") == "AicpuAllGatherSoleMeshConcur"
    assert rule("AllGather", detour(8), 128 * MiB + 1, "AICPU") == "AicpuAllGatherSoleMeshConcur"    # D x R > 1 GiB
    assert rule("AllGather", detour(8), 128 * MiB, "AICPU") == "AicpuAllGatherSoleMesh"
    assert rule("AllGather", detour(8), 16 * MiB + 1, "CCU_SCHED", device="960") == "CcuSchedAllGatherSoleMeshConcur"
    assert rule("ReduceScatter", detour(2), 4 * MiB, "AICPU") == "AicpuReduceScatterSoleMeshConcur"
    assert rule("ReduceScatter", detour(2), 4 * MiB, "CCU_MS") == "NOT_MATCH"
    assert rule("ReduceScatter", detour(8), 2 * MiB + 1, "CCU_MS", device="960") == "CcuMSReduceScatterSoleMeshConcur"
    assert rule("ReduceScatter", not_regular(), 1 * KiB, "CCU_MS") == "NOT_MATCH"
    assert rule("AllGather", not_regular(), 1 * KiB, "CCU_SCHED") == "NOT_MATCH"
