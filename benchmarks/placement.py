"""Placement on emulated hosts: block, round-robin, and round-robin taken as one server, against native MPI.

Run from the repository root (MPICH)::

    .venv/bin/python benchmarks/placement.py   # 4 ranks on 2 hosts: AllReduce, AllGather, ReduceScatter
    .venv/bin/python benchmarks/placement.py --ranks 8 --hosts 2 --sizes 1K,64K,4M,64M

For each op it runs ``python -m pyhccl.bench <op>`` under mpiexec three times, the ranks on
``--hosts`` emulated hosts (:func:`pyhccl.launch.emulated_hosts`; traffic between hosts goes
through MPICH's network module):

* ``block``: consecutive ranks per host, the layout detected (``1xHx(N/H)``);
* ``round-robin``: rank r on host r % H, the same layout detected, pyhccl numbering the ranks host
  by host underneath (docs/hosts.md);
* ``flat``: round-robin with ``PYHCCL_TOPO=1x1xN``, what pyhccl did before it mapped the placement:
  one server spanning the hosts.

and writes, under ``--results-dir`` (default ``benchmarks/results``), ``placement_<N>x<H>.txt`` (a
table: per op and size, native MPI's time, each run's pyhccl time, algorithm and ratio native /
pyhccl) and ``.json`` (every row). Nothing here asserts timings; the exit status is 1 if a job
failed or any value was wrong.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from pyhccl.launch import emulated_hosts, launch_env, mpiexec_command  # noqa: E402

OPS = ("allreduce", "allgather", "reducescatter")
RUNS = ("block", "round-robin", "flat")


def bench_job(op: str, args: argparse.Namespace, out: Path, placement: str, label: str,
              env_extra: dict | None = None, extra: tuple[str, ...] = ()) -> dict:
    """One ``python -m pyhccl.bench op`` job on ``args.hosts`` emulated hosts (``placement``); its JSON (meta and
    rows), or {} when it failed (its output printed). Also used by benchmarks/hierarchical.py."""
    hosts, env = emulated_hosts(args.hosts, args.ranks, placement)
    env["MPIR_CVAR_ENABLE_HEAVY_YIELD"] = "1"
    env.update(env_extra or {})
    cmd = [*mpiexec_command(), "-n", str(args.ranks), *hosts, sys.executable, "-m", "pyhccl.bench", op,
           "--sizes", args.sizes, "-d", "float32", "-n", str(args.iters), "-w", "2", "--budget", str(args.budget),
           "--no-inplace", *extra, "--json", str(out)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=launch_env(env), cwd=REPO, timeout=args.timeout)
    print(f"# {label}: rc {done.returncode} in {time.perf_counter() - t0:.0f} s", flush=True)
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], file=sys.stderr)
        return {}
    return json.loads(out.read_text())


def bench(op: str, run: str, args: argparse.Namespace, out: Path) -> dict:
    """One run of ``op``: block, round-robin, or round-robin taken as one server (flat)."""
    return bench_job(op, args, out, "block" if run == "block" else "round-robin", f"{op} {run}",
                     {"PYHCCL_TOPO": f"1x1x{args.ranks}"} if run == "flat" else None)


def table(results: dict, args: argparse.Namespace) -> str:
    """Per op and size: each run's native MPI time, pyhccl time and ratio, then the algorithms."""
    lines = [f"# placement on emulated hosts: {args.ranks} ranks on {args.hosts} hosts (MPICH), float32, out of place",
             "# times: slowest rank's mean (us); ratio = native MPI time / pyhccl time, same run (> 1: pyhccl faster)",
             "# a shared, noisy 2-core VM (other jobs running): treat differences under ~2x as noise",
             f"# {'op':<14}{'size':>10}" + "".join(f"{r + ' native':>20}{'pyhccl':>10}{'ratio':>7}" for r in RUNS)
             + "  algorithms (" + ", ".join(RUNS) + ")"]
    logs: dict[str, list[float]] = {r: [] for r in RUNS}
    for op in OPS:
        rows = {r: {row["size"]: row for row in results.get((op, r), {}).get("rows", [])} for r in RUNS}
        for size in sorted(set().union(*rows.values())):
            cells, algos = [], []
            for r in RUNS:
                row = rows[r].get(size)
                if row is None:
                    cells.append(f"{'-':>20}{'-':>10}{'-':>7}")
                    algos.append("-")
                    continue
                ratio = row["native_time_us"] / row["time_us"]
                logs[r].append(math.log(ratio))
                cells.append(f"{row['native_time_us']:>20.1f}{row['time_us']:>10.1f}{ratio:>7.2f}")
                algos.append(row["algo"].split(":")[-1])
            lines.append(f"  {op:<14}{size:>10}" + "".join(cells) + "  " + ", ".join(algos))
    lines.append("# geomean ratio to native: " + ", ".join(
        f"{r} {math.exp(sum(v) / len(v)):.2f}" for r, v in logs.items() if v))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--hosts", type=int, default=2)
    p.add_argument("--sizes", default="1K,64K,4M,64M", help="bytes, comma-separated (default 1K,64K,4M,64M)")
    p.add_argument("--ops", default=",".join(OPS), help=f"comma-separated, of {', '.join(OPS)}")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--budget", type=float, default=0.5, help="seconds per measurement, about (default 0.5)")
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("--results-dir", type=Path, default=HERE / "results")
    args = p.parse_args(argv)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stem = args.results_dir / f"placement_{args.ranks}x{args.hosts}"
    results, ok = {}, True
    for op in args.ops.split(","):
        for run in RUNS:
            got = bench(op, run, args, Path(f"{stem}_{op}_{run}.json"))
            ok &= bool(got) and all(row["wrong"] == 0 for row in got.get("rows", []))
            results[(op, run)] = got
    text = table(results, args)
    print(text, end="")
    stem.with_suffix(".txt").write_text(text)
    stem.with_suffix(".json").write_text(json.dumps({f"{op}:{run}": v for (op, run), v in results.items()}, indent=1))
    for op in args.ops.split(","):
        for run in RUNS:
            Path(f"{stem}_{op}_{run}.json").unlink(missing_ok=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
