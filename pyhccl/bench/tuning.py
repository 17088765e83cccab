"""After a sweep: the tuning file (``--tune``), the regret report (``--report regret``) and the plot (``--plot``).

Rank 0 calls :func:`finish` with the rows every rank measured alike. The regret of a choice at
one size is its measured time over the best measured time at that size (every algorithm of the
sweep and native MPI); the report gives it per size for HCCL's profile and for the measured
profile, and their geometric means.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import numpy as np
from typing import Any, Sequence

from ..core import settings
from ..core.call import OPS
from ..select import SelectionError, select_for
from ..tune.file import NATIVE, Point, Tuning, TuningError, load_tuning
from ..comm.buffers import dtype_by_name
from ..tune.features import pool_identical
from ..tune.fit import fit_op
from ..tune.profile import measured_profile
from ..core.units import format_size
from .driver import BenchArgs, Row

__all__ = ["finish", "tuning_from_rows", "regret", "Regret", "plot"]

_AUTO = ("auto:", "tuned:")


@dataclass(frozen=True)
class Regret:
    """One size of the regret report: the best measured and each profile's choice with its ratio."""

    size: int
    best: str
    best_us: float
    hccl: str
    hccl_ratio: float | None
    tuned: str
    tuned_ratio: float | None


def _op(args: BenchArgs) -> str:
    from .collective import BENCH_OPS
    return BENCH_OPS[args.op_name].op


def _measured(rows: Sequence[Row]) -> dict[tuple[str, int], dict[str, float]]:
    """Per (dtype, size): seconds per algorithm, native MPI included; the selection columns left out."""
    out: dict[tuple[str, int], dict[str, float]] = {}
    for r in rows:
        at = out.setdefault((r.type, r.size), {})
        if r.time_us is not None and not r.algo.startswith(_AUTO):
            at[r.algo] = r.time_us * 1e-6
        if r.native_time_us is not None:
            at[NATIVE] = r.native_time_us * 1e-6
    return out


def tuning_from_rows(args: BenchArgs, rows: Sequence[Row], topo: str, nranks: int, ub: int, mpi: str,
                     previous: Tuning | None = None) -> Tuning:
    """The tuning file's content: this sweep's points (and ``previous``'s for other ops), fitted per op."""
    hccl = OPS[_op(args)].hccl
    nbytes = {(r.type, r.size): r.nbytes for r in rows}
    points = [p for p in (previous.points if previous else ()) if p.op != hccl]
    for (dtype, size), times in _measured(rows).items():
        if nbytes[(dtype, size)] <= 0:
            continue
        points += [Point(hccl, algo, nbytes[(dtype, size)], t * 1e6, dtype, size) for algo, t in times.items()]
    fits = {op: f for op, f in (previous.fits.items() if previous else ()) if op != hccl}
    fit = fit_op(hccl, points, topo, ub)
    if fit is not None:
        fits[hccl] = fit
    return Tuning(topo, nranks, ub, tuple(points), fits, mpi, time.strftime("%Y-%m-%dT%H:%M:%S%z"))


def _choice(args: BenchArgs, topology: Any, row: Row, tuning: Tuning | str) -> str:
    """The algorithm the Communicator's selection picks for this row's call (out of place)."""
    hccl = OPS[_op(args)].hccl
    selection = settings.selector()             # as the Communicator reads them; no override: the profile's choice
    try:
        sel = select_for(hccl, topology.info, row.nbytes, row.type, row.redop if row.redop != "none" else "sum",
                         root=max(row.root, 0), algo="", profile=measured_profile(tuning), **selection)
    except (SelectionError, ValueError) as e:
        return f"({type(e).__name__})"
    return sel.algorithm


def regret(args: BenchArgs, rows: Sequence[Row], topology: Any, tuning: Tuning | None) -> list[Regret]:
    """Per (dtype, size): best measured, HCCL's choice and the tuned choice with their time ratios to it.

    Names that run the very same plans (:func:`pyhccl.tune.features.signature`) count as one
    algorithm: each is timed at the mean of their measurements.
    """
    measured = _measured(rows)
    out = []
    seen = set()
    for r in rows:
        key = (r.type, r.size)
        if key in seen or not measured.get(key):
            continue
        seen.add(key)
        itemsize = np.dtype(dtype_by_name(r.type)).itemsize
        times = pool_identical(OPS[_op(args)].hccl, measured[key], topology.spec.to_text(), r.nbytes, itemsize,
                               max(r.root, 0))
        best = min(times, key=times.__getitem__)
        hccl = _choice(args, topology, r, "")
        tuned = _choice(args, topology, r, tuning) if tuning is not None else "-"
        ratio = (lambda name: times[name] / times[best] if name in times else None)
        out.append(Regret(r.size, best, times[best] * 1e6, hccl, ratio(hccl), tuned, ratio(tuned)))
    return out


def geomean(values: Sequence[float | None]) -> float | None:
    xs = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in xs) / len(xs)) if xs else None


def regret_lines(report: Sequence[Regret]) -> list[str]:
    """The regret table as text."""
    out = ["# regret = the choice's measured time / the best measured time at that size (1.00 = best)",
           f"#{'size':>10}  {'best measured':<40} {'time(us)':>10}  {'HCCL profile':<40} {'regret':>6}  "
           f"{'tuned (measured profile)':<40} {'regret':>6}"]
    f = (lambda v: "-" if v is None else f"{v:.2f}")
    for g in report:
        out.append(f" {format_size(g.size):>10}  {g.best:<40} {g.best_us:>10.1f}  {g.hccl:<40} {f(g.hccl_ratio):>6}  "
                   f"{g.tuned:<40} {f(g.tuned_ratio):>6}")
    h, t = geomean([g.hccl_ratio for g in report]), geomean([g.tuned_ratio for g in report])
    missing = sum(g.hccl_ratio is None for g in report)
    out.append(f"# geomean regret: HCCL profile {f(h)}, tuned {f(t)}"
               + (f" ({missing} HCCL choices were not measured: left out)" if missing else ""))
    return out


def plot(args: BenchArgs, rows: Sequence[Row], nranks: int, path: str, report: Sequence[Regret] = ()) -> None:
    """busbw against size per algorithm, native MPI as a reference line, the one-host memory bound (the roofline,
    where the rows carry their % of it), the choices marked; ``--algo fast``'s rows are one line, whatever each
    size picked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dtype = rows[0].type
    rows = [r for r in rows if r.type == dtype and r.redop == rows[0].redop]
    fig, ax = plt.subplots(figsize=(11, 6.5))
    algos = list(dict.fromkeys(r.algo for r in rows if not r.algo.startswith((*_AUTO, "fast:"))))
    cmap = plt.get_cmap("tab20")
    busbw: dict[tuple[str, int], float] = {}
    for i, a in enumerate(algos):
        pts = [(r.size, r.busbw) for r in rows if r.algo == a and r.busbw]
        busbw.update({(a, s): b for s, b in pts})
        if pts:
            ax.plot(*zip(*pts), color=cmap(i % 20), lw=1, alpha=0.75, label=a)
    native = sorted({(r.size, r.native_time_us) for r in rows if r.native_time_us})
    if native:
        factor = OPS[_op(args)].busbw_factor(nranks)
        nat = [(s, s / (t * 1e-6) / 1e9 * factor) for s, t in native]
        busbw.update({(NATIVE, s): b for s, b in nat})
        ax.plot(*zip(*nat), color="black", lw=2.5, ls="--", label="native MPI")
    for g in report:
        for name, marker, color, label in ((g.hccl, "o", "tab:red", "HCCL profile's choice"),
                                           (g.tuned, "*", "tab:green", "tuned choice")):
            if (name, g.size) in busbw:
                ax.plot(g.size, busbw[(name, g.size)], marker, color=color, ms=11 if marker == "*" else 8,
                        mfc="none" if marker == "o" else color, label=label)
    fast = [(r.size, r.busbw) for r in rows if r.algo.startswith("fast:") and r.busbw]
    if fast:
        ax.plot(*zip(*fast), "o-", color="tab:blue", lw=2, ms=5, label="default communicator (--algo fast)")
    roof = sorted({r.size: r.busbw * 100 / r.bound for r in rows if r.busbw and r.bound}.items())
    if roof:
        ax.plot(*zip(*roof), color="tab:gray", lw=1.5, ls=":", label="memory bound (pyhccl.bench.roofline)")
    sel = [r for r in rows if r.algo.startswith("auto:") and r.busbw]
    if not report and sel:
        ax.plot([r.size for r in sel], [r.busbw for r in sel], "o", color="tab:red", mfc="none", ms=8,
                label="selected (auto)")
    sizes = sorted({r.size for r in rows})
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sizes)
    ax.set_xticklabels([_label(s) for s in sizes], rotation=45)
    ax.set_xlabel("message size (nccl-tests' size: the whole buffer)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    topo = f", topology {args.topo}" if args.topo else ""
    ax.set_title(f"{OPS[_op(args)].hccl}: busbw per algorithm, {nranks} ranks{topo}, {dtype}")
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), uniq.keys(), fontsize=7, ncol=2, loc="upper left", framealpha=0.8)
    ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _label(nbytes: int) -> str:
    """8B, 4KiB, 64MiB."""
    text = format_size(nbytes)
    return text + "iB" if text[-1] in "KMG" else text + "B"


def finish(args: BenchArgs, rows: Sequence[Row], topology: Any, nranks: int, ub: int, mpi: str,
           out=None) -> dict[str, Any]:
    """Rank 0, after the table: write ``--tune``'s file, print ``--report``, draw ``--plot``. Returns a summary."""
    summary: dict[str, Any] = {}
    topo = topology.spec.to_text()
    tuning = None
    if args.tune:
        previous = None
        if os.path.exists(args.tune):
            try:
                previous = load_tuning(args.tune)
                previous.check_machine(topo, nranks, "this run")
            except TuningError as e:
                print(f"# --tune: not merging with the existing {args.tune} ({e})", file=out)
                previous = None
        tuning = tuning_from_rows(args, rows, topo, nranks, ub, mpi, previous)
        tuning.save(args.tune)
        tuning = load_tuning(args.tune)
        fit = tuning.fits.get(OPS[_op(args)].hccl)
        print(f"# tuning file {args.tune}: {len(tuning.points)} points"
              + (f"; fit over {fit.points} points: rms relative error {fit.rms_rel_error:.1%}, "
                 f"max {fit.max_rel_error:.1%}" if fit else "; no fit (no algorithm measured)"), file=out)
    if args.tuning:
        tuning = load_tuning(args.tuning)
        tuning.check_machine(topo, nranks, "this run")
    report: list[Regret] = []
    if args.report == "regret":
        report = regret(args, rows, topology, tuning)
        for line in regret_lines(report):
            print(line, file=out)
        summary["regret"] = {"hccl": geomean([g.hccl_ratio for g in report]),
                             "tuned": geomean([g.tuned_ratio for g in report]),
                             "sizes": [g.__dict__ for g in report]}
    if args.plot:
        plot(args, rows, nranks, args.plot, report)
        print(f"# plot: {args.plot}", file=out)
    if out is not None:
        out.flush()
    return summary
