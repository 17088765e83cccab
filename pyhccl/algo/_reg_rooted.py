"""Broadcast, Reduce and Scatter registrations (names: hccl-selection.md §5.4, §5.5, §5.7, Appendix B).

HCCL source: src/ops/{broadcast,reduce,scatter}/algorithm/executor/*.cc. Attributes are not in the
reference (``declared=False``): §8.5's engine patterns plus the shapes and level counts the rule
selectors return each name for; the Broadcast/Scatter concurrent ones carry the eq4
``topoCustomCheck`` that §9.16 reports.
"""

from __future__ import annotations

from functools import partial

from . import checks as c
from .attrs import UNSUPPORTED_64BIT
from .registry import ALL3, CLOS, MESH1D, MESH_OR_UBX, UBX, register

R = partial(register, declared=False)
_ONE, _TWO, _THREE, _CV2 = "TopoMatchOneLevel", "TopoMatchTwoLevel", "TopoMatchThreeLevel", "TopoMatchConcurrentV2"
_B64 = dict(prod=False, bad=UNSUPPORTED_64BIT)

# Broadcast: Parallel/Sequence run Scatter then AllGather per level
S, P, C = "InsV2BroadcastSoleExecutor", "InsV2BroadcastParallelExecutor", "InsV2BroadcastConcurrentExecutor"
_BP = ["L0:InsTempScatterMesh1D", "L1:InsTempScatterNHR", "L0:InsTempAllGatherMesh1D", "L1:InsTempAllGatherNHR"]
R("AicpuBroadcastSoleMeshTwoShot", S, _ONE, ["L0:InsTempBroadcastMesh1DTwoShot"], levels=(1, 1), l0=MESH_OR_UBX,
  pcie=True)
R("AicpuBroadcastSoleNHR", S, _ONE, ["L0:InsTempBroadcastNHR"], l0=ALL3, pcie=True, l1nhr=True)
R("AicpuBroadcastSoleNHRMultiLink", S, _ONE, ["L0:InsTempBroadcastNHR"], l0=CLOS)
R("AicpuBroadcastParallelMeshNHR", P, _TWO, _BP, l0=MESH_OR_UBX, pcie=True)
R("AicpuBroadcastParallelMeshNHRMultiJetty", P, _TWO, _BP, levels=(1, 1), l0=UBX)
R("AicpuBroadcastParallelNHRNHR", P, _THREE, ["L0:InsTempScatterNHR", "L1:InsTempScatterNHR",
                                              "L0:InsTempAllGatherNHR", "L1:InsTempAllGatherNHR"], levels=(3, 3), l0=ALL3)
R("AicpuBroadcastSequenceMeshConcurNHRNHR", "InsV2BroadcastSequenceExecutor3Level", _THREE,
  ["L0:InsTempScatterMesh1DZAxisDetour", "L1:InsTempScatterNHR", "L2:InsTempScatterNHR", "L2:InsTempAllGatherNHR",
   "L1:InsTempAllGatherNHR", "L0:InsTempAllGatherMesh1D1DZAxisDetour"], levels=(3, 3))
R("AicpuBroadcastConcurMeshNHR", C, _CV2, ["L0:InsTempBroadcastMesh1D", "L0:InsTempBroadcastNHR"], levels=(1, 1),
  l0=UBX, topo_check=c.EQ4)
R("AivBroadcastSoleMesh", S, _ONE, ["L0:AivTempBroadcastMesh1D"])
R("CcuMSBroadcastSoleMesh", S, _ONE, ["L0:CcuTempBroadcastMesh1D"], l0=MESH_OR_UBX, pcie=True)
R("CcuMsBroadcastConcurMeshNHR", C, _CV2, ["L0:CcuTempBroadcastMesh1D", "L0:CcuTempBroadcastNHR1DMem2Mem"],
  levels=(1, 1), l0=UBX, inplace=False, topo_check=c.EQ4)       # sic "CcuMs": parsed as AICPU_TS (§9.15)
R("CcuSchedBroadcastSoleMesh", S, _ONE, ["L0:CcuTempBroadcastMesh1DMem2Mem"], l0=MESH_OR_UBX, pcie=True)
R("CcuSchedBroadcastSoleNHR", S, _ONE, ["L0:CcuTempBroadcastNHR1DMem2Mem"], l0=MESH1D + CLOS, l1nhr=True)
_BPC = ["L0:CcuTempScatterMesh1DMem2Mem", "L1:CcuTempScatterNHR1DMem2Mem", "L0:CcuTempAllGatherMesh1DMem2Mem",
        "L1:CcuTempAllGatherNHR1DMem2Mem"]
R("CcuSchedBroadcastParallelMeshNHR", P, _TWO, _BPC, levels=(2, 2))
R("CcuSchedBroadcastParallelMeshNHRMultiJetty", P, _TWO, _BPC, levels=(1, 1), l0=UBX)
R("CcuSchedBroadcastPipeLineMeshNHR", "InsV2BroadcastOmniPipe2dExecutor", _TWO,
  ["L0:CcuTempBroadcastOmniPipeMesh1DMem2Mem", "L1:CcuTempBroadcastOmniPipeNHR1DMem2Mem"], levels=(1, 1), l0=UBX)
R("CcuSchedBroadcastConcurMeshNHR", C, _CV2, ["L0:CcuTempBroadcastMesh1DMem2Mem", "L0:CcuTempBroadcastNHR1DMem2Mem"],
  levels=(1, 1), l0=UBX, topo_check=c.EQ4)
R("DpuBroadcastSequenceMeshNHR", "InsV2BroadcastSequenceExecutor", _TWO,
  ["L0:InsTempScatterMesh1DIntra", "L1:InsTempScatterNHRDPU", "L1:InsTempAllGatherNHRDPU", "L0:InsTempAllGatherMesh1dIntra"])
R("DpuBroadcastOmniPipeMeshNHR", "InsV2BroadcastOmniPipeExecutor", _TWO,
  ["L0:InsTempBroadcastOmniPipeMesh1D", "L1:InsTempBroadcastOmniPipeNHRDPU"], l0=UBX, topo_check=c.NOT_PCIE)

# Reduce: Parallel runs ReduceScatter then Gather per level
S, P, C = "InsV2ReduceSoleExecutor", "InsV2ReduceParallelExecutor", "InsV2ReduceConcurrentExecutor"
_RP = ["L0:InsTempReduceScatterMesh1D", "L1:InsTempReduceScatterNHR", "L1:InsTempGatherNHR", "L0:InsTempGatherMesh1D"]
R("AicpuReduceSoleMesh", S, _ONE, ["L0:InsTempReduceMesh1D"], levels=(1, 1), l0=MESH_OR_UBX, pcie=True)
R("AicpuReduceSoleMeshTwoShot", S, _ONE, ["L0:InsTempReduceMesh1DTwoShot"], levels=(1, 1), l0=MESH_OR_UBX, pcie=True)
R("AicpuReduceSoleNHR", S, _ONE, ["L0:InsTempReduceNHR"], l0=ALL3, pcie=True, l1nhr=True, **_B64)
R("AicpuReduceSoleNHRAicpuReduce", S, _ONE, ["L0:InsTempReduceAicpuReduceNHR"], l0=ALL3, pcie=True, l1nhr=True)
R("AicpuReduceParallelMeshNHR", P, _TWO, _RP, l0=MESH_OR_UBX, pcie=True, **_B64)
R("AicpuReduceParallelMeshNHRMultiJetty", P, _TWO, _RP, levels=(1, 1), l0=UBX, **_B64)
R("AicpuReduceParallelNHRNHR", P, _THREE, ["L0:InsTempReduceScatterNHR", "L1:InsTempReduceScatterNHR",
                                           "L1:InsTempGatherNHR", "L0:InsTempGatherNHR"], levels=(3, 3), l0=ALL3, **_B64)
R("AicpuReduceSequenceMeshConcurNHRNHR", "InsV2ReduceSequenceExecutor3Level", _THREE,
  ["L0:InsTempReduceScatterMesh1DZAxisDetour", "L1:InsTempReduceScatterNHR", "L2:InsTempReduceScatterNHR",
   "L2:InsTempGatherNHR", "L1:InsTempGatherNHR", "L0:InsTempGatherMesh1D"], levels=(3, 3), **_B64)
R("AicpuReduceConcurMeshNHR", C, _CV2, ["L0:InsTempReduceMesh1D", "L0:InsTempReduceNHR"], levels=(1, 1), l0=UBX, **_B64)
R("AivReduceSoleMesh", S, _ONE, ["L0:AivTempReduceMesh1D"])
R("CcuMSReduceSoleMesh", S, _ONE, ["L0:CcuTempReduceMesh1D"], l0=MESH_OR_UBX, pcie=True)
R("CcuMSReducePipeLineMeshNHR", "InsV2ReduceOmniPipe2dExecutor", _TWO,
  ["L0:CcuTempReduceScatterOmniPipeMesh1D", "L1:CcuTempReduceScatterOmniPipeNHR1DMem2Mem"], l0=UBX)
R("CcuSchedReduceSoleMesh", S, _ONE, ["L0:CcuTempReduceMeshMem2Mem1D"], l0=MESH_OR_UBX, pcie=True,
  bad=UNSUPPORTED_64BIT)                                        # int8 allowed (reduce_auto_selector.cc)
R("CcuSchedReduceSoleMeshTwoShot", S, _ONE, ["L0:CcuTempReduceMesh1DTwoShotMem2Mem"], levels=(1, 1))
R("CcuSchedReduceSoleNHR", S, _ONE, ["L0:CcuTempReduceNHR1DMem2Mem"], l0=MESH1D + CLOS, l1nhr=True)
_RPC = ["L0:CcuTempReduceScatterMesh1DMem2Mem", "L1:CcuTempReduceScatterNHR1DMem2Mem", "L1:CcuTempGatherNHR1DMem2Mem",
        "L0:CcuTempGatherMesh1DMem2Mem"]
R("CcuSchedReduceParallelMeshNHR", P, _TWO, _RPC, levels=(2, 2))
R("CcuSchedReduceParallelMeshNHRMultiJetty", P, _TWO, _RPC, levels=(1, 1), l0=UBX)
R("CcuSchedReducePipeLineMeshNHR", "InsV2ReduceOmniPipe2dExecutor", _TWO,
  ["L0:CcuTempReduceScatterOmniPipeMesh1DMem2Mem", "L1:CcuTempReduceScatterOmniPipeNHR1DMem2Mem"], levels=(1, 1),
  l0=UBX)
R("CcuSchedReduceConcurMeshNHR", C, _CV2, ["L0:CcuTempReduceMeshMem2Mem1D", "L0:CcuTempReduceNHR1DMem2Mem"],
  levels=(1, 1), l0=UBX, topo_check=c.EQ4)
R("CcuMsReduceConcurMeshNHR", C, _CV2, ["L0:CcuTempReduceMesh1D", "L0:CcuTempReduceNHR1DMem2Mem"], levels=(1, 1),
  l0=UBX, prod=False, inplace=False, topo_check=c.EQ4)          # sic "CcuMs"
R("DpuReduceSequenceMeshNHR", "InsV2ReduceSequenceExecutor", _TWO,
  ["L0:InsTempReduceScatterMesh1DIntra", "L1:InsTempReduceScatterMesh1dDpuInter", "L1:InsTempGatherDpuInter",
   "L0:InsTempGatherIntra"])
R("DpuReducePipeLineMeshNHRNHR", "InsV2ReduceOmniPipeExecutor", _THREE,
  ["L0:InsTempReduceScatterOmniPipeMesh1D", "L1:InsTempReduceScatterOmniPipeNHR", "L2:InsTempReduceScatterOmniPipeNHRDPU"],
  l0=UBX, topo_check=c.NOT_PCIE)

# Scatter
S, P, C = "InsV2ScatterSoleExecutor", "InsV2ScatterParallelExecutor", "InsV2ScatterConcurrentExecutor"
_SP = ["L0:InsTempScatterMesh1D", "L1:InsTempScatterNHR"]
R("AicpuScatterSoleMesh", S, _ONE, ["L0:InsTempScatterMesh1D"], l0=ALL3, pcie=True)
R("AicpuScatterSoleNHR", S, _ONE, ["L0:InsTempScatterNHR"], l0=ALL3, pcie=True, l1nhr=True)
R("AicpuScatterParallelMeshNHR", P, _TWO, _SP, l0=MESH_OR_UBX, pcie=True)
R("AicpuScatterParallelMeshNHRMultiJetty", P, _TWO, _SP, levels=(1, 1), l0=UBX)
R("AicpuScatterSequenceMeshConcurNHRNHR", "InsV2ScatterSequenceExecutor3Level", _THREE,
  ["L0:InsTempScatterMesh1DZAxisDetour", "L1:InsTempScatterNHR", "L2:InsTempScatterNHR"], levels=(3, 3))
R("AicpuScatterConcurMeshNHR", C, _CV2, ["L0:InsTempScatterMesh1D", "L0:InsTempScatterNHR"], levels=(1, 1), l0=UBX,
  topo_check=c.EQ4)
R("AivScatterSoleMesh", S, _ONE, ["L0:AivTempScatterMesh1D"])
R("CcuSchedScatterSoleMesh", S, _ONE, ["L0:CcuTempScatterMesh1DMem2Mem"], l0=MESH_OR_UBX, pcie=True)
R("CcuSchedScatterSoleNHR", S, _ONE, ["L0:CcuTempScatterNHR1DMem2Mem"], l0=MESH1D + CLOS, l1nhr=True)
_SPC = ["L0:CcuTempScatterMesh1DMem2Mem", "L1:CcuTempScatterNHR1DMem2Mem"]
R("CcuSchedScatterParallelMeshNHR", P, _TWO, _SPC, levels=(2, 2))
R("CcuSchedScatterParallelMeshNHRMultiJetty", P, _TWO, _SPC, levels=(1, 1), l0=UBX)
R("CcuSchedScatterPipeLineMeshNHR", "InsV2ScatterOmniPipe2dExecutor", _TWO,
  ["L0:CcuTempScatterOmniPipeMesh1DMem2Mem", "L1:CcuTempScatterOmniPipeNHR1DMem2Mem"], levels=(1, 1), l0=UBX)
R("CcuSchedScatterConcurMeshNHR", C, _CV2, ["L0:CcuTempScatterMesh1DMem2Mem", "L0:CcuTempScatterNHR1DMem2Mem"],
  levels=(1, 1), l0=UBX, topo_check=c.EQ4)
R("DpuScatterSequenceMeshNHR", "InsV2ScatterSequenceExecutor", _TWO, ["L0:InsTempScatterMesh1D", "L1:InsTempScatterNHRDPU"])
R("DpuScatterOmniPipeMeshNHR", "InsV2ScatterOmniPipeExecutor", _TWO,
  ["L0:InsTempScatterOmniPipeMesh1D", "L1:InsTempScatterOmniPipeNHRDPU"], l0=UBX, topo_check=c.NOT_PCIE)
