"""TopoInfo: HCCL's per-communicator topology record, field by field, and the enums it uses.

HCCL source: src/ops/op_common/inc/alg_param.h (``TopoInfo``, ``TopoInfoWithNetLayerDetails``,
``NetLayerDetails``, ``TopoInstDetails``, ``PhysicalLevelInfo``); the enums of HCOMM's
hccl_rank_graph.h / hccl_res.h (``CommTopo``, ``CommProtocol``). Field names are the snake_case
of HCCL's. Runtime handles (``mainThread``, ``notifyNumOnMainThread``) are left out; HCCL's
``INVALID_UINT`` is ``None`` here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["Level0Shape", "Level0MeshType", "CommTopo", "CommProtocol", "EndpointLocType",
           "PhysicalLevelView", "Endpoint", "NetLayerDetails", "TopoInstDetails",
           "PhysicalLevelInfo", "TopoInfo", "summarize_sizes"]


class Level0Shape(enum.IntEnum):
    """Shape of level 0 (alg_param.h ``Level0Shape``)."""

    CLOS = 0
    MESH_1D = 1
    MESH_1D_CLOS = 2


class Level0MeshType(enum.IntEnum):
    """Die layout of a level-0 1D mesh (alg_param.h ``Level0MeshType``)."""

    NOT_MESH = 0
    SINGLE_DIE = 1
    TWO_DIE_REGULAR = 2
    TWO_DIE_NOT_REGULAR = 3


class CommTopo(enum.IntEnum):
    """Type of a topology instance (HCOMM hccl_rank_graph.h ``CommTopo``).

    No 2D-mesh value: HCOMM reports a 2D mesh as a row and a column MESH_1D instance plus a CLOS
    (the analyzer's topo_model.cc; pyhccl's ``level0=mesh2d``); only an early draft of the header
    had ``COMM_TOPO_2DMESH``, under another numbering.
    """

    CLOS = 0
    MESH_1D = 1       # COMM_TOPO_1DMESH
    A3_910_93 = 2     # COMM_TOPO_910_93
    P310 = 3          # COMM_TOPO_310P
    A2AXSERVER = 4
    CUSTOM = 5


class CommProtocol(enum.IntEnum):
    """Link protocol (HCOMM hccl_res.h ``CommProtocol``, newest numbering)."""

    HCCS = 0
    ROCE = 1
    PCIE = 2
    SIO = 3
    UB_CTP = 4
    UBC_TP = 5
    UB_MEM = 6
    UBOE = 7
    HCCS_ONLY = 8
    UB_RTP = 9


class EndpointLocType(enum.IntEnum):
    """Where an endpoint sits (HCOMM ``EndpointLocType``; RESERVED = the endpoints disagree)."""

    RESERVED = -1
    HOST = 0
    DEVICE = 1


class PhysicalLevelView(enum.IntEnum):
    """LOCAL: only this rank's piece of the layer is known; GLOBAL: the whole partition."""

    LOCAL = 0
    GLOBAL = 1


@dataclass(frozen=True)
class Endpoint:
    """One communication endpoint of a rank: protocol, location and interface address."""

    protocol: CommProtocol
    loc: EndpointLocType
    addr: str


@dataclass(frozen=True)
class NetLayerDetails:
    """Net layers and their instances (alg_param.h ``NetLayerDetails``).

    The ``*_of_layer`` tuples are indexed by net-layer id (length: highest id + 1).
    """

    net_layer_num: int = 0
    net_layers: tuple[int, ...] = ()
    net_inst_num_of_layer: tuple[int, ...] = ()
    inst_size_list_of_layer: tuple[tuple[int, ...], ...] = ()
    local_net_ins_size_of_layer: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopoInstDetails:
    """The topology instances of one net layer that contain this rank (``TopoInstDetails``).

    ``rank_num_for_topo_type`` is HCCL's ``std::map<CommTopo, vector<u32>>`` as sorted pairs;
    ``size_of_topo`` is never filled by HCCL (zeros).
    """

    topo_inst_num: int = 0
    size_of_topo: tuple[int, ...] = ()
    type_of_topo: tuple[CommTopo, ...] = ()
    ranks_in_topo: tuple[tuple[int, ...], ...] = ()
    rank_num_for_topo_type: tuple[tuple[CommTopo, tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class PhysicalLevelInfo:
    """One ring of the chain of nested rank ranges this rank sees (``PhysicalLevelInfo``)."""

    local_ranks: tuple[int, ...]
    view: PhysicalLevelView = PhysicalLevelView.LOCAL
    inst_size_list_by_layer: tuple[int, ...] = ()
    net_layer: int = 0                      # ref.netLayer
    topo_inst_id: int | None = None         # ref.topoInstId
    has_topo_inst: bool = False
    topo_type: CommTopo | None = None
    loc_type: EndpointLocType | None = None
    protocols: tuple[CommProtocol, ...] = ()
    port_nums: tuple[int, ...] = ()
    endpoints: tuple[Endpoint, ...] = ()


@dataclass(frozen=True)
class TopoInfo:
    """HCCL's ``TopoInfoWithNetLayerDetails`` (with its base ``TopoInfo``) for one rank.

    Every selector only reads it. Build it with :func:`pyhccl.topo.calc_topo_info`, or directly
    (every field has HCCL's default) to ask what HCCL would choose on a given machine.
    """

    # TopoInfo (base)
    user_rank: int = 0
    user_rank_size: int = 1
    server_idx: int | None = None
    super_pod_idx: int | None = None
    device_type: str = "DEV_TYPE_950"
    device_num_per_module: int = 0
    server_num_per_super_pod: int = 0
    server_num: int = 0
    module_num: int = 0
    super_pod_num: int = 0
    module_idx: int | None = None
    is_diff_device_module: bool = False
    multi_module_diff_device_num_mode: bool = False
    multi_super_pod_diff_server_num_mode: bool = False
    is_hccs_sw_num_equal_to_twice_sio_num: bool = False
    # TopoInfoWithNetLayerDetails
    topo_level_nums: int = 0
    level0_topo: Level0Shape = Level0Shape.CLOS
    level0_nhr: bool = False
    level1_nhr: bool = False
    level1_hd: bool = False
    is_2die_full_mesh: bool = False
    level0_pcie_mix: bool = False
    level0_big_clos_range: bool = False
    top_level_uboe: bool = False
    level2_ub_rtp: bool = False
    host_dpu_only: bool = False
    level0_symmetric: bool = False
    level1_symmetric: bool = False
    topo_inst_details_of_layer_size: int = 0
    is_pod: bool = False
    level0_mesh_type: Level0MeshType = Level0MeshType.NOT_MESH
    net_layer_details: NetLayerDetails = field(default_factory=NetLayerDetails)
    topo_inst_details_of_layer: tuple[TopoInstDetails, ...] = ()
    physical_level_num: int = 0
    physical_levels: tuple[PhysicalLevelInfo, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: enums by name, tuples as lists, HCCL's field order."""
        return _plain(self)


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.name
    if hasattr(value, "__dataclass_fields__"):
        out = {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
        if "rank_num_for_topo_type" in out:        # a std::map in HCCL: an object in JSON
            out["rank_num_for_topo_type"] = {k.name: list(v) for k, v in value.rank_num_for_topo_type}
        return out
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def summarize_sizes(sizes) -> str:
    """Instance sizes as runs, for people: ``(64,) * 128`` -> "128 x 64", ``(8, 8, 4)`` -> "2 x 8, 1 x 4".

    Machine-readable outputs (``to_dict``, ``--json``) keep the full list.
    """
    runs: list[list[int]] = []
    for size in sizes:
        if runs and runs[-1][1] == size:
            runs[-1][0] += 1
        else:
            runs.append([1, size])
    return ", ".join(f"{n} x {size}" for n, size in runs) or "-"
