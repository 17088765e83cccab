"""The simulator at HCCL's scale: the figures of issue 20, each next to its target.

Run from the repository root::

    .venv/bin/python benchmarks/verify_scale.py                  # every figure (hours on a loaded 2-core VM)
    .venv/bin/python benchmarks/verify_scale.py --only nhr,pod   # NHR 4096 and the 8192-rank selections
    .venv/bin/python benchmarks/verify_scale.py --only sweep --fraction 0.005

Figures:

- ``nhr``: NHR AllReduce, 4096 ranks, count 10^10+19 (target <= 5 s).
- ``pod``: HCCL's selection for AllReduce, AllGather, ReduceScatter and AlltoAll on ``1x128x64``
  and ``2x64x64`` (8192 ranks), count 1000 and 10^10+19 (target <= 10 s per call, peak memory).
- ``cluster``: 131 072 ranks (``16x128x64``), AllReduce as HCCL selects it (target <= 5 min, <= 8 GiB).
- ``sweep``: ``python -m pyhccl.verify all --ranks 1-128`` plus the default multi-level shapes
  with ``-j 2`` (target <= 10 min): a seeded random ``--fraction`` of its tasks is run and the
  whole is extrapolated (CPU seconds / fraction / 2 jobs), which the output says. ``--sample group``
  draws whole (op, machine) groups instead, as the sweep hands them to one worker (names that
  build equal plans are simulated once per worker: a task sample misses that).

Each call runs in its own process (wall and CPU seconds, split into building the plans and
simulating them, and the process's peak resident memory). A call whose plans would take more
than ``--timeout`` seconds to build (estimated from a run of consecutive ranks, built in order as
verify builds them, so that they share work as they do there) is not run: the estimate is
printed instead, as what bounds it. A call the verifier's memory guard stops (``pyhccl/verify/memory.py``)
prints ``failed`` with its peak memory and the guard's reason (what it would need, what is available); a
process killed outright (the OOM killer's SIGKILL) prints ``crashed``. Timings on a shared machine are
noisy: CPU seconds are printed next to wall seconds, and the first line measures how fast the machine is
now (a pure-Python loop and a numpy copy): figures from different VMs, or hours apart on one, differ by 2x.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LARGE = 10_000_000_019
SMALL = 1000
POD_TOPOS = ("1x128x64", "2x64x64")
POD_OPS = ("AllReduce", "AllGather", "ReduceScatter", "AlltoAll")
SAMPLE_RANKS = 64     # a level-0 group of the pods: timed twice, cold then steady
_SELECTED = "selected; not built"


def child(case: dict) -> dict:
    """Run one call in this process: estimate the build, then verify it; the figures as a dict."""
    import pyhccl.verify.api as api
    from pyhccl.plan.api import NotRunnableError
    from pyhccl.verify import verify

    m = api.machine(case["topo"])
    call = api.make_call(case["op"], m.nranks, count=case["count"])
    rng = random.Random(0)
    first = rng.randrange(max(1, m.nranks - 2 * SAMPLE_RANKS))
    algo = forced = case.get("algo")
    if algo is None:            # HCCL's selection, found the way verify() finds it, stopped before building
        def stop(call, algo, rank, machine=None):
            raise NotRunnableError(_SELECTED)

        api.build_plan, real_build = stop, api.build_plan
        res = verify(case["op"], case["topo"], count=case["count"])
        api.build_plan = real_build
        algo = res.algorithm
        if res.error != _SELECTED:
            return {"status": res.status, "algorithm": algo, "error": res.error.splitlines()[0] if res.error else ""}
    if api.rank0_alone(call, algo, m):
        estimate = 0.0          # verify() builds rank 0's plan alone (every rank's is it, rotated)
    else:
        api.build_plan(call, algo, first, m)                # the first build computes the machine's groups
        cold = range(first + 1, min(m.nranks, first + 1 + SAMPLE_RANKS))      # a group's worth: work its peers reuse
        steady = range(cold.stop, min(m.nranks, cold.stop + 4 * SAMPLE_RANKS))   # the cost per rank after it
        gc.disable()                # as verify() builds plans
        t0 = time.process_time()
        for r in cold:
            api.build_plan(call, algo, r, m)
        t1 = time.process_time()
        for r in steady:
            api.build_plan(call, algo, r, m)
        per_rank = (time.process_time() - t1) / max(1, len(steady))
        gc.enable()
        estimate = t1 - t0 + per_rank * (m.nranks - len(cold))
    out = {"algorithm": algo, "build_estimate": estimate}
    if estimate > case["timeout"]:
        return {**out, "status": "skipped"}
    times = {"sim": 0.0}

    def timed(simulate):
        def run(*args, **kw):
            t = time.process_time()
            try:
                return simulate(*args, **kw)
            finally:
                times["sim"] = time.process_time() - t
        return run

    api.simulate, api.simulate_rank0 = timed(api.simulate), timed(api.simulate_rank0)      # (rank 0's alone)
    w0, c0 = time.perf_counter(), time.process_time()
    res = verify(case["op"], case["topo"], count=case["count"], algo=forced)     # the selection's path when selected
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return {**out, "status": res.status, "wall": wall, "cpu": cpu, "sim": times["sim"], "build": cpu - times["sim"],
            "rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            "error": res.error.splitlines()[0] if res.error else ""}


def run_case(case: dict, timeout: float) -> dict:
    """:func:`child` in a fresh process, killed after ``timeout`` x 4 seconds."""
    cmd = [sys.executable, __file__, "--child", json.dumps({**case, "timeout": timeout})]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout * 4, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "error": f"no result in {timeout * 4:g} s"}
    if p.returncode:
        why = (p.stderr.strip().splitlines() or [""])[-1]
        if not why and p.returncode == -signal.SIGKILL:
            why = "killed by SIGKILL (on Linux, most likely the kernel's OOM killer: see dmesg)"
        return {"status": "crashed", "error": why or f"exit status {p.returncode}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def show(label: str, target: str, r: dict) -> None:
    if r.get("status") == "ok":
        print(f"{label:<44} {r['algorithm']:<44} wall {r['wall']:7.1f} s  cpu {r['cpu']:7.1f} s "
              f"(build {r['build']:6.1f}, simulate {r['sim']:6.1f})  peak {r['rss_gib']:5.2f} GiB   target {target}",
              flush=True)
    elif r.get("status") == "skipped":
        print(f"{label:<44} {r['algorithm']:<44} not run: building the plans alone takes about "
              f"{r['build_estimate']:.0f} s (from {5 * SAMPLE_RANKS} consecutive ranks)   target {target}", flush=True)
    else:       # failed (a fault, or the memory guard's reason: what it needs, what is available), crashed, timeout
        peak = f" (peak {r['rss_gib']:.2f} GiB)" if "rss_gib" in r else ""
        print(f"{label:<44} {r.get('algorithm') or '-':<44} {r['status']}{peak}: {r.get('error', '')}   "
              f"target {target}", flush=True)


def sweep(fraction: float, seed: int, by: str = "task") -> None:
    """Run a random ``fraction`` of the ``all --ranks 1-128`` sweep's tasks (or of its (op, machine)
    groups, ``by="group"``) and extrapolate."""
    from pyhccl.core import settings
    from pyhccl.topo import parse_topo
    from pyhccl.verify.cli import DEFAULT_TIMEOUT, DEFAULT_TOPOS
    from pyhccl.verify.sweep import canonical_ops, make_tasks, run_tasks

    flat = [f"1x1x{n}" for n in range(1, 129)]
    topos = [parse_topo(t).to_text() for t in DEFAULT_TOPOS]
    tasks = make_tasks(canonical_ops("all"), ["all"], flat, topos, expansion_mode=settings.expansion_mode(None),
                       timeout=DEFAULT_TIMEOUT)
    rng = random.Random(seed)
    if by == "group":
        groups = {(t.op, t.topo): rng.random() < fraction for t in tasks}
        picked = [t for t in tasks if groups[t.op, t.topo]]
    else:
        picked = [t for t in tasks if rng.random() < fraction]
    c0, w0 = time.process_time(), time.perf_counter()
    calls = failed = 0
    for i, o in enumerate(run_tasks(picked, 1)):
        calls += o.ran
        failed += o.statuses["failed"]
        for f in o.failures:
            print(f"#   FAILED {f.op} {f.algorithm} on {f.topo}: {f.error.splitlines()[0][:160]}", file=sys.stderr,
                  flush=True)
        if (i + 1) % 5 == 0:
            so_far = (time.process_time() - c0) / ((i + 1) / len(tasks)) / 2
            print(f"#   {i + 1}/{len(picked)} sampled tasks, {time.perf_counter() - w0:.0f} s wall, "
                  f"{time.process_time() - c0:.0f} s cpu; so far the whole sweep extrapolates to {so_far / 60:.1f} min "
                  f"with -j 2", file=sys.stderr, flush=True)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    est = cpu / (len(picked) / len(tasks)) / 2
    print(f"{'verify all --ranks 1-128 + default shapes':<44} {len(picked)} of {len(tasks)} tasks (by {by}; {calls} calls, "
          f"{failed} failed) in {wall:.0f} s wall, {cpu:.0f} s cpu; whole sweep with -j 2: about {est / 60:.1f} min "
          f"(extrapolated: cpu / {len(picked) / len(tasks):.4f} / 2)   target <= 10 min", flush=True)


def machine_line() -> str:
    """How fast this machine is now, the best of three: a pure-Python loop and a numpy copy out of cache (figures
    measured on different VMs, or hours apart on one, differ by 2x: compare runs by this line, or A/B in one run)."""
    import numpy as np

    def best(f) -> float:
        times = []
        for _ in range(3):
            t = time.perf_counter()
            f()
            times.append(time.perf_counter() - t)
        return min(times)

    a, b = np.ones(8 << 20), np.empty(8 << 20)          # 64 MiB each
    loop = best(_loop)
    copy = best(lambda: np.copyto(b, a))
    return (f"# this machine now: a Python loop of 10^7 additions {loop:.2f} s, a 64 MiB numpy copy "
            f"{2 * a.nbytes / copy / 1e9:.1f} GB/s (bytes read + written)")


def _loop() -> None:
    s = 0
    for i in range(10_000_000):
        s += i


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="nhr,pod,cluster,sweep", help="comma-separated: nhr, pod, cluster, sweep")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds of plan building above which a call is not run (its process gets 4x this)")
    p.add_argument("--fraction", type=float, default=0.01, help="share of the sweep's tasks to run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sample", choices=("task", "group"), default="task",
                   help="with sweep: draw tasks, or whole (op, machine) groups as one worker runs them")
    p.add_argument("--ops", default=",".join(POD_OPS), help="with pod: only these ops, comma-separated")
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print(json.dumps(child(json.loads(a.child))))
        return 0
    print(machine_line(), flush=True)
    parts = {x.strip() for x in a.only.split(",")}
    if "nhr" in parts:
        show("NHR AllReduce 1x1x4096 count 10^10+19", "<= 5 s",
             run_case({"op": "AllReduce", "topo": "1x1x4096", "count": LARGE, "algo": "NHR"}, a.timeout))
    if "pod" in parts:
        for topo in POD_TOPOS:
            for op in [o for o in POD_OPS if o in a.ops.split(",")]:
                for count in (SMALL, LARGE):
                    show(f"{op} {topo} count {count}", "<= 10 s",
                         run_case({"op": op, "topo": topo, "count": count}, a.timeout))
    if "cluster" in parts:
        show("AllReduce 16x128x64 count 10^10+19", "<= 300 s, <= 8 GiB",
             run_case({"op": "AllReduce", "topo": "16x128x64", "count": LARGE}, a.timeout))
    if "sweep" in parts:
        sweep(a.fraction, a.seed, a.sample)
    return 0


if __name__ == "__main__":
    sys.exit(main())
