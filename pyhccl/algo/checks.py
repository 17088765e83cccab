"""The custom (soft) checks registrations declare: topoCustomCheck and opCustomCheck lambdas.

HCCL source: the ``topo.topoCustomCheck`` / ``op.opCustomCheck`` assignments in the
``REGISTER_ALG_ATTRS`` of src/ops/all_reduce/algorithm/executor/*.cc (hccl-selection.md
Appendix A, whose short names eq4 / mult these keep).
"""

from __future__ import annotations

from ..topo.info import Level0Shape, TopoInfo
from .attrs import Check
from .predicates import OpCall, all_mesh_connected, clos_multiple_of_mesh, mesh_equal_clos, symmetric

__all__ = ["EQ4", "NOT_EQ4", "MULT", "UBX_EQ4_UNLESS_PCIE", "UBX_ONLY_WITH_PCIE", "LEVEL0_CLOS",
           "SCHED_MESH_UBX", "UBX_EQ4", "PCIE_NOT_ALLCONN", "UBX_PCIE_NOT_ALLCONN", "PCIE_NOT_ALLCONN_OR_MULT",
           "UBOE_SYM_DEV8", "DPU_SEQUENCE", "NOT_PCIE", "STRICT_SMALL", "STRICT_GROUP", "NO_SYMMETRIC_MEMORY",
           "AIV_CCL_LOOPS", "OP_MULT", "MAX_RANK_NUM_FOR_CONCURRENT_ALGO", "MAX_RANK_NUM_FOR_ORDER_PRESERVED",
           "AIV_MAX_CCL_LOOP_NUM", "DEVICE_NUM_PER_MODULE_8"]

MAX_RANK_NUM_FOR_CONCURRENT_ALGO = 4   # all_reduce_auto_selector.cc ("4P mesh")
MAX_RANK_NUM_FOR_ORDER_PRESERVED = 8   # src/common/order_preserved_common.h
AIV_MAX_CCL_LOOP_NUM = 16              # op_common/algorithm/template/aiv/hccl_aiv_utils.h
DEVICE_NUM_PER_MODULE_8 = 8            # all_reduce_auto_selector.cc


def _eq4(t: TopoInfo) -> bool:
    return bool(mesh_equal_clos(t)) and t.user_rank_size <= MAX_RANK_NUM_FOR_CONCURRENT_ALGO


def _ubx(t: TopoInfo) -> bool:
    return t.level0_topo == Level0Shape.MESH_1D_CLOS


def _pcie_not_allconn(t: TopoInfo) -> bool:
    return t.level0_pcie_mix and not all_mesh_connected(t)


EQ4 = Check("CLOS size == mesh size and R <= 4", _eq4)
NOT_EQ4 = Check("not (CLOS size == mesh size and R <= 4)", lambda t: not _eq4(t))
MULT = Check("not eq4 and CLOS size a multiple of mesh size", lambda t: not _eq4(t) and bool(clos_multiple_of_mesh(t)))
UBX_EQ4 = Check("on MESH_1D_CLOS: eq4", lambda t: not _ubx(t) or _eq4(t))
UBX_EQ4_UNLESS_PCIE = Check("on MESH_1D_CLOS without PCIe: eq4",
                            lambda t: not _ubx(t) or t.level0_pcie_mix or _eq4(t))
UBX_ONLY_WITH_PCIE = Check("on MESH_1D_CLOS only with PCIe", lambda t: not _ubx(t) or t.level0_pcie_mix)
LEVEL0_CLOS = Check("level0 == CLOS", lambda t: t.level0_topo == Level0Shape.CLOS)
SCHED_MESH_UBX = Check("on MESH_1D_CLOS: PCIe -> fully mesh-connected, else eq4",
                       lambda t: not _ubx(t) or (all_mesh_connected(t) if t.level0_pcie_mix else _eq4(t)))
PCIE_NOT_ALLCONN = Check("PCIe-mixed and not fully mesh-connected", _pcie_not_allconn)
UBX_PCIE_NOT_ALLCONN = Check("on MESH_1D_CLOS: PCIe-mixed and not fully mesh-connected",
                             lambda t: not _ubx(t) or _pcie_not_allconn(t))
PCIE_NOT_ALLCONN_OR_MULT = Check("(PCIe-mixed and not fully mesh-connected) or mult",
                                 lambda t: _pcie_not_allconn(t) or MULT(t))
UBOE_SYM_DEV8 = Check("topLevelUboe and symmetric and deviceNumPerModule == 8",
                      lambda t: t.top_level_uboe and symmetric(t) and t.device_num_per_module == DEVICE_NUM_PER_MODULE_8)
DPU_SEQUENCE = Check("not MESH_1D_CLOS, or PCIe, or deviceNumPerModule == 1",
                     lambda t: not _ubx(t) or t.level0_pcie_mix or t.device_num_per_module == 1)
NOT_PCIE = Check("level 0 not PCIe-mixed", lambda t: not t.level0_pcie_mix)
STRICT_SMALL = Check("R <= 8", lambda t: t.user_rank_size <= MAX_RANK_NUM_FOR_ORDER_PRESERVED)
STRICT_GROUP = Check("R > 8", lambda t: t.user_rank_size > MAX_RANK_NUM_FOR_ORDER_PRESERVED)
NO_SYMMETRIC_MEMORY = Check("no symmetric memory", lambda c, t: not c.symmetric_memory)
OP_MULT = Check("mult", lambda c, t: MULT(t))


def _aiv_loops(c: OpCall, t: TopoInfo) -> bool:
    return c.nbytes <= c.ccl_buffer_size * AIV_MAX_CCL_LOOP_NUM


AIV_CCL_LOOPS = Check("D <= cclBuffer * AIV_MAX_CCL_LOOP_NUM", _aiv_loops)
