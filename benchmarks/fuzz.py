"""The fuzzers' big budget: the MPI fuzz under mpiexec at several rank counts, then the simulator fuzz.

Run from the repository root (the script itself does not use MPI)::

    .venv/bin/python benchmarks/fuzz.py                   # 2..8 ranks x 50 examples per method; sim 5000 (+500)
    .venv/bin/python benchmarks/fuzz.py --ranks 2,3 --mpi-examples 5 --sim-examples 100     # a quick look

It runs the tests CI runs, ``tests/mpi/test_fuzz.py`` (one ``mpiexec -n N`` job per rank count)
and ``tests/test_fuzz_sim.py``, with ``PYHCCL_FUZZ_EXAMPLES`` raised, and collects the JSON line
each test appends to ``PYHCCL_FUZZ_REPORT``: cases run, how they ended, the failure. It prints
the cases per part and every failure; the exit status is 1 on any failure (a job that fails,
or runs past ``--timeout``, counts as one), else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyhccl.launch import launch_env, mpiexec_command  # noqa: E402

PYTEST = ("-m", "pytest", "-q", "-p", "no:cacheprovider")


def run_job(cmd: list[str], examples: int, timeout: float) -> tuple[list[dict], str | None, float]:
    """Run one pytest job with the fuzz budget; its report lines, a job failure (or None), seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.jsonl"
        env = launch_env({"PYHCCL_FUZZ_EXAMPLES": str(examples), "PYHCCL_FUZZ_REPORT": str(report),
                          "MPIR_CVAR_ENABLE_HEAVY_YIELD": os.environ.get("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")})
        t0 = time.monotonic()
        try:
            out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
            problem = None if out.returncode == 0 else \
                f"exit status {out.returncode}:\n{out.stdout[-3000:]}{out.stderr[-2000:]}"
        except subprocess.TimeoutExpired as e:
            problem = f"no end in {timeout:g} s (hang?):\n{(e.stdout or b'')[-3000:]!r}"
        seconds = time.monotonic() - t0
        rows = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    return rows, problem, seconds


#: How a case ended (the rest of a report's counts say which kind of algorithm it forced).
OUTCOMES = ("ok", "refused", "topo", "not-eligible", "not-runnable", "failed")


def summary(rows: list[dict]) -> str:
    total = Counter()
    for r in rows:
        total.update({k: v for k, v in r.items() if isinstance(v, int) and k != "ranks"})
    cases = total.pop("cases", 0)
    ends = ", ".join(f"{k} {total.pop(k)}" for k in OUTCOMES if k in total)
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(total.items()))
    return f"{cases} cases: {ends}" + (f"; algorithms: {kinds}" if kinds else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="2,3,4,5,6,7,8", help="MPI rank counts, comma-separated ('none': skip)")
    p.add_argument("--mpi-examples", type=int, default=50, help="examples per collective per rank count (default 50)")
    p.add_argument("--sim-examples", type=int, default=5000,
                   help="simulator examples up to 32 ranks, a tenth of it on 33-256 ranks (default 5000; 0: skip)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per job (default 1800)")
    a = p.parse_args(argv)
    ranks = [] if a.ranks.strip().lower() == "none" else [int(x) for x in a.ranks.split(",")]
    parts: list[tuple[str, list[dict], str | None, float]] = []
    for n in ranks:
        cmd = [*mpiexec_command(), "-n", str(n), sys.executable, *PYTEST, "--with-mpi", "tests/mpi/test_fuzz.py"]
        parts.append((f"mpi, {n} ranks", *run_job(cmd, a.mpi_examples, a.timeout)))
        print(f"{parts[-1][0]}: {summary(parts[-1][1])} in {parts[-1][3]:.0f} s", flush=True)
    if a.sim_examples > 0:
        cmd = [sys.executable, *PYTEST, "tests/test_fuzz_sim.py"]
        parts.append(("sim", *run_job(cmd, a.sim_examples, a.timeout)))
        for r in parts[-1][1]:
            print(f"{r['test']}: {summary([r])}", flush=True)
        print(f"simulator fuzz: {parts[-1][3]:.0f} s", flush=True)
    failures = [(name, r["test"], r["failure"]) for name, rows, _, _ in parts for r in rows if r.get("failure")]
    failures += [(name, "job", problem) for name, rows, problem, _ in parts
                 if problem and not any(r.get("failure") for r in rows)]
    mpi = sum(r["cases"] for name, rows, _, _ in parts if name.startswith("mpi") for r in rows)
    sim = sum(r["cases"] for name, rows, _, _ in parts if name == "sim" for r in rows)
    for name, test, text in failures:
        print(f"\nFAILED {name}: {test}\n{text}")
    print(f"\n# {mpi} MPI cases over ranks {a.ranks}, {sim} simulator cases: "
          f"{len(failures)} failure{'s' if len(failures) != 1 else ''}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
