"""Rank table: read the layout from a JSON subset of HCCL's rank table (``PYHCCL_RANK_TABLE``).

Two of HCCL's formats, read as data with ``json``:

- version 2.0 (Ascend 950, docs/zh/user_guide/cluster_info_config/rank_table_config_a5.md):
  ``rank_list`` entries with ``rank_id``, ``device_id`` and a ``level_list`` whose
  ``net_layer`` 0 ``net_instance_id`` names the server and ``net_layer`` 1 one the super pod;
  a layer-0 ``net_type`` of ``CLOS`` wires level 0 as a Clos (``TOPO_FILE_DESC``: a mesh);
- versions 1.0 / 1.2: ``server_list`` of ``{server_id, device: [{device_id, rank_id}]}`` and,
  for super pods, ``super_pod_list`` of ``{super_pod_id, server_list: [{server_id}]}``.

Everything else in the file (addresses, ports) is ignored. ``rank_id`` is the communicator's
rank and must name 0 .. R-1 once each, in any order: HCCL numbers ranks server by server, and a
table that does not (``--map-by node`` placement) gives the same layout in HCCL's numbering plus
the order that maps it to the communicator's ranks (:mod:`pyhccl.topo.placement`).
``status``, when present, must be ``completed``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .placement import Placement, from_rows
from .spec import TopoSpec

__all__ = ["load_rank_table", "parse_rank_table", "rank_table_placement"]

_EXAMPLE = ('{"version": "2.0", "rank_list": [{"rank_id": 0, "device_id": 0, "level_list": '
            '[{"net_layer": 0, "net_instance_id": "server0"}]}]}')


def load_rank_table(path: str | Path) -> TopoSpec:
    """The TopoSpec (in HCCL's numbering) of the rank table file at ``path`` (:func:`rank_table_placement`: and the order).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not JSON, or not a rank table this subset reads (the message says why).
    """
    return rank_table_placement(path).spec


def parse_rank_table(data: Any, name: str = "rank table") -> TopoSpec:
    """The TopoSpec (in HCCL's numbering) of a parsed rank table (a dict)."""
    return rank_table_placement(data, name).spec


def rank_table_placement(table: str | Path | dict, name: str = "rank table") -> Placement:
    """The layout and order of a rank table: a path to read, or a parsed table (a dict).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not JSON, or not a rank table this subset reads (the message says why).
    """
    if isinstance(table, (str, Path)):
        name = str(table)
        try:
            table = json.loads(Path(table).read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"rank table {name} is not valid JSON ({e.msg} at character {e.pos})") from None
    data = table
    if not isinstance(data, dict):
        raise ValueError(f"{name}: expecting a JSON object, got {type(data).__name__}; e.g. {_EXAMPLE}")
    if data.get("status", "completed") != "completed":
        raise ValueError(f"{name}: expecting status 'completed', got {data['status']!r}")
    version = str(data.get("version", ""))
    if version == "2.0":
        return _v2(data, name)
    if version in ("1.0", "1.2"):
        return _v1(data, name)
    raise ValueError(f"{name}: expecting version '2.0', '1.0' or '1.2', got {data.get('version')!r}; "
                     f"e.g. {_EXAMPLE}")


def _v2(data: dict, name: str) -> Placement:
    ranks = sorted(_list(data, "rank_list", name), key=lambda r: _int(r, "rank_id", name))
    if "rank_count" in data and _int(data, "rank_count", name) != len(ranks):
        raise ValueError(f"{name}: rank_count is {data['rank_count']} but rank_list has {len(ranks)} ranks")
    rows, types = [], set()
    for r in ranks:
        layers = {_int(lv, "net_layer", name): lv for lv in _list(r, "level_list", name)}
        if 0 not in layers:
            raise ValueError(f"{name}: rank {r['rank_id']} has no net_layer 0 entry naming its server; "
                             f"e.g. {_EXAMPLE}")
        types.add(str(layers[0].get("net_type", "TOPO_FILE_DESC")).upper())
        if 1 in layers and "net_instance_id" not in layers[1]:
            raise ValueError(f"{name}: rank {r['rank_id']}'s net_layer 1 entry has no net_instance_id (its super pod)")
        pod = str(layers[1]["net_instance_id"]) if 1 in layers else ""
        dev = _int(r, "device_id", name) if "device_id" in r else _int(r, "local_id", name, default=len(rows))
        rows.append((_int(r, "rank_id", name), pod, str(layers[0].get("net_instance_id")), dev))
    if len(types) > 1:
        raise ValueError(f"{name}: expecting one layer-0 net_type for every rank, got {sorted(types)}")
    return from_rows(rows, name, level0="clos" if types == {"CLOS"} else "mesh")


def _v1(data: dict, name: str) -> Placement:
    servers = {str(s.get("server_id")): s for s in _list(data, "server_list", name) if isinstance(s, dict)}
    pods = [("", list(servers))]
    if data.get("super_pod_list"):
        pods = [(str(p.get("super_pod_id")), [str(s.get("server_id")) for s in _list(p, "server_list", name)])
                for p in _list(data, "super_pod_list", name) if isinstance(p, dict)]
    listed = [sid for _, ids in pods for sid in ids]
    if sorted(listed) != sorted(servers):
        raise ValueError(f"{name}: super_pod_list names servers {sorted(listed)} but server_list has "
                         f"{sorted(servers)}; each server belongs to exactly one super pod")
    rows = []
    for pod, ids in pods:
        for sid in ids:
            for d in _list(servers[sid], "device", name):
                rows.append((_int(d, "rank_id", name, default=len(rows)), pod, sid, _int(d, "device_id", name)))
    return from_rows(rows, name)


def _list(d: Any, key: str, name: str) -> list:
    value = d.get(key) if isinstance(d, dict) else None
    if not isinstance(value, list) or not value:
        raise ValueError(f"{name}: expecting a non-empty list {key!r}, got {value!r}; e.g. {_EXAMPLE}")
    return value


def _int(d: Any, key: str, name: str, default: int | None = None) -> int:
    if not isinstance(d, dict):
        raise ValueError(f"{name}: expecting an object with {key!r}, got {d!r}; e.g. {_EXAMPLE}")
    value = d.get(key, default)
    if isinstance(value, bool) or not ((isinstance(value, int) and value >= 0)
                                       or (isinstance(value, str) and value.isdigit())):
        raise ValueError(f"{name}: expecting {key} as an integer >= 0 (or a string of digits), got {value!r}")
    return int(value)
