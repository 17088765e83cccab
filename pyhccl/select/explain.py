"""The decision as text: topology summary, rules tried, cost table, tuner changes, winner.

What ``python -m pyhccl.select`` prints and ``Selection.trace`` holds.
"""

from __future__ import annotations

from ..algo.registry import get
from ..core.units import format_size
from ..topo.info import summarize_sizes
from .rules.base import Ctx

__all__ = ["trace_lines", "topo_summary"]


def topo_summary(x: Ctx) -> list[str]:
    """HCCL's TopoInfo fields the selectors read, in two lines."""
    t = x.topo
    flags = [name for name, on in (("Level1Nhr", t.level1_nhr), ("is2DieFullMesh", t.is_2die_full_mesh),
                                   ("level0PcieMix", t.level0_pcie_mix), ("level0BigClosRange", t.level0_big_clos_range),
                                   ("topLevelUboe", t.top_level_uboe), ("level2UbRtp", t.level2_ub_rtp),
                                   ("hostDpuOnly", t.host_dpu_only), ("isPod", t.is_pod)) if on]
    net = t.net_layer_details
    sizes = "; ".join(f"L{layer}: {summarize_sizes(s)}" for layer, s in enumerate(net.inst_size_list_of_layer) if s)
    return [f"topology: R={x.R} levels={x.levels} level0={t.level0_topo.name} ({t.level0_mesh_type.name}) "
            f"servers={t.server_num} devices/module={t.device_num_per_module} layer sizes=[{sizes}]",
            f"  derived: twoLevel={x.two_level} sym={x.sym} equal={x.equal} multiple={x.multiple} "
            f"allconn={x.allconn} frames={x.frame} flags={','.join(flags) or '-'} device={t.device_type}"]


def _us(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e6:.2f}"


def _measured_table(res) -> list[str]:
    """The measured profile's table: the fit's price, the price used, and where it came from."""
    out = ["measured profile: fit = a tuning file's fitted cost model on the plan's counts; cost = the price "
           "used: measured where the profile has points around this size, else the fit (us)",
           f"  {'algorithm':<44} {'engine':<9} {'fit':>10} {'cost':>10}  cost from"]
    for r in res.rows:
        if not r.filtered:
            mark = " <-" if res.winner is r else ""
            src = r.priced_by or "fit"
            out.append(f"  {r.name:<44} {r.engine:<9} {_us(r.body):>10} {_us(r.cost):>10}  {src}{mark}")
    filtered = [r for r in res.rows if r.filtered]
    if filtered:
        out.append("  filtered:")
        out += [f"    {r.name:<44} {r.filtered}" for r in filtered]
    if res.tuner_changes:
        out.append("tuner (pyhccl.tune.MeasuredTuner, from the file's points):")
        out += [f"  {line}" for line in res.tuner_changes]
    return out


def trace_lines(sel) -> list[str]:
    """The lines of ``sel``'s trace."""
    x = Ctx(sel.topo, sel.call)
    c = sel.call
    out = [f"{sel.op} {format_size(c.nbytes)} ({c.nbytes} B) {c.dtype.name} {c.reduce_op.name}"
           f"{' in-place' if c.inplace else ''} | mode={sel.mode}"]
    out += topo_summary(x)
    if sel.rule_steps:
        out.append("rules:")
        out += [f"  {eng:<9} {ans.name:<44} {ans.why}" for eng, ans in sel.rule_steps]
    if sel.cost is not None and sel.source == "measured":
        out += _measured_table(sel.cost)
    elif sel.cost is not None:
        res = sel.cost
        out.append(f"cost model: start {res.config.name}, engines {'/'.join(e.name for e in res.candidates)}; "
                   "cost = max(sum of group costs, sum of D) (us)")
        out.append(f"  {'algorithm':<44} {'A (s/B)':>10} {'B (s/B)':>10} {'C (us)':>8} {'D (us)':>8} "
                   f"{'body':>9} {'cost':>9}")
        for r in res.rows:
            if not r.filtered:
                mark = " <-" if res.winner is r else ""
                out.append(f"  {r.name:<44} {r.A:>10.4g} {r.B:>10.4g} {_us(r.C):>8} {_us(r.D):>8} "
                           f"{_us(r.body):>9} {_us(r.cost):>9}{mark}")
        filtered = [r for r in res.rows if r.filtered]
        if filtered:
            out.append("  filtered:")
            out += [f"    {r.name:<44} {r.filtered}" for r in filtered]
        if res.tuner_changes:
            out.append("tuner:")
            out += [f"  {line}" for line in res.tuner_changes]
        if res.ties:
            out.append(f"  ties kept the first in registration order: {', '.join(res.ties)}")
    out += list(sel.notes)
    out.append(f"winner: {sel.algorithm} (engine {sel.engine}, by {sel.source})")
    if sel.algorithm != "NOT_MATCH":
        try:
            reg = get(sel.algorithm)
        except ValueError:
            return out
        levels = "; ".join(f"L{i}: {' -> '.join(ts)}" for i, ts in enumerate(reg.levels))
        out.append(f"  executor {reg.executor} ({reg.topo_match}); {levels or 'no template'}")
    return out
