"""Warm per-call overhead of pyhccl's Python layer: Communicator.Allreduce minus the plan it runs.

Run under MPI (1 or 2 ranks give the cleanest figure on a small machine)::

    .venv/bin/mpiexec -n 2 .venv/bin/python benchmarks/overhead.py [--count 2] [--iters 20000]

For one warm call shape it times, interleaved in rounds so that drift hits all three alike:

- ``comm``: ``pyhccl.Communicator.Allreduce(a, b)`` (parse and check the buffers, look up the
  agreed algorithm and the compiled plan, run it);
- ``plan``: the same compiled plan run directly (``CompiledPlan.run``) on the same buffers;
- ``native``: the wrapped communicator's ``Allreduce``;
- ``tuned``: a communicator whose tuning file makes native MPI the cheapest (a throwaway file):
  what a warm call adds when the measured profile hands the call to the wrapped MPI;
- ``checked``: ``comm`` with ``check=True`` (``PYHCCL_CHECK``): what the consistency check costs.

overhead = comm - plan: what the Python layer adds per call once selection and plan are cached.
The median over rounds of the slowest rank's mean is printed. Nothing here asserts timings.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import pyhccl  # noqa: E402
from pyhccl.tune import NATIVE, Point, Tuning  # noqa: E402


def timed(comm: MPI.Intracomm, fn, iters: int) -> float:
    comm.Barrier()
    t0 = MPI.Wtime()
    for _ in range(iters):
        fn()
    return comm.allreduce((MPI.Wtime() - t0) / iters, op=MPI.MAX)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=2, help="float32 elements per call (default 2)")
    p.add_argument("--iters", type=int, default=5000, help="calls per round (default 5000)")
    p.add_argument("--rounds", type=int, default=7, help="rounds (default 7)")
    p.add_argument("--algo", default=None, help="force an algorithm (default: HCCL's selection)")
    a = p.parse_args()
    world = MPI.COMM_WORLD
    comm = pyhccl.Communicator(world, algo=a.algo)
    x = np.arange(a.count, dtype=np.float32)
    y = np.empty_like(x)
    comm.Allreduce(x, y)
    name = comm.last_selection.algorithm if comm.last_selection else comm.algo
    (plan,) = comm.compiled_plans.values()              # the plan the communicator runs, run directly
    scratch = np.empty(max(plan.scratch_count, 1), np.float32)
    pcomm = world.Dup()
    # a communicator whose tuning file makes native MPI the cheapest: its warm call hands straight to native
    path = None
    if world.Get_rank() == 0:
        fd, path = tempfile.mkstemp(suffix=".json", prefix="pyhccl-overhead-")
        os.close(fd)
    path = world.bcast(path)
    if world.Get_rank() == 0:
        Tuning(comm.topology.spec.to_text(), world.Get_size(), comm.ub_transfer_bytes,
               tuple(Point("AllReduce", algo, nb, us) for algo, us in ((NATIVE, 1.0), (name, 1000.0))
                     for nb in (8, 1 << 20))).save(path)
    world.Barrier()
    tuned = pyhccl.Communicator(world, algo="", tuning=path)
    tuned.Allreduce(x, y)
    checked = pyhccl.Communicator(world, algo=a.algo, check=True)       # PYHCCL_CHECK: one small allreduce per call
    checked.Allreduce(x, y)
    assert tuned.last_selection.algorithm == NATIVE, tuned.last_selection
    forms = {"comm": lambda: comm.Allreduce(x, y),
             "plan": lambda: plan.run(pcomm, (x, y, scratch), np.add),
             "native": lambda: world.Allreduce(x, y),
             "tuned": lambda: tuned.Allreduce(x, y),
             "checked": lambda: checked.Allreduce(x, y)}
    res: dict[str, list[float]] = {k: [] for k in forms}
    for _ in range(a.rounds):
        for k, fn in forms.items():
            res[k].append(timed(world, fn, a.iters))
    med = {k: statistics.median(v) * 1e6 for k, v in res.items()}
    if world.Get_rank() == 0:
        print(f"# overhead.py: {world.Get_size()} ranks, {a.count} float32, algorithm {name}, "
              f"{a.rounds} rounds x {a.iters} calls; median of the slowest rank's mean (us)")
        for k, v in med.items():
            print(f"{k:>8} {v:9.2f} us")
        print(f"overhead (comm - plan): {med['comm'] - med['plan']:.2f} us per call; comm / native: "
              f"{med['comm'] / med['native']:.2f}x")
        print(f"native chosen by a tuning file (tuned - native): {med['tuned'] - med['native']:.2f} us per call; "
              f"tuned / native: {med['tuned'] / med['native']:.2f}x")
        print(f"the consistency check (checked - comm): {med['checked'] - med['comm']:.2f} us per call")
        os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
