"""The default communicator against native MPI: issue 19's targets, each figure next to its target.

Run from the repository root (launches its own MPI jobs)::

    .venv/bin/python benchmarks/fast_default.py --refresh             # 2, 4 and 8 ranks, every op
    .venv/bin/python benchmarks/fast_default.py --ranks 2 --ops allreduce --rounds 2

For each rank count and op it runs ``python -m pyhccl.bench OP --algo fast`` (the default
communicator: no tuning file, ordinary numpy arrays, the machine profile measured or read from
the cache; ``--refresh`` measures it again first) at 8 B-64 MiB, every size timed round-robin against native MPI in the same run
(``--rounds``: each keeps its best round; MPICH's heavy yield only where the ranks outnumber the
cores), and prints:

- geomean of native time / pyhccl time over 8 B-64 MiB (target >= 1.0), per op and over every op;
- AllReduce from 1 MiB: each ratio (target >= 1.5 at 2 ranks, >= 1.2 at 4 and 8; 16-64 MiB >= 2.0 at
  2 ranks, >= 1.5 at 4 and 8) with its % of the one-host memory bound (:mod:`pyhccl.bench.roofline`);
- 8 B-4 KiB AllReduce: pyhccl time / native time (target <= 1.5 at 2 ranks, <= 1.0 at 8);
- every op from 1 MiB: the worst ratio (target >= 1.0 in every cell).

Raw tables, JSON and a plot per op and rank count (busbw of the default communicator and of native MPI
against size, with the one-host memory bound; needs matplotlib) go to ``--out`` (default
benchmarks/results/fast/). Timings on a shared 2-core machine are noisy: the ratios of one run compare
like with like.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyhccl.launch import launch_env, mpiexec_command  # noqa: E402
from pyhccl.run.shm.flags import cores  # noqa: E402

OPS = ("allreduce", "allgather", "reducescatter", "broadcast", "alltoall", "reduce")
SIZES = "8,64,512,4K,32K,256K,1M,4M,16M,64M"
MIB = 1 << 20


def job_env(n: int) -> dict[str, str]:
    """The jobs' environment: MPICH's heavy yield only where the ranks outnumber the cores (native MPI then
    sleeps while it waits, as pyhccl's flag barrier yields), so that each side runs as it runs best."""
    extra = {"PYTHONPATH": str(ROOT)}
    if n > cores():
        extra["MPIR_CVAR_ENABLE_HEAVY_YIELD"] = "1"
    return launch_env(extra)


def refresh(n: int) -> None:
    """Measure the machine profile of ``n`` local ranks again (``python -m pyhccl.tune --refresh``)."""
    cmd = [*mpiexec_command(), "-n", str(n), sys.executable, "-m", "pyhccl.tune", "--refresh"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=job_env(n), timeout=600)
    print(proc.stdout.rstrip() or proc.stderr.rstrip(), flush=True)


def run(n: int, op: str, args: argparse.Namespace, out: Path) -> list[dict]:
    """One bench job; its rows (the default communicator's, with native MPI's time and the ratio)."""
    js = out / f"{op}_{n}.json"
    cmd = [*mpiexec_command(), "-n", str(n), sys.executable, "-m", "pyhccl.bench", op, "--algo", "fast",
           "--sizes", args.sizes, "--rounds", str(args.rounds), "--budget", str(args.budget), "--no-inplace",
           "--json", str(js)] + (["--plot", str(out / f"{op}_{n}.png")] if args.plot else [])
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=job_env(n), timeout=args.timeout)
    (out / f"{op}_{n}.txt").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        print(f"# {op} at {n} ranks failed (rc {proc.returncode}); see {out / f'{op}_{n}.txt'}", flush=True)
        return []
    print(f"# {op} at {n} ranks: {time.perf_counter() - t:.0f} s", flush=True)
    return json.loads(js.read_text())["rows"]


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def summary(results: dict[tuple[int, str], list[dict]], ranks: list[int]) -> list[str]:
    lines = ["# ratio = native MPI time / pyhccl time (higher is better); small = pyhccl time / native time",
             "# (lower is better); bound = % of the one-host memory bound; the default communicator, ordinary arrays"]
    for n in ranks:
        lines.append(f"\n## {n} ranks")
        every = []
        for op in OPS:
            rows = [r for r in results.get((n, op), []) if r["ratio"]]
            if not rows:
                continue
            ratios = [r["ratio"] for r in rows]
            every += ratios
            worst = worst_from_1mib(rows)
            algos = sorted({r["algo"] for r in rows if not r["algo"].endswith(":-")})
            lines.append(f"{op:<14} geomean 8 B-64 MiB {geomean(ratios):5.2f} (target >= 1.0)"
                         + (f"; from 1 MiB worst {worst['ratio']:.2f} at {_b(worst['size'])} (target >= 1.0)"
                            if worst else "") + f"; {', '.join(algos)}")
            if op == "allreduce":
                small = [r for r in rows if r["size"] <= 4096]
                target = 1.5 if n <= 2 else 1.0
                lines.append(f"  8 B-4 KiB time / native: " + ", ".join(
                    f"{_b(r['size'])} {1 / r['ratio']:.2f}" for r in small) + f" (target <= {target})")
                want = 1.5 if n <= 2 else 1.2
                want_big = 2.0 if n <= 2 else 1.5
                lines.append(f"  from 1 MiB (target >= {want}; 16-64 MiB >= {want_big}): " + ", ".join(
                    f"{_b(r['size'])} {r['ratio']:.2f} ({r['bound'] or 0:.0f}% of bound)" for r in rows
                    if r["size"] >= MIB))
        if every:
            lines.append(f"every op       geomean 8 B-64 MiB {geomean(every):5.2f}")
    return lines


def worst_from_1mib(rows: list[dict]) -> dict | None:
    """The row of lowest ratio from 1 MiB, or None."""
    big = [r for r in rows if r["size"] >= MIB]
    return min(big, key=lambda r: r["ratio"]) if big else None


def markdown(results: dict[tuple[int, str], list[dict]], ranks: list[int]) -> list[str]:
    """The README's tables: AllReduce per rank count, and every op's worst cell from 1 MiB."""
    def rows(n, op):
        return [r for r in results.get((n, op), []) if r["ratio"]]

    def cell(n, op, size):
        r = next((r for r in rows(n, op) if r["size"] == size), None)
        return "-" if r is None else f"{r['ratio']:.2f} ({r['bound'] or 0:.0f} %)"

    out = ["| default communicator | AllReduce geomean 8 B-64 MiB | AllReduce 8 B-4 KiB, time / native | "
           "AllReduce 1 MiB | 4 MiB | 16 MiB | 64 MiB | every op, geomean |", "|---|---|---|---|---|---|---|---|"]
    for n in ranks:
        ar = rows(n, "allreduce")
        small = [1 / r["ratio"] for r in ar if r["size"] <= 4096]
        every = [r["ratio"] for op in OPS for r in rows(n, op)]
        out.append(f"| {n} ranks | {geomean([r['ratio'] for r in ar]):.2f} | "
                   + (f"{min(small):.2f}-{max(small):.2f}" if small else "-") + " | "
                   + " | ".join(cell(n, "allreduce", k * MIB) for k in (1, 4, 16, 64)) + f" | {geomean(every):.2f} |")
    others = [op for op in OPS if op != "allreduce"]
    out += ["", "| from 1 MiB, worst cell | " + " | ".join(others) + " |", "|---" * (len(others) + 1) + "|"]
    for n in ranks:
        worst = []
        for op in others:
            w = worst_from_1mib(rows(n, op))
            worst.append("-" if w is None else f"{w['ratio']:.2f} ({_b(w['size'])})")
        out.append(f"| {n} ranks | " + " | ".join(worst) + " |")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="2,4,8", help="rank counts (default 2,4,8)")
    p.add_argument("--ops", default=",".join(OPS), help=f"ops (default {','.join(OPS)})")
    p.add_argument("--sizes", default=SIZES, help=f"sizes (default {SIZES})")
    p.add_argument("--rounds", type=int, default=3, help="round-robin rounds; each form keeps its best (default 3)")
    p.add_argument("--budget", type=float, default=0.2, help="seconds of timed iterations per measurement")
    p.add_argument("--refresh", action="store_true",
                   help="measure each rank count's machine profile again first (python -m pyhccl.tune --refresh)")
    p.add_argument("--timeout", type=float, default=1200, help="seconds one bench job may take")
    p.add_argument("--no-plot", dest="plot", action="store_false",
                   help="no plot per op and rank count (busbw, native MPI, the roofline; drawn where matplotlib is)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "fast"), help="where results go")
    args = p.parse_args(argv)
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("# no plots: matplotlib is not installed (pip install 'pyhccl[plot]')", flush=True)
            args.plot = False
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ranks = [int(x) for x in args.ranks.split(",")]
    for n in ranks if args.refresh else ():
        refresh(n)
    results = {(n, op): run(n, op, args, out) for n in ranks for op in args.ops.split(",")}
    lines = summary(results, ranks) + [""] + markdown(results, ranks)
    text = "\n".join(lines)
    print(text)
    (out / "summary.txt").write_text(text + "\n")
    return 0


def _b(n: int) -> str:
    for unit, k in (("MiB", MIB), ("KiB", 1024)):
        if n >= k and n % k == 0:
            return f"{n // k} {unit}"
    return f"{n} B"


if __name__ == "__main__":
    sys.exit(main())
