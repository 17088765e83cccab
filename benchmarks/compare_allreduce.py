"""Compare pyhccl's AllReduce (every template and the default rule) with native MPI at several rank counts.

One invocation from the repository root runs everything::

    .venv/bin/python benchmarks/compare_allreduce.py            # N = 2, 4, 8; 8 B .. 64 MiB
    .venv/bin/python benchmarks/compare_allreduce.py --quick    # smoke test: up to 1 MiB, few iterations

The top-level process does not use MPI. For each rank count N it launches
``mpiexec -n N <python> benchmarks/compare_allreduce.py --worker ...``; every worker calls
:func:`pyhccl.bench.allreduce.run` once per message size with ``--algo auto,all`` (HCCL's
selection, the default, and each template), and rank 0 writes the rows as JSON. The
parent then prints one combined table (N, size, algo, pyhccl and native bus bandwidth, the ratio
native time / pyhccl time, #wrong), the geometric mean of the ratios per (N, algo) and the total
number of wrong values, and writes the table and the JSON rows to ``benchmarks/results/``.

Iteration counts are adaptive: sizes below ``--big-from`` (1 MiB) use ``--iters``/``--warmup``,
larger ones ``--big-iters``/``--big-warmup``, so that the full run stays within minutes even with
eight busy-polling ranks on two cores. Nothing here asserts anything about timings.

Exit status: 0 if every worker finished and no value was wrong, 1 otherwise, 2 on a bad command line.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))  # benchmark this checkout's pyhccl

from pyhccl import units  # noqa: E402  (no MPI: the parent process must not initialise it)
from pyhccl.launch import mpiexec_command  # noqa: E402
from pyhccl.plan import ALLREDUCE_ALGOS  # noqa: E402

DEFAULT_RESULTS = HERE / "results"
TEMPLATES = tuple(ALLREDUCE_ALGOS)


# --------------------------------------------------------------------------- command line helpers


def parse_size(text: str) -> int:
    """:func:`pyhccl.units.parse_size` for argparse (a positive size)."""
    try:
        value = units.parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expecting a positive size, got {text!r}")
    return value


def parse_ranks(text: str) -> list[int]:
    """Parse a comma-separated list of rank counts such as ``"2,4,8"``.

    Args:
        text: The list as given on the command line.

    Returns:
        The rank counts, in the given order, without duplicates.

    Raises:
        argparse.ArgumentTypeError: If an entry is not an integer >= 1.
    """
    out: list[int] = []
    for part in text.split(","):
        try:
            n = int(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expecting rank counts like 2,4,8, got {text!r}") from None
        if n < 1:
            raise argparse.ArgumentTypeError(f"expecting rank counts >= 1, got {n}")
        if n not in out:
            out.append(n)
    return out


def size_ladder(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """Sizes ``min_bytes * factor**k`` up to ``max_bytes``, plus ``max_bytes`` itself if it is off the ladder.

    Args:
        min_bytes: The smallest size.
        max_bytes: The largest size; always included.
        factor: The step factor (>= 2).

    Returns:
        The increasing list of sizes.
    """
    out, s = [], min_bytes
    while s <= max_bytes:
        out.append(s)
        s *= factor
    if out[-1] != max_bytes:
        out.append(max_bytes)
    return out


def build_parser() -> argparse.ArgumentParser:
    """The command line of both the parent and the ``--worker`` mode."""
    p = argparse.ArgumentParser(
        description="Compare pyhccl's AllReduce (each template and the default rule) with native MPI.",
        epilog="ratio = native MPI time / pyhccl time (out-of-place): above 1 means pyhccl is faster.")
    p.add_argument("--ranks", type=parse_ranks, default=[2, 4, 8], help="rank counts N (default 2,4,8)")
    p.add_argument("--min-bytes", type=parse_size, default=8, help="smallest size (default 8)")
    p.add_argument("--max-bytes", type=parse_size, default=None,
                   help="largest size, always included (default 64M; 1M with --quick)")
    p.add_argument("--factor", type=int, default=8, help="size step factor (default 8)")
    p.add_argument("--iters", type=int, default=None, help="timed iterations below --big-from (default 20; 5 quick)")
    p.add_argument("--warmup", type=int, default=None, help="warm-up iterations below --big-from (default 5; 1 quick)")
    p.add_argument("--big-from", type=parse_size, default=1 << 20,
                   help="sizes from here on use --big-iters/--big-warmup (default 1M)")
    p.add_argument("--big-iters", type=int, default=None, help="timed iterations for big sizes (default 3; 2 quick)")
    p.add_argument("--big-warmup", type=int, default=None, help="warm-up iterations for big sizes (default 1)")
    p.add_argument("--datatype", default="float", help="datatype passed to the bench as -d (default float)")
    p.add_argument("--quick", action="store_true", help="smoke test: up to 1M, few iterations")
    p.add_argument("--mpiexec", default=None,
                   help="launcher command, split like a shell would (default: PYHCCL_MPIEXEC, else the "
                        "mpiexec next to python, else on PATH)")
    p.add_argument("--timeout", type=float, default=1800.0,
                   help="seconds before a worker is considered hung and killed (default 1800)")
    p.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS,
                   help=f"where the table and JSON go (default {DEFAULT_RESULTS.relative_to(REPO)})")
    p.add_argument("--worker", metavar="JSON_OUT", default=None, help=argparse.SUPPRESS)
    return p


def resolve_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse and validate the command line, filling the ``--quick``-dependent defaults.

    Args:
        argv: The arguments (``sys.argv[1:]`` if None).

    Returns:
        The namespace, with every option set.
    """
    p = build_parser()
    a = p.parse_args(argv)
    quick_defaults = {"iters": 5, "warmup": 1, "big_iters": 2, "big_warmup": 1}
    full_defaults = {"iters": 20, "warmup": 5, "big_iters": 3, "big_warmup": 1}
    for key, value in (quick_defaults if a.quick else full_defaults).items():
        if getattr(a, key) is None:
            setattr(a, key, value)
    if a.max_bytes is None:
        a.max_bytes = 1 << 20 if a.quick else 64 << 20
    if a.max_bytes < a.min_bytes:
        p.error(f"expecting --max-bytes >= --min-bytes, got {a.min_bytes} and {a.max_bytes}")
    if a.factor < 2:
        p.error(f"expecting --factor >= 2, got {a.factor}")
    if min(a.iters, a.big_iters) < 1 or min(a.warmup, a.big_warmup) < 0:
        p.error("expecting iteration counts >= 1 and warm-up counts >= 0")
    if a.timeout <= 0:
        p.error(f"expecting --timeout > 0, got {a.timeout}")
    return a


def schedule(a: argparse.Namespace) -> list[tuple[int, int, int]]:
    """``(size, iters, warmup)`` for every size of the run."""
    return [(s, a.big_iters, a.big_warmup) if s >= a.big_from else (s, a.iters, a.warmup)
            for s in size_ladder(a.min_bytes, a.max_bytes, a.factor)]


# --------------------------------------------------------------------------- worker (under mpiexec)


def worker(a: argparse.Namespace) -> int:
    """Run the benchmark on ``MPI.COMM_WORLD``; rank 0 rewrites ``a.worker`` (JSON) after every size.

    Any exception on any rank aborts the whole job, so that a failure cannot leave the other ranks
    waiting in a collective.

    Args:
        a: The parsed command line; ``a.worker`` is the JSON output path.

    Returns:
        0 (wrong values are reported in the rows, not by the exit status).
    """
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    try:
        from dataclasses import asdict

        from pyhccl.bench.allreduce import run

        mpi_version = MPI.Get_library_version().splitlines()[0].strip()
        rows: list[dict[str, Any]] = []
        for size, iters, warmup in schedule(a):
            t0 = time.perf_counter()
            argv = ["-b", str(size), "-e", str(size), "-n", str(iters), "-w", str(warmup),
                    "-c", "1", "-d", a.datatype, "--algo", "auto,all"]
            _, got = run(comm, argv)     # native MPI is measured once per size, beside every algorithm
            rows += [{"nranks": n, "iters": iters, "warmup": warmup, **asdict(r)} for r in got]
            if rank == 0:
                _write_json(Path(a.worker), {"nranks": n, "mpi": mpi_version, "rows": rows})
                print(f"[N={n}] {units.format_size(size):>5} done in {time.perf_counter() - t0:6.1f} s "
                      f"(-n {iters} -w {warmup})", file=sys.stderr, flush=True)
    except BaseException as e:  # noqa: BLE001 -- any failure must abort every rank
        import traceback

        print(f"[N={n} rank {rank}] worker failed: {type(e).__name__}: {e}", file=sys.stderr)
        traceback.print_exc()
        sys.stderr.flush()
        comm.Abort(1)
    return 0


def _write_json(path: Path, obj: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1))
    os.replace(tmp, path)


# --------------------------------------------------------------------------- parent


def launch(a: argparse.Namespace, launcher: list[str], n: int, out: Path) -> tuple[int | None, str]:
    """Run one worker job of ``n`` ranks and wait for it.

    Args:
        a: The parsed command line.
        launcher: The ``mpiexec`` command.
        n: The number of ranks.
        out: Where rank 0 writes its JSON.

    Returns:
        ``(returncode, problem)``: the job's exit status (None if it was killed after ``--timeout``)
        and a description of what went wrong, empty if nothing did.
    """
    cmd = [*launcher, "-n", str(n), sys.executable, str(Path(__file__).resolve()), "--worker", str(out),
           "--min-bytes", str(a.min_bytes), "--max-bytes", str(a.max_bytes), "--factor", str(a.factor),
           "--iters", str(a.iters), "--warmup", str(a.warmup), "--big-from", str(a.big_from),
           "--big-iters", str(a.big_iters), "--big-warmup", str(a.big_warmup), "--datatype", a.datatype]
    print(f"# N={n}: {shlex.join(cmd)}", file=sys.stderr, flush=True)
    try:
        proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True)
    except OSError as e:
        return 127, f"N={n}: cannot start {launcher[0]!r}: {e}"
    try:
        rc = proc.wait(timeout=a.timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return None, f"N={n}: no result after {a.timeout:.0f} s (hang?); the job was killed"
    except KeyboardInterrupt:
        _kill_group(proc)
        raise
    if rc != 0:
        return rc, f"N={n}: the worker job exited with status {rc}"
    if not out.exists():
        return rc, f"N={n}: the worker job exited normally but wrote no results to {out}"
    return rc, ""


def _kill_group(proc: subprocess.Popen) -> None:
    """Terminate the launcher's process group (it was started in its own session)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


def geomean(values: Sequence[float]) -> float | None:
    """The geometric mean of the positive values, or None if there are none."""
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def group(row: dict[str, Any]) -> str:
    """The geometric-mean group: ``auto`` (the bench labels it ``auto:<chosen>``) or the template name."""
    return "auto" if row["algo"].startswith("auto:") else row["algo"]


def native_busbw(row: dict[str, Any]) -> float | None:
    """Native MPI's bus bandwidth in GB/s (same bus factor as pyhccl's, so busbw * pyhccl time / native time)."""
    nat = row.get("native_time_us")
    return row["busbw"] * row["time_us"] / nat if nat else None


def _fmt(x: float | None, spec: str) -> str:
    """``format(x, spec)``, or a ``-`` of the same width (``spec`` is like ``>9.3f``) if ``x`` is None."""
    return format(x, spec) if x is not None else format("-", spec.split(".")[0])


def format_report(rows: list[dict[str, Any]], meta: dict[str, Any], problems: list[str]) -> str:
    """The combined table, the per-(N, algo) geometric means and the final #wrong line.

    Args:
        rows: Every worker's rows, each with ``nranks`` added.
        meta: The run's description (printed in the header).
        problems: Worker failures, printed at the end.

    Returns:
        The report text.
    """
    lines = [
        f"# pyhccl AllReduce vs native MPI -- {meta['date']}, host {meta['host']} ({meta['cpus']} CPUs), "
        f"{meta.get('mpi', 'MPI unknown')}",
        f"# datatype {meta['datatype']}, op sum; iters {meta['iters']}/warmup {meta['warmup']} below "
        f"{units.format_size(meta['big_from'])}, {meta['big_iters']}/{meta['big_warmup']} from there on",
        "# time = slowest rank's mean, out-of-place; busbw in GB/s (nccl-tests' bus bandwidth);",
        "# ratio = native MPI time / pyhccl time (>1: pyhccl faster); #wrong = out-of-place + in-place wrong values",
        "# auto:X = HCCL's selection (the default), which chose algorithm X",
        "",
        f"{'N':>3} {'size':>9} {'algo':<40} {'time(us)':>11} {'busbw':>8} {'nat.time':>11} {'nat.busbw':>9} "
        f"{'ratio':>6} {'#wrong':>6}",
    ]
    order = {g: i for i, g in enumerate(("auto", *TEMPLATES))}
    key = lambda r: (r["nranks"], r["size"], order.get(group(r), 99))  # noqa: E731
    last = None
    for r in sorted(rows, key=key):
        if last is not None and (r["nranks"], r["size"]) != last:
            lines.append("")
        last = (r["nranks"], r["size"])
        lines.append(f"{r['nranks']:>3} {units.format_size(r['size']):>9} {r['algo']:<40} {r['time_us']:>11.2f} "
                     f"{r['busbw']:>8.3f} {_fmt(r['native_time_us'], '>11.2f')} {_fmt(native_busbw(r), '>9.3f')} "
                     f"{_fmt(r['ratio'], '>6.2f')} {r['wrong'] + r['ip_wrong']:>6}")

    groups = ["auto", *TEMPLATES]
    groups += sorted({group(r) for r in rows} - set(groups))
    lines += ["", "# Geometric mean of ratio (native time / pyhccl time) per (N, algo), over all sizes",
              f"{'N':>3} " + " ".join(f"{g:>11}" for g in groups)]
    for n in sorted({r["nranks"] for r in rows}):
        cells = [geomean([r["ratio"] for r in rows if r["nranks"] == n and group(r) == g]) for g in groups]
        lines.append(f"{n:>3} " + " ".join(_fmt(c, ">11.3f") for c in cells))
    cells = [geomean([r["ratio"] for r in rows if group(r) == g]) for g in groups]
    lines.append(f"{'all':>3} " + " ".join(_fmt(c, ">11.3f") for c in cells))

    wrong = sum(r["wrong"] + r["ip_wrong"] for r in rows)
    lines.append("")
    for p in problems:
        lines.append(f"# PROBLEM: {p}")
    status = "OK" if wrong == 0 and not problems else "FAILED"
    lines.append(f"# Total #wrong: {wrong} over {len(rows)} rows; workers failed: {len(problems)} -> {status}")
    return "\n".join(lines) + "\n"


def parent(a: argparse.Namespace) -> int:
    """Launch one worker job per rank count, then print and save the combined report.

    Args:
        a: The parsed command line.

    Returns:
        0 if every job finished and no value was wrong, else 1.
    """
    try:
        launcher = shlex.split(a.mpiexec) if a.mpiexec else list(mpiexec_command())
    except (FileNotFoundError, ValueError) as e:
        print(f"compare_allreduce: {e}", file=sys.stderr)
        return 2
    if not launcher:
        print("compare_allreduce: --mpiexec is empty", file=sys.stderr)
        return 2
    sched = schedule(a)
    print(f"# sizes {', '.join(units.format_size(s) for s, _, _ in sched)}; ranks {a.ranks}; "
          f"launcher {shlex.join(launcher)}", file=sys.stderr, flush=True)
    t_start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    mpi = None
    per_n_seconds: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="compare_allreduce.") as tmp:
        for n in a.ranks:
            out = Path(tmp) / f"n{n}.json"
            t0 = time.perf_counter()
            _, problem = launch(a, launcher, n, out)
            per_n_seconds[n] = round(time.perf_counter() - t0, 1)
            if problem:
                problems.append(problem)
                print(f"compare_allreduce: {problem}", file=sys.stderr, flush=True)
            if out.exists():  # keep partial rows of a failed job too
                try:
                    data = json.loads(out.read_text())
                except json.JSONDecodeError as e:
                    problems.append(f"N={n}: unreadable results {out}: {e}")
                    continue
                rows += data["rows"]
                mpi = mpi or data.get("mpi")
    elapsed = time.perf_counter() - t_start
    meta = {
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
        "mpi": mpi, "launcher": launcher, "ranks": a.ranks, "sizes": [s for s, _, _ in sched],
        "datatype": a.datatype, "iters": a.iters, "warmup": a.warmup, "big_from": a.big_from,
        "big_iters": a.big_iters, "big_warmup": a.big_warmup, "elapsed_s": round(elapsed, 1),
        "elapsed_s_per_nranks": per_n_seconds, "problems": problems,
    }
    report = format_report(rows, meta, problems)
    report += f"# Run time: {elapsed:.1f} s ({', '.join(f'N={n}: {s} s' for n, s in per_n_seconds.items())})\n"
    print(report, end="")

    stem = "allreduce_compare_quick" if a.quick else "allreduce_compare"
    try:
        a.results_dir.mkdir(parents=True, exist_ok=True)
        (a.results_dir / f"{stem}.txt").write_text(report)
        _write_json(a.results_dir / f"{stem}.json", {"meta": meta, "rows": rows})
        print(f"# wrote {a.results_dir / stem}.txt and .json", file=sys.stderr)
    except OSError as e:
        print(f"compare_allreduce: cannot write results to {a.results_dir}: {e}", file=sys.stderr)
        return 1
    wrong = sum(r["wrong"] + r["ip_wrong"] for r in rows)
    return 1 if wrong or problems else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: the parent by default, a benchmark worker with ``--worker``."""
    a = resolve_args(argv)
    return worker(a) if a.worker else parent(a)


if __name__ == "__main__":
    sys.exit(main())
