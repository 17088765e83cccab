"""The measured profile: the cost table priced with a tuning file's fit, then re-priced from its points.

Where HCCL's cost model prices candidates with coefficients measured on Ascend hardware
(selector_engine.cc ``InitCostModel`` -> ``TunerEnrichCostTable`` -> ``SelectMinCost``), the
measured profile keeps the three stages and changes the numbers: each candidate's cost is the
fit of :mod:`pyhccl.tune.fit` applied to its plan's counts, then :class:`MeasuredTuner` (a tuner
plugin like any other, hccl_tuner_plugin.h) replaces it with the measured time where the file
has points around the size; where any candidate has, the fit-only ones step aside (the fit's
error is larger than the gaps it would decide). Candidates are every HCCL name whose hard attributes accept the
call, pyhccl's templates for the op, the same templates on the shared-memory engine where the
file measured them (``NHR@shm``), and the wrapped MPI's own collective (:data:`NATIVE`); only
this profile may choose the last two, and only from measurements. :class:`MeasuredProfile` is
the tuning file as selection takes it (:class:`pyhccl.select.profile.Profile`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import ClassVar

from ..algo.attrs import check_op, check_topo
from ..algo.dtypes import DATATYPE_SIZE
from ..algo.names import AlgoRef, OpExecuteConfig, Runtime, parse_algo_ref
from ..algo.predicates import OpCall
from ..algo.registry import registrations
from ..core.call import HCCL_OPS
from ..core.settings import ub_transfer_bytes
from ..plan.api import NotRunnableError, flat_names
from ..select.cost.model import CostResult, CostRow, select_min_cost
from ..select.tuner import Tuner, TunerCommInfo, TunerEntry
from ..topo.info import TopoInfo
from .features import features, pool_identical
from .file import NATIVE, Tuning, load_tuning_cached
from .fit import predict

__all__ = ["MeasuredProfile", "measured_profile", "MeasuredTuner", "measured_costs", "describe", "PYHCCL_ENGINE",
           "NATIVE_ENGINE"]

PYHCCL_ENGINE = "PYHCCL"       # pyhccl's one-level templates
NATIVE_ENGINE = "MPI"          # the wrapped MPI library's collective
SHM_ENGINE = "SHM"             # pyhccl's templates on the shared-memory engine (pyhccl.run.shm)


@dataclass(frozen=True)
class MeasuredProfile:
    """A tuning file as the measured profile selection is handed (:class:`pyhccl.select.profile.Profile`)."""

    tuning: Tuning
    kind: ClassVar[str] = "tuning file"

    @property
    def label(self) -> str:
        return f"tuning file {self.tuning.path or '(in memory)'}"

    def ops(self) -> set[str]:
        return self.tuning.ops()

    def check(self, topo: TopoInfo) -> None:
        self.tuning.check_info(topo)

    def costs(self, op: str, topo: TopoInfo, call: OpCall) -> tuple[CostResult, dict[str, str]]:
        return measured_costs(op, topo, call, self.tuning)

    def describe(self, op: str) -> list[str]:
        return describe(self.tuning, op)


def measured_profile(tuning: Tuning | str | os.PathLike | None) -> MeasuredProfile | None:
    """The profile of a tuning file (a :class:`Tuning`, or a path read once per file version); None for None or "".

    Raises:
        TuningError: a file that cannot be read or is not a valid tuning file.
        TypeError: something else.
    """
    if tuning is None or (isinstance(tuning, (str, os.PathLike)) and not os.fspath(tuning)):
        return None
    if isinstance(tuning, (str, os.PathLike)):
        tuning = load_tuning_cached(os.fspath(tuning))
    if not isinstance(tuning, Tuning):
        raise TypeError(f"expecting tuning as a pyhccl.tune.Tuning or a file path, got {type(tuning).__name__}")
    return MeasuredProfile(tuning)


class MeasuredTuner:
    """The built-in tuner plugin: re-prices every candidate the tuning file measured around the size.

    Usable on HCCL's own cost model too (``PYHCCL_TUNER_PLUGIN`` needs an importable object, so
    pass an instance to ``select(tuner=Tuner(MeasuredTuner(t)))``). ``how`` keeps, per name, where
    its last price came from.
    """

    def __init__(self, tuning: Tuning) -> None:
        self.tuning = tuning
        self.nranks = tuning.nranks
        self.how: dict[str, str] = {}

    def init(self, comm_info: TunerCommInfo) -> None:
        self.nranks = comm_info.n_ranks

    def get_coll_info(self, op: str, nbytes: int, dtype: str, entries: tuple[TunerEntry, ...]) -> None:
        if op == "ReduceScatter":                  # the tuner is given param.inputSize (x ranks)
            nbytes //= max(1, self.nranks)
        self.how = {}
        for e in entries:
            got = self.tuning.measured(op, e.alg_name, nbytes)
            if got is not None:
                e.cost, self.how[e.alg_name] = got


def measured_costs(op: str, topo: TopoInfo, call: OpCall, tuning: Tuning) -> tuple[CostResult, dict[str, str]]:
    """The measured profile's cost table for ``call``, and per name where its price came from.

    Costs are seconds; a row without a price (no fit for the op, native MPI outside the measured
    sizes) is filtered with the reason.
    """
    name = HCCL_OPS[op]
    fit = tuning.fits.get(op)
    itemsize = DATATYPE_SIZE[call.dtype]
    ub = ub_transfer_bytes(tuning.ub_transfer_bytes)
    rows: list[CostRow] = []
    source: dict[str, str] = {}
    cands: list[tuple[str, str]] = [(r.name, r.engine.name) for r in registrations(op)]
    cands += [(n, PYHCCL_ENGINE) for n in flat_names(name)] + [(NATIVE, NATIVE_ENGINE)]
    shm = [str(AlgoRef(n, Runtime.SHM)) for n in flat_names(name)]
    cands += [(n, SHM_ENGINE) for n in shm if tuning.curve(op, n)]
    regs = {r.name: r for r in registrations(op)}
    for algo, engine in cands:
        row = CostRow(algo, engine)
        rows.append(row)
        reg = regs.get(algo)
        if reg is not None:
            reason = check_topo(reg.op, reg.engine, reg.topo, topo, False) or check_op(reg.opattrs, call, topo, False)
            if reason:
                row.filtered = f"attributes: {reason}"
                continue
        if algo == NATIVE or parse_algo_ref(algo).shm:      # priced from measurements only
            row.cost = row.model_cost = math.inf
            continue
        try:
            x = features(op, algo, tuning.topo, call.nbytes, itemsize, ub, call.root, call.inplace)
        except NotRunnableError as e:
            row.filtered = f"not runnable: {str(e).splitlines()[0]}"
            continue
        if fit is None:
            row.cost = row.model_cost = math.inf
            continue
        row.body = row.cost = row.model_cost = predict(fit, x)
        source[algo] = "fit"
    result = CostResult(rows, None, OpExecuteConfig.HOSTCPU, ())
    plugin = MeasuredTuner(tuning)
    Tuner(plugin, "pyhccl.tune.MeasuredTuner").enrich(op, call, topo, rows, result.tuner_changes)
    source.update(plugin.how)
    measured = {r.name: r.cost for r in rows if r.name in plugin.how}
    pooled = pool_identical(op, measured, tuning.topo, call.nbytes, itemsize, call.root, call.inplace)
    for row in rows:                         # names that run the same plans share their measurements
        if row.name in pooled and pooled[row.name] != row.cost:
            row.cost = pooled[row.name]
            source[row.name] += " (mean of the names with the same plans)"
    any_measured = bool(plugin.how)
    for row in rows:
        row.priced_by = source.get(row.name, "")
        if any_measured and row.priced_by == "fit":     # measurements outrank the model where they exist
            row.cost, row.filtered = None, "not measured at this size (measured candidates are)"
        if row.cost is not None and math.isinf(row.cost):
            row.cost = None
            row.filtered = ("no measured point around this size" if row.engine in (NATIVE_ENGINE, SHM_ENGINE)
                            else f"the tuning file has no fit for {op}")
    result.winner, result.ties = select_min_cost(rows)
    return result, source


def describe(tuning: Tuning, op: str) -> list[str]:
    """Lines saying which numbers come from the file."""
    fit = tuning.fits.get(op)
    out = [f"measured profile: tuning file {tuning.path or '(in memory)'} ({tuning.topo}, {tuning.nranks} ranks, "
           f"{sum(p.op == op for p in tuning.points)} {op} points, {tuning.mpi or 'MPI ?'})"]
    if fit is not None:
        lv = "; ".join(f"L{i}: {c.latency_per_step * 1e6:.3g} us/step, {c.per_byte_moved * 1e9:.3g} ns/B moved, "
                       f"{c.per_byte_reduced * 1e9:.3g} ns/B reduced" for i, c in enumerate(fit.levels)
                       if c.latency_per_step or c.per_byte_moved or c.per_byte_reduced)
        out.append(f"  fit ({fit.points} points, rms error {fit.rms_rel_error:.1%}, max {fit.max_rel_error:.1%}): "
                   f"{lv or 'no level terms'}; {fit.per_byte_copied * 1e9:.3g} ns/B copied, "
                   f"{fit.launch_per_task * 1e6:.3g} us/task, {fit.per_call * 1e6:.3g} us/call")
    return out
