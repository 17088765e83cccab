"""The algorithm registry: every HCCL name with its executor, templates per level and attributes.

HCCL source: the ``REGISTER_EXEC_V2*`` / ``REGISTER_EXECUTOR_BY_*_TEMPS`` registrations and the
``REGISTER_ALG_ATTRS`` that follow them in src/ops/<op>/algorithm/executor/*.cc
(src/ops/op_common/selector/alg_attrs_registry.h). Registration order is kept: the cost model
breaks ties by it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable

from ..topo.info import Level0MeshType, Level0Shape
from .attrs import (CCU_SCHED_MAX_RANK_SIZE, LEVEL0_ANY, UNSUPPORTED_INT8_AND_64BIT, UNSUPPORTED_UINT64_FP64,
                    Check, OpAttrs, TopoAttrs)
from .names import AlgName, OpExecuteConfig, close_matches, engine_of, parse_name

__all__ = ["Registration", "register", "get", "names", "registrations", "REDUCING_OPS", "Tpl"]

#: Ops that reduce (CCU/AIV attributes then forbid PROD and the 64-bit types, §8.5).
REDUCING_OPS = frozenset({"AllReduce", "ReduceScatter", "Reduce", "ReduceScatterV"})
#: AIV rank caps (op_common/algorithm/template/aiv/hccl_aiv_utils.h ``MAX_RANK_SIZE`` / ``MAX_RANK_SIZE_V``).
AIV_MAX_RANK_SIZE = 1024
AIV_MAX_RANK_SIZE_V = 256


@dataclass(frozen=True)
class Tpl:
    """One template invocation of an executor: the template class and the algorithm level it runs on."""

    level: int
    template: str

    def __str__(self) -> str:
        return f"L{self.level}:{self.template}"


@dataclass(frozen=True)
class Registration:
    """One registered algorithm (``AlgElement`` + ``AlgAttrs``).

    ``declared`` is True when the attributes are the ones HCCL declares (hccl-selection.md
    Appendix A); False when the reference does not list that registration's attributes and
    pyhccl derived them from the rule selector's branches and §8.5's patterns.
    """

    name: str
    op: str
    engine: OpExecuteConfig
    executor: str
    topo_match: str
    templates: tuple[Tpl, ...]
    topo: TopoAttrs = field(default_factory=TopoAttrs)
    opattrs: OpAttrs = field(default_factory=OpAttrs)
    declared: bool = True
    order: int = 0

    @property
    def parts(self) -> AlgName:
        """The name split into engine, op, executor and templates."""
        return parse_name(self.name)

    @property
    def levels(self) -> tuple[tuple[str, ...], ...]:
        """The template chain per algorithm level, each in execution order."""
        top = max((t.level for t in self.templates), default=-1)
        return tuple(tuple(t.template for t in self.templates if t.level == lv) for lv in range(top + 1))


_REGISTRY: dict[str, Registration] = {}


def register(name: str, executor: str, topo_match: str, templates: Iterable[str], *, declared: bool = True,
             op: str | None = None, **kw) -> Registration:
    """Register ``name`` (HCCL's ``REGISTER_ALG_ATTRS``): a duplicate overwrites, as in HCCL.

    Args:
        templates: "L<level>:<template>" strings in execution order.
        declared: whether the attributes are HCCL's own (see :class:`Registration`).
        op: the op type; parsed from the name when omitted.
        **kw: attribute shorthands, see :func:`_attrs`.
    """
    parsed_op = op or parse_name(name).op
    engine = engine_of(name)
    tpls = tuple(Tpl(int(t[1:t.index(":")]), t[t.index(":") + 1:]) for t in templates)
    topo, opattrs = _attrs(engine, parsed_op, **kw)
    reg = Registration(name, parsed_op, engine, executor, topo_match, tpls, topo, opattrs, declared,
                       order=len(_REGISTRY) if name not in _REGISTRY else _REGISTRY[name].order)
    _REGISTRY[name] = reg
    return reg


def _attrs(engine: OpExecuteConfig, op: str, *, levels=None, l0=None, mesh=None, pcie=None, l1nhr=None,
           die2=None, allconn=None, cap=None, dev=None, dpu=None, prod=None, bad=None, good=None, inplace=None,
           strict=False, topo_check: Check | None = None, op_check: Check | None = None,
           engine_defaults: bool = True) -> tuple[TopoAttrs, OpAttrs]:
    """Build TopoAttrs / OpAttrs from shorthands; ``engine_defaults`` applies §8.5's engine patterns
    (used for the registrations whose attributes the reference does not list)."""
    t: dict = {}
    o: dict = {}
    if engine_defaults:
        reducing = op in REDUCING_OPS
        if engine in (OpExecuteConfig.CCU_MS, OpExecuteConfig.CCU_SCHED):
            o["is_support_inplace"] = False
            if reducing:
                o.update(is_support_prod=False, unsupported_data_types=UNSUPPORTED_INT8_AND_64BIT)
            t["max_topo_level_num"] = 1 if engine == OpExecuteConfig.CCU_MS else 2
            if engine == OpExecuteConfig.CCU_SCHED:
                t["max_support_rank_size"] = CCU_SCHED_MAX_RANK_SIZE
        elif engine == OpExecuteConfig.AIV:
            t.update(max_topo_level_num=2, support_level0_topos=LEVEL0_ANY, is_support_level0_pcie_mix=True,
                     is_support_level1_nhr=True,
                     max_support_rank_size=AIV_MAX_RANK_SIZE_V if op in ("AllToAllV", "AllToAllVC")
                     else AIV_MAX_RANK_SIZE)
            if reducing:
                o.update(is_support_prod=False, unsupported_data_types=UNSUPPORTED_UINT64_FP64)
        elif engine == OpExecuteConfig.HOSTCPU:
            t.update(min_topo_level_num=2, support_level0_topos=LEVEL0_ANY, is_support_level0_pcie_mix=True,
                     is_host_dpu_only=True, is_support_level1_nhr=True)
    for key, attr, value in (("levels", None, levels), ("l0", "support_level0_topos", l0),
                             ("mesh", "support_level0_mesh_types", mesh), ("pcie", "is_support_level0_pcie_mix", pcie),
                             ("l1nhr", "is_support_level1_nhr", l1nhr), ("die2", "is_support_2die_full_mesh", die2),
                             ("allconn", "require_all_mesh_connected", allconn), ("cap", "max_support_rank_size", cap),
                             ("dev", "support_dev_types", dev), ("dpu", "is_host_dpu_only", dpu)):
        if value is None:
            continue
        if key == "levels":
            t["min_topo_level_num"], t["max_topo_level_num"] = value
        elif key in ("l0", "mesh", "dev"):
            t[attr] = frozenset(value)
        else:
            t[attr] = value
    if topo_check is not None:
        t["topo_custom_check"] = topo_check
    for attr, value in (("is_support_prod", prod), ("unsupported_data_types", bad),
                        ("supported_data_types", good), ("is_support_inplace", inplace)):
        if value is not None:
            o[attr] = frozenset(value) if attr.endswith("types") else value
    if strict:
        o["is_support_float_order_preserved"] = True
    if op_check is not None:
        o["op_custom_check"] = op_check
    return TopoAttrs(**t), OpAttrs(**o)


def get(name: str) -> Registration:
    """The registration of ``name``.

    Raises:
        ValueError: unknown name; the message lists close matches.
    """
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}{close_matches(name, _REGISTRY)}") from None


def registrations(op: str | None = None) -> tuple[Registration, ...]:
    """Every registration (of ``op``, when given), in registration order."""
    _load()
    return tuple(r for r in _REGISTRY.values() if op is None or r.op == op)


def names(op: str | None = None) -> tuple[str, ...]:
    """Every registered name (of ``op``), in registration order."""
    return tuple(r.name for r in registrations(op))


def with_topo(reg: Registration, **changes) -> Registration:
    """A copy of ``reg`` with TopoAttrs fields changed (for tests and what-if questions)."""
    return replace(reg, topo=replace(reg.topo, **changes))


def _load() -> None:
    if not _REGISTRY:
        from . import _reg_allreduce, _reg_gather_scatter, _reg_rooted, _reg_misc  # noqa: F401


# Shorthand shape sets used by the registration tables.
MESH1D = (Level0Shape.MESH_1D,)
CLOS = (Level0Shape.CLOS,)
UBX = (Level0Shape.MESH_1D_CLOS,)
MESH_OR_UBX = (Level0Shape.MESH_1D, Level0Shape.MESH_1D_CLOS)
ALL3 = tuple(Level0Shape)
TWO_DIE_REGULAR = (Level0MeshType.TWO_DIE_REGULAR,)
