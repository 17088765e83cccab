"""All-to-all, V-op, Barrier and point-to-point registrations (hccl-selection.md §5.6, §5.8, Appendix B).

HCCL source: src/ops/all_to_all_v/algorithm/executor/*.cc (commit b198b83f) and the
all_gather_v, reduce_scatter_v, barrier, send, recv and batch_send_recv executors. Attributes
are not in the reference (``declared=False``): §8.5's engine patterns and the rule selectors'
shapes and level counts.
"""

from __future__ import annotations

from functools import partial

from .registry import ALL3, MESH_OR_UBX, TWO_DIE_REGULAR, UBX, register

R = partial(register, declared=False)
_ONE, _TWO, _CV2 = "TopoMatchOneLevel", "TopoMatchTwoLevel", "TopoMatchConcurrentV2"
S, C = "InsV2AllToAllVSoleExecutor", "InsV2AllToAllVConcurrentExecutor"

for op in ("AllToAll", "AllToAllV"):
    mesh = "InsTempAlltoAllVMesh1D"
    R(f"Aicpu{op}SoleMesh", S, _ONE, [f"L0:{mesh}"], l0=ALL3, pcie=True)
    if op == "AllToAll":
        R("AicpuAllToAllSoleMeshSingleChannel", S, _ONE, [f"L0:{mesh}"], l0=ALL3, pcie=True)
    R(f"Aicpu{op}SoleMeshConcurrent", C, _CV2, [f"L0:{mesh}", f"L0:{mesh}"], levels=(1, 1), l0=UBX)
    R(f"Aicpu{op}SoleMeshMultiJetty", S, _ONE, ["L0:InsTempUBXAllToAllVMesh1D"], levels=(1, 1), l0=UBX)
    R(f"Aicpu{op}SolePairwise", S, _TWO, ["L0:InsTempAlltoAllVPairwise"], levels=(2, 3))
    R(f"Aiv{op}SoleMesh", S, _ONE, [f"L0:AivTemp{'AlltoAllMesh1D' if op == 'AllToAll' else 'AlltoAllVMesh1D'}"])
    R(f"CcuSched{op}SoleMesh", S, _ONE, [f"L0:CcuTemp{op.replace('AllToAll', 'AlltoAll')}Mesh1D"], l0=MESH_OR_UBX,
      pcie=True)
    R(f"CcuSched{op}SoleMesh2Die", S, _ONE, [f"L0:CcuTemp{op}Mesh2Die"], levels=(1, 1), mesh=TWO_DIE_REGULAR, die2=True)
    R(f"CcuSched{op}SoleMeshMultiLink", S, _TWO, [f"L0:CcuTemp{op}Mesh1D2Die"], levels=(2, 2))
    R(f"CcuSched{op}SoleMeshConcurrent", C, _CV2, [f"L0:CcuTemp{op}Mesh1DMultiJetty"] * 2, levels=(1, 1), l0=UBX)
    R(f"CcuSched{op}SoleMeshMultiJetty", S, _ONE, [f"L0:CcuTemp{op}Mesh1DMultiJetty"], levels=(1, 1), l0=UBX)
    if op == "AllToAll":
        R("CcuSchedAllToAllSoleMeshConcur", S, _CV2, ["L0:CcuTempAllToAllConcurrentMeshNHR"], levels=(1, 1),
          dev=("DEV_TYPE_960",))
    R(f"Dpu{op}SoleMesh", S, _ONE, ["L0:DpuAlltoAllMesh"])
R("AicpuAllToAllVCSoleMesh", S, _ONE, ["L0:InsTempAlltoAllVMesh1D"], l0=ALL3, pcie=True)
R("AicpuAllToAllVCSolePairwise", S, _TWO, ["L0:InsTempAlltoAllVPairwise"], levels=(2, 3))
R("AivAllToAllVCSoleMesh", S, _ONE, ["L0:AivTempAlltoAllVMesh1D"])
R("CcuSchedAllToAllVCSoleMesh", S, _ONE, ["L0:CcuTempAlltoAllVMesh1D"], levels=(1, 1))
R("DpuAllToAllVCSoleMesh", S, _ONE, ["L0:DpuAlltoAllMesh"])

R("AicpuAllGatherVSoleMesh", "InsV2AllGatherVSoleExecutor", _ONE, ["L0:InsTempAllGatherVMesh1D"], l0=ALL3, pcie=True)
R("CcuSchedAllGatherVSoleMesh", "InsV2AllGatherVSoleExecutor", _ONE, ["L0:CcuTempAllGatherVMesh1DMem2Mem"],
  levels=(1, 1))
R("AicpuReduceScatterVSoleMesh", "InsV2ReduceScatterVSoleExecutor", _ONE, ["L0:InsTempReduceScatterVMesh1D"],
  l0=ALL3, pcie=True)
R("CcuSchedReduceScatterVSoleMesh", "InsV2ReduceScatterVSoleExecutor", _ONE, ["L0:CcuTempReduceScatterVMesh1D"],
  levels=(1, 1), l0=MESH_OR_UBX)
R("AicpuBarrierSoleNHR", "InsV2BarrierSoleExecutor", _ONE, ["L0:InsTempBarrierNhrAicpu"], l0=ALL3, pcie=True)
R("DpuBarrierSequenceMeshNHR", "InsV2BarrierSequenceExecutor", _TWO, ["L0:InsTempBarrierMesh1D", "L1:InsTempBarrierNHRDPU"])
for op in ("Send", "Recv"):
    R(f"Aicpu{op}SoleMesh", f"InsV2{op}Executor", "NoTopoMatch", [], l0=ALL3, pcie=True)
    R(f"Aiv{op}SoleMesh", f"InsV2{op}Executor", "NoTopoMatch", [])
    R(f"Dpu{op}SoleMesh", f"InsV2{op}Executor", "NoTopoMatch", [f"L0:InsTemp{op}Dpu"])
    R(f"Dpu{op}SoleHost", f"InsV2{op}Executor", "NoTopoMatch", [f"L0:InsTemp{op}DpuHost"])
R("AicpuBatchSendRecvSoleMesh", "InsV2BatchSendRecvExecutor", "NoTopoMatch", [], l0=ALL3, pcie=True)
R("DpuBatchSendRecvSoleMesh", "InsV2BatchSendRecvExecutor", _ONE, ["L0:InsTempBatchSendRecvDpu"])
