"""Topology predicates HCCL's selectors and attribute checks share, and the op call they judge.

HCCL source: src/ops/op_common/selector/auto_selector_base.cc (``IsTwoLevelNetLayer``,
``CheckMeshNumEqualToClosNum``, ``CheckClosNumMultipleOfMeshNum``, ``IsLayerAllConnetedWithTopo``,
``CalcFrameNum``), src/common/order_preserved_common.h (``IsNeedStrictModeForOrderPreserved``).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from ..topo.info import CommTopo, Level0Shape, TopoInfo
from .dtypes import FLOAT_TYPES, HcclDataType, HcclReduceOp, parse_dtype, parse_reduce_op

__all__ = ["OpCall", "op_call", "mesh_clos_sizes", "mesh_equal_clos", "clos_multiple_of_mesh", "all_mesh_connected",
           "two_level_net_layer", "frame_num", "l0_size", "symmetric", "is_strict",
           "MIN_STRICT_RANK_NUM_ORDER_PRESERVED", "DEFAULT_CCL_BUFFER_SIZE"]

MIN_STRICT_RANK_NUM_ORDER_PRESERVED = 2   # src/common/order_preserved_common.h
#: CCL buffer per rank when the user gives none: HCCL_BUFFSIZE's documented default, 200 MB.
DEFAULT_CCL_BUFFER_SIZE = 200 * 1024 * 1024


@dataclass(frozen=True)
class OpCall:
    """The op-side inputs HCCL's rules and op checks read (``OpParam``, alg_param.h).

    ``nbytes`` is HCCL's data size D of §5.0: the whole buffer for AllReduce, Broadcast and
    Reduce, the per-rank block for AllGather, ReduceScatter and Scatter, the per-peer block
    (sendCounts[0] x size) for AllToAll/V/VC.
    """

    op: str
    nbytes: int
    dtype: HcclDataType = HcclDataType.FP32
    reduce_op: HcclReduceOp = HcclReduceOp.SUM
    inplace: bool = False
    deterministic: str = "false"           # HCCL_DETERMINISTIC: false | true | strict
    symmetric_memory: bool = False         # OpParam.supportSymmetricMemory
    ccl_buffer_size: int = DEFAULT_CCL_BUFFER_SIZE
    has_send_counts: bool = True           # AllToAll: sendCounts non-null
    root: int = 0
    aiv_only: bool = False                 # expansion mode AIV_ONLY (comm config)



def op_call(op: str, nbytes: int, dtype="fp32", reduce_op="sum", **param) -> OpCall:
    """The :class:`OpCall` selection and the attribute checks judge, built in this one place.

    ``dtype`` and ``reduce_op`` are names (HCCL's, numpy's) or the enums; ``param`` the other
    OpParam fields (``inplace``, ``root``, ...).

    Raises:
        ValueError: unknown dtype or reduce op; TypeError: a dtype that is neither name nor dtype.
    """
    return OpCall(op, nbytes, parse_dtype(dtype), parse_reduce_op(reduce_op), **param)


def l0_size(topo: TopoInfo) -> int:
    """``localNetInsSizeOfLayer[0]``: ranks of this rank's level-0 instance."""
    sizes = topo.net_layer_details.local_net_ins_size_of_layer
    return sizes[0] if sizes else topo.user_rank_size


def mesh_clos_sizes(topo: TopoInfo) -> tuple[int, int] | None:
    """(CLOS size, 1DMESH size) of layer 0, or None when either is missing (HCCL: error)."""
    if not topo.topo_inst_details_of_layer:
        return None
    by_type = dict(topo.topo_inst_details_of_layer[0].rank_num_for_topo_type)
    clos, mesh = by_type.get(CommTopo.CLOS, ()), by_type.get(CommTopo.MESH_1D, ())
    if not clos or not mesh:
        return None
    return clos[0], mesh[0]


def mesh_equal_clos(topo: TopoInfo) -> bool | None:
    """``CheckMeshNumEqualToClosNum``: layer-0 CLOS size == 1DMESH size; None if not computable."""
    sizes = mesh_clos_sizes(topo)
    return None if sizes is None else sizes[0] == sizes[1]


def clos_multiple_of_mesh(topo: TopoInfo) -> bool | None:
    """``CheckClosNumMultipleOfMeshNum``: mesh > 1, clos > mesh, clos % mesh == 0."""
    sizes = mesh_clos_sizes(topo)
    if sizes is None:
        return None
    clos, mesh = sizes
    return mesh > 1 and clos > mesh and clos % mesh == 0


def all_mesh_connected(topo: TopoInfo) -> bool:
    """``IsLayerAllConnetedWithTopo(0, 1DMESH)``: a 1DMESH instance covers the local level 0."""
    if not topo.topo_inst_details_of_layer:
        return False
    by_type = dict(topo.topo_inst_details_of_layer[0].rank_num_for_topo_type)
    return l0_size(topo) in by_type.get(CommTopo.MESH_1D, ())


def two_level_net_layer(topo: TopoInfo) -> bool:
    """``IsTwoLevelNetLayer``: not host-DPU, > 1 net layer, a CLOS on layer 1, level 0 > 1 rank."""
    net = topo.net_layer_details
    if topo.host_dpu_only or net.net_layer_num <= 1 or len(topo.topo_inst_details_of_layer) < 2:
        return False
    layer1 = topo.topo_inst_details_of_layer[1]
    has_clos = any(t == CommTopo.CLOS and sizes for t, sizes in layer1.rank_num_for_topo_type)
    return has_clos and l0_size(topo) > 1


def frame_num(topo: TopoInfo) -> int:
    """``CalcFrameNum``: 0 for one level, else R / GCD of the layer-0 instance sizes."""
    net = topo.net_layer_details
    if topo.topo_level_nums <= 1 or not net.inst_size_list_of_layer:
        return 0
    g = 0
    for size in net.inst_size_list_of_layer[net.net_layers[0]]:
        g = gcd(g, size)
    return topo.user_rank_size // g if g else 0


def symmetric(topo: TopoInfo) -> bool:
    """"sym" of the rule selectors: level0Symmetric and level1Symmetric."""
    return topo.level0_symmetric and topo.level1_symmetric


def is_strict(call: OpCall, rank_size: int) -> bool:
    """``IsNeedStrictModeForOrderPreserved``: strict determinism, float SUM/PROD, R > 2."""
    return (call.deterministic == "strict" and call.dtype in FLOAT_TYPES
            and call.reduce_op in (HcclReduceOp.SUM, HcclReduceOp.PROD)
            and rank_size > MIN_STRICT_RANK_NUM_ORDER_PRESERVED)


def level0_is(topo: TopoInfo, *shapes: Level0Shape) -> bool:
    """Whether level 0 has one of ``shapes``."""
    return topo.level0_topo in shapes
