"""The hierarchical runtime on emulated hosts: one HCCL two-level plan all over MPI, and on ``@shm``, against native MPI.

Run from the repository root (MPICH)::

    .venv/bin/python benchmarks/hierarchical.py                   # 4 ranks on 2 hosts, 1K..64M
    .venv/bin/python benchmarks/hierarchical.py --ranks 8 --hosts 2 --sizes 1K,64K,4M,64M

For each op (AllReduce, AllGather, ReduceScatter) one ``python -m pyhccl.bench <op>`` job, block-placed
on ``--hosts`` emulated hosts (:func:`pyhccl.launch.emulated_hosts`: traffic between hosts goes through
MPICH's network module), times in the same run native MPI, the op's two-level HCCL algorithm over MPI
(``NAME``) and the same plan on the hierarchical runtime (``NAME@shm``: level 0 read from the node's
shared window, the levels between hosts over MPI; pyhccl/run/shm/hier.py). It writes
``results/hierarchical_<N>x<H>.txt`` (per op and size: the three times and the ratios native / MPI plan
and native / hierarchical) and ``.json``. Nothing here asserts timings; the exit status is 1 if a job
failed or a value was wrong.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from placement import bench_job  # noqa: E402 - benchmarks/placement.py, beside this script

#: Per op, a two-level HCCL algorithm (the one HCCL's selection picks at 64 MiB on 1x2x2).
ALGOS = {"allreduce": "CcuSchedAllReduceSequenceMeshMesh", "allgather": "CcuSchedAllGatherParallelMeshNHR",
         "reducescatter": "AicpuReduceScatterParallelMeshNHR"}


def bench(op: str, args: argparse.Namespace, out: Path) -> dict:
    """One ``python -m pyhccl.bench`` job: native, the algorithm over MPI and on @shm; its JSON."""
    name = ALGOS[op]
    return bench_job(op, args, out, "block", op, extra=("--algo", f"{name},{name}@shm"))


def table(results: dict, args: argparse.Namespace) -> str:
    """Per op and size: native, MPI plan, hierarchical (times in us) and the two ratios to native."""
    lines = [f"# hierarchical runtime on emulated hosts: {args.ranks} ranks on {args.hosts} hosts (MPICH), block "
             "placement, float32, out of place",
             "# times: slowest rank's mean (us); ratio = native MPI time / pyhccl time, same run (> 1: pyhccl faster)",
             "# a shared, noisy 2-core VM (other jobs running, ranks oversubscribed): treat differences under ~2x as noise",
             f"# {'op':<14}{'size':>10}{'native':>11}{'MPI plan':>11}{'ratio':>7}{'hier @shm':>11}{'ratio':>7}"
             f"{'hier/MPI':>9}  algorithm"]
    logs: dict[str, list[float]] = {"mpi": [], "hier": []}
    for op, got in results.items():
        name = ALGOS[op]
        rows: dict[int, dict[str, dict]] = {}
        for row in got.get("rows", []):
            rows.setdefault(row["size"], {})[row["algo"].split(":")[-1]] = row
        for size, by in sorted(rows.items()):
            mpi, hier = by.get(name), by.get(f"{name}@shm")
            if mpi is None or hier is None:
                continue
            native = mpi["native_time_us"]
            r1, r2 = native / mpi["time_us"], native / hier["time_us"]
            logs["mpi"].append(math.log(r1))
            logs["hier"].append(math.log(r2))
            lines.append(f"  {op:<14}{size:>10}{native:>11.1f}{mpi['time_us']:>11.1f}{r1:>7.2f}{hier['time_us']:>11.1f}"
                         f"{r2:>7.2f}{mpi['time_us'] / hier['time_us']:>9.2f}  {name}")
    lines.append("# geomean ratio to native: " + ", ".join(
        f"{k} {math.exp(sum(v) / len(v)):.2f}" for k, v in (("MPI plan", logs["mpi"]), ("hierarchical", logs["hier"]))
        if v))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--hosts", type=int, default=2)
    p.add_argument("--sizes", default="1K,16K,256K,4M,64M", help="bytes, comma-separated (default 1K,16K,256K,4M,64M)")
    p.add_argument("--ops", default=",".join(ALGOS), help=f"comma-separated, of {', '.join(ALGOS)}")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--budget", type=float, default=1.0, help="seconds per measurement, about (default 1)")
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("--results-dir", type=Path, default=HERE / "results")
    args = p.parse_args(argv)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stem = args.results_dir / f"hierarchical_{args.ranks}x{args.hosts}"
    results, ok = {}, True
    for op in args.ops.split(","):
        part = Path(f"{stem}_{op}.json")
        got = bench(op, args, part)
        part.unlink(missing_ok=True)
        ok &= bool(got) and all(row["wrong"] == 0 for row in got.get("rows", []))
        results[op] = got
    text = table(results, args)
    print(text, end="")
    stem.with_suffix(".txt").write_text(text)
    stem.with_suffix(".json").write_text(json.dumps(results, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
