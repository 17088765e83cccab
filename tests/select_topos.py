"""Topologies for the selection tests: TopoInfo from pyhccl.topo specs, plus HCCL shapes no spec makes."""

from dataclasses import replace
from functools import lru_cache

from pyhccl.select import select
from pyhccl.topo import CommTopo, Level0MeshType, NetLayerDetails, TopoInstDetails, calc_topo_info

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@lru_cache(maxsize=None)
def topo(spec: str):
    """TopoInfo of rank 0 of ``spec``."""
    return calc_topo_info(spec)


def detour(n: int):
    """One server of n ranks whose layer 1 is a CLOS over the same ranks (HCCL's Z-axis detour case:
    topoLevelNums == 1 but IsTwoLevelNetLayer)."""
    t = topo(f"1x1x{n}")
    net = NetLayerDetails(2, (0, 1), (1, 1), ((n,), (n,)), (n, n))
    layer1 = TopoInstDetails(1, (0,), (CommTopo.CLOS,), (tuple(range(n)),), ((CommTopo.CLOS, (n,)),))
    return replace(t, net_layer_details=net, topo_inst_details_of_layer=t.topo_inst_details_of_layer + (layer1,))


def not_regular(spec: str = "1x1x8;dies=2"):
    """A 2-die mesh whose dies are not balanced (TWO_DIE_NOT_REGULAR)."""
    return replace(topo(spec), level0_mesh_type=Level0MeshType.TWO_DIE_NOT_REGULAR)


def rule(op, t, nbytes, engine, dtype="fp32", reduce_op="sum", **kw) -> str:
    """One engine's rule answer, no cascade."""
    return select(op, t, nbytes, dtype, reduce_op, engine=engine, cascade=False, algo="", **kw).algorithm


def why(op, t, nbytes, engine, dtype="fp32", reduce_op="sum", **kw) -> str:
    """The branch one engine's rule took."""
    sel = select(op, t, nbytes, dtype, reduce_op, engine=engine, cascade=False, algo="", **kw)
    return sel.rule_steps[0][1].why
