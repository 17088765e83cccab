"""Topology spec: HCCL's TopoMeta (super pods -> servers -> device ids) plus the level-0 link kind.

The layout is the TopoMeta of HCCL's offline algorithm analyzer (test/st/algorithm/README_en.md):
``[[[0,1,2,3],[0,1,2,3]]]`` is one super pod of two servers of four devices; ranks are numbered
in that order. Accepted forms, all parsed as data (``json.loads``, never ``eval``):

- a nested list, or its JSON text: ``[[[0,1,2,3],[0,1]]]`` (asymmetric layouts allowed);
- the shorthand ``PxSxD``: ``1x2x4`` = 1 super pod x 2 servers x 4 devices;
- either text followed by ``;key=value`` options: ``1x1x8;level0=mesh+clos;clos_ports=2``;
- a dict / JSON object ``{"layout": ..., "level0": ..., ...}`` (the presets in launch/presets/).

Options (defaults in brackets) say how the emulated machine is wired; each feeds one of
CalcTopoShape's rules:

- ``level0`` [mesh]: links inside a server: ``mesh`` (a 1D full mesh), ``clos`` (a switch),
  ``mesh+clos`` (both, the UBX shape MESH_1D_CLOS; alias ``ubx``), ``mesh2d`` (a 2D mesh, alias
  ``2dmesh``: device ids on HCCL's 8 x 8 grid, a 1D mesh per row and per column and a Clos
  across them, as HCCL's analyzer wires a server; ids must be 0..63);
- ``mesh_size`` / ``clos_size`` [whole server]: ranks per mesh / Clos instance, cut from each
  server in order (a smaller mesh or Clos is how HCCL's level-0 size check fails);
- ``dies`` [1]: 2 = each device reaches the first half of its mesh peers from die 0 and the
  rest from die 1 (a 2-die mesh);
- ``clos_ports`` [1]: ports per Clos link (the physical levels' port counts);
- ``pcie`` [false]: level-0 links run over PCIe (HCCL's PCIe-mix servers);
- ``level1`` / ``level2`` [ub_ctp]: protocol between servers / between super pods
  (``uboe`` on the top level, ``ub_rtp`` on level 2 are what HCCL tests for);
- ``dpu`` [false]: the inter-server levels are reached through host (DPU) endpoints;
- ``pod`` [false]: the device is of the POD form factor.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, fields
from typing import Any, Mapping

from .info import CommProtocol
from .physical import PORT_NUM_SANITY_LIMIT

__all__ = ["TopoSpec", "parse_topo", "LEVEL0_LINKS", "GRID_SIZE"]

#: Level-0 link kinds: 1D mesh, Clos, both (the UBX shape), or a 2D mesh (row and column meshes + Clos).
LEVEL0_LINKS = ("mesh", "clos", "mesh+clos", "mesh2d")
#: Side of the device grid a 2D mesh places device ids on (the analyzer's topo_model.cc ``GRID_SIZE``).
GRID_SIZE = 8

_EXAMPLE = "e.g. [[[0,1,2,3],[0,1,2,3]]] or '1x2x4'"
_SHORTHAND = re.compile(r"(\d+)x(\d+)x(\d+)")
_BOOLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
_PROTOCOLS = {p.name.lower(): p for p in CommProtocol}


@dataclass(frozen=True)
class TopoSpec:
    """An emulated machine: the TopoMeta layout and how its levels are wired.

    Constructing one validates it; lists are turned into tuples.

    Raises:
        TypeError, ValueError: a malformed layout or option (the message names it and shows a
            valid example).
    """

    layout: tuple[tuple[tuple[int, ...], ...], ...]
    level0: str = "mesh"
    mesh_size: int | None = None
    clos_size: int | None = None
    dies: int = 1
    clos_ports: int = 1
    pcie: bool = False
    level1: CommProtocol = CommProtocol.UB_CTP
    level2: CommProtocol = CommProtocol.UB_CTP
    dpu: bool = False
    pod: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "layout", _layout(self.layout))
        for key, value in _options({f.name: getattr(self, f.name) for f in fields(self)
                                    if f.name != "layout"}).items():
            object.__setattr__(self, key, value)
        if self.level0 == "mesh2d" and max(d for pod in self.layout for server in pod for d in server) \
                >= GRID_SIZE * GRID_SIZE:
            raise ValueError(f"level0=mesh2d places device ids on HCCL's {GRID_SIZE} x {GRID_SIZE} grid (row = id // "
                             f"{GRID_SIZE}, column = id % {GRID_SIZE}); expecting device ids 0..{GRID_SIZE ** 2 - 1}, "
                             "e.g. '1x1x16;level0=mesh2d'")

    @property
    def nranks(self) -> int:
        """Devices in the layout: the communicator size it needs."""
        return sum(len(server) for pod in self.layout for server in pod)

    @property
    def server_sizes(self) -> tuple[int, ...]:
        """Devices per server, all super pods in order (HCCL's layer-0 instance sizes)."""
        return tuple(len(server) for pod in self.layout for server in pod)

    @property
    def pod_sizes(self) -> tuple[int, ...]:
        """Devices per super pod (HCCL's layer-1 instance sizes)."""
        return tuple(sum(len(server) for server in pod) for pod in self.layout)

    def options(self) -> dict[str, Any]:
        """The options that differ from their defaults, as JSON-ready values."""
        return {f.name: _json_value(getattr(self, f.name)) for f in fields(self)
                if f.name != "layout" and getattr(self, f.name) != f.default}

    def to_text(self) -> str:
        """The canonical text form (``PxSxD`` when it fits), which :func:`parse_topo` reads back."""
        pods, servers, devices = len(self.layout), len(self.layout[0]), len(self.layout[0][0])
        if all(server == tuple(range(devices)) for pod in self.layout for server in pod) \
                and all(len(pod) == servers for pod in self.layout):
            head = f"{pods}x{servers}x{devices}"
        else:
            head = json.dumps(self.layout, separators=(",", ":"))
        return ";".join([head] + [f"{k}={v if not isinstance(v, bool) else str(v).lower()}"
                                  for k, v in self.options().items()])

    def check_size(self, nranks: int) -> None:
        """Raise ValueError unless the layout has exactly ``nranks`` devices."""
        if self.nranks != nranks:
            example = f"'1x1x{nranks}'" + (f" or '1x2x{nranks // 2}'" if nranks % 2 == 0 and nranks > 2 else "")
            raise ValueError(f"topo {self.to_text()} has {self.nranks} devices but the communicator has "
                             f"{nranks} ranks; expecting a layout of {nranks} devices, e.g. {example}")


def parse_topo(topo: Any) -> TopoSpec:
    """Read a topology spec in any accepted form (see the module docstring).

    Raises:
        TypeError: ``topo`` is not a string, nested list, dict or TopoSpec.
        ValueError: it is malformed; the message names the problem and shows a valid example.
    """
    if isinstance(topo, TopoSpec):
        return topo
    if isinstance(topo, str):
        return _parse_text(topo)
    if isinstance(topo, Mapping):
        return _from_dict(topo)
    if isinstance(topo, (list, tuple)):
        return TopoSpec(topo)
    raise TypeError(f"expecting topo as a string, nested list, dict or TopoSpec, got {type(topo).__name__}")


def _parse_text(text: str) -> TopoSpec:
    text = text.strip()
    if not text:
        raise ValueError(f"expecting a topology spec, got an empty string; {_EXAMPLE}")
    if text.startswith("{"):
        return _from_dict(_json(text))
    head, *items = [part.strip() for part in text.split(";")]
    opts: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"expecting key=value after ';' in topo, got {item!r}; e.g. '1x1x8;level0=clos'")
        if key.strip() in opts:
            raise ValueError(f"topo option {key.strip()!r} is given twice")
        opts[key.strip()] = value.strip()
    return TopoSpec(_layout_text(head), **_known(opts))


#: The largest machine a spec may describe (HCCL's largest communicators are far smaller).
MAX_RANKS = 1 << 20


def _layout_text(head: str) -> Any:
    if head.startswith("["):
        return _json(head)
    m = _SHORTHAND.fullmatch(head.replace(" ", "").lower())
    if m is None or 0 in (counts := tuple(int(g) for g in m.groups())):
        raise ValueError(f"expecting PxSxD with positive integers (super pods x servers x devices), "
                         f"e.g. '1x2x4', or a nested list, got {head!r}")
    pods, servers, devices = counts
    if pods * servers * devices > MAX_RANKS:
        raise ValueError(f"topo {head!r} has {pods * servers * devices} devices; expecting at most {MAX_RANKS} "
                         "(pyhccl builds one entry per rank)")
    return [[list(range(devices))] * servers] * pods


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"topo is not valid JSON ({e.msg} at character {e.pos}): {text!r}; {_EXAMPLE}") from None


def _from_dict(d: Mapping) -> TopoSpec:
    if "layout" not in d:
        raise ValueError(f"expecting a 'layout' key in the topo dict, got keys {sorted(d)}; "
                         f"e.g. {{\"layout\": \"1x2x4\", \"level0\": \"mesh\"}}")
    opts = {k: v for k, v in d.items() if k not in ("layout", "description")}
    layout = d["layout"]
    return TopoSpec(_layout_text(layout.strip()) if isinstance(layout, str) else layout, **_known(opts))


def _known(opts: Mapping[str, Any]) -> dict[str, Any]:
    valid = [f.name for f in fields(TopoSpec) if f.name != "layout"]
    for key in opts:
        if key not in valid:
            close = difflib.get_close_matches(key, valid, n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise ValueError(f"unknown topo option {key!r}{hint}; valid: {', '.join(valid)}")
    return dict(opts)


def _layout(layout: Any) -> tuple[tuple[tuple[int, ...], ...], ...]:
    """Validate super pods -> servers -> device ids, naming the first bad element by its path."""
    def seq(x: Any, path: str, what: str) -> list:
        if not isinstance(x, (list, tuple)):
            raise TypeError(f"{path} is {x!r}, expecting a list of {what} "
                            f"(super pods -> servers -> device ids), {_EXAMPLE}")
        if not x:
            raise ValueError(f"{path} is empty, expecting at least one of {what}; {_EXAMPLE}")
        return list(x)

    pods = []
    for p, pod in enumerate(seq(layout, "topo", "super pods")):
        servers = []
        for s, server in enumerate(seq(pod, f"topo[{p}]", "servers")):
            ids = seq(server, f"topo[{p}][{s}]", "device ids")
            for d, dev in enumerate(ids):
                if isinstance(dev, bool) or not isinstance(dev, int) or dev < 0:
                    raise ValueError(f"topo[{p}][{s}][{d}] is {dev!r}, expecting a device id "
                                     f"(an integer >= 0); {_EXAMPLE}")
            if len(set(ids)) != len(ids):
                dup = next(i for i in ids if ids.count(i) > 1)
                raise ValueError(f"topo[{p}][{s}] repeats device id {dup}: the device ids of a server "
                                 f"must differ, e.g. [0,1,2,3]")
            servers.append(tuple(ids))
        pods.append(tuple(servers))
    return tuple(pods)


def _options(o: dict[str, Any]) -> dict[str, Any]:
    """Convert and check the link options (strings from the text form, or native values)."""
    level0 = {"ubx": "mesh+clos", "2dmesh": "mesh2d"}.get(str(o["level0"]).lower(), str(o["level0"]).lower())
    if level0 not in LEVEL0_LINKS:
        raise ValueError(f"expecting level0 one of {', '.join(LEVEL0_LINKS)}, got {o['level0']!r}")
    out = dict(o, level0=level0)
    for key, top in (("mesh_size", None), ("clos_size", None), ("dies", 2), ("clos_ports", PORT_NUM_SANITY_LIMIT)):
        if o[key] is not None:
            out[key] = _int(key, o[key], top)
    for key in ("pcie", "dpu", "pod"):
        value = o[key]
        if not isinstance(value, bool):
            if str(value).lower() not in _BOOLS:
                raise ValueError(f"expecting {key} true or false, got {value!r}")
            value = _BOOLS[str(value).lower()]
        out[key] = value
    for key in ("level1", "level2"):
        name = o[key].name.lower() if isinstance(o[key], CommProtocol) else str(o[key]).lower()
        if name not in _PROTOCOLS:
            raise ValueError(f"expecting {key} one of {', '.join(_PROTOCOLS)}, got {o[key]!r}")
        out[key] = _PROTOCOLS[name]
    needs = {"dies": ("mesh", out["dies"] != 1), "mesh_size": ("mesh", out["mesh_size"] is not None),
             "clos_size": ("clos", out["clos_size"] is not None)}
    for key, (kind, given) in needs.items():
        if given and (kind not in level0 or level0 == "mesh2d"):
            raise ValueError(f"{key}={o[key]} needs a {kind} at level 0, got level0={level0}"
                             f"{' (a 2D mesh is wired from the device ids)' if level0 == 'mesh2d' else ''}; "
                             f"e.g. '1x1x8;level0=mesh+clos;{key}={o[key]}'")
    return out


def _int(key: str, value: Any, top: int | None) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not (isinstance(value, int) or text.isdigit()) \
            or int(text) < 1 or (top is not None and int(text) > top):
        bound = f"in 1..{top}" if top is not None else "as an integer >= 1"
        raise ValueError(f"expecting {key} {bound}, got {value!r}")
    return int(text)


def _json_value(value: Any) -> Any:
    return value.name.lower() if isinstance(value, CommProtocol) else value
