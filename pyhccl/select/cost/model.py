"""The cost-model selector: InitCostModel -> TunerEnrichCostTable -> SelectMinCost, with the table it shows.

HCCL source: src/ops/op_common/selector/selector_engine.cc (commit 4cbe21b3, N3),
cost_model.cc (``InitCostModel``, ``GetEnginePriority``, ``FilterCmByEngine``) and cost_table.cc
(``CostTableGen``, ``CalcAlgCost``); hccl-selection.md §4.5, §6.5, §8.3.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ...algo.attrs import check_op, check_topo
from ...algo.names import OpExecuteConfig as E
from ...algo.names import to_cost_engine
from ...algo.predicates import OpCall
from ...algo.registry import Registration, registrations
from ...topo.info import TopoInfo
from .executors import calibrate
from .params import Coeff, ub_util
from .templates import template_coeff

__all__ = ["CostRow", "CostResult", "engine_priority", "run_cost_model", "alg_cost", "select_min_cost"]

#: ``GetEnginePriority`` (cost_model.cc, N3): the engines a starting config may fall back to.
ENGINE_PRIORITY: dict[E, tuple[E, ...]] = {
    E.CCU_MS: (E.CCU_MS, E.CCU_SCHED, E.AICPU_TS, E.HOSTCPU), E.CCU_SCHED: (E.CCU_SCHED, E.AICPU_TS, E.HOSTCPU),
    E.AIV: (E.AIV, E.AICPU_TS, E.HOSTCPU), E.AIV_ONLY: (E.AIV,), E.AICPU_TS: (E.AICPU_TS, E.HOSTCPU),
    E.HOSTCPU: (E.HOSTCPU,),
}


def engine_priority(config: E) -> tuple[E, ...]:
    """Candidate engines for ``config`` (anything else -> AICPU_TS, HOSTCPU)."""
    return ENGINE_PRIORITY.get(config, (E.AICPU_TS, E.HOSTCPU))


@dataclass
class CostRow:
    """One cost-table row: an algorithm, its terms, its cost, or why it was filtered out."""

    name: str
    engine: str
    coeffs: tuple[Coeff, ...] = ()
    body: float | None = None          # summed group costs
    launch: float | None = None        # sum of D
    cost: float | None = None          # max(body, launch), then the tuner's value
    model_cost: float | None = None    # before the tuner
    filtered: str = ""                 # reason, "" when costed
    priced_by: str = ""                # where a measured profile's price came from

    @property
    def A(self) -> float:  # noqa: N802
        return sum(c.A for c in self.coeffs)

    @property
    def B(self) -> float:  # noqa: N802
        return sum(c.B for c in self.coeffs)

    @property
    def C(self) -> float:  # noqa: N802
        return sum(c.C for c in self.coeffs)

    @property
    def D(self) -> float:  # noqa: N802
        return sum(c.D for c in self.coeffs)


@dataclass
class CostResult:
    """The cost table (registration order), the winner (or None) and the tuner's changes."""

    rows: list[CostRow]
    winner: CostRow | None
    config: E
    candidates: tuple[E, ...]
    tuner_changes: list[str] = field(default_factory=list)
    ties: list[str] = field(default_factory=list)


def alg_cost(coeffs: tuple[Coeff, ...], meta, nbytes: int, engine: E, op: str) -> tuple[float, float]:
    """``CalcAlgCost``: (Σ group costs, Σ D); the cost is their max (D acts as a launch floor)."""
    eng = to_cost_engine(engine)
    groups = meta.group_sizes or (1,) * len(coeffs)
    body, i = 0.0, 0
    for size in groups:
        seg_costs = []
        for j in range(i, i + size):
            c = coeffs[j]
            util = ub_util(nbytes, meta.data_ratios[j], meta.rank_sizes[j], meta.net_types[j],
                           meta.algo_types[j], eng, op)
            seg_costs.append((c.A / util + c.B) * nbytes + c.C)
        body += max(seg_costs) if meta.intra_group_mode == "MAX" else sum(seg_costs)
        i += size
    return body, sum(c.D for c in coeffs)


def _calibrated(reg: Registration, topo: TopoInfo) -> tuple[tuple[Coeff, ...], object] | str:
    cal = calibrate(reg, topo)
    if cal.meta is None:
        return f"uncalibrated: {cal.reason}"
    coeffs = []
    for seg in cal.segs:
        c = template_coeff(seg)
        if c is None:
            return f"uncalibrated: template {seg.template} gives no coefficients for R={seg.rank_size}"
        coeffs.append(c)
    return tuple(coeffs), cal.meta


def run_cost_model(op: str, topo: TopoInfo, call: OpCall, config: E, *, soft: bool = True,
                   allowed: Callable[[str], bool] | None = None, rollback: bool = False,
                   tuner=None, only: tuple[str, ...] | None = None) -> CostResult:
    """``SelectorEngine::Run`` for one op: build the model, cost the table, apply the tuner, pick the minimum.

    Args:
        config: the starting opExecuteConfig.
        soft: ``needSoftPolicyCheck`` (False when a tuner or PYHCCL_ALGO takes over).
        allowed: the override grammar's filter (``FilterCmByHcclAlgo``), or None.
        rollback: ``IsRollBackAiv`` held (config becomes AIV_ONLY unless it already is).
        tuner: a loaded :class:`~pyhccl.select.tuner.Tuner`, or None.
        only: restrict the table to these names (None: every registration of ``op``).
    """
    if rollback and config != E.AIV_ONLY:
        config = E.AIV_ONLY
    cands = engine_priority(config)
    rows: list[CostRow] = []
    for reg in registrations(op):
        if only is not None and reg.name not in only:
            continue
        row = CostRow(reg.name, reg.engine.name)
        rows.append(row)
        reason = check_topo(reg.op, reg.engine, reg.topo, topo, soft)
        if reason:
            row.filtered = f"topo: {reason}"
            continue
        got = _calibrated(reg, topo)
        if isinstance(got, str):
            row.filtered = got
            continue
        if reg.engine not in cands:
            row.filtered = f"engine {reg.engine.name} not in {'/'.join(e.name for e in cands)}"
            continue
        if allowed is not None and not allowed(reg.name):
            row.filtered = "excluded by PYHCCL_ALGO"
            continue
        reason = check_op(reg.opattrs, call, topo, soft)
        if reason:
            row.filtered = f"op: {reason}"
            continue
        row.coeffs, meta = got
        row.body, row.launch = alg_cost(row.coeffs, meta, call.nbytes, reg.engine, op)
        row.cost = row.model_cost = max(row.body, row.launch)
    result = CostResult(rows, None, config, cands)
    if tuner is not None and any(r.cost is not None for r in rows):
        tuner.enrich(op, call, topo, rows, result.tuner_changes)
    result.winner, result.ties = select_min_cost(rows)
    return result


def select_min_cost(rows: list[CostRow]) -> tuple[CostRow | None, list[str]]:
    """``SelectMinCost``: skip uncosted and negative rows; strictly smallest wins, ties keep the first."""
    best, ties = None, []
    for r in rows:
        if r.cost is None or r.cost < 0:
            continue
        if best is None or r.cost < best.cost:
            best, ties = r, []
        elif r.cost == best.cost:
            ties.append(r.name)
    return best, ties
