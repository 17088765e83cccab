"""``python -m pyhccl.verify``: sweep ops, algorithms and machines through the simulator; print a summary.

Examples: ``python -m pyhccl.verify all`` (every op, algorithm and default machine);
``python -m pyhccl.verify allreduce --algo NHR --ranks 1-64`` (one line per rank count);
``python -m pyhccl.verify all --ranks none --topo 4x8x8 1x8x128 --algo hccl``.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter, defaultdict
from concurrent.futures.process import BrokenProcessPool
from typing import Sequence

from ..algo.dtypes import parse_dtype
from ..core import settings
from ..core.call import OPS, canonical_op
from ..plan.api import resolve_name
from ..select.cascade import EXPANSION_MODES
from ..topo import parse_topo
from .cases import parse_ranks
from .progress import Progress, weight
from .sweep import AUTO, Outcome, canonical_ops, default_jobs, expand_algos, make_tasks, run_tasks

__all__ = ["main", "DEFAULT_TOPOS", "DEFAULT_RANKS"]

#: Rank counts of the flat machines 1x1xN by default.
DEFAULT_RANKS = "1-16"
#: Multi-level machines ``all`` adds by default: two and three levels, symmetric and not, a UBX level 0.
DEFAULT_TOPOS = ("1x2x4", "2x2x2", "1x4x8", "2x4x4", "[[[0,1,2,3],[0,1]]]", "[[[0,1,2],[0,1,2]],[[0,1,2]]]",
                 "1x1x8;level0=mesh+clos", "1x2x8;level0=clos")
#: Seconds one call may take up to 32 ranks, times (N/32)^2 above (a call of the default sweep takes < 1 s).
DEFAULT_TIMEOUT = 5.0
_REASON_WIDTH = 160


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pyhccl.verify", description=__doc__.splitlines()[0])
    p.add_argument("op", help=f"all, or one collective: {', '.join(OPS)} (HCCL's names too)")
    p.add_argument("--ranks", default=None,
                   help=f"rank counts of flat machines 1x1xN, e.g. 1-64, 4096, 1,2,8-16, none (default {DEFAULT_RANKS})")
    p.add_argument("--topo", nargs="+", action="extend", default=None, metavar="SPEC",
                   help="multi-level machines, e.g. 1x2x4 2x2x2 4x8x8 '[[[0,1,2,3],[0,1]]]' "
                        "(repeatable; default for all: a set of 2- and 3-level shapes; 'none' for none)")
    p.add_argument("--op", dest="ops", default=None, help="with all: only these ops, comma-separated")
    p.add_argument("--algo", default="all",
                   help="comma-separated: all (default), templates (pyhccl's), hccl (HCCL's names), auto (HCCL's "
                        "selection), or algorithm names")
    p.add_argument("--count", type=int, action="append", default=None,
                   help="HCCL's count (repeatable; default 0, 1, N-1, N, N+1, 7919, 10000000019, uneven V counts)")
    p.add_argument("--in-place", action="store_true", help="only the in-place form of each call")
    p.add_argument("--out-of-place", action="store_true", help="only the out-of-place form of each call")
    p.add_argument("--dtype", default="FP32", help="HCCL dtype (FP32, BFP16, HIF8, FP8E4M3, INT64, ...; default FP32)")
    p.add_argument("--reduce-op", default="sum", choices=("sum", "prod", "max", "min"))
    p.add_argument("--expansion-mode", default=None, choices=tuple(EXPANSION_MODES),
                   help="HCCL_OP_EXPANSION_MODE for auto (AI_CPU, AIV, CCU_MS, ...; default PYHCCL_OP_EXPANSION_MODE)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                   help=f"seconds per call before it counts as failed, times (N/32)^2 above 32 ranks; 0 for "
                        f"none (default {DEFAULT_TIMEOUT:g})")
    p.add_argument("-j", "--jobs", type=int, default=None, help="worker processes (default: the CPUs available)")
    p.add_argument("-v", "--verbose", action="store_true", help="full failure reports and every reason")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns 0 when nothing failed, 1 otherwise (2 on a usage error, via SystemExit)."""
    p = _parser()
    a = p.parse_args(argv)
    sweep = a.op.lower() == "all"
    try:
        ops = canonical_ops(a.ops or "all") if sweep else [canonical_op(a.op)]
        if a.ops and not sweep:
            raise ValueError("--op applies to all; name the collective in place of all instead")
        flat = [f"1x1x{n}" for n in parse_ranks(a.ranks or DEFAULT_RANKS)]
        topo_args = a.topo if a.topo is not None else (list(DEFAULT_TOPOS) if sweep else [])
        topos = [parse_topo(t).to_text() for t in topo_args if t.lower() != "none"]
        topos = [t for t in dict.fromkeys(topos) if t not in flat]
        tokens = [t.strip() for t in a.algo.split(",") if t.strip()]
        _check_algos(ops, tokens)
        if a.count is not None and any(c < 0 for c in a.count):
            raise ValueError(f"expecting --count >= 0, got {a.count}")
        if a.in_place and a.out_of_place:
            raise ValueError("--in-place and --out-of-place exclude each other")
        if a.in_place and not any(OPS[op].in_place_ok for op in ops):
            raise ValueError(f"--in-place: {', '.join(ops)} has no in-place form")
        if a.timeout < 0:
            raise ValueError(f"expecting --timeout >= 0, got {a.timeout:g}")
        try:
            parse_dtype(a.dtype)
        except ValueError as e:
            raise ValueError(f"--dtype: {e}") from None
        mode = settings.expansion_mode(a.expansion_mode)
        if mode is not None and mode not in EXPANSION_MODES:        # (the flag's choices: from the environment)
            raise ValueError(f"expecting PYHCCL_OP_EXPANSION_MODE one of {', '.join(EXPANSION_MODES)}, got {mode!r}")
        if a.jobs is not None and a.jobs < 1:
            raise ValueError(f"expecting --jobs >= 1, got {a.jobs}")
    except ValueError as e:
        p.error(str(e))
    places = "in" if a.in_place else "out" if a.out_of_place else "both"
    if a.in_place:
        ops = [op for op in ops if OPS[op].in_place_ok]
    tasks = make_tasks(ops, tokens, flat, topos, counts=tuple(a.count) if a.count else None, places=places,
                       dtype=a.dtype, reduce_op=a.reduce_op,
                       expansion_mode=mode,
                       timeout=a.timeout or None)
    jobs = a.jobs or default_jobs()
    t0 = time.perf_counter()
    outcomes: list[Outcome | None] = []
    try:
        if not sweep:
            for o in run_tasks(tasks, jobs):
                outcomes.append(o)
                line = _line(o)
                if line:
                    print(line, flush=True)
        else:
            weights = [weight(t) for t in tasks]
            groups: dict[tuple[str, str], list[int]] = {}    # one op on one machine: one worker's batch
            for i, t in enumerate(tasks):
                groups.setdefault((t.op, t.topo), []).append(i)
            order = [i for g in sorted(groups.values(), key=lambda g: -sum(weights[i] for i in g)) for i in g]
            outcomes = [None] * len(tasks)
            index = {t: i for i, t in enumerate(tasks)}
            progress = Progress(weights, start=t0)
            for o in run_tasks([tasks[i] for i in order], jobs, ordered=False):     # as finished: honest progress
                i = index[o.task]
                outcomes[i] = o
                progress.finish(weights[i])
                progress.show()
        stopped = ""
    except KeyboardInterrupt:            # the workers are stopped (run_tasks); report what finished
        stopped = "INTERRUPTED"
    except BrokenProcessPool:            # a worker died: the kernel's OOM killer, most likely
        stopped = "ABORTED"
    done = [o for o in outcomes if o is not None]
    if sweep:
        _summary(done, a.verbose)
    failed = _report(done, a.verbose)
    wall = time.perf_counter() - t0
    ran = sum(o.ran for o in done)
    if stopped:
        why = ("" if stopped == "INTERRUPTED" else " (a worker process died, killed by the system: out of memory? "
               "use fewer --jobs, or PYHCCL_VERIFY_MEMORY=<GiB per worker>)")
        print(f"# {stopped} after {wall:.1f} s: {len(done)} of {len(tasks)} tasks done, {ran} calls"
              + (f", {failed} failed" if failed else ", none failed") + why)
        return 130 if stopped == "INTERRUPTED" else 1
    if failed:
        print(f"# FAILED: {failed} of {ran} calls in {wall:.1f} s")
        return 1
    print(f"# all {ran} calls passed in {wall:.1f} s ({len(tasks)} tasks, {jobs} jobs)")
    return 0


def _check_algos(ops: list[str], tokens: list[str]) -> None:
    """Every ``--algo`` token must name something for at least one op."""
    if not tokens:
        raise ValueError("expecting --algo names, got nothing")
    for t in tokens:
        if not any(expand_algos(op, [t]) for op in ops):
            resolve_name(ops[0], t)        # raises with the close matches
            raise ValueError(f"--algo {t!r} names no algorithm of {', '.join(ops)}")


def _where(o: Outcome) -> str:
    return f"n={o.nranks}" if o.task.flat else o.task.topo


def _line(o: Outcome) -> str | None:
    """One line per task for the single-op form (tasks with nothing to run print nothing)."""
    s = o.statuses
    head = f"{o.task.op} {o.task.algo} {_where(o)}"
    if s["failed"]:
        return f"{head}: FAIL {s['failed']} of {o.ran} calls"
    if not o.ran:
        return f"{head}: not runnable: {_short(o.reasons['not-runnable'])}" if s["not-runnable"] else None
    extra = "".join(f"  {s[k]} {k}" for k in ("not-runnable", "not-eligible") if s[k])
    picked = f"  picked={','.join(o.picked)}" if o.picked else ""
    return (f"{head}: ok  calls={o.ran}  rounds={o.rounds}  max sent/rank={o.bytes} bytes{extra}{picked}  "
            f"({o.seconds:.2f} s)")


def _ranges(ns: set[int]) -> str:
    out, xs = [], sorted(ns)
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ",".join(out)


def _summary(outcomes: list[Outcome], verbose: bool) -> None:
    """The table: one row per (op, algorithm) that ran anywhere."""
    rows: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        rows[(o.task.op, o.task.algo)].append(o)
    fmt = "{:<16} {:<44} {:<34} {:<14} {:>6}  {:<22} {:>8}"
    print(fmt.format("op", "algorithm", "topologies", "ranks", "calls", "result", "time"))
    for (op, algo), os_ in rows.items():
        ran = [o for o in os_ if o.ran]
        if not ran:
            continue
        st = sum((o.statuses for o in os_), Counter())
        topos = list(dict.fromkeys("1x1xN" if o.task.flat else o.task.topo for o in ran))
        where = " ".join(topos)
        if len(where) > 34 and not verbose:
            where = where[:30] + " ..."
        result = f"FAIL {st['failed']}/{st['ok'] + st['failed']}" if st["failed"] else "ok"
        nr = sum(1 for o in os_ if o.statuses["not-runnable"])
        if nr:
            result += f", NR on {nr} topo"
        label = algo if algo != AUTO else "auto (HCCL's selection)"
        print(fmt.format(op, label, where, _ranges({o.nranks for o in ran}), st["ok"] + st["failed"], result,
                         f"{sum(o.seconds for o in os_):.1f}s"))


def _short(text: str, verbose: bool = False) -> str:
    first = text.splitlines()[0] if text else ""
    return first if verbose or len(first) <= _REASON_WIDTH else first[:_REASON_WIDTH - 3] + "..."


def _report(outcomes: list[Outcome], verbose: bool) -> int:
    """Not-runnable names, names eligible nowhere, and failures; returns the number of failed calls."""
    by_name: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_name[(o.task.op, o.task.algo)].append(o)
    nr = [(k, os_) for k, os_ in by_name.items() if any(o.statuses["not-runnable"] for o in os_)]
    if nr:
        print(f"\n# not runnable ({len(nr)} algorithms): pyhccl cannot build them on these machines")
        for (op, algo), os_ in nr:
            bad = [o for o in os_ if o.statuses["not-runnable"]]
            where = _places(bad, verbose)
            print(f"  {op:<16} {algo:<44} on {where}: {_short(bad[0].reasons['not-runnable'], verbose)}")
    nowhere = [(k, os_) for k, os_ in by_name.items()
               if all(not o.ran and not o.statuses["not-runnable"] for o in os_)]
    if nowhere:
        print(f"\n# not eligible on any machine of this run ({len(nowhere)} algorithms)"
              + ("" if verbose else "; -v lists them with the first reason"))
        if verbose:
            for (op, algo), os_ in nowhere:
                reason = next((o.reasons.get("not-eligible", "") for o in os_ if o.reasons), "")
                print(f"  {op:<16} {algo:<44} {_short(reason)}")
    failed = 0
    for (op, algo), os_ in by_name.items():
        bad = [o for o in os_ if o.statuses["failed"]]
        if not bad:
            continue
        n = sum(o.statuses["failed"] for o in bad)
        failed += n
        total = sum(o.ran for o in os_)
        print(f"\n# FAIL {op} {algo}: {n} of {total} calls failed, on {_places(bad, verbose)}")
        first, *more = [f for o in bad for f in o.failures]
        print(f"first: {_describe(first, verbose)}")
        lines = first.error.splitlines()
        print("\n".join(lines if verbose else lines[:40]))
        for f in more[:None if verbose else 5]:
            print(f"also: {_describe(f, verbose)}: {_short(f.error, verbose)}")
    return failed


def _places(outcomes: list[Outcome], verbose: bool) -> str:
    """``1x1xN (N=2-5,8) 1x2x4 ...``: the machines of ``outcomes``, flat ones as one range."""
    flat = {o.nranks for o in outcomes if o.task.flat}
    parts = ([f"1x1xN (N={_ranges(flat)})"] if flat else []) + list(dict.fromkeys(o.task.topo for o in outcomes
                                                                                    if not o.task.flat))
    text = " ".join(parts)
    return text if verbose or len(text) <= 80 else text[:76] + " ..."


def _describe(f, verbose: bool) -> str:
    """Where a failed call ran and its arguments, on one line."""
    c = f.call
    if c is None:                       # (its calls could not be made: the reason says why)
        what = "no call made"
    elif c.counts is not None:
        what = f"counts={c.counts} displs={c.displs}"
    elif c.matrix is not None:
        what = f"matrix={c.matrix}"
    elif c.items is not None:
        what = f"items={c.items}"
    else:
        what = f"count={c.count}" + (f" root={c.root}" if c.spec.rooted else "") + (" in place" if c.in_place else "")
    if len(what) > 200 and not verbose:
        what = what[:196] + " ..."
    return f"{f.algorithm or '-'} on {f.topo} ({f.nranks} ranks), {what}"
