"""The standard comparison: default selection with and without a tuning file, every algorithm, native MPI.

Run from the repository root::

    .venv/bin/python benchmarks/compare.py              # AllReduce; 2, 4, 8 ranks on two layouts each; 8 B .. 64 MiB
    .venv/bin/python benchmarks/compare.py --quick      # smoke test: two small layouts, up to 256 KiB

For each configuration (ranks:topology) the script runs ``python -m pyhccl.bench`` twice under
``mpiexec`` (this process does not use MPI):

1. ``--algo all --tune FILE``: every eligible algorithm and native MPI at every size; the tuning
   file (measured points and the fitted cost model) goes to ``results/tuning/``.
2. ``--algo all --tuning FILE --report regret --plot``: a fresh measurement of everything, with the
   default selection run twice: with HCCL's profile (``auto``) and with the tuning file (``tuned``);
   the regret of each profile is computed against this second run's best, so the tuned numbers
   are out of sample.

Then it prints and writes one table: per configuration and size, native MPI's busbw, each
profile's choice, its regret and its ratio to native (native time / pyhccl time), and the
geometric means. Outputs under ``--results-dir`` (default ``benchmarks/results``):
``<op>_compare.txt``, ``<op>_compare.json``, and per configuration ``<op>_<N>_<topo>.{json,csv,png}``
and the bench's own text output ``<op>_<N>_<topo>.txt``. Nothing here asserts timings; the exit
status is 1 if a job failed or any value was wrong.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from pyhccl.launch import launch_env, mpiexec_command  # noqa: E402  (no MPI in this process)
from pyhccl.core.units import format_size, parse_size  # noqa: E402

CONFIGS = "2:1x1x2,2:1x2x1,4:1x1x4,4:1x2x2,8:1x2x4,8:1x1x8"
QUICK_CONFIGS = "2:1x2x1,4:1x2x2"
SIZES = "8,64,512,4K,32K,256K,2M,16M,64M"
QUICK_SIZES = "8,512,32K,256K"


def yield_env(n: int) -> dict[str, str]:
    """MPICH busy-polls; with more ranks than cores every wait costs a time slice, so heavy yield
    (sleep in the wait) there. With a core per rank it would only slow every wait down (a sliced
    16 MiB exchange takes 10x longer at 2 ranks), so it is off."""
    return {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1" if n > (os.cpu_count() or 1) else "0"}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--op", default="allreduce", help="the bench command (default allreduce)")
    p.add_argument("--configs", default=None, help=f"ranks:topology list (default {CONFIGS})")
    p.add_argument("--sizes", default=None, help=f"sizes (default {SIZES})")
    p.add_argument("--iters", type=int, default=25, help="timed iterations per measurement, at most (default 25)")
    p.add_argument("--warmup", type=int, default=3, help="warm-up iterations (default 3)")
    p.add_argument("--budget", type=float, default=0.5, help="seconds of timed iterations per measurement (default 0.5)")
    p.add_argument("--blocks", type=int, default=5, help="timing blocks; the median block counts (default 5)")
    p.add_argument("--quick", action="store_true", help=f"configs {QUICK_CONFIGS}, sizes {QUICK_SIZES}, budget 0.05 s")
    p.add_argument("--timeout", type=float, default=3600, help="seconds before a job counts as hung (default 3600)")
    p.add_argument("--rounds", type=int, default=1,
                   help="the bench's --rounds: measure everything this many times round-robin, keep each fastest")
    p.add_argument("--buffers", default="numpy", choices=("numpy", "shared"),
                   help="the bench's --buffers: shared runs pyhccl on Communicator.alloc_shared arrays (results "
                        "named <op>_shared_...; native MPI stays on ordinary arrays)")
    p.add_argument("--results-dir", type=Path, default=HERE / "results")
    p.add_argument("--resume", action="store_true",
                   help="keep the results of configurations already measured in --results-dir; run the others")
    a = p.parse_args(argv)
    a.configs = a.configs or (QUICK_CONFIGS if a.quick else CONFIGS)
    a.sizes = a.sizes or (QUICK_SIZES if a.quick else SIZES)
    if a.quick:
        a.budget, a.iters, a.warmup = min(a.budget, 0.05), min(a.iters, 5), min(a.warmup, 1)
    try:
        a.pairs = [(int(n), t) for n, t in (c.split(":", 1) for c in a.configs.split(","))]
        [parse_size(s) for s in a.sizes.split(",")]
    except ValueError as e:
        p.error(f"--configs as N:TOPO,... and --sizes as 8,4K,...: {e}")
    return a


def bench(a: argparse.Namespace, n: int, topo: str, extra: list[str], log: Path) -> tuple[int, str]:
    cmd = [*mpiexec_command(), "-n", str(n), sys.executable, "-m", "pyhccl.bench", a.op, "--topo", topo,
           "--algo", "all", "--sizes", a.sizes, "--no-inplace", "-n", str(a.iters), "-w", str(a.warmup),
           "--budget", str(a.budget), "--blocks", str(a.blocks), "--buffers", a.buffers, "--rounds", str(a.rounds), *extra]
    env = yield_env(n)
    print("+", *(f"{k}={v}" for k, v in env.items()), " ".join(cmd), flush=True)
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, env=launch_env(env), cwd=REPO)
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {a.timeout} s"
    log.write_text(out.stdout + out.stderr)
    return out.returncode, out.stderr[-2000:]


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def summarize(op: str, n: int, topo: str, data: dict) -> tuple[list[str], dict]:
    """Per size: native busbw, each profile's choice, regret and ratio to native."""
    rows = data["rows"]
    reg = {g["size"]: g for g in data["meta"].get("regret", {}).get("sizes", [])}
    lines, per_size = [], []
    for size in sorted({r["size"] for r in rows}):
        at = [r for r in rows if r["size"] == size]
        auto = next((r for r in at if r["algo"].startswith("auto:")), None)
        tuned = next((r for r in at if r["algo"].startswith("tuned:")), None)
        g = reg.get(size, {})
        nat = next((r["native_time_us"] for r in at if r["native_time_us"]), None)
        nat_bw = auto["busbw"] / auto["ratio"] if auto and auto["busbw"] and auto["ratio"] else None
        item = {"size": size, "native_us": nat, "native_busbw": nat_bw,
                "hccl": g.get("hccl"), "hccl_regret": g.get("hccl_ratio"), "hccl_ratio": auto and auto["ratio"],
                "hccl_busbw": auto and auto["busbw"],
                "tuned": g.get("tuned"), "tuned_regret": g.get("tuned_ratio"), "tuned_ratio": tuned and tuned["ratio"],
                "tuned_busbw": tuned and tuned["busbw"], "best": g.get("best"),
                "wrong": sum(r["wrong"] for r in at)}
        per_size.append(item)
        f = (lambda v, d=2: "-" if v is None else f"{v:.{d}f}")
        lines.append(f" {n:>2} {topo:<8} {format_size(size):>6} {f(nat_bw, 3):>8}  {str(item['hccl'])[:38]:<38} "
                     f"{f(item['hccl_regret']):>6} {f(item['hccl_ratio']):>6}  {str(item['tuned'])[:38]:<38} "
                     f"{f(item['tuned_regret']):>6} {f(item['tuned_ratio']):>6}  {str(item['best'])[:34]}")
    summary = {"n": n, "topo": topo, "sizes": per_size,
               "hccl_regret": geomean([s["hccl_regret"] for s in per_size]),
               "tuned_regret": geomean([s["tuned_regret"] for s in per_size]),
               "hccl_ratio": geomean([s["hccl_ratio"] for s in per_size]),
               "tuned_ratio": geomean([s["tuned_ratio"] for s in per_size]),
               "wrong": sum(s["wrong"] for s in per_size)}
    return lines, summary


def targets(summaries: list[dict]) -> list[str]:
    """The performance targets' view: the tuned default's ratio to native (native time / pyhccl time) by size band."""
    def band(s: dict, lo: int, hi: int) -> float | None:
        xs = [x["tuned_ratio"] for x in s["sizes"] if lo <= x["size"] <= hi and x["tuned_ratio"]]
        return min(xs) if xs else None
    f = (lambda v: "   -" if v is None else f"{v:4.2f}")
    lines = ["# tuned default vs native, worst ratio per size band (>1: faster than native; latency ratio = 1/ratio)",
             "#  N topo      8 B-4 KiB  >=1 MiB  4-64 MiB"]
    for s in summaries:
        lines.append(f"#  {s['n']:>2} {s['topo']:<8}  {f(band(s, 0, 4096)):>9}  {f(band(s, 1 << 20, 1 << 62)):>7}"
                     f"  {f(band(s, 4 << 20, 64 << 20)):>8}")
    return lines


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    res = a.results_dir
    (res / "tuning").mkdir(parents=True, exist_ok=True)
    head = (f"#{'N':>2} {'topo':<8} {'size':>6} {'nat.bw':>8}  {'HCCL profile (auto)':<38} {'regret':>6} "
            f"{'ratio':>6}  {'tuned (measured profile)':<38} {'regret':>6} {'ratio':>6}  best measured")
    table, summaries, failed = [head], [], 0
    t0 = time.time()
    op = a.op + ("_shared" if a.buffers == "shared" else "")
    for n, topo in a.pairs:
        stem = f"{op}_{n}_{topo}"
        tuning = res / "tuning" / f"{stem}.json"
        done = a.resume and (res / f"{stem}.json").exists() and tuning.exists()
        if not done:
            tuning.unlink(missing_ok=True)
        rc, err = (0, "") if done else bench(a, n, topo, ["--tune", str(tuning)], res / f"{stem}_tune.txt")
        if rc == 0 and not done:
            rc, err = bench(a, n, topo, ["--tuning", str(tuning), "--report", "regret", "--plot",
                                         str(res / f"{stem}.png"), "--json", str(res / f"{stem}.json"),
                                         "--csv", str(res / f"{stem}.csv")], res / f"{stem}.txt")
        if rc != 0:
            failed += 1
            print(f"# {stem}: job failed (exit {rc}): {err}", flush=True)
            continue
        lines, summary = summarize(a.op, n, topo, json.loads((res / f"{stem}.json").read_text()))
        table += lines
        summaries.append(summary)
        print("\n".join([head] + lines), flush=True)
    f = (lambda v: "-" if v is None else f"{v:.3f}")
    table.append("# geomean per configuration: regret (1 = best measured) and ratio to native (>1: faster than native)")
    for s in summaries:
        table.append(f"#  {s['n']:>2} {s['topo']:<8} HCCL profile: regret {f(s['hccl_regret'])}, ratio {f(s['hccl_ratio'])}"
                     f" | tuned: regret {f(s['tuned_regret'])}, ratio {f(s['tuned_ratio'])} | #wrong {s['wrong']}")
    table += targets(summaries)
    wrong = sum(s["wrong"] for s in summaries)
    table.append(f"# #wrong {wrong}, failed jobs {failed}, {time.time() - t0:.0f} s; sizes {a.sizes}, budget "
                 f"{a.budget} s, iters <= {a.iters}, {a.buffers} buffers, {a.rounds} round(s)")
    text = "\n".join(table)
    print(text)
    name = f"{op}_compare{'_quick' if a.quick else ''}"
    (res / f"{name}.txt").write_text(text + "\n")
    (res / f"{name}.json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()},
                                                  "configs": summaries}, indent=1))
    return 1 if failed or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
