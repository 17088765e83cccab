"""The benchmark harness: nccl-tests' flags, timing loop, data check and table writer.

Follows nccl-tests src/common.cu (BenchTime, TimeTest, setupArgs) and src/util.cu (the table,
"Out of bounds values", "Avg bus bandwidth"): warm up, time without checking, then re-seed,
run once and check with inputs whose exact result does not depend on reduction order.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from dataclasses import asdict, dataclass, fields
from typing import Callable, Sequence

import numpy as np
from mpi4py import MPI

from ..core import settings, units
from ..comm.buffers import SUPPORTED_DTYPES, dtype_by_name
from ..topo import parse_topo

__all__ = ["BenchArgs", "Row", "parse_args", "parse_size", "sizes", "fill", "time_call", "write_rows",
           "write_footer", "write_json", "write_csv", "count_wrong", "UsageError"]

OPS = ("sum", "prod", "max", "min")


class UsageError(Exception):
    """A bad command line: rank 0 prints it, every rank exits with status 2."""


@dataclass(frozen=True)
class BenchArgs:
    op_name: str
    minbytes: int
    maxbytes: int
    stepfactor: int
    stepbytes: int | None
    iters: int
    warmup: int
    check: bool
    redops: tuple[str, ...]
    dtypes: tuple[str, ...]
    algo: str
    native: bool
    json: str | None
    seed: int
    csv: str | None = None
    topo: str | None = None
    root: int = 0
    inplace: bool = True
    budget: float | None = None
    blocks: int = 1
    tune: str | None = None
    tuning: str | None = None
    report: str | None = None
    plot: str | None = None
    size_list: tuple[int, ...] = ()
    shared: bool = False
    rounds: int = 1


@dataclass
class Row:
    """One line of the table (nccl-tests' columns plus algorithm and native MPI).

    ``size`` and ``count`` are nccl-tests': the whole buffer (N blocks for AllGather,
    ReduceScatter, AlltoAll, Gather, Scatter). Times are None where the form does not exist
    (Bcast has no in-place form) or the communicator refused the call.
    """

    size: int
    count: int
    type: str
    redop: str
    root: int
    time_us: float | None
    algbw: float | None
    busbw: float | None
    wrong: int
    ip_time_us: float | None
    ip_algbw: float | None
    ip_busbw: float | None
    ip_wrong: int | None
    algo: str
    native_time_us: float | None
    ratio: float | None
    nbytes: int = 0          # HCCL's data size D of the call (what selection is given)
    bound: float | None = None      # % of the roofline's bound (pyhccl.bench.roofline), out of place


def parse_size(text: str) -> int:
    """:func:`pyhccl.core.units.parse_size`, raising UsageError."""
    try:
        return units.parse_size(text)
    except ValueError as e:
        raise UsageError(str(e)) from None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # raise instead of printing on every rank
        raise UsageError(f"{self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> None:
        raise SystemExit(status)


def parse_args(op_name: str, argv: Sequence[str] | None, algo_help: str) -> BenchArgs:
    """nccl-tests' flags: -b -e -f -i -n -w -c -o -d -r, plus --algo, --topo, --no-native, --json and --csv."""
    p = _Parser(prog=f"python -m pyhccl.bench {op_name}", description=f"Benchmark {op_name}.")
    p.add_argument("-b", "--minbytes", default="8", help="smallest size (default 8)")
    p.add_argument("-e", "--maxbytes", default="4M", help="largest size (default 4M)")
    p.add_argument("-f", "--stepfactor", type=int, default=8, help="multiply the size by this (default 8)")
    p.add_argument("-i", "--stepbytes", default=None, help="add this many bytes instead of multiplying")
    p.add_argument("-n", "--iters", type=int, default=20, help="timed iterations (default 20)")
    p.add_argument("-w", "--warmup_iters", type=int, default=5, help="warm-up iterations (default 5)")
    p.add_argument("-c", "--check", type=int, default=1, help="check the data: 0 or 1 (default 1)")
    p.add_argument("-o", "--op", default="sum", help=f"reduce op: {', '.join(OPS)} or all (default sum)")
    p.add_argument("-d", "--datatype", default="float",
                   help=f"dtype: {', '.join(SUPPORTED_DTYPES)} (or float, double, half, int), or all")
    p.add_argument("--algo", default="auto,fast", help=algo_help)
    p.add_argument("--no-native", action="store_true", help="skip the native MPI measurement")
    p.add_argument("-r", "--root", type=int, default=0, help="root of the rooted collectives (default 0)")
    p.add_argument("--topo", default=None, metavar="SPEC",
                   help="the machine to emulate, passed to pyhccl.Communicator(topo=...), e.g. 1x2x4")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the rows as JSON to FILE")
    p.add_argument("--csv", default=None, metavar="FILE", help="also write the rows as CSV to FILE")
    p.add_argument("--seed", type=int, default=0, help="seed of the checked inputs (default 0)")
    p.add_argument("--sizes", default=None, metavar="LIST",
                   help="explicit sizes instead of -b/-e/-f, comma-separated, e.g. 8,4K,64M")
    p.add_argument("--no-inplace", action="store_true", help="time the out-of-place form only")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="cap the timed iterations of one measurement at about SECONDS (large sizes run fewer)")
    p.add_argument("--blocks", type=int, default=1,
                   help="time in this many blocks and report the median block (robust to stalls; default 1)")
    p.add_argument("--tune", default=None, metavar="FILE",
                   help="write a tuning file: the measured times and the fitted cost model (use with --algo all)")
    p.add_argument("--tuning", default=None, metavar="FILE",
                   help="a tuning file for the 'tuned' column and the regret report (default: --tune's FILE, else "
                        "PYHCCL_TUNING_FILE as the Communicator reads it)")
    p.add_argument("--report", default=None, choices=("regret",),
                   help="regret: per size, the HCCL profile's and the tuned choice against the best measured")
    p.add_argument("--plot", default=None, metavar="FILE.png",
                   help="plot busbw against size per algorithm (needs matplotlib: pip install pyhccl[plot])")
    p.add_argument("--buffers", default="numpy", choices=("numpy", "shared"),
                   help="numpy: ordinary arrays (default); shared: arrays from Communicator.alloc_shared, which "
                        "the @shm engine reads in place (native MPI still runs on ordinary arrays)")
    p.add_argument("--rounds", type=int, default=1,
                   help="measure every algorithm (and native MPI) this many times, round-robin, and keep each one's "
                        "fastest: a slow spell of the machine then spoils one round, not one algorithm (default 1)")
    a = p.parse_args(argv)
    minb, maxb = parse_size(a.minbytes), parse_size(a.maxbytes)
    step = parse_size(a.stepbytes) if a.stepbytes is not None else None
    if maxb < minb:
        raise UsageError(f"expecting -e >= -b, got -b {minb} -e {maxb}")
    if step is None and a.stepfactor < 2 and minb != maxb:
        raise UsageError(f"expecting -f >= 2, got {a.stepfactor}")
    if step is not None and step <= 0:
        raise UsageError(f"expecting -i > 0, got {a.stepbytes}")
    if a.iters < 1 or a.warmup_iters < 0:
        raise UsageError(f"expecting -n >= 1 and -w >= 0, got -n {a.iters} -w {a.warmup_iters}")
    if a.check not in (0, 1):
        raise UsageError(f"expecting -c 0 or 1, got {a.check}")
    redops = OPS if a.op == "all" else (a.op.lower(),)
    if redops[0] not in OPS:
        raise UsageError(f"unknown op {a.op!r}; valid: {', '.join(OPS)}, all")
    dtypes = tuple(SUPPORTED_DTYPES) if a.datatype == "all" else (a.datatype,)
    try:
        dtypes = tuple(str(dtype_by_name(d)) for d in dtypes)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if a.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError("--plot needs matplotlib: pip install 'pyhccl[plot]'") from None
    if a.rounds < 1:
        raise UsageError(f"expecting --rounds >= 1, got {a.rounds}")
    if a.blocks < 1:
        raise UsageError(f"expecting --blocks >= 1, got {a.blocks}")
    if a.budget is not None and not a.budget > 0:
        raise UsageError(f"expecting --budget > 0 seconds, got {a.budget}")
    if (a.tune or a.report) and not any(t.strip().lower() in ("all", "hccl", "templates") for t in a.algo.split(",")):
        raise UsageError("--tune and --report measure every algorithm: add --algo all")
    if a.topo is not None:
        try:
            parse_topo(a.topo)
        except (TypeError, ValueError) as e:
            raise UsageError(f"--topo: {e}") from None
    tuning = a.tuning
    if tuning is None and a.tune is None:
        tuning = settings.tuning_file() or None         # the file the Communicator would use
    return BenchArgs(op_name, minb, maxb, a.stepfactor, step, a.iters, a.warmup_iters, bool(a.check),
                     redops, dtypes, a.algo, not a.no_native, a.json, a.seed, a.csv, a.topo, a.root,
                     not a.no_inplace, a.budget, a.blocks, a.tune, tuning, a.report, a.plot,
                     tuple(parse_size(t) for t in a.sizes.split(",") if t.strip()) if a.sizes else (),
                     a.buffers == "shared", a.rounds)


def sizes(args: BenchArgs, itemsize: int, granularity: int = 1) -> list[int]:
    """Sizes from -b to -e (or ``--sizes``), rounded down to whole elements times ``granularity``."""
    unit = itemsize * granularity
    if args.size_list:
        return list(dict.fromkeys(s // unit * unit for s in args.size_list))
    out, size = [], args.minbytes
    while size <= args.maxbytes:
        unit = itemsize * granularity
        s = size // unit * unit
        if not out or out[-1] != s:
            out.append(s)
        if args.stepbytes:
            size += args.stepbytes
        else:
            size = size * args.stepfactor if size else 1
            if args.minbytes == args.maxbytes:
                break
    return out


def fill(arr: np.ndarray, seed: int, rank: int, redop: str | None) -> None:
    """Small-integer values from (seed, rank, index): exact under any reduction order.

    SUM: -2..2 (0..4 unsigned); PROD: +-1 (1 or 2 unsigned, wrapping exactly); MAX/MIN: 0..4.
    ``redop=None`` (ops that only move data): values that tell ranks apart, 0..126 for 1-byte
    types and bfloat16 (exact to 256), 0..2038 otherwise (float16 is exact to 2048).
    """
    idx = np.arange(arr.size, dtype=np.int64)
    if redop is None:
        small = arr.dtype.itemsize == 1 or arr.dtype.name == "bfloat16"
        arr[...] = ((seed * 31 + rank * 37 + idx * 13) % (127 if small else 2039)).astype(arr.dtype)
        return
    v = (seed * 31 + rank * 7 + idx * 13) % 5
    signed = arr.dtype.kind != "u"
    if redop == "sum" and signed:
        v = v - 2
    elif redop == "prod":
        v = np.where(v % 2 == 0, 1, -1) if signed else 1 + (v == 4)
    arr[...] = v.astype(arr.dtype)


def time_call(comm: MPI.Intracomm, fn: Callable[[], None], iters: int, warmup: int,
              budget: float | None = None, blocks: int = 1) -> float:
    """Seconds per call, the slowest rank's average over ``iters`` after ``warmup`` calls.

    With ``budget`` (seconds), ``iters`` drops so that the timed loop takes about that long,
    judged from the slowest rank's warm-up calls (at least one); every rank runs the same count.
    With ``blocks`` > 1 the timed calls run in that many blocks (one barrier before each) and the
    median block's slowest-rank average is returned: a scheduler stall spoils one block, not the figure.
    """
    t0 = MPI.Wtime()
    for _ in range(max(warmup, 1 if budget else 0)):
        fn()
    if budget:
        per = comm.allreduce((MPI.Wtime() - t0) / max(warmup, 1), op=MPI.MAX)
        iters = max(1, min(iters, int(budget / per) if per > 0 else iters))
    if blocks <= 1:
        comm.Barrier()
        t0 = MPI.Wtime()
        for _ in range(iters):
            fn()
        dt = (MPI.Wtime() - t0) / iters
        return comm.allreduce(dt, op=MPI.MAX)
    counts = [len(part) for part in np.array_split(np.arange(iters), min(blocks, iters))]
    mine = np.empty(len(counts))
    for i, k in enumerate(counts):
        comm.Barrier()
        t0 = MPI.Wtime()
        for _ in range(k):
            fn()
        mine[i] = (MPI.Wtime() - t0) / k
    slowest = np.empty_like(mine)
    comm.Allreduce(mine, slowest, op=MPI.MAX)
    return float(np.median(slowest))


_HEAD = ("#{:>11} {:>12} {:>9} {:>6} {:>5}  {:>9} {:>8} {:>8} {:>6} {:>6}  {:>9} {:>8} {:>8} {:>6}  {:<40} {:>9} {:>6}")
_LINE = (" {:>11} {:>12} {:>9} {:>6} {:>5}  {:>9} {:>8} {:>8} {:>6} {:>6}  {:>9} {:>8} {:>8} {:>6}"
         "  {:<40} {:>9} {:>6}")


def write_rows(rows: list[Row], out=None, *, header: bool = True) -> None:
    """The nccl-tests table: out-of-place and in-place columns, algorithm, native MPI, ratio."""
    out = out or sys.stdout
    if header:
        print(_HEAD.format("", "", "", "", "", "out-of-place", "", "", "", "", "in-place", "", "", "", "", "native",
                           ""), file=out)
        print(_HEAD.format("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "bound", "#wrong",
                           "time", "algbw", "busbw", "#wrong", "algo", "time", "ratio"), file=out)
        print(_HEAD.format("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "(%)", "",
                           "(us)", "(GB/s)", "(GB/s)", "", "", "(us)", "(x)"), file=out)
    for r in rows:
        print(_LINE.format(r.size, r.count, r.type, r.redop, r.root, _f(r.time_us, 2), _f(r.algbw, 3),
                           _f(r.busbw, 3), _f(r.bound, 0), r.wrong, _f(r.ip_time_us, 2), _f(r.ip_algbw, 3),
                           _f(r.ip_busbw, 3),
                           "-" if r.ip_wrong is None else r.ip_wrong, r.algo, _f(r.native_time_us, 2),
                           _f(r.ratio, 2)), file=out)
    out.flush()


def _f(x: float | None, digits: int) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def write_footer(rows: list[Row], out=None) -> None:
    """nccl-tests' closing lines, plus the geometric mean of the native ratios."""
    out = out or sys.stdout
    wrong = count_wrong(rows)
    print(f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}", file=out)
    bws = [r.busbw for r in rows if r.busbw is not None]
    if bws:
        print(f"# Avg bus bandwidth    : {sum(bws) / len(bws):.4f}", file=out)
    ratios = [r.ratio for r in rows if r.ratio]
    if ratios:
        print(f"# Geomean ratio to native MPI (native time / pyhccl time) : {_geomean(ratios):.3f}", file=out)
    for kind, what in _KINDS.items():
        mine = [r.ratio for r in rows if r.ratio and r.algo.startswith(kind + ":")]
        if mine and len(mine) < len(ratios):
            print(f"#   {kind + ':':<6} {what:<52}: {_geomean(mine):.3f}", file=out)
    out.flush()


#: Row labels' prefixes the footer gives a geomean of their own (the README's first command prints both).
_KINDS = {"auto": "HCCL's choice (PYHCCL_PROFILE=hccl)", "fast": "the default communicator (pyhccl's fast paths)",
          "tuned": "the tuning file's choice"}


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def count_wrong(rows: list[Row]) -> int:
    """#wrong over every row, out of place and in place."""
    return sum(r.wrong + (r.ip_wrong or 0) for r in rows)


def write_csv(rows: list[Row], path: str) -> None:
    """The rows as CSV, one column per :class:`Row` field (empty where a value is None)."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[fl.name for fl in fields(Row)])
        w.writeheader()
        w.writerows(asdict(r) for r in rows)


def write_json(rows: list[Row], path: str, meta: dict) -> None:
    """The same rows as JSON: ``{"meta": ..., "rows": [...]}``."""
    with open(path, "w") as f:
        json.dump({"meta": meta, "rows": [asdict(r) for r in rows]}, f, indent=1)
