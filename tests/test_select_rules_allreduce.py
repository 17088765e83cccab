"""AllReduce rule selector: every branch, both sides of each threshold (hccl-selection.md §5.1)."""

import pytest
from select_topos import GiB, KiB, MiB, detour, not_regular, rule, topo

M8, M2, M4, M16 = "1x1x8", "1x1x2", "1x1x4", "1x1x16"
UBX4, UBX8 = "1x1x4;level0=mesh+clos", "1x1x8;level0=mesh+clos"
MULT8 = "1x1x8;level0=mesh+clos;mesh_size=4"
PCIE_ALL, PCIE_NOT = "1x1x8;level0=mesh+clos;pcie=true", "1x1x8;level0=mesh+clos;mesh_size=4;pcie=true"
CLOS8, TWO, ASYM, L01 = "1x1x8;level0=clos", "1x2x8", "[[[0,1,2,3],[0,1,2]]]", "1x4x1"
DIE2 = "1x1x8;dies=2"

CASES = [
    # CCU_MS
    (M8, 256 * KiB, "CCU_MS", {}, "CcuMSAllReduceSoleMeshOneShot"),
    (M8, 512 * KiB, "CCU_MS", {}, "CcuMSAllReduceSoleMesh"),
    (M8, 1 * KiB, "CCU_MS", {"dtype": "int8"}, "NOT_MATCH"),
    (M8, 1 * KiB, "CCU_MS", {"reduce_op": "prod"}, "NOT_MATCH"),
    (M8, 1 * KiB, "CCU_MS", {"dtype": "int64"}, "NOT_MATCH"),
    (M8, 1 * KiB, "CCU_MS", {"deterministic": "strict"}, "NOT_MATCH"),
    (M2, 1 * KiB, "CCU_MS", {"deterministic": "strict"}, "CcuMSAllReduceSoleMeshOneShot"),   # strict needs R > 2
    (TWO, 1 * KiB, "CCU_MS", {}, "NOT_MATCH"),
    (M8, 1 * KiB, "CCU_MS", {"inplace": True}, "NOT_MATCH"),
    (DIE2, 256 * KiB, "CCU_MS", {}, "CcuMSAllReduceSoleMesh2Die"),
    (DIE2, 512 * KiB, "CCU_MS", {}, "CcuMSAllReduceSequenceMesh2Die"),
    (UBX4, 256 * KiB, "CCU_MS", {}, "CcuMSAllReduceSoleMeshOneShot"),
    (UBX4, 512 * KiB, "CCU_MS", {}, "CcuMSAllReduceConcurMeshNHRMultiLink"),
    (MULT8, 32 * MiB - 1, "CCU_MS", {}, "NOT_MATCH"),
    (MULT8, 32 * MiB, "CCU_MS", {}, "CcuMSAllReducePipeLineMeshNHR"),
    (MULT8, 1 * KiB, "CCU_MS", {}, "CcuMSAllReduceSoleMesh"),        # multiple but small -> R <= 8
    (UBX8, 1 * MiB, "CCU_MS", {}, "CcuMSAllReduceSoleMesh"),
    ("1x1x16;level0=mesh+clos", 1 * MiB, "CCU_MS", {}, "NOT_MATCH"),  # R > MAX_RANK_NUM_FOR_REDUCE_MS_ALGO
    (CLOS8, 1 * KiB, "CCU_MS", {}, "NOT_MATCH"),
    # CCU_SCHED single level
    (M8, 8 * MiB, "CCU_SCHED", {}, "CcuSchedAllReduceSoleMesh"),          # 8 MiB * 8/64 = 1 MiB
    (M2, 4 * MiB, "CCU_SCHED", {}, "CcuSchedAllReduceSoleMesh"),          # 4 MiB * 8/4 = 8 MiB, not > 8
    (M2, 4 * MiB + 1, "CCU_SCHED", {}, "NOT_MATCH"),
    (M8, 1 * KiB, "CCU_SCHED", {"dtype": "int8"}, "NOT_MATCH"),
    (M8, 1 * KiB, "CCU_SCHED", {"inplace": True}, "NOT_MATCH"),
    (DIE2, 256 * KiB, "CCU_SCHED", {}, "CcuSchedAllReduceSoleMesh2Die"),
    (DIE2, 512 * KiB, "CCU_SCHED", {}, "CcuSchedAllReduceSequenceMesh2Die"),
    (UBX4, 256 * KiB, "CCU_SCHED", {}, "CcuSchedAllReduceSoleMesh"),
    (UBX4, 512 * KiB, "CCU_SCHED", {}, "CcuSchedAllReduceConcurMeshNHRMultiLink"),
    (MULT8, 64 * MiB - 1, "CCU_SCHED", {}, "CcuSchedAllReduceParallelMeshNHRMultiJetty"),
    (MULT8, 64 * MiB, "CCU_SCHED", {}, "CcuSchedAllReducePipeLineMeshNHR"),
    (UBX8, 1 * MiB, "CCU_SCHED", {}, "CcuSchedAllReduceSoleNHRMultiLink"),
    (PCIE_ALL, 1 * MiB, "CCU_SCHED", {}, "CcuSchedAllReduceSoleMesh"),
    (PCIE_NOT, 1 * MiB, "CCU_SCHED", {}, "NOT_MATCH"),
    (CLOS8, 8 * MiB - 1, "CCU_SCHED", {}, "CcuSchedAllReduceSoleNHR"),
    (CLOS8, 8 * MiB, "CCU_SCHED", {}, "NOT_MATCH"),
    # CCU_SCHED multi-level
    (TWO, 512 * KiB, "CCU_SCHED", {}, "CcuSchedAllReduceSoleMesh"),
    (TWO, 512 * KiB + 1, "CCU_SCHED", {}, "CcuSchedAllReduceSequenceMeshMesh"),
    (TWO, 64 * MiB, "CCU_SCHED", {}, "CcuSchedAllReduceSequenceMeshMesh"),
    (TWO, 64 * MiB + 1, "CCU_SCHED", {}, "NOT_MATCH"),
    (TWO, 1 * MiB, "CCU_SCHED", {"dtype": "int8"}, "NOT_MATCH"),                 # int8: no Parallel
    ("1x8x8", 16 * MiB, "CCU_SCHED", {}, "CcuSchedAllReduceSequenceMeshMesh"),     # R == 64, D <= 16 MiB
    ("1x8x8", 16 * MiB + 1, "CCU_SCHED", {}, "CcuSchedAllReduceParallelMeshNHR"),
    ("1x9x8", 32 * MiB, "CCU_SCHED", {}, "CcuSchedAllReduceSequenceMeshMesh"),     # R > 64, D <= 32 MiB
    (ASYM, 1 * KiB, "CCU_SCHED", {}, "CcuSchedAllReduceSoleNHR"),
    (L01, 1 * KiB, "CCU_SCHED", {}, "CcuSchedAllReduceSoleNHR"),
    ("1x2x8;level0=clos", 8 * MiB - 1, "CCU_SCHED", {}, "CcuSchedAllReduceSoleNHR"),
    ("1x2x8;level0=clos", 8 * MiB, "CCU_SCHED", {}, "NOT_MATCH"),
    ("2x2x4", 1 * KiB, "CCU_SCHED", {}, "NOT_MATCH"),                               # 3 levels: gate
    # AIV
    (M8, 128 * KiB - 1, "AIV", {}, "AivAllReduceSoleMeshOneShot"),
    (M8, 128 * KiB, "AIV", {}, "AivAllReduceSoleMeshTwoShot"),
    (M16, 512 * KiB - 1, "AIV", {}, "AivAllReduceSoleMeshOneShot"),
    (M16, 512 * KiB, "AIV", {}, "AivAllReduceSoleMeshTwoShot"),
    (UBX8, 1 * KiB, "AIV", {}, "AivAllReduceSoleMeshTwoShot"),
    (M8, 1 * KiB, "AIV", {"dtype": "int64"}, "AivAllReduceSoleMeshOneShot"),       # INT64 allowed
    (M8, 1 * KiB, "AIV", {"dtype": "uint64"}, "NOT_MATCH"),
    (M8, 1 * KiB, "AIV", {"reduce_op": "prod"}, "NOT_MATCH"),
    (M8, 64 * MiB - 1, "AIV", {}, "AivAllReduceSoleMeshTwoShot"),                  # < 8 MiB x R
    (M8, 64 * MiB, "AIV", {}, "NOT_MATCH"),
    (M8, 64 * MiB, "AIV", {"expansion_mode": "AIV_ONLY"}, "AivAllReduceSoleMeshTwoShot"),
    (M8, 16 * MiB + 1, "AIV", {"ccl_buffer_size": 1 * MiB}, "NOT_MATCH"),          # > cclBuffer x 16
    ("2x2x4", 1 * KiB, "AIV", {}, "NOT_MATCH"),
    # AICPU single level
    (M8, 8 * MiB, "AICPU", {}, "AicpuAllReduceSoleMeshOneShot"),
    (M8, 8 * MiB + 1, "AICPU", {}, "AicpuAllReduceSoleMeshTwoShot"),
    (M8, 256 * MiB, "AICPU", {}, "AicpuAllReduceSoleMeshTwoShot"),                 # x 8/64 = 32 MiB, not > 32
    (M8, 256 * MiB + 8, "AICPU", {}, "AicpuAllReduceSoleMeshChunkTwoShot"),
    (M8, 8 * MiB, "AICPU", {"dtype": "fp64"}, "AicpuAllReduceSoleMeshOneShot"),
    (M8, 8 * MiB + 1, "AICPU", {"dtype": "fp64"}, "AicpuAllReduceSoleMeshTwoShot"),
    (CLOS8, 1 * KiB, "AICPU", {}, "AicpuAllReduceSoleNHRMultiLink"),
    (CLOS8, 1 * KiB, "AICPU", {"reduce_op": "prod"}, "AicpuAllReduceSoleNHRAicpuReduce"),
    (PCIE_ALL, 8 * MiB, "AICPU", {}, "AicpuAllReduceSoleMeshOneShot"),
    (PCIE_ALL, 8 * MiB + 1, "AICPU", {}, "AicpuAllReduceSoleMeshTwoShot"),
    (PCIE_NOT, 32 * MiB - 1, "AICPU", {}, "AicpuAllReduceParallelMeshNHR"),
    (PCIE_NOT, 32 * MiB, "AICPU", {}, "AicpuAllReducePipeLineMeshNHR"),
    (PCIE_NOT, 1 * KiB, "AICPU", {"dtype": "int64"}, "AicpuAllReduceSequenceMeshNHRAicpuReduce"),
    (UBX4, 8 * MiB, "AICPU", {}, "AicpuAllReduceSoleMeshOneShot"),
    (UBX4, 8 * MiB + 1, "AICPU", {}, "AicpuAllReduceConcurMeshTwoShotNHR"),
    (UBX4, 8 * MiB + 1, "AICPU", {"dtype": "int64"}, "AicpuAllReduceSoleMeshTwoShot"),
    (UBX8, 1 * KiB, "AICPU", {"dtype": "int64"}, "AicpuAllReduceSoleNHRAicpuReduce"),
    (MULT8, 1 * MiB, "AICPU", {}, "AicpuAllReduceParallelMeshNHRMultiJetty"),
    (MULT8, 1 * MiB, "AICPU", {"symmetric_memory": True}, "AicpuAllReducePipeLineMeshNHR"),
    (MULT8, 1 * MiB - 1, "AICPU", {}, "AicpuAllReduceSoleNHR"),
    (M8, 1 * KiB, "AICPU", {"deterministic": "strict"}, "AicpuAllReduceStrictOrderedMesh"),
    ("1x1x9", 1 * KiB, "AICPU", {"deterministic": "strict"}, "AicpuAllReduceStrictOrderedGroupMesh"),
    # AICPU multi-level
    (TWO, 32 * MiB, "AICPU", {}, "AicpuAllReduceSoleNHR"),
    (TWO, 32 * MiB + 1, "AICPU", {}, "AicpuAllReduceParallelMeshNHR"),
    (TWO, 4 * GiB + 1, "AICPU", {}, "AicpuAllReduceSequenceMeshConcurNHR"),
    (TWO, 1 * KiB, "AICPU", {"dtype": "int64"}, "AicpuAllReduceSoleNHRAicpuReduce"),
    ("1x2x8;level1=uboe", 1 * KiB, "AICPU", {}, "AicpuAllReducePipeLineMeshNHR"),
    ("2x2x8;level2=uboe", 1 * KiB, "AICPU", {}, "AicpuAllReducePipeLineMeshNHRNHR"),
    ("2x2x4;level2=uboe", 1 * KiB, "AICPU", {}, "AicpuAllReduceParallelMeshNHR"),    # sym, 3 levels, not dev8
    ("2x2x4", 1 * KiB, "AICPU", {}, "AicpuAllReduceSequenceMeshConcurNHRNHR"),
    (ASYM, 1 * KiB, "AICPU", {}, "AicpuAllReduceSoleNHR"),
    (L01, 1 * KiB, "AICPU", {}, "AicpuAllReduceSoleNHR"),
    ("1x2x8;level0=clos", 1 * KiB, "AICPU", {}, "AicpuAllReduceSoleNHRMultiLink"),
    ("1x2x8;level0=mesh+clos", 1 * KiB, "AICPU", {}, "NOT_MATCH"),
    # DPU
    (M8, 1 * KiB, "DPU", {}, "NOT_MATCH"),
    ("1x2x8;dpu=true", 1 * KiB, "DPU", {}, "DpuAllReduceSequenceMeshNHR"),
    ("1x2x8;dpu=true;level0=mesh+clos", 1 * KiB, "DPU", {}, "DpuAllReducePipeLineMeshNHRNHR"),
    ("1x2x8;dpu=true;level0=mesh+clos;pcie=true", 1 * KiB, "DPU", {}, "DpuAllReduceSequenceMeshNHR"),
]


@pytest.mark.parametrize("spec, nbytes, engine, kw, expected", CASES)
def test_allreduce_rule(spec, nbytes, engine, kw, expected):
    assert rule("AllReduce", topo(spec), nbytes, engine, **kw) == expected


def test_ccu_ms_two_die_not_regular_and_detour():
    assert rule("AllReduce", not_regular(), 1 * KiB, "CCU_MS") == "NOT_MATCH"
    assert rule("AllReduce", detour(2), 8 * MiB - 2, "CCU_MS") == "CcuMSAllReduceSoleMesh"
    assert rule("AllReduce", detour(2), 8 * MiB, "CCU_MS") == "NOT_MATCH"


def test_ccu_ms_960_concur():
    assert rule("AllReduce", detour(8), 16 * MiB + 8, "CCU_MS", device="960") == "CcuMSAllReduceSoleMeshConcur"
    assert rule("AllReduce", detour(8), 16 * MiB, "CCU_MS", device="960") == "CcuMSAllReduceSoleMesh"
    assert rule("AllReduce", detour(8), 16 * MiB + 8, "CCU_MS") == "CcuMSAllReduceSoleMesh"


def test_aicpu_detour():
    assert rule("AllReduce", detour(2), 8 * MiB, "AICPU") == "AicpuAllReduceSoleMeshConcur"
    assert rule("AllReduce", detour(2), 8 * MiB - 2, "AICPU") == "AicpuAllReduceSoleMeshOneShot"
    assert rule("AllReduce", detour(8), 4 * GiB + 8, "AICPU") == "AicpuAllReduceSoleMeshConcur"
    assert rule("AllReduce", topo("1x1x8"), 4 * GiB + 8, "AICPU") == "AicpuAllReduceSoleMeshChunkTwoShot"
