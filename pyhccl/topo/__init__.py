"""Topology: where each rank sits, and HCCL's CalcTopoShape / TopoInfo. Imports mpi4py only to detect."""

from .calc import BIG_CLOS_RANGE, HcclError, calc_topo_info
from .info import (CommProtocol, CommTopo, Endpoint, EndpointLocType, Level0MeshType, Level0Shape,
                   NetLayerDetails, PhysicalLevelInfo, PhysicalLevelView, TopoInfo, TopoInstDetails)
from .rankgraph import RankGraph
from .spec import LEVEL0_LINKS, TopoSpec, parse_topo

__all__ = [
    "TopoSpec", "parse_topo", "LEVEL0_LINKS",
    "TopoInfo", "calc_topo_info", "HcclError", "BIG_CLOS_RANGE", "RankGraph",
    "Level0Shape", "Level0MeshType", "CommTopo", "CommProtocol", "EndpointLocType", "Endpoint",
    "PhysicalLevelView", "PhysicalLevelInfo", "NetLayerDetails", "TopoInstDetails",
]
