"""AllReduce registrations with the attributes HCCL declares (38 names, hccl-selection.md Appendix A).

HCCL source: src/ops/all_reduce/algorithm/executor/*.cc (REGISTER_EXEC_V2* + REGISTER_ALG_ATTRS).
Templates are HCCL's class names; "L<k>:" is the algorithm level a template runs on.
"""

from __future__ import annotations

from . import checks as c
from .attrs import SUPPORTED_FLOAT_ONLY, UNSUPPORTED_64BIT, UNSUPPORTED_INT8_AND_64BIT, UNSUPPORTED_UINT64_FP64
from .registry import ALL3, CLOS, MESH1D, MESH_OR_UBX, TWO_DIE_REGULAR, UBX, register

_SOLE, _ONE = "InsV2AllReduceSoleExecutor", "TopoMatchOneLevel"
_I8, _B64 = UNSUPPORTED_INT8_AND_64BIT, UNSUPPORTED_64BIT
_CCU = dict(prod=False, bad=_I8, inplace=False, engine_defaults=False)
_NOPROD64 = dict(prod=False, bad=_B64, engine_defaults=False)
_D = dict(engine_defaults=False)
_PAR = ("L0:{p}TempReduceScatterMesh1D{m}", "L1:{p}TempReduceScatterNHR{n}", "L0:{p}TempAllGatherMesh1D{m}",
        "L1:{p}TempAllGatherNHR{n}")
_PAR_INS = [t.format(p="Ins", m="", n="") for t in _PAR]
_PAR_CCU = [t.format(p="Ccu", m="Mem2Mem", n="1DMem2Mem") for t in _PAR]

# Sole
register("AicpuAllReduceSoleMeshOneShot", _SOLE, _ONE, ["L0:InsTempAllReduceMesh1DOneShot"], levels=(1, 1),
         l0=MESH_OR_UBX, pcie=True, allconn=True, topo_check=c.UBX_EQ4_UNLESS_PCIE, **_D)
register("AicpuAllReduceSoleMeshTwoShot", _SOLE, _ONE, ["L0:InsTempAllReduceMesh1DTwoShot"], levels=(1, 1),
         l0=MESH_OR_UBX, pcie=True, allconn=True, topo_check=c.UBX_EQ4_UNLESS_PCIE, **_D)
register("AicpuAllReduceSoleNHR", _SOLE, _ONE, ["L0:InsTempAllReduceNHR"], l0=ALL3, l1nhr=True, **_NOPROD64)
register("AicpuAllReduceSoleNHRMultiLink", _SOLE, _ONE, ["L0:InsTempAllReduceNHR"], l0=CLOS,
         topo_check=c.LEVEL0_CLOS, **_NOPROD64)
register("AicpuAllReduceSoleMeshChunkTwoShot", _SOLE, _ONE, ["L0:InsTempAllReduceMesh1DTwoShotMeshChunk"],
         levels=(1, 1), l0=MESH_OR_UBX, pcie=True, allconn=True, topo_check=c.UBX_ONLY_WITH_PCIE, **_NOPROD64)
register("AicpuAllReduceSoleNHRAicpuReduce", _SOLE, _ONE, ["L0:InsTempAllReduceAicpuReduceNHR"], l0=ALL3,
         pcie=True, l1nhr=True, **_D)
register("AivAllReduceSoleMeshOneShot", _SOLE, _ONE, ["L0:AivTempAllReduceMesh1DOneShot"], levels=(1, 2),
         pcie=True, cap=1024, l1nhr=True, prod=False, bad=UNSUPPORTED_UINT64_FP64, op_check=c.AIV_CCL_LOOPS, **_D)
register("AivAllReduceSoleMeshTwoShot", _SOLE, _ONE, ["L0:AivTempAllReduceMesh1DTwoShot"], levels=(1, 2),
         l0=ALL3, pcie=True, cap=1024, l1nhr=True, prod=False, bad=UNSUPPORTED_UINT64_FP64,
         op_check=c.AIV_CCL_LOOPS, **_D)
register("CcuSchedAllReduceSoleNHR", _SOLE, _ONE, ["L0:CcuTempAllReduceNHRMem2Mem1D"], levels=(1, 2), cap=64,
         l0=MESH1D + CLOS, l1nhr=True, die2=True, prod=False, bad=_B64, inplace=False, engine_defaults=False)
register("CcuSchedAllReduceSoleMesh", _SOLE, _ONE, ["L0:CcuTempAllReduceMeshMem2Mem1D"], levels=(1, 2), cap=64,
         l0=MESH_OR_UBX, pcie=True, allconn=True, topo_check=c.SCHED_MESH_UBX, **_CCU)
register("CcuMSAllReduceSoleMesh", _SOLE, _ONE, ["L0:CcuTempAllReduceMesh1D"], levels=(1, 1), l0=MESH_OR_UBX,
         pcie=True, **_CCU)
register("CcuMSAllReduceSoleMesh2Die", _SOLE, _ONE, ["L0:CcuTempAllreduceMesh1D2DieOneShot"], levels=(1, 1),
         l0=MESH1D, mesh=TWO_DIE_REGULAR, die2=True, **_CCU)
register("CcuMSAllReduceSoleMeshOneShot", _SOLE, _ONE, ["L0:CcuTempAllReduceMesh1DOneShot"], levels=(1, 1),
         l0=MESH_OR_UBX, pcie=True, allconn=True, topo_check=c.UBX_EQ4, **_CCU)
register("CcuSchedAllReduceSoleMesh2Die", _SOLE, _ONE, ["L0:CcuTempAllReduceMesh1DMem2Mem2DieOneShot"], cap=64,
         levels=(1, 1), l0=MESH_OR_UBX, mesh=TWO_DIE_REGULAR, pcie=True, allconn=True, die2=True, **_CCU)
register("CcuSchedAllReduceSoleNHRMultiLink", _SOLE, _ONE, ["L0:CcuTempAllReduceNhrMem2Mem1DMultiJetty"], cap=64,
         levels=(1, 1), l0=UBX, topo_check=c.NOT_EQ4, **_CCU)
register("CcuMSAllReduceSoleMeshConcur", _SOLE, "TopoMatchConcurrentV2", ["L0:CcuTempAllReduceConcurrentMeshNHR"],
         levels=(1, 1), dev=("DEV_TYPE_960",), **_CCU)
register("AicpuAllReduceSoleMeshConcur", "InsV2AllReduceTwoShotSoleExecutor", _ONE,
         ["L0:InsTempReduceScatterMesh1DZAxisDetour", "L0:InsTempAllGatherMesh1D1DZAxisDetour"], levels=(1, 1),
         **_NOPROD64)
# Concurrent: two templates on the same ranks, two link types
_CON, _CM = "InsV2AllReduceConcurrentExecutor", "TopoMatchConcurrentV2"
register("CcuSchedAllReduceConcurMeshNHRMultiLink", _CON, _CM,
         ["L0:CcuTempAllReduceMeshMem2Mem1D", "L0:CcuTempAllReduceNhrMem2Mem1DMultiJetty"], cap=64, levels=(1, 1),
         l0=UBX, topo_check=c.EQ4, **_CCU)
register("CcuMSAllReduceConcurMeshNHRMultiLink", _CON, _CM,
         ["L0:CcuTempAllReduceMesh1D", "L0:CcuTempAllReduceNhrMem2Mem1DMultiJetty"], levels=(1, 1), l0=UBX,
         pcie=True, allconn=True, topo_check=c.EQ4, **_CCU)
register("AicpuAllReduceConcurMeshTwoShotNHR", _CON, _CM,
         ["L0:InsTempAllReduceMesh1DTwoShot", "L0:InsTempAllReduceNHR"], levels=(1, 1), l0=UBX,
         topo_check=c.EQ4, **_NOPROD64)
# Parallel: RS mesh, RS NHR, AG mesh, AG NHR on two data parts
_PX, _TWO = "InsAllReduceParallelExecutor", "TopoMatchTwoLevel"
register("AicpuAllReduceParallelMeshNHR", _PX, _TWO, _PAR_INS, l0=MESH_OR_UBX, pcie=True,
         topo_check=c.UBX_PCIE_NOT_ALLCONN, **_NOPROD64)
register("AicpuAllReduceParallelMeshNHRMultiJetty", _PX, _TWO, _PAR_INS, levels=(1, 1), l0=UBX, topo_check=c.MULT,
         op_check=c.NO_SYMMETRIC_MEMORY, **_NOPROD64)
register("CcuSchedAllReduceParallelMeshNHR", _PX, _TWO, _PAR_CCU, cap=64, levels=(1, 2), **_CCU)
register("CcuSchedAllReduceParallelMeshNHRMultiJetty", _PX, _TWO, _PAR_CCU, cap=64, levels=(1, 1), l0=UBX,
         op_check=c.OP_MULT, **_CCU)
# Sequence
_SA = "InsV2AllReduceSequenceExecutorAicpu"
register("AicpuAllReduceSequenceMeshConcurNHR", _SA, _TWO,
         ["L0:InsTempReduceScatterMesh1DZAxisDetour", "L1:InsTempReduceScatterNHR", "L1:InsTempAllGatherNHR",
          "L0:InsTempAllGatherMesh1D1DZAxisDetour"], levels=(2, 2), **_NOPROD64)
register("AicpuAllReduceSequenceMeshNHRAicpuReduce", _SA, _TWO,
         ["L0:InsTempReduceScatterMesh1D", "L1:InsTempReduceScatterAicpuReduceNHRPcie", "L1:InsTempAllGatherNHR",
          "L0:InsTempAllGatherMesh1D"], levels=(1, 1), l0=UBX, pcie=True, topo_check=c.PCIE_NOT_ALLCONN,
         good=UNSUPPORTED_64BIT, **_D)
register("CcuSchedAllReduceSequenceMeshMesh", _SA, _TWO,
         ["L0:CcuTempReduceScatterMesh1DMem2Mem", "L1:CcuTempReduceScatterMesh1DMem2Mem",
          "L1:CcuTempAllGatherMesh1DMem2Mem", "L0:CcuTempAllGatherMesh1DMem2Mem"], cap=64, levels=(1, 2), **_CCU)
register("AicpuAllReduceSequenceMeshConcurNHRNHR", "InsV2AllReduceSequenceExecutorAicpu3Level", "TopoMatchThreeLevel",
         ["L0:InsTempReduceScatterMesh1DZAxisDetour", "L1:InsTempReduceScatterNHR", "L2:InsTempReduceScatterNHR",
          "L2:InsTempAllGatherNHR", "L1:InsTempAllGatherNHR", "L0:InsTempAllGatherMesh1D1DZAxisDetour"],
         levels=(3, 3), **_NOPROD64)
register("DpuAllReduceSequenceMeshNHR", "InsV2AllReduceSequenceExecutor", _TWO,
         ["L0:InsTempReduceScatterMesh1DIntra", "L1:InsTempReduceScatterMesh1dDpuInter",
          "L1:InsTempAllGatherNhrDpuInter", "L0:InsTempAllGatherMesh1dIntra"], l0=ALL3, levels=(2, 3), pcie=True,
         dpu=True, topo_check=c.DPU_SEQUENCE, **_NOPROD64)
# PipeLine (OmniPipe)
_OP = "InsV2AllReduceOmniPipeExecutor"
_OMNI = ["L0:InsTempReduceScatterOmniPipeMesh1D", "L1:InsTempReduceScatterOmniPipeNHR",
         "L1:InsTempAllGatherOmniPipeNHR", "L0:InsTempAllGatherOmniPipeMesh1D"]
register("AicpuAllReducePipeLineMeshNHR", _OP, _TWO, _OMNI, l0=UBX, pcie=True,
         topo_check=c.PCIE_NOT_ALLCONN_OR_MULT, **_D)
register("AicpuAllReducePipeLineMeshNHRNHR", _OP, "TopoMatchThreeLevel",
         _OMNI[:2] + ["L2:InsTempReduceScatterOmniPipeMesh1D", "L2:InsTempAllGatherOmniPipeNHR"] + _OMNI[2:],
         levels=(3, 3), topo_check=c.UBOE_SYM_DEV8, **_NOPROD64)
register("DpuAllReducePipeLineMeshNHRNHR", _OP, "TopoMatchThreeLevel",
         _OMNI[:2] + ["L2:InsTempReduceScatterOmniPipeMesh1dDpu", "L2:InsTempAllGatherOmniPipeNHRDPU"] + _OMNI[2:],
         l0=UBX, dpu=True, topo_check=c.NOT_PCIE, **_D)
_O2 = "InsV2AllReduceOmniPipe2dExecutor"
_OMNI_CCU = ["L0:CcuTempReduceScatterOmniPipeMesh1DMem2Mem", "L1:CcuTempReduceScatterOmniPipeNHR1DMem2Mem",
             "L0:CcuTempAllGatherOmniPipeMesh1DMem2Mem", "L1:CcuTempAllGatherOmniPipeNHR1DMem2Mem"]
register("CcuSchedAllReducePipeLineMeshNHR", _O2, _TWO, _OMNI_CCU, cap=64, levels=(1, 1), l0=UBX,
         topo_check=c.MULT, **_CCU)
register("CcuMSAllReducePipeLineMeshNHR", _O2, _TWO, ["L0:CcuTempReduceScatterOmniPipeMesh1D"] + _OMNI_CCU[1:],
         levels=(1, 1), l0=UBX, pcie=True, topo_check=c.MULT, **_CCU)
# 2-die (the CcuSched sibling's attributes were not read: taken as the CcuMS ones plus the CCU_SCHED rank cap)
_2D = ["L0:CcuTempReduceScatterMesh2Die", "L0:CcuTempAllGather2DiesMesh1D"]
register("CcuMSAllReduceSequenceMesh2Die", "InsV2AllReduceSequence2DieExecutor", _ONE, _2D, levels=(1, 1),
         l0=MESH1D, mesh=TWO_DIE_REGULAR, die2=True, **_CCU)
register("CcuSchedAllReduceSequenceMesh2Die", "InsV2AllReduceSequence2DieExecutor", _ONE, _2D, levels=(1, 1),
         l0=MESH1D, mesh=TWO_DIE_REGULAR, die2=True, cap=64, declared=False, **_CCU)
# Strict order
_OPX = "InsV2AllReduceOrderPreservedExecutor"
register("AicpuAllReduceStrictOrderedMesh", _OPX, _ONE,
         ["L0:InsTempReduceScatterOrderPreservedLevel1", "L0:InsTempAllGatherMesh1D"], l0=MESH1D + CLOS,
         l1nhr=True, topo_check=c.STRICT_SMALL, good=SUPPORTED_FLOAT_ONLY, strict=True, **_D)
register("AicpuAllReduceStrictOrderedGroupMesh", _OPX, _ONE,
         ["L0:InsTempReduceScatterOrderPreservedGroup", "L0:InsTempAllGatherNHR"], l0=MESH1D + CLOS,
         l1nhr=True, topo_check=c.STRICT_GROUP, good=SUPPORTED_FLOAT_ONLY, strict=True, **_D)
