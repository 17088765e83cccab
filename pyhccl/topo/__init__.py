"""Topology: where each rank sits, and HCCL's CalcTopoShape / TopoInfo. Imports mpi4py only to detect."""

from .calc import BIG_CLOS_RANGE, HcclError, calc_topo_info
from .info import (CommProtocol, CommTopo, Endpoint, EndpointLocType, Level0MeshType, Level0Shape,
                   NetLayerDetails, PhysicalLevelInfo, PhysicalLevelView, TopoInfo, TopoInstDetails,
                   summarize_sizes)
from .layout import LEVEL_NAMES, Coords, Layout
from .machine import Machine, machine
from .rankgraph import RankGraph
from .placement import Placement
from .ranktable import load_rank_table, parse_rank_table, rank_table_placement
from .spec import LEVEL0_LINKS, TopoSpec, parse_topo
from .topology import Topology, comm_topology, resolve_topo

__all__ = [
    "TopoSpec", "parse_topo", "LEVEL0_LINKS", "load_rank_table", "parse_rank_table", "rank_table_placement", "Placement",
    "TopoInfo", "calc_topo_info", "HcclError", "BIG_CLOS_RANGE", "RankGraph",
    "Level0Shape", "Level0MeshType", "CommTopo", "CommProtocol", "EndpointLocType", "Endpoint",
    "PhysicalLevelView", "PhysicalLevelInfo", "NetLayerDetails", "TopoInstDetails", "summarize_sizes",
    "Layout", "Coords", "LEVEL_NAMES", "Machine", "machine", "Topology", "comm_topology", "resolve_topo",
]
