"""AllGather and ReduceScatter registrations (names: hccl-selection.md §5.2-5.3, Appendix A/B).

HCCL source: src/ops/{all_gather,reduce_scatter}/algorithm/executor/*.cc. The reference lists
these names, executors and templates but not their REGISTER_ALG_ATTRS: the attributes here
(``declared=False``) are the engine patterns of §8.5 plus the shapes and level counts the rule
selectors return each name for.
"""

from __future__ import annotations

from functools import partial

from . import checks as c
from .attrs import MESH_TYPES_ANY, SUPPORTED_FLOAT_ONLY, UNSUPPORTED_64BIT
from .registry import ALL3, CLOS, MESH1D, MESH_OR_UBX, TWO_DIE_REGULAR, UBX, register

R = partial(register, declared=False)
_ONE, _TWO, _THREE, _CV2 = "TopoMatchOneLevel", "TopoMatchTwoLevel", "TopoMatchThreeLevel", "TopoMatchConcurrentV2"
_B64 = dict(prod=False, bad=UNSUPPORTED_64BIT)

# AllGather
S, C, P = "InsV2AllGatherSoleExecutor", "InsV2AllGatherConcurrentExecutor", "InsV2AllGatherParallelExecutor"
R("AicpuAllGatherSoleMesh", S, _ONE, ["L0:InsTempAllGatherMesh1D"], levels=(1, 1), l0=MESH_OR_UBX, pcie=True)
R("AicpuAllGatherSoleMeshConcur", S, _ONE, ["L0:InsTempAllGatherMesh1D1DZAxisDetour"], levels=(1, 1))
R("AicpuAllGatherSoleNHR", S, _ONE, ["L0:InsTempAllGatherNHR"], l0=ALL3, pcie=True, l1nhr=True)
R("AicpuAllGatherSoleNHRMultiLink", S, _ONE, ["L0:InsTempAllGatherNHR"], l0=CLOS)
R("AivAllGatherSoleMesh", S, _ONE, ["L0:AivTempAllGatherMesh1D"])
R("CcuSchedAllGatherSoleMesh", S, _ONE, ["L0:CcuTempAllGatherMesh1DMem2Mem"], l0=MESH_OR_UBX, pcie=True)
R("CcuMSAllGatherSoleMesh", S, _ONE, ["L0:CcuTempAllGatherMesh1D"], l0=MESH_OR_UBX, pcie=True)
R("CcuSchedAllGatherSoleNHR", S, _ONE, ["L0:CcuTempAllGatherNHR1DMem2Mem"], l0=MESH1D + CLOS, l1nhr=True, die2=True)
R("CcuSchedAllGatherSoleNHRMultiLink", S, _ONE, ["L0:CcuTempAllGatherNHR1DMultiJettyMem2Mem"], levels=(1, 1), l0=UBX)
R("CcuMSAllGatherSoleMesh2Die", S, _ONE, ["L0:CcuTempAllGather2DiesMesh1D"], mesh=TWO_DIE_REGULAR, die2=True)
R("CcuSchedAllGatherSoleMesh2Die", S, _ONE, ["L0:CcuTempAllGather2DiesMeshMem2Mem1D"], levels=(1, 1),
  mesh=TWO_DIE_REGULAR, die2=True)
R("CcuSchedAllGatherSoleMeshConcur", S, _CV2, ["L0:CcuTempAllGatherConcurrentMeshMem2MemNHR"], levels=(1, 1),
  dev=("DEV_TYPE_960",))
R("AicpuAllGatherConcurMeshNHR", C, _CV2, ["L0:InsTempAllGatherMesh1D", "L0:InsTempAllGatherNHR"], levels=(1, 1),
  l0=UBX, topo_check=c.EQ4)
R("CcuSchedAllGatherConcurMeshNHRMultiLink", C, _CV2,
  ["L0:CcuTempAllGatherMesh1DMem2Mem", "L0:CcuTempAllGatherNHR1DMultiJettyMem2Mem"], levels=(1, 1), l0=UBX,
  topo_check=c.EQ4)
R("CcuMSAllGatherConcurMeshNHRMultiLink", C, _CV2,
  ["L0:CcuTempAllGatherMesh1D", "L0:CcuTempAllGatherNHR1DMultiJettyMem2Mem"], l0=UBX, topo_check=c.EQ4)
_AGP = ["L0:InsTempAllGatherMesh1D", "L1:InsTempAllGatherNHR"]
R("AicpuAllGatherParallelMeshNHR", P, _TWO, _AGP, l0=MESH_OR_UBX, pcie=True)
R("AicpuAllGatherParallelMeshNHRMultiJetty", P, _TWO, _AGP, levels=(1, 1), l0=UBX, topo_check=c.MULT)
R("AicpuAllGatherParallelNHRNHR", P, _THREE, ["L0:InsTempAllGatherNHR", "L1:InsTempAllGatherNHR"], levels=(3, 3),
  l0=ALL3)
_AGPC = ["L0:CcuTempAllGatherMesh1DMem2Mem", "L1:CcuTempAllGatherNHR1DMem2Mem"]
R("CcuSchedAllGatherParallelMeshNHR", P, _TWO, _AGPC, levels=(2, 2))
R("CcuSchedAllGatherParallelMeshNHRMultiLink", P, _TWO,
  ["L0:CcuTempAllGatherMesh1DMem2Mem", "L1:CcuTempAllGatherNHR1DMultiJettyMem2Mem"], levels=(1, 1), l0=UBX)
R("AicpuAllGatherSequenceMeshConcurNHR", "InsV2AllGatherSequenceExecutorAicpu", _TWO,
  ["L1:InsTempAllGatherNHR", "L0:InsTempAllGatherMesh1D1DZAxisDetour"], levels=(2, 2))
R("AicpuAllGatherSequenceMeshConcurNHRNHR", "InsV2AllGatherSequenceExecutor3Level", _THREE,
  ["L2:InsTempAllGatherNHR", "L1:InsTempAllGatherNHR", "L0:InsTempAllGatherMesh1D1DZAxisDetour"], levels=(3, 3))
R("CcuSchedAllGatherSequenceMeshMesh", "InsV2AllGatherSequenceExecutorAicpu", _TWO,
  ["L1:CcuTempAllGatherMesh1DMem2Mem", "L0:CcuTempAllGatherMesh1DMem2Mem"], levels=(2, 2))
R("DpuAllGatherSequenceMeshNHR", "InsV2AllGatherSequenceExecutor", _TWO,
  ["L0:InsTempAllGatherMesh1D", "L1:InsTempAllGatherNHRDPU"], topo_check=c.DPU_SEQUENCE)
_AGO = ["L0:InsTempAllGatherOmniPipeMesh1D", "L1:InsTempAllGatherOmniPipeNHR"]
R("AicpuAllGatherPipeLineMeshNHR", "InsV2AllGatherOmniPipeExecutor", _TWO, _AGO, l0=MESH_OR_UBX, pcie=True)
R("AicpuAllGatherPipeLineMeshNHRNHR", "InsV2AllGatherOmniPipeExecutor", _THREE,
  _AGO + ["L2:InsTempAllGatherOmniPipeNHR"], levels=(3, 3), topo_check=c.UBOE_SYM_DEV8)
R("DpuAllGatherPipeLineMeshNHRNHR", "InsV2AllGatherOmniPipeExecutor", _THREE,
  _AGO + ["L2:InsTempAllGatherOmniPipeNHRDPU"], l0=UBX, topo_check=c.NOT_PCIE)
R("CcuSchedAllGatherPipeLineMeshNHR", "InsV2AllGatherOmniPipe2dExecutor", _TWO,
  ["L0:CcuTempAllGatherOmniPipeMesh1DMem2Mem", "L1:CcuTempAllGatherOmniPipeNHR1DMem2Mem"], levels=(1, 1), l0=UBX)

# ReduceScatter
S, C, P = "InsV2ReduceScatterSoleExecutor", "InsV2ReduceScatterConcurrentExecutor", "InsReduceScatterParallelExecutor"
R("AicpuReduceScatterSoleMesh", S, _ONE, ["L0:InsTempReduceScatterMesh1D"], levels=(1, 1), l0=MESH_OR_UBX, pcie=True)
R("AicpuReduceScatterSoleMeshChunk", S, _ONE, ["L0:InsTempReduceScatterMesh1DMeshChunk"], levels=(1, 1),
  l0=MESH_OR_UBX, pcie=True)
R("AicpuReduceScatterSoleMeshConcur", S, _ONE, ["L0:InsTempReduceScatterMesh1DZAxisDetour"], levels=(1, 1))
R("AicpuReduceScatterSoleNHR", S, _ONE, ["L0:InsTempReduceScatterNHR"], l0=ALL3, pcie=True, l1nhr=True, **_B64)
R("AicpuReduceScatterSoleNHRMultiLink", S, _ONE, ["L0:InsTempReduceScatterNHR"], l0=CLOS, **_B64)
R("AicpuReduceScatterSoleNHRAicpuReduce", S, _ONE, ["L0:InsTempReduceScatterAicpuReduceNHR"], l0=ALL3, pcie=True,
  l1nhr=True)
_RSO = "InsV2ReduceScatterOrderPreservedExecutor"
R("AicpuReduceScatterStrictOrderedMesh", _RSO, _ONE, ["L0:InsTempReduceScatterOrderPreservedLevel1"],
  l0=MESH1D + CLOS, l1nhr=True, topo_check=c.STRICT_SMALL, good=SUPPORTED_FLOAT_ONLY, strict=True)
R("AicpuReduceScatterStrictOrderedGroupMesh", _RSO, _ONE, ["L0:InsTempReduceScatterOrderPreservedGroup"],
  l0=MESH1D + CLOS, l1nhr=True, topo_check=c.STRICT_GROUP, good=SUPPORTED_FLOAT_ONLY, strict=True)
R("AivReduceScatterSoleMesh", S, _ONE, ["L0:AivTempReduceScatterMesh1D"])
R("CcuSchedReduceScatterSoleMesh", S, _ONE, ["L0:CcuTempReduceScatterMesh1DMem2Mem"], l0=MESH_OR_UBX, pcie=True)
R("CcuMSReduceScatterSoleMesh", S, _ONE, ["L0:CcuTempReduceScatterMesh1D"], l0=MESH_OR_UBX, pcie=True)
R("CcuSchedReduceScatterSoleNHR", S, _ONE, ["L0:CcuTempReduceScatterNHR1DMem2Mem"], l0=MESH1D + CLOS, l1nhr=True,
  die2=True)
R("CcuSchedReduceScatterSoleNHRMultiLink", S, _ONE, ["L0:CcuTempReduceScatterNhrMultiJettyMem2Mem1D"],
  levels=(1, 1), l0=UBX)
R("CcuMSReduceScatterSoleMesh2Die", S, _ONE, ["L0:CcuTempReduceScatterMesh2Die"], mesh=TWO_DIE_REGULAR, die2=True)
R("CcuSchedReduceScatterSoleMesh2Die", S, _ONE, ["L0:CcuTempReduceScatterMeshMem2Mem1D2Die"], mesh=MESH_TYPES_ANY,
  die2=True)
R("CcuMSReduceScatterSoleMeshConcur", S, _CV2, ["L0:CcuTempReduceScatterConcurrentMeshNHR"], dev=("DEV_TYPE_960",))
R("AicpuReduceScatterConcurMeshNHR", C, _CV2, ["L0:InsTempReduceScatterMesh1D", "L0:InsTempReduceScatterNHR"],
  levels=(1, 1), l0=UBX)
R("CcuSchedReduceScatterConcurMeshNHRMultiLink", C, _CV2,
  ["L0:CcuTempReduceScatterMesh1DMem2Mem", "L0:CcuTempReduceScatterNhrMultiJettyMem2Mem1D"], levels=(1, 1), l0=UBX,
  topo_check=c.EQ4)
R("CcuMSReduceScatterConcurMeshNHRMultiLink", C, _CV2,
  ["L0:CcuTempReduceScatterMesh1D", "L0:CcuTempReduceScatterNhrMultiJettyMem2Mem1D"], l0=UBX, pcie=True,
  topo_check=c.EQ4)
_RSP = ["L0:InsTempReduceScatterMesh1D", "L1:InsTempReduceScatterNHR"]
R("AicpuReduceScatterParallelMeshNHR", P, _TWO, _RSP, l0=MESH_OR_UBX, pcie=True, **_B64)
R("AicpuReduceScatterParallelMeshNHRMultiJetty", P, _TWO, _RSP, levels=(1, 1), l0=UBX, topo_check=c.MULT,
  op_check=c.NO_SYMMETRIC_MEMORY, **_B64)
R("CcuSchedReduceScatterParallelMeshNHR", P, _TWO,
  ["L0:CcuTempReduceScatterMesh1DMem2Mem", "L1:CcuTempReduceScatterNHR1DMem2Mem"], levels=(2, 2))
R("CcuSchedReduceScatterParallelMeshNHRMultiLink", P, _TWO,
  ["L0:CcuTempReduceScatterMesh1DMem2Mem", "L1:CcuTempReduceScatterNhrMultiJettyMem2Mem1D"], levels=(1, 1), l0=UBX)
R("AicpuReduceScatterSequenceMeshConcurNHR", "InsV2ReduceScatterSequenceExecutorAicpu", _TWO,
  ["L0:InsTempReduceScatterMesh1DZAxisDetour", "L1:InsTempReduceScatterNHR"], levels=(2, 2), **_B64)
R("AicpuReduceScatterSequenceMeshConcurNHRNHR", "InsV2ReduceScatterSequenceExecutor3Level", _THREE,
  ["L0:InsTempReduceScatterMesh1DZAxisDetour", "L1:InsTempReduceScatterNHR", "L2:InsTempReduceScatterNHR"],
  levels=(3, 3), **_B64)
R("AicpuReduceScatterSequenceMeshNHRAicpuReduce", "InsV2ReduceScatterSequenceExecutorAicpu", _TWO,
  ["L0:InsTempReduceScatterMesh1D", "L1:InsTempReduceScatterAicpuReduceNHRPcie"], levels=(1, 1), l0=UBX, pcie=True,
  topo_check=c.PCIE_NOT_ALLCONN)
R("CcuSchedReduceScatterSequenceMeshMesh", "InsV2ReduceScatterSequenceExecutorAicpu", _TWO,
  ["L0:CcuTempReduceScatterMesh1DMem2Mem", "L1:CcuTempReduceScatterMesh1DMem2Mem"], levels=(2, 2))
R("DpuReduceScatterSequenceMeshMesh", "InsV2ReduceScatterSequenceExecutor", _TWO,
  ["L0:InsTempReduceScatterMesh1D", "L1:InsTempReduceScatterMesh1dDpu"], topo_check=c.DPU_SEQUENCE)
_RSOP = ["L0:InsTempReduceScatterOmniPipeMesh1D", "L1:InsTempReduceScatterOmniPipeNHR"]
R("AicpuReduceScatterPipeLineMeshNHR", "InsV2ReduceScatterOmniPipeExecutor", _TWO, _RSOP, l0=MESH_OR_UBX, pcie=True)
R("AicpuReduceScatterPipeLineMeshNHRMesh", "InsV2ReduceScatterOmniPipeExecutor", _THREE,
  _RSOP + ["L2:InsTempReduceScatterOmniPipeMesh1D"], levels=(3, 3), topo_check=c.UBOE_SYM_DEV8, **_B64)
R("DpuReduceScatterPipeLineMeshNHRMesh", "InsV2ReduceScatterOmniPipeExecutor", _THREE,
  _RSOP + ["L2:InsTempReduceScatterOmniPipeMesh1dDpu"], l0=UBX, topo_check=c.NOT_PCIE)
_RSO2 = ["L0:CcuTempReduceScatterOmniPipeMesh1DMem2Mem", "L1:CcuTempReduceScatterOmniPipeNHR1DMem2Mem"]
R("CcuSchedReduceScatterPipeLineMeshNHR", "InsV2ReduceScatterOmniPipe2dExecutor", _TWO, _RSO2, levels=(1, 1), l0=UBX)
R("CcuMSReduceScatterPipeLineMeshNHR", "InsV2ReduceScatterOmniPipe2dExecutor", _TWO,
  ["L0:CcuTempReduceScatterOmniPipeMesh1D", "L1:CcuTempReduceScatterOmniPipeNHR1DMem2Mem"], l0=UBX, pcie=True)
