"""select(): HCCL's decision for one op, by name, with a trace that says why.

HCCL source: src/ops/op_common/op_common.cc (``Selector``), selector/execute_selector.cc (rule
selector), selector/selector_engine.cc (cost model); hccl-selection.md §4. Modes: ``rules`` is
HCCL's default path, ``cost`` is HCCL_USE_NEW_SELECTOR=1, ``auto`` (pyhccl's default) runs the
rules and falls through to the cost model where they answer NOT_MATCH (docs/selection.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from functools import lru_cache

from ..algo.attrs import check_op, check_topo
from ..algo.dtypes import HcclDataType, HcclReduceOp
from ..algo.names import ENGINE_PREFIXES, OP_TYPES, OpExecuteConfig, close_matches
from ..core.call import hccl_op
from ..algo.predicates import DEFAULT_CCL_BUFFER_SIZE, OpCall, op_call
from ..algo.registry import get, names, registrations
from ..topo.info import TopoInfo
from .cascade import DEVICES, ENGINE_KEYS, initial_config, is_rollback_aiv, run_cascade
from .cost.model import CostResult, engine_priority, run_cost_model
from .override import Override, parse_override
from .profile import Profile
from .rules import NOT_MATCH, RULES, Answer, Ctx
from .tuner import Tuner, load_tuner

__all__ = ["Selection", "SelectionError", "select", "select_for", "check_settings", "MODES", "normalize_op"]

log = logging.getLogger("pyhccl.select")
MODES = ("auto", "rules", "cost")
DETERMINISTIC = ("false", "true", "strict")
_ENGINE_CONFIG = {"CCU_MS": OpExecuteConfig.CCU_MS, "CCU_SCHED": OpExecuteConfig.CCU_SCHED,
                  "AIV": OpExecuteConfig.AIV, "AICPU": OpExecuteConfig.AICPU_TS, "DPU": OpExecuteConfig.HOSTCPU}


class SelectionError(ValueError):
    """No algorithm: every engine answered NOT_MATCH (rules) or no candidate was left (cost).

    ``selection`` holds the trace.
    """

    def __init__(self, message: str, selection: "Selection"):
        super().__init__(message)
        self.selection = selection


@dataclass(frozen=True)
class Selection:
    """The decision: ``algorithm`` (or "NOT_MATCH"), the engine it runs on, and why."""

    op: str
    algorithm: str
    engine: str
    mode: str
    source: str                                  # "rules" | "cost" | "override" | "engine" | "measured"
    call: OpCall
    topo: TopoInfo
    rule_steps: tuple[tuple[str, Answer], ...] = ()
    cost: CostResult | None = None
    notes: tuple[str, ...] = ()

    @property
    def cost_table(self) -> tuple:
        """The cost-table rows (costed and filtered), empty when the cost model did not run."""
        return tuple(self.cost.rows) if self.cost else ()

    @property
    def registration(self):
        """The chosen algorithm's registration (executor, templates per level, attributes)."""
        return get(self.algorithm)

    @property
    def trace(self) -> tuple[str, ...]:
        """The decision as text lines (what ``python -m pyhccl.select`` prints)."""
        from .explain import trace_lines
        return tuple(trace_lines(self))

    def __str__(self) -> str:
        return "\n".join(self.trace)


def normalize_op(op: str) -> str:
    """HCCL's Pascal op name for "AllReduce", "allreduce", "all_reduce", ... (one with HCCL rules).

    pyhccl's ops are named by :func:`pyhccl.core.call.hccl_op`; HCCL's point-to-point ops, which
    have rules but no pyhccl call (Send, Recv, BatchSendRecv), by HCCL's own table (alg_parse.cc).

    Raises:
        ValueError: unknown op; the message lists the valid ones.
    """
    key = str(op).replace("_", "").replace("-", "").lower()
    try:
        name = hccl_op(str(op))
    except ValueError:
        name = OP_TYPES.get(key)
    if name not in RULES:
        raise ValueError(f"unknown op {op!r}{close_matches(key, OP_TYPES)}; valid: {', '.join(RULES)}")
    return name


def select(op: str, topo_info: TopoInfo, nbytes: int, dtype="fp32", reduce_op="sum", *, device: str = "950",
           expansion_mode: str | None = None, mode: str = "auto", engine: str | None = None,
           cascade: bool = True, algo: str | None = None, tuner: Tuner | str | None = None,
           profile: Profile | None = None, inplace: bool = False, deterministic: str = "false",
           symmetric_memory: bool = False, ccl_buffer_size: int = DEFAULT_CCL_BUFFER_SIZE,
           has_send_counts: bool = True, root: int = 0) -> Selection:
    """The algorithm HCCL picks for ``op`` on ``topo_info`` with ``nbytes`` of ``dtype``.

    Reads no environment: :func:`pyhccl.core.settings.selection` gives the keyword arguments
    the ``PYHCCL_*`` variables set (``algo``, ``mode``, ``expansion_mode``, ``tuner``).

    Args:
        op: HCCL's op name ("AllReduce", "AllGather", ...; case and underscores ignored).
        topo_info: the communicator's TopoInfo (:func:`pyhccl.topo.calc_topo_info`).
        nbytes: HCCL's data size D (§5.0): the whole buffer for AllReduce/Broadcast/Reduce, the
            per-rank block for AllGather/ReduceScatter/Scatter, per-peer bytes for AllToAll*.
        dtype: HCCL name ("fp16", "bfp16", "int8"), numpy name, or HcclDataType.
        reduce_op: "sum", "prod", "max" or "min".
        device: emulated device: "950" (default), "960" or "910_93".
        expansion_mode: HCCL_OP_EXPANSION_MODE value; None for the device's default.
        mode: "auto", "rules" or "cost" (PYHCCL_SELECTOR's values).
        engine: "CCU_MS", "CCU_SCHED", "AIV", "AICPU" or "DPU": start from that engine; with
            ``cascade=False`` return only that engine's rule answer (NOT_MATCH included).
        cascade: see ``engine``.
        algo: PYHCCL_ALGO text: an HCCL name or the cost-model grammar; None or "" for none.
        tuner: a Tuner, a "module:attr" spec (PYHCCL_TUNER_PLUGIN's form), or None / "" for none.
        profile: a measured profile (:class:`~pyhccl.select.profile.Profile`, e.g.
            :func:`pyhccl.tune.profile.measured_profile` of a tuning file); with prices for
            ``op`` it chooses (after an explicit override, before the rules): docs/tuning.md.
        inplace, deterministic, symmetric_memory, ccl_buffer_size, has_send_counts, root: the
            other OpParam inputs HCCL's rules read, with HCCL's defaults (HCCL_DETERMINISTIC is
            "false", "true" or "strict").

    Raises:
        ValueError: a bad argument (named, with the valid choices); an override that is unknown
            or excluded by this topology/op/dtype; :class:`SelectionError` when nothing matches.
        TypeError: a wrong argument type.
    """
    op = normalize_op(op)
    if not isinstance(topo_info, TopoInfo):
        raise TypeError(f"expecting topo_info as pyhccl.topo.TopoInfo, got {type(topo_info).__name__}")
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise ValueError(f"expecting nbytes as an int >= 0, got {nbytes!r}")
    _check_mode(mode)
    if deterministic not in DETERMINISTIC:
        raise ValueError(f"unknown deterministic {deterministic!r}; valid: {', '.join(DETERMINISTIC)}")
    if engine is not None and engine not in ENGINE_KEYS:
        raise ValueError(f"unknown engine {engine!r}{close_matches(str(engine), ENGINE_KEYS)}; "
                         f"valid: {', '.join(ENGINE_KEYS)}")
    config = initial_config(device, expansion_mode)
    topo = replace(topo_info, device_type=DEVICES[device][0])
    call = op_call(op, nbytes, dtype, reduce_op, inplace=inplace, deterministic=deterministic,
                   symmetric_memory=symmetric_memory, ccl_buffer_size=ccl_buffer_size,
                   has_send_counts=has_send_counts, root=root, aiv_only=config == OpExecuteConfig.AIV_ONLY)
    x = Ctx(topo, call)
    base = dict(op=op, mode=mode, call=call, topo=topo)
    if engine is not None and not cascade:
        ans = RULES[op][engine](x)
        return Selection(algorithm=ans.name, engine=_ENGINE_CONFIG[engine].name, source="engine",
                         rule_steps=((engine, ans),), **base)
    if engine is not None:
        config = _ENGINE_CONFIG[engine]
    override = parse_override(algo) if algo and algo.strip() else None
    if isinstance(tuner, str):
        tuner = load_tuner(tuner)
    if override is not None and override.kind == "name":
        return _forced(override, x, base)
    notes = []
    if override is not None and override.kind == "legacy":
        notes.append(f"PYHCCL_ALGO {override.text!r}: legacy HCCL_ALGO is parsed (valid) but HCCL's 950/960 "
                     "selectors ignore it; no effect")
        log.warning(notes[-1])
    if override is not None and override.kind == "grammar" and override.names_op(op):
        return _cost(x, config, base, notes, override, tuner, mode)
    if profile is not None:
        profile.check(topo_info)
        if op in profile.ops():
            return _measured(x, base, notes, profile)
        notes.append(f"{profile.label} has no {op} measurements: HCCL's selection")
    steps: list[tuple[str, Answer]] = []
    if mode in ("rules", "auto"):
        ans, final = run_cascade(RULES[op], x, config, steps)
        if ans.matched:
            reg_note = _attr_note(ans.name, x)
            sel = Selection(algorithm=ans.name, engine=final.name, source="rules", rule_steps=tuple(steps),
                            notes=tuple(notes + reg_note), **base)
            log.debug("%s", sel)
            return sel
        if mode == "rules":
            sel = Selection(algorithm=NOT_MATCH, engine=final.name, source="rules", rule_steps=tuple(steps),
                            notes=tuple(notes), **base)
            raise SelectionError(f"no {op} algorithm: every engine answered NOT_MATCH (HCCL_E_NOT_SUPPORT); "
                                 f"trace:\n{sel}", sel)
        notes.append("rules answered NOT_MATCH on every engine: cost model over the candidates")
    return _cost(x, config, base, notes, None, tuner, mode, tuple(steps))


def _attr_note(name: str, x: Ctx) -> list[str]:
    """Declared attributes are not checked by HCCL's rule selectors; pyhccl reports a disagreement."""
    try:
        reg = get(name)
    except ValueError:
        return [f"{name} is not registered (HCCL's rule selector can return such names)"]
    reason = check_topo(reg.op, reg.engine, reg.topo, x.topo) or check_op(reg.opattrs, x.call, x.topo)
    return [f"note: {name}'s attributes would reject it ({reason}); HCCL's rules do not check them"] if reason else []


def _forced(override: Override, x: Ctx, base: dict) -> Selection:
    name, op = override.name, x.call.op
    reg = get(name)
    valid = [r.name for r in registrations(op) if not check_topo(r.op, r.engine, r.topo, x.topo, False)
             and not check_op(r.opattrs, x.call, x.topo, False)]
    if reg.op != op:
        raise ValueError(f"PYHCCL_ALGO {name!r} is a {reg.op} algorithm, not {op}; valid for {op} here: "
                         f"{', '.join(valid) or 'none'}")
    reason = check_topo(reg.op, reg.engine, reg.topo, x.topo, False) or check_op(reg.opattrs, x.call, x.topo, False)
    if reason:
        raise ValueError(f"PYHCCL_ALGO {name!r} does not apply here: {reason}; valid for {op} here: "
                         f"{', '.join(valid) or 'none'}")
    return Selection(algorithm=name, engine=reg.engine.name, source="override",
                     notes=(f"PYHCCL_ALGO forces {name} (hard attribute checks passed; soft checks skipped)",), **base)


def _cost(x: Ctx, config: OpExecuteConfig, base: dict, notes: list[str], override: Override | None,
          tuner: Tuner | None, mode: str, steps: tuple = ()) -> Selection:
    op = x.call.op
    rollback = is_rollback_aiv(x)
    engines = engine_priority(OpExecuteConfig.AIV_ONLY if rollback else config)
    allowed = override.allowed(op, engines) if override is not None else None
    dead = override.dead_segments(op, engines) if override is not None else []
    if dead:
        prefixes = tuple(p for p, e in ENGINE_PREFIXES.items() if e in engines)
        valid = [n for n in names(op) if n.startswith(prefixes)]
        raise ValueError(f"PYHCCL_ALGO segment {', '.join(dead)} matches no {op} algorithm on engines "
                         f"{'/'.join(e.name for e in engines)}; valid: {', '.join(valid)}")
    soft = not (tuner is not None or (override is not None and override.names_op(op)))
    if not soft:
        notes.append("soft policies skipped (a tuner or PYHCCL_ALGO takes over)")
    res = run_cost_model(op, x.topo, x.call, config, soft=soft, rollback=rollback, tuner=tuner,
                         allowed=None if allowed is None else allowed.__contains__)
    if res.winner is None:
        sel = Selection(algorithm=NOT_MATCH, engine=res.config.name, source="cost", rule_steps=steps, cost=res,
                        notes=tuple(notes), **base)
        what = f"PYHCCL_ALGO {override.text!r} leaves no" if override else "no"
        raise SelectionError(f"{what} calibrated {op} candidate passes its attributes here (HCCL_E_NOT_SUPPORT); "
                             f"trace:\n{sel}", sel)
    engine = get(res.winner.name).engine
    sel = Selection(algorithm=res.winner.name, engine=engine.name, source="cost", rule_steps=steps, cost=res,
                    notes=tuple(notes), **base)
    log.debug("%s", sel)
    return sel


def _measured(x: Ctx, base: dict, notes: list[str], profile: Profile) -> Selection:
    op = x.call.op
    res, source = profile.costs(op, x.topo, x.call)
    notes = profile.describe(op) + notes
    if res.winner is None:
        sel = Selection(algorithm=NOT_MATCH, engine="-", source="measured", cost=res, notes=tuple(notes), **base)
        raise SelectionError(f"no {op} candidate has a price in the measured profile; trace:\n{sel}", sel)
    w = res.winner
    notes.append(f"{w.name}'s price: {source.get(w.name, 'fit')} ({profile.kind})")
    sel = Selection(algorithm=w.name, engine=w.engine, source="measured", cost=res, notes=tuple(notes), **base)
    log.debug("%s", sel)
    return sel


@lru_cache(maxsize=4096)
def _cached(op, topo_info, nbytes, dtype, reduce_op, root, items) -> Selection:
    return select(op, topo_info, nbytes, dtype, reduce_op, root=root, **dict(items))


def select_for(op: str, topo_info: TopoInfo, nbytes: int, dtype="fp32", reduce_op="sum", root: int = 0,
               **op_param) -> Selection:
    """:func:`select`, cached per (op, topology, size, dtype, reduce op, root, keywords).

    A warm call is one dict lookup. A profile is part of the key (equal profiles share
    entries). Calls with a tuner bypass the cache (a plugin's costs may change between calls).
    """
    if op_param.get("tuner"):
        return select(op, topo_info, nbytes, dtype, reduce_op, root=root, **op_param)
    return _cached(op, topo_info, nbytes, dtype if isinstance(dtype, (str, HcclDataType)) else str(dtype),
                   reduce_op if isinstance(reduce_op, (str, HcclReduceOp)) else str(reduce_op), root,
                   tuple(sorted(op_param.items())))


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (PYHCCL_SELECTOR){close_matches(mode, MODES)}; valid: {', '.join(MODES)}")


def check_settings(mode: str, expansion_mode: str | None = None, tuner: str = "") -> None:
    """Raise now what :func:`select_for` would raise at a communicator's first call for its settings
    (:func:`pyhccl.core.settings.selector`): an unknown mode, expansion mode or tuner plugin (loaded here, once)."""
    _check_mode(mode)
    initial_config("950", expansion_mode)
    load_tuner(tuner)
