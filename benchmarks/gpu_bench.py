"""AllReduce of cupy arrays: pyhccl (device path) against the wrapped MPI library, a few sizes, one line each.

Run under mpiexec on a GPU machine (benchmarks/gpu_check.sh does)::

    mpiexec -n 2 python benchmarks/gpu_bench.py [--sizes 4K,1M,16M] [--iters 20]

The native column passes the cupy arrays to MPI when it is CUDA-aware, else copies them to the
host and back around MPI's Allreduce (what a script without pyhccl would do). Every result is
checked; a wrong one exits 1.
"""

import argparse
import sys
import time

import numpy as np
from mpi4py import MPI

import pyhccl
from pyhccl import gpu
from pyhccl.core.units import parse_size


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="4K,256K,4M,32M", help="bytes per rank, comma-separated (default %(default)s)")
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args()
    import cupy as cp
    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    cp.cuda.Device(rank % cp.cuda.runtime.getDeviceCount()).use()
    c = pyhccl.Communicator(comm)
    aware = gpu.cuda_aware()
    if rank == 0:
        print(f"# AllReduce float32 SUM on cupy arrays, {n} ranks, MPI CUDA-aware: {aware} "
              f"({'direct' if aware else 'staged through pinned memory'}); time in us, busbw in GB/s")
        print(f"# {'bytes':>10} {'pyhccl us':>10} {'busbw':>7} {'native us':>10} {'busbw':>7}  native")

    def native(x, out):
        if aware:
            comm.Allreduce(x, out)
        else:
            h = cp.asnumpy(x)
            r = np.empty_like(h)
            comm.Allreduce(h, r)
            out.set(r)

    wrong = 0
    for nbytes in (parse_size(s) for s in args.sizes.split(",")):
        k = max(1, nbytes // 4)
        x = cp.full(k, rank + 1, cp.float32)
        out = cp.zeros(k, cp.float32)
        row = []
        for fn in (c.Allreduce, native):
            fn(x, out)                                   # warm-up (plan, pinned buffer)
            cp.cuda.get_current_stream().synchronize()
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(args.iters):
                fn(x, out)
            cp.cuda.get_current_stream().synchronize()
            us = comm.allreduce((time.perf_counter() - t0) / args.iters * 1e6, op=MPI.MAX)
            out.fill(0)
            fn(x, out)
            wrong += int((out != n * (n + 1) / 2).sum())
            row += [us, 4 * k * 2 * (n - 1) / n / us / 1e3]
        if rank == 0:
            print(f"  {4 * k:>10} {row[0]:>10.1f} {row[1]:>7.2f} {row[2]:>10.1f} {row[3]:>7.2f}  "
                  f"{'device' if aware else 'host copy'}", flush=True)
    wrong = comm.allreduce(wrong)
    c.release()
    if rank == 0:
        print(f"# Out of bounds values : {wrong} {'OK' if not wrong else 'FAILED'}")
    return 1 if wrong else 0


if __name__ == "__main__":
    try:
        code = main()
    except Exception:                    # one rank's error must not leave the others waiting
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)
    sys.exit(code)
