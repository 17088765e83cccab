"""What every rule selector reads (AutoSelectorBase's helpers) and the AIV / CCU_SCHED common gates.

HCCL source: src/ops/op_common/selector/auto_selector_base.h/.cc (``IsSmallData``, ``IsLargeData``,
``Is64BitDataType``, ``CalcFrameNum``, the AIV and CCU_SCHED gates); hccl-selection.md §5.0.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ...algo.dtypes import IS_64BIT, IS_8BIT, HcclDataType, HcclReduceOp
from ...algo.predicates import (OpCall, all_mesh_connected, clos_multiple_of_mesh, frame_num, is_strict, l0_size,
                                mesh_equal_clos, symmetric, two_level_net_layer)
from ...topo.info import Level0MeshType, Level0Shape, TopoInfo
from .. import thresholds as th

__all__ = ["Ctx", "Answer", "hit", "miss", "miss_if", "by_size", "sched_ubx", "aicpu_ubx_tail", "dpu_sequence_or_pipeline", "NOT_MATCH", "aiv_gate", "sched_gate", "MESH_1D", "CLOS", "UBX",
           "TWO_DIE_REGULAR", "TWO_DIE_NOT_REGULAR"]

NOT_MATCH = "NOT_MATCH"
MESH_1D, CLOS, UBX = Level0Shape.MESH_1D, Level0Shape.CLOS, Level0Shape.MESH_1D_CLOS
TWO_DIE_REGULAR, TWO_DIE_NOT_REGULAR = Level0MeshType.TWO_DIE_REGULAR, Level0MeshType.TWO_DIE_NOT_REGULAR
#: Ops whose AIV size gate uses D*R (§5.0).
_AIV_SIZE_TIMES_R = frozenset({"AllGather", "ReduceScatter", "Scatter", "AllToAll"})


@dataclass(frozen=True)
class Answer:
    """One engine's rule answer: an algorithm name or NOT_MATCH, and the branch that gave it."""

    name: str
    why: str

    @property
    def matched(self) -> bool:
        return self.name != NOT_MATCH


def hit(name: str, why: str) -> Answer:
    """A MATCH with ``name``, reached through the branch ``why``."""
    return Answer(name, why)


def miss(why: str) -> Answer:
    """NOT_MATCH, reached through the branch ``why``."""
    return Answer(NOT_MATCH, why)


@dataclass(frozen=True)
class Ctx:
    """The inputs of one selection, with AutoSelectorBase's derived predicates."""

    topo: TopoInfo
    call: OpCall

    @property
    def R(self) -> int:  # noqa: N802 - HCCL's notation
        return self.topo.user_rank_size

    @property
    def D(self) -> int:  # noqa: N802 - HCCL's notation (§5.0)
        return self.call.nbytes

    @property
    def levels(self) -> int:
        return self.topo.topo_level_nums

    @property
    def multi(self) -> bool:
        return self.topo.topo_level_nums > 1

    @property
    def shape(self) -> Level0Shape:
        return self.topo.level0_topo

    @property
    def small(self) -> bool:
        """``IsSmallData``: D < 512 KiB."""
        return self.D < th.SMALL_COUNT_512KB

    @property
    def large(self) -> bool:
        """``IsLargeData``: D >= 1 MiB."""
        return self.D >= th.LARGE_COUNT_1024KB

    @property
    def b64(self) -> bool:
        return self.call.dtype in IS_64BIT

    @property
    def int8(self) -> bool:
        return self.call.dtype in IS_8BIT

    @property
    def prod(self) -> bool:
        return self.call.reduce_op == HcclReduceOp.PROD

    @property
    def special(self) -> bool:
        """64-bit dtype or PROD."""
        return self.b64 or self.prod

    @property
    def inplace(self) -> bool:
        return self.call.inplace

    @cached_property
    def strict(self) -> bool:
        return is_strict(self.call, self.R)

    @cached_property
    def two_level(self) -> bool:
        return two_level_net_layer(self.topo)

    @cached_property
    def equal(self) -> bool | None:
        return mesh_equal_clos(self.topo)

    @cached_property
    def multiple(self) -> bool | None:
        return clos_multiple_of_mesh(self.topo)

    @cached_property
    def allconn(self) -> bool:
        return all_mesh_connected(self.topo)

    @cached_property
    def frame(self) -> int:
        return frame_num(self.topo)

    @property
    def is960(self) -> bool:
        return self.topo.device_type == "DEV_TYPE_960"

    @property
    def l0_1(self) -> bool:
        """localNetInsSizeOfLayer[0] == 1."""
        return l0_size(self.topo) == 1

    @property
    def sym(self) -> bool:
        return symmetric(self.topo)

    @property
    def dev8(self) -> bool:
        return self.topo.device_num_per_module == th.DEVICE_NUM_PER_MODULE_8

    @property
    def pcie(self) -> bool:
        return self.topo.level0_pcie_mix

    @property
    def mesh_type(self) -> Level0MeshType:
        return self.topo.level0_mesh_type

    def dtype_is(self, *dtypes: HcclDataType) -> bool:
        return self.call.dtype in dtypes


def by_size(where: str, value: float, limit: str, below: str, above: str) -> Answer:
    """``below`` when ``value`` < the threshold named ``limit`` (thresholds.py), else ``above``."""
    if value < getattr(th, limit):
        return hit(below, f"{where}, D < {limit}")
    return hit(above, f"{where}, D >= {limit}")


def sched_ubx(x: "Ctx", mesh1d, parallel: str, limit: str) -> Answer:
    """The CCU_SCHED single-level MESH_1D_CLOS ladder AllReduce and ReduceScatter share.

    PCIe: the Mesh1D rule when fully mesh-connected; int8 out; equal and R <= 4: SoleMesh when
    small, else the concurrent algorithm; multiple and not small: ``parallel`` below ``limit``,
    else the pipeline; otherwise SoleNHRMultiLink.
    """
    p = f"CcuSched{x.call.op}"
    if x.pcie:
        return mesh1d(x, "UBX PCIe allconn") if x.allconn else miss("UBX PCIe, not allconn")
    if x.int8:
        return miss("UBX, int8")
    if x.equal and x.R <= th.MAX_RANK_NUM_FOR_CONCURRENT_ALGO:
        return (hit(f"{p}SoleMesh", "UBX, equal, R <= 4, small") if x.small else
                hit(f"{p}ConcurMeshNHRMultiLink", "UBX, equal, R <= 4, not small"))
    if x.multiple and not x.small:
        return by_size("UBX, multiple", x.D, limit, f"{p}{parallel}", f"{p}PipeLineMeshNHR")
    return hit(f"{p}SoleNHRMultiLink", "UBX, not equal/multiple")


def aicpu_ubx_tail(x: "Ctx") -> Answer:
    """The end of the AICPU single-level MESH_1D_CLOS branch AllReduce and ReduceScatter share."""
    p = f"Aicpu{x.call.op}"
    if x.special:
        return hit(f"{p}SoleNHRAicpuReduce", "UBX, special")
    if x.multiple and x.large:
        return (hit(f"{p}PipeLineMeshNHR", "UBX, multiple, D >= LARGE_COUNT_1024KB, symmetric memory")
                if x.call.symmetric_memory else
                hit(f"{p}ParallelMeshNHRMultiJetty", "UBX, multiple, D >= LARGE_COUNT_1024KB"))
    return hit(f"{p}SoleNHR", "UBX, otherwise")


def dpu_sequence_or_pipeline(x: "Ctx", sequence: str, pipeline: str, first: bool, first_why: str) -> Answer:
    """The DPU selectors of AllReduce, AllGather and ReduceScatter: multi-level only; ``first`` or
    MESH_1D -> the Sequence algorithm; MESH_1D_CLOS without PCIe -> the PipeLine one."""
    if not x.multi:
        return miss("single level")
    if first or x.shape == Level0Shape.MESH_1D:
        return hit(sequence, f"{first_why} or MESH_1D")
    if x.shape == Level0Shape.MESH_1D_CLOS:
        return (hit(sequence, "MESH_1D_CLOS, PCIe") if x.topo.level0_pcie_mix else
                hit(pipeline, "MESH_1D_CLOS, no PCIe"))
    return hit(sequence, "other level 0")


def miss_if(**conds: bool) -> Answer | None:
    """NOT_MATCH naming every true condition (keyword = its name, ``_`` read as a space), else None."""
    true = [k.replace("__", " > ").replace("_", " ").strip() for k, v in conds.items() if v]
    return miss(", ".join(true)) if true else None


def sched_gate(x: Ctx) -> Answer | None:
    """CCU_SCHED common gate: reject level2UbRtp and topoLevelNums >= 3."""
    if x.topo.level2_ub_rtp:
        return miss("CCU_SCHED gate: level2UbRtp")
    if x.levels >= 3:
        return miss("CCU_SCHED gate: topoLevelNums >= 3")
    return None


def aiv_gate(x: Ctx, waive_per_rank_cap: bool = False) -> Answer | None:
    """AIV common gate (§5.0): rank cap, level2UbRtp, 3 levels, the 8 MiB x R and CCL-loop caps."""
    size = x.D * x.R if x.call.op in _AIV_SIZE_TIMES_R else x.D
    if x.R > th.MAX_RANK_SIZE:
        return miss(f"AIV gate: R {x.R} > MAX_RANK_SIZE {th.MAX_RANK_SIZE}")
    if x.topo.level2_ub_rtp:
        return miss("AIV gate: level2UbRtp")
    if x.levels >= 3:
        return miss("AIV gate: topoLevelNums >= 3")
    if not x.call.aiv_only and not waive_per_rank_cap and size >= th.AIV_MAX_PER_RANK_DATA_SIZE * x.R:
        return miss(f"AIV gate: size {size} >= AIV_MAX_PER_RANK_DATA_SIZE x R")
    if size > x.call.ccl_buffer_size * th.AIV_MAX_CCL_LOOP_NUM:
        return miss(f"AIV gate: size {size} > cclBuffer x AIV_MAX_CCL_LOOP_NUM")
    return None
