"""Bus bandwidth of native MPI, pyhccl's MPI point-to-point runtime and its shared-memory runtime.

Run as ``mpiexec -n N python benchmarks/shm_bench.py [--sizes 1M,4M,16M,64M] [--time 0.3]``.
Per op, size and template it prints busbw (GB/s, nccl-tests' definition: algbw times the op's
busbw factor) of ``comm.Allreduce`` / ``Allgather`` / ``Reduce_scatter_block``, of
``compile_plan(plan).run`` (MPI Isend/Irecv), of the shm runtime on ordinary numpy buffers
(``shm``) and on arrays in shared memory from ``ShmEngine.alloc`` (``shm-win``, nothing copied in or out), with the ratio
of each to native. Float32, sum; each timing is the slowest rank's mean over a loop, and the variants are timed
in interleaved rounds (``--rounds``), keeping each one's best round, so that load from other
processes on a small machine hits them alike. Every result is checked once against native MPI's
("!" marks a wrong one).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from mpi4py import MPI

from pyhccl.core.call import Call
from pyhccl.plan.api import build_plan
from pyhccl.core.settings import ub_transfer_bytes
from pyhccl.run.mpi import compile_plan
from pyhccl.run.shm import ShmRunner, compile_shm, shm_engine

TEMPLATES = {"allreduce": ["MeshTwoShot", "MeshOneShot", "Ring", "NHR"],
             "all_gather": ["Mesh", "Ring"], "reduce_scatter": ["Mesh", "Ring"]}


def _timed(comm: MPI.Intracomm, fn, budget: float) -> float:
    """Seconds per call: warm up, size the loop to ``budget``, slowest rank's mean."""
    fn()
    comm.Barrier()
    t = time.perf_counter()
    fn()
    est = comm.allreduce(time.perf_counter() - t, op=MPI.MAX)
    iters = max(2, min(50, int(budget / max(est, 1e-6))))
    comm.Barrier()
    t = time.perf_counter()
    for _ in range(iters):
        fn()
    return comm.allreduce((time.perf_counter() - t) / iters, op=MPI.MAX)


def _size(text: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * mult[text[-1].upper()] if text[-1].upper() in mult else int(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1M,2M,4M,8M,16M,32M,64M", help="bytes per rank's data (nccl-tests' size)")
    ap.add_argument("--ops", default="allreduce,all_gather,reduce_scatter")
    ap.add_argument("--time", type=float, default=0.1, help="seconds per measurement")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the best is kept")
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    eng = shm_engine(comm)
    if rank == 0:
        print(f"# {n} ranks, float32 sum; busbw GB/s (ratio to native)")
        print(f"# {'op':<15}{'size':>6} {'template':<12}{'native':>8}{'p2p':>14}{'shm':>14}{'shm-win':>14}")
    for op in args.ops.split(","):
        for nbytes in map(_size, args.sizes.split(",")):
            count = nbytes // 4
            if op == "allreduce":
                call, nin, nout = Call(op, n, count), count, count
                native = lambda x, y: comm.Allreduce(x, y)
            elif op == "all_gather":
                call, nin, nout = Call(op, n, count // n), count // n, count // n * n
                native = lambda x, y: comm.Allgather(x, y)
            else:
                call, nin, nout = Call(op, n, count // n), count // n * n, count // n
                native = lambda x, y: comm.Reduce_scatter_block(x, y)
            x = np.random.default_rng(rank).integers(-3, 4, nin).astype(np.float32)
            want = np.empty(nout, np.float32)
            native(x, want)
            factor = call.spec.busbw_factor(n)
            bw = lambda t: factor * nbytes / t / 1e9
            for algo in TEMPLATES[op]:
                plan = build_plan(call, algo, rank)
                cp = compile_plan(plan, 4, ub_transfer_bytes())
                scratch = np.empty(cp.scratch_count, np.float32)
                sp = ShmRunner(compile_shm(call, [build_plan(call, algo, r) for r in range(n)], 4, rank), eng)
                y = np.empty(nout, np.float32)
                wi, wo = eng.alloc(nin * 4).view(np.float32), eng.alloc(nout * 4).view(np.float32)
                wi[:] = x
                variants = [(lambda: native(x, want), want),
                            (lambda: cp.run(comm, (x, y, scratch), np.add), y),
                            (lambda: sp.run(comm, (x, y, None), np.add), y),
                            (lambda: sp.run(comm, (wi, wo, None), np.add), wo)]
                oks = []
                for fn, got in variants[1:]:
                    fn()
                    oks.append(comm.allreduce(bool(np.array_equal(got, want)), op=MPI.LAND))
                best = [min(ts) for ts in zip(*[[_timed(comm, fn, args.time) for fn, _ in variants]
                                                for _ in range(args.rounds)])]
                res = [f"{bw(t):6.2f}({best[0] / t:4.2f}){'' if ok else '!'}" for t, ok in zip(best[1:], oks)]
                if rank == 0:
                    print(f"  {op:<15}{nbytes >> 20:>4}M  {algo:<12}{bw(best[0]):8.2f}"
                          + "".join(f"{r:>14}" for r in res), flush=True)
                eng.release(wi)
                eng.release(wo)


if __name__ == "__main__":
    main()
