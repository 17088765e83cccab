"""Broadcast, Reduce, Scatter, all-to-all and the other ops' rule selectors (§5.4-§5.8)."""

import pytest
from select_topos import KiB, MiB, rule, topo

M8, M2, TWO, CLOS8 = "1x1x8", "1x1x2", "1x2x8", "1x1x8;level0=clos"
UBX4, UBX8, MULT8 = "1x1x4;level0=mesh+clos", "1x1x8;level0=mesh+clos", "1x1x8;level0=mesh+clos;mesh_size=4"
PCIE_ALL, PCIE_NOT = "1x1x8;level0=mesh+clos;pcie=true", "1x1x8;level0=mesh+clos;mesh_size=4;pcie=true"
DIE2, ASYM, L01 = "1x1x8;dies=2", "[[[0,1,2,3],[0,1,2]]]", "1x4x1"

CASES = [
    # Broadcast
    ("Broadcast", M8, 1 * KiB, "CCU_MS", {}, "CcuMSBroadcastSoleMesh"),
    ("Broadcast", DIE2, 1 * KiB, "CCU_MS", {}, "NOT_MATCH"),
    ("Broadcast", UBX8, 2 * MiB - 1, "CCU_MS", {}, "CcuMSBroadcastSoleMesh"),
    ("Broadcast", UBX8, 2 * MiB, "CCU_MS", {}, "CcuMsBroadcastConcurMeshNHR"),
    ("Broadcast", PCIE_ALL, 2 * MiB, "CCU_MS", {}, "CcuMSBroadcastSoleMesh"),
    ("Broadcast", MULT8, 1 * KiB, "CCU_MS", {}, "NOT_MATCH"),
    ("Broadcast", TWO, 16 * 16 * KiB, "CCU_SCHED", {}, "CcuSchedBroadcastSoleMesh"),      # p = 16 KiB
    ("Broadcast", TWO, 16 * 16 * KiB + 16, "CCU_SCHED", {}, "CcuSchedBroadcastSoleNHR"),
    ("Broadcast", TWO, 64 * MiB, "CCU_SCHED", {}, "CcuSchedBroadcastSoleNHR"),            # p = 4 MiB
    ("Broadcast", TWO, 64 * MiB + 16, "CCU_SCHED", {}, "NOT_MATCH"),                      # R < 64, D > 64 MiB
    ("Broadcast", "1x2x4", 32 * MiB, "CCU_SCHED", {}, "CcuSchedBroadcastSoleNHR"),       # p = 4 MiB
    ("Broadcast", "1x2x4", 32 * MiB + 8, "CCU_SCHED", {}, "CcuSchedBroadcastParallelMeshNHR"),
    ("Broadcast", "1x8x8", 64 * MiB, "CCU_SCHED", {}, "CcuSchedBroadcastSoleNHR"),       # R 64, p = 1 MiB
    ("Broadcast", "1x8x8", 64 * MiB + 64, "CCU_SCHED", {}, "NOT_MATCH"),
    ("Broadcast", MULT8, 16 * MiB - 1, "CCU_SCHED", {}, "CcuSchedBroadcastParallelMeshNHRMultiJetty"),
    ("Broadcast", MULT8, 16 * MiB, "CCU_SCHED", {}, "CcuSchedBroadcastPipeLineMeshNHR"),
    ("Broadcast", UBX8, 2 * MiB, "CCU_SCHED", {}, "CcuSchedBroadcastConcurMeshNHR"),
    ("Broadcast", M8, 1 * KiB, "AIV", {}, "AivBroadcastSoleMesh"),
    ("Broadcast", M8, 64 * MiB, "AIV", {}, "NOT_MATCH"),
    ("Broadcast", UBX8, 64 * MiB, "AIV", {}, "AivBroadcastSoleMesh"),                    # UBX R <= 8 waiver
    ("Broadcast", M8, 1 * KiB, "AICPU", {}, "AicpuBroadcastSoleMeshTwoShot"),
    ("Broadcast", UBX8, 2 * MiB, "AICPU", {}, "AicpuBroadcastConcurMeshNHR"),
    ("Broadcast", UBX8, 2 * MiB - 1, "AICPU", {}, "AicpuBroadcastSoleMeshTwoShot"),
    ("Broadcast", PCIE_NOT, 1 * KiB, "AICPU", {}, "AicpuBroadcastParallelMeshNHR"),
    ("Broadcast", MULT8, 1 * MiB, "AICPU", {}, "AicpuBroadcastParallelMeshNHRMultiJetty"),
    ("Broadcast", MULT8, 1 * MiB - 1, "AICPU", {}, "AicpuBroadcastSoleNHR"),
    ("Broadcast", CLOS8, 1 * KiB, "AICPU", {}, "AicpuBroadcastSoleNHRMultiLink"),
    ("Broadcast", TWO, 1 * KiB, "AICPU", {}, "AicpuBroadcastParallelMeshNHR"),
    ("Broadcast", "2x2x4", 1 * KiB, "AICPU", {}, "AicpuBroadcastSequenceMeshConcurNHRNHR"),
    ("Broadcast", "2x2x4;level2=uboe", 1 * KiB, "AICPU", {}, "AicpuBroadcastParallelNHRNHR"),
    ("Broadcast", ASYM, 1 * KiB, "AICPU", {}, "AicpuBroadcastSoleNHR"),
    ("Broadcast", "1x2x8;dpu=true", 1 * KiB, "DPU", {}, "DpuBroadcastSequenceMeshNHR"),
    ("Broadcast", "1x2x8;dpu=true;level0=mesh+clos;mesh_size=4", 1 * KiB, "DPU", {}, "DpuBroadcastOmniPipeMeshNHR"),
    # Reduce
    ("Reduce", M8, 8 * MiB - 1, "CCU_MS", {}, "CcuMSReduceSoleMesh"),
    ("Reduce", M8, 8 * MiB, "CCU_MS", {}, "NOT_MATCH"),
    ("Reduce", MULT8, 64 * MiB - 1, "CCU_MS", {}, "NOT_MATCH"),
    ("Reduce", MULT8, 64 * MiB, "CCU_MS", {}, "CcuMSReducePipeLineMeshNHR"),
    ("Reduce", M8, 16 * MiB, "CCU_SCHED", {}, "CcuSchedReduceSoleMeshTwoShot"),
    ("Reduce", M8, 16 * MiB + 1, "CCU_SCHED", {}, "NOT_MATCH"),
    ("Reduce", "1x1x4", 8 * MiB, "CCU_SCHED", {}, "NOT_MATCH"),                          # R < 8, D >= 8 MiB
    ("Reduce", UBX8, 1 * KiB, "CCU_SCHED", {"dtype": "int8"}, "CcuSchedReduceSoleMesh"),  # int8 allowed here
    ("Reduce", MULT8, 128 * MiB - 1, "CCU_SCHED", {}, "CcuSchedReduceParallelMeshNHRMultiJetty"),
    ("Reduce", MULT8, 128 * MiB, "CCU_SCHED", {}, "CcuSchedReducePipeLineMeshNHR"),
    ("Reduce", TWO, 16 * 256 * KiB, "CCU_SCHED", {}, "CcuSchedReduceSoleNHR"),           # p = 256 KiB
    ("Reduce", TWO, 16 * 256 * KiB + 16, "CCU_SCHED", {}, "CcuSchedReduceParallelMeshNHR"),
    ("Reduce", M8, 1 * KiB, "AIV", {"dtype": "int64"}, "AivReduceSoleMesh"),
    ("Reduce", M8, 1 * KiB, "AIV", {"reduce_op": "prod"}, "NOT_MATCH"),
    ("Reduce", M8, 8 * MiB - 1, "AICPU", {}, "AicpuReduceSoleMesh"),
    ("Reduce", M8, 8 * MiB, "AICPU", {}, "AicpuReduceSoleMeshTwoShot"),
    ("Reduce", UBX8, 2 * MiB - 1, "AICPU", {}, "AicpuReduceSoleMesh"),
    ("Reduce", UBX8, 2 * MiB, "AICPU", {}, "AicpuReduceConcurMeshNHR"),
    ("Reduce", MULT8, 1 * MiB, "AICPU", {}, "AicpuReduceParallelMeshNHRMultiJetty"),
    ("Reduce", MULT8, 1 * MiB - 1, "AICPU", {}, "AicpuReduceSoleNHR"),
    ("Reduce", PCIE_NOT, 1 * KiB, "AICPU", {"dtype": "fp64"}, "AicpuReduceSoleNHRAicpuReduce"),
    ("Reduce", CLOS8, 1 * KiB, "AICPU", {}, "AicpuReduceSoleNHR"),
    ("Reduce", TWO, 1 * KiB, "AICPU", {}, "AicpuReduceParallelMeshNHR"),
    ("Reduce", TWO, 1 * KiB, "AICPU", {"reduce_op": "prod"}, "AicpuReduceSoleNHRAicpuReduce"),
    ("Reduce", "2x2x8;level2=uboe", 1 * KiB, "AICPU", {}, "AicpuReduceParallelNHRNHR"),
    ("Reduce", "2x2x4", 1 * KiB, "AICPU", {}, "AicpuReduceSequenceMeshConcurNHRNHR"),
    ("Reduce", "1x2x8;dpu=true;level0=mesh+clos;mesh_size=4", 1 * KiB, "DPU", {}, "DpuReducePipeLineMeshNHRNHR"),
    ("Reduce", "1x2x8;dpu=true;level0=mesh+clos", 1 * KiB, "DPU", {}, "NOT_MATCH"),
    # Scatter (D per rank, T = D x R)
    ("Scatter", M8, 1 * KiB, "CCU_MS", {}, "NOT_MATCH"),
    ("Scatter", M8, 1 * KiB, "CCU_SCHED", {}, "CcuSchedScatterSoleMesh"),
    ("Scatter", UBX8, 1 * MiB - 1, "CCU_SCHED", {}, "CcuSchedScatterSoleMesh"),
    ("Scatter", UBX8, 1 * MiB, "CCU_SCHED", {}, "CcuSchedScatterConcurMeshNHR"),
    ("Scatter", MULT8, 2 * MiB - 1, "CCU_SCHED", {}, "CcuSchedScatterParallelMeshNHRMultiJetty"),
    ("Scatter", MULT8, 2 * MiB, "CCU_SCHED", {}, "CcuSchedScatterPipeLineMeshNHR"),
    ("Scatter", TWO, 1 * MiB, "CCU_SCHED", {}, "CcuSchedScatterParallelMeshNHR"),
    ("Scatter", TWO, 1 * MiB + 1, "CCU_SCHED", {}, "NOT_MATCH"),
    ("Scatter", M8, 1 * KiB, "AIV", {}, "AivScatterSoleMesh"),
    ("Scatter", M8, 1 * KiB, "AICPU", {}, "AicpuScatterSoleMesh"),
    ("Scatter", UBX8, 1 * MiB, "AICPU", {}, "AicpuScatterConcurMeshNHR"),
    ("Scatter", MULT8, 1 * KiB, "AICPU", {}, "AicpuScatterParallelMeshNHRMultiJetty"),
    ("Scatter", CLOS8, 1 * KiB, "AICPU", {}, "AicpuScatterSoleMesh"),
    ("Scatter", TWO, 1 * KiB, "AICPU", {}, "AicpuScatterParallelMeshNHR"),
    ("Scatter", "2x2x4", 1 * KiB, "AICPU", {}, "AicpuScatterSequenceMeshConcurNHRNHR"),
    ("Scatter", "2x2x4;level2=uboe", 1 * KiB, "AICPU", {}, "AicpuScatterSoleNHR"),
    ("Scatter", "1x2x8;dpu=true", 1 * KiB, "DPU", {}, "DpuScatterSequenceMeshNHR"),
    # AllToAll family (D per peer)
    ("AllToAll", M8, 1 * KiB, "CCU_MS", {}, "NOT_MATCH"),
    ("AllToAll", M8, 1 * KiB, "CCU_SCHED", {}, "CcuSchedAllToAllSoleMesh"),
    ("AllToAll", DIE2, 1 * KiB, "CCU_SCHED", {}, "CcuSchedAllToAllSoleMesh2Die"),
    ("AllToAll", UBX4, 512, "CCU_SCHED", {}, "CcuSchedAllToAllSoleMeshMultiJetty"),
    ("AllToAll", UBX4, 513, "CCU_SCHED", {}, "CcuSchedAllToAllSoleMeshConcurrent"),
    ("AllToAll", TWO, 1 * KiB, "CCU_SCHED", {}, "CcuSchedAllToAllSoleMeshMultiLink"),
    ("AllToAll", M8, 1 * KiB, "CCU_SCHED", {"inplace": True}, "NOT_MATCH"),
    ("AllToAll", M8, 150 * MiB // 8, "AICPU", {}, "AicpuAllToAllSoleMeshSingleChannel"),
    ("AllToAll", M8, 150 * MiB // 8 + 1, "AICPU", {}, "AicpuAllToAllSoleMesh"),
    ("AllToAll", UBX4, 2048, "AICPU", {}, "AicpuAllToAllSoleMeshMultiJetty"),            # 512 fp32 elements
    ("AllToAll", UBX4, 2052, "AICPU", {}, "AicpuAllToAllSoleMeshConcurrent"),            # 513 elements
    ("AllToAll", TWO, 1 * KiB, "AICPU", {}, "AicpuAllToAllSolePairwise"),
    ("AllToAll", "1x3x8", 1 * KiB, "AICPU", {}, "AicpuAllToAllSoleMeshSingleChannel"),   # R 24: not pairwise
    ("AllToAll", M8, 1 * KiB, "AIV", {}, "AivAllToAllSoleMesh"),
    ("AllToAll", TWO, 1 * KiB, "DPU", {}, "DpuAllToAllSoleMesh"),
    ("AllToAllV", TWO, 1 * KiB, "CCU_SCHED", {}, "CcuSchedAllToAllVSoleMeshMultiLink"),
    ("AllToAllV", "1x2x2", 1 * KiB, "CCU_SCHED", {}, "CcuSchedAllToAllVSoleMesh"),
    ("AllToAllV", UBX4, 1 * KiB, "AICPU", {}, "AicpuAllToAllVSoleMeshConcurrent"),
    ("AllToAllV", MULT8, 1 * KiB, "AICPU", {}, "AicpuAllToAllVSoleMeshMultiJetty"),
    ("AllToAllV", TWO, 1 * KiB, "AICPU", {}, "AicpuAllToAllVSolePairwise"),
    ("AllToAllV", "1x1x257", 1 * KiB, "AIV", {}, "NOT_MATCH"),
    ("AllToAllVC", M8, 1 * KiB, "CCU_SCHED", {}, "CcuSchedAllToAllVCSoleMesh"),
    ("AllToAllVC", TWO, 1 * KiB, "AICPU", {}, "AicpuAllToAllVCSolePairwise"),
    ("AllToAllVC", M8, 1 * KiB, "AIV", {}, "AivAllToAllVCSoleMesh"),
    # V ops, barrier, p2p
    ("AllGatherV", M8, 1 * KiB, "CCU_SCHED", {}, "CcuSchedAllGatherVSoleMesh"),
    ("AllGatherV", TWO, 1 * KiB, "CCU_SCHED", {}, "NOT_MATCH"),
    ("AllGatherV", TWO, 1 * KiB, "AICPU", {}, "AicpuAllGatherVSoleMesh"),
    ("ReduceScatterV", M8, 32 * MiB - 1, "CCU_SCHED", {}, "CcuSchedReduceScatterVSoleMesh"),
    ("ReduceScatterV", M8, 32 * MiB, "CCU_SCHED", {}, "NOT_MATCH"),
    ("ReduceScatterV", M8, 1 * KiB, "AICPU", {"dtype": "fp64"}, "NOT_MATCH"),
    ("ReduceScatterV", M8, 1 * KiB, "AICPU", {"dtype": "int64"}, "AicpuReduceScatterVSoleMesh"),
    ("Barrier", M8, 0, "AICPU", {}, "AicpuBarrierSoleNHR"),
    ("Barrier", M8, 0, "CCU_MS", {}, "NOT_MATCH"),
    ("Send", M8, 1 * KiB, "AICPU", {}, "AicpuSendSoleMesh"),
    ("Recv", M8, 1 * KiB, "AIV", {}, "AivRecvSoleMesh"),
    ("Recv", "2x2x4", 1 * KiB, "AIV", {}, "NOT_MATCH"),
    ("BatchSendRecv", TWO, 1 * KiB, "DPU", {}, "DpuBatchSendRecvSoleMesh"),
]


@pytest.mark.parametrize("op, spec, nbytes, engine, kw, expected", CASES)
def test_rule(op, spec, nbytes, engine, kw, expected):
    assert rule(op, topo(spec), nbytes, engine, **kw) == expected
