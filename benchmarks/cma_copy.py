"""Cross-memory attach: every rank's block into every peer's array, read by the peers or pushed by its owner.

Run under MPI from the repository root, e.g.::

    .venv/bin/mpiexec -n 8 .venv/bin/python benchmarks/cma_copy.py --sizes 4M,16M,64M

The pattern is an AllGather's (``SIZE`` bytes of output per rank, one block of SIZE/N per rank): each
rank either reads the N-1 peers' blocks into its output (``process_vm_readv``, the loader pulls) or
writes its block into the N-1 peers' outputs (``process_vm_writev``, the owner pushes), one call per
block or per ``--chunk`` bytes, then copies its own block. Printed per size and way: the time per round
(each ended by a barrier; :func:`pyhccl.bench.driver.time_call`: the median of ``--blocks`` blocks of
``--iters`` rounds, the slowest rank's mean) and the user and kernel CPU per round summed over the ranks;
then MPI's own Allgather of the same arrays.
This is the measurement behind the @shm engine's rule that symmetric loads are pushed
(:func:`pyhccl.run.shm.program.shares`).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyhccl.bench.driver import time_call  # noqa: E402
from pyhccl.core.units import parse_size  # noqa: E402
from pyhccl.run.shm.cma import Remote, available, reader, writer  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="4M,16M,64M", help="output bytes per rank, comma-separated")
    p.add_argument("--chunk", default="0", help="bytes per kernel call (0: one call per block)")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--blocks", type=int, default=3)
    a = p.parse_args()
    comm = MPI.COMM_WORLD
    n, r = comm.Get_size(), comm.Get_rank()
    if not comm.allreduce(available(), op=MPI.LAND):
        if r == 0:
            print("cross-memory attach is not available here")
        return 1
    for size in (parse_size(s) for s in a.sizes.split(",")):
        blk = size // n // 4 * 4
        x = np.full(blk // 4, r, np.float32)
        y = np.empty(n * blk // 4, np.float32)
        peers = comm.allgather((os.getpid(), x.ctypes.data, y.ctypes.data))
        chunk = parse_size(a.chunk) or blk
        for way in ("read", "push"):
            calls = []
            for k in range(1, n):
                q = (r + k) % n
                pid, src, dst = peers[q]
                for off in range(0, blk, chunk):
                    ln = min(chunk, blk - off)
                    if way == "read":
                        calls.append(reader(Remote(pid, src + off, ln, 1), y.view(np.uint8)[q * blk + off:][:ln]))
                    else:
                        calls.append(writer(x.view(np.uint8)[off:off + ln], Remote(pid, dst + r * blk + off, ln, 1)))

            def run():
                for c in calls:
                    c()
                y[r * (blk // 4):(r + 1) * (blk // 4)] = x
                comm.Barrier()

            _report(comm, f"{way:6s}", size, run, a)
            if way == "read":
                ok = all((y[q * (blk // 4):(q + 1) * (blk // 4)] == q).all() for q in range(n))
                if not comm.allreduce(ok, op=MPI.LAND):
                    raise SystemExit("a read block holds the wrong values")
        _report(comm, "native", size, lambda: comm.Allgather(x, y), a)
    return 0


def _report(comm, label: str, size: int, run, a) -> None:
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    dt = time_call(comm, run, a.iters * a.blocks, 3, blocks=a.blocks)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    calls = a.iters * a.blocks + 3
    user = comm.allreduce((r1.ru_utime - r0.ru_utime) / calls)
    kern = comm.allreduce((r1.ru_stime - r0.ru_stime) / calls)
    if comm.Get_rank() == 0:
        print(f"{comm.Get_size()} ranks {size >> 20:4d} MiB {label}: {dt * 1e3:8.2f} ms "
              f"(per round, summed over ranks: user {user * 1e3:.1f} ms, kernel {kern * 1e3:.1f} ms)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
