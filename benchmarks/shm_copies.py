"""What the copies into and out of the shared window cost the @shm engine's AllReduce.

Run under MPI from the repository root (heavy yield only with more ranks than cores)::

    .venv/bin/mpiexec -n 2 .venv/bin/python benchmarks/shm_copies.py [--algos MeshTwoShot,NHR] [--sizes 4M,16M,64M]

The @shm engine (pyhccl/run/shm/) runs a plan on the caller's numpy arrays: the part of the
input a peer loads is first copied into this rank's segment of the shared window, and results a
peer wrote there are copied out. For each size, rank 0 prints native MPI's Allreduce, each
algorithm on ordinary arrays, and the same plan on arrays in shared memory (``ShmEngine.alloc``, what
``Communicator.alloc_shared`` returns: no copy in or out), as time and ratio to native. Every
result is checked. Nothing is asserted about the times.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyhccl.bench.driver import time_call  # noqa: E402
from pyhccl.core.call import Call  # noqa: E402
from pyhccl.plan.api import build_plan  # noqa: E402
from pyhccl.run.shm import ShmRunner, compile_shm, shm_engine  # noqa: E402
from pyhccl.core.units import format_size, parse_size  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algos", default="MeshTwoShot,NHR", help="pyhccl templates run on the @shm engine")
    p.add_argument("--sizes", default="4M,16M,64M", help="AllReduce sizes (float32)")
    p.add_argument("--iters", type=int, default=10)
    a = p.parse_args()
    comm = MPI.COMM_WORLD
    n, rank = comm.Get_size(), comm.Get_rank()
    engine = shm_engine(comm)
    want = np.float32(n * (n + 1) // 2)
    if rank == 0:
        print(f"# shm_copies.py: AllReduce float32 sum, {n} ranks; time (ms) and native time / time")
    try:
        sizes = [parse_size(s) for s in a.sizes.split(",")]
    except ValueError as e:
        raise SystemExit(f"--sizes: {e}") from None
    for nbytes in sizes:
        count = nbytes // 4
        x = np.full(count, rank + 1, np.float32)
        y = np.empty_like(x)
        res = {"native": time_call(comm, lambda: comm.Allreduce(x, y), a.iters, 2, blocks=3)}
        for algo in a.algos.split(","):
            call = Call("allreduce", n, count)
            runner = ShmRunner(compile_shm(call, [build_plan(call, algo, r) for r in range(n)], 4, rank), engine)
            inp, out = (engine.alloc(nbytes).view(np.float32) for _ in range(2))
            inp[...] = rank + 1
            for label, bufs in ((f"{algo}@shm", (x, y, None)), (f"{algo}@shm in window", (inp, out, None))):
                bufs[1][...] = 0
                runner.run(comm, bufs, np.add)
                if comm.allreduce(int(not np.all(bufs[1] == want)), op=MPI.MAX):
                    raise SystemExit(f"{label} gave a wrong AllReduce of {nbytes} B")
                res[label] = time_call(comm, lambda: runner.run(comm, bufs, np.add), a.iters, 2, blocks=3)
            engine.release(inp)
            engine.release(out)
        if rank == 0:
            print(f"{format_size(nbytes):>5}  " + "  ".join(f"{k} {t * 1e3:.2f} ({res['native'] / t:.2f}x)"
                                                          for k, t in res.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
