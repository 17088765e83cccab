"""Every collective but AllReduce on the shared-memory engine against native MPI, 1-64 MiB (issue 19, target 4).

    mpiexec -n N python benchmarks/collectives_shm.py [--ops allgather,reducescatter,broadcast,reduce,alltoall]
        [--sizes 1M,4M,16M,64M] [--rounds 5] [--round-s 0.02] [--algos allgather=Mesh,NB] [--out DIR]

Per op and size (nccl-tests' size: the whole buffer; Broadcast and Reduce: each rank's buffer),
float32 SUM, ordinary numpy arrays, out of place (Broadcast: in its one buffer, root 0; Reduce:
root 0), every form timed interleaved in each round: native MPI (the wrapped MPICH's
collective), then each algorithm ``Name@shm`` as the Communicator runs it (cross-memory attach
from ``CMA_MIN_BYTES``, the window below). A form's time is its best round, a round the
slowest rank's mean of 2 to 20 calls in a row (``--round-s``: as many as native MPI runs in
20 ms). The table gives each algorithm's ratio (native time / pyhccl time, higher is better),
the best one's % of the one-host memory bound
(:mod:`pyhccl.bench.roofline`, probed once at the start) and #wrong (every element of every
form checked against numpy once). With MPICH run oversubscribed, set
``MPIR_CVAR_ENABLE_HEAVY_YIELD=1``. Timings on a shared 2-core machine are noisy: compare ratios
from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
from mpi4py import MPI

from pyhccl import Communicator
from pyhccl.bench.roofline import bound_seconds, measure
from pyhccl.core.units import parse_size
from pyhccl.run.shm import engine as shm_engine_module

ALGOS = {"allgather": ["Mesh", "NB"], "reducescatter": ["Mesh", "NHR"], "broadcast": ["Mesh", "MeshTwoShot"],
         "reduce": ["Mesh", "MeshTwoShot"], "alltoall": ["Mesh", "Pairwise"]}
OP = {"allgather": "all_gather", "reducescatter": "reduce_scatter", "broadcast": "broadcast", "reduce": "reduce",
      "alltoall": "alltoall"}


def setup(op, comm, nelem):
    """``(call(c), output array, expected output)``: ``call(c)`` runs the op on ``c`` (a Communicator or
    the MPI communicator) with this rank's buffers; ``nelem``: elements of nccl-tests' size."""
    n, r = comm.Get_size(), comm.Get_rank()
    blk = nelem // n

    def data(k, m):
        return (np.arange(m, dtype=np.float32) * 7 + 3 * k) % 97

    if op == "allgather":
        x, y = data(r, blk), np.empty(blk * n, np.float32)
        return (lambda c: c.Allgather(x, y)), y, np.concatenate([data(k, blk) for k in range(n)])
    if op == "reducescatter":
        x, y = data(r, blk * n), np.empty(blk, np.float32)
        want = sum(data(k, blk * n) for k in range(n))[r * blk:(r + 1) * blk]
        return (lambda c: c.Reduce_scatter_block(x, y)), y, want
    if op == "alltoall":
        x, y = data(r, blk * n), np.empty(blk * n, np.float32)
        want = np.concatenate([data(k, blk * n)[r * blk:(r + 1) * blk] for k in range(n)])
        return (lambda c: c.Alltoall(x, y)), y, want
    if op == "broadcast":
        root = data(0, nelem)
        y = root.copy() if r == 0 else np.empty(nelem, np.float32)     # the root's data is never written
        return (lambda c: c.Bcast(y, root=0)), y, root
    if op == "reduce":
        x, y = data(r, nelem), np.empty(nelem, np.float32)
        want = sum(data(k, nelem) for k in range(n)) if r == 0 else y
        return (lambda c: c.Reduce(x, y if r == 0 else None, root=0)), y, want
    raise ValueError(f"expecting one of {', '.join(ALGOS)} in --ops, got {op!r}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", default=",".join(ALGOS))
    p.add_argument("--sizes", default="1M,4M,16M,64M")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--round-s", type=float, default=0.02,
                   help="a round of a form runs about this long: 2 to 20 calls, as many as native MPI runs in it")
    p.add_argument("--algos", action="append", default=[], metavar="OP=A,B",
                   help="the @shm algorithms of an op (default: " + "; ".join(f"{k}={','.join(v)}"
                                                                         for k, v in ALGOS.items()) + ")")
    p.add_argument("--cma-min", type=int, default=None, metavar="BYTES",
                   help="a study: read peers' arrays with cross-memory attach from this many bytes (default: "
                        "pyhccl.run.shm.engine.CMA_MIN_BYTES)")
    p.add_argument("--out", default=None, help="folder for collectives_<N>.txt and .json (default: print only)")
    a = p.parse_args(argv)
    algos = dict(ALGOS)
    for text in a.algos:
        op, _, names = text.partition("=")
        if op not in ALGOS or not names:
            raise SystemExit(f"--algos: expecting OP=Name[,Name] with OP one of {', '.join(ALGOS)}, got {text!r}")
        algos[op] = names.split(",")
    comm = MPI.COMM_WORLD
    n, rank = comm.Get_size(), comm.Get_rank()
    if a.cma_min is not None:
        shm_engine_module.CMA_MIN_BYTES = a.cma_min
    roof = measure(comm)
    lines = [f"# collectives_shm: {n} ranks, {MPI.Get_library_version().splitlines()[0].strip()}, rounds {a.rounds}; "
             f"{roof.describe()}",
             "# ratio = native time / pyhccl time (higher is better); bound = the best form's % of the memory bound"]
    head = f"{'op':<14}{'size':>9}{'native ms':>10}{'best':>14}{'ms':>8}{'ratio':>7}{'bound':>7}  others (ratio)  #wrong"
    lines.append(head)
    if rank == 0:
        print("\n".join(lines), flush=True)
    results = []
    for op in a.ops.split(","):
        if op not in ALGOS:
            raise SystemExit(f"--ops: expecting some of {', '.join(ALGOS)}, got {op!r}")
        comms = {x: Communicator(comm.Dup(), algo=x + "@shm") for x in algos[op]}
        first = next(iter(comms.values()))
        for c in comms.values():
            c.share_window(first)
        for size in (parse_size(s) for s in a.sizes.split(",")):
            nelem = size // 4 // n * n
            run, y, want = setup(op, comm, nelem)
            fns = {"native": comm, **comms}
            wrong = 0
            for k, c in fns.items():                # warm-up and check
                if op != "broadcast" or rank != 0:
                    y[:] = -1
                run(c)
                if rank == 0 or op not in ("reduce",):
                    wrong += int(np.count_nonzero(y != want))
            wrong = comm.allreduce(wrong)
            t = time.perf_counter()
            run(comm)
            calls = int(min(20, max(2, a.round_s // comm.allreduce(time.perf_counter() - t, op=MPI.MAX))))
            best = {k: float("inf") for k in fns}
            for _ in range(a.rounds):
                for k, c in fns.items():
                    comm.Barrier()
                    t = time.perf_counter()
                    for _ in range(calls):
                        run(c)
                    best[k] = min(best[k], comm.allreduce((time.perf_counter() - t) / calls, op=MPI.MAX))
            nat = best.pop("native")
            top = min(best, key=best.get)
            bound = bound_seconds(OP[op], n, size, roof)
            results.append({"op": op, "size": size, "nranks": n, "native_s": nat, "bound_s": bound, "wrong": wrong,
                            "best": top + "@shm", "ratios": {k + "@shm": nat / v for k, v in best.items()},
                            "times_s": {k + "@shm": v for k, v in best.items()}})
            others = " ".join(f"{k}:{nat / v:.2f}" for k, v in best.items() if k != top)
            lines.append(f"{op:<14}{size:>9}{nat * 1e3:>10.2f}{top + '@shm':>14}{best[top] * 1e3:>8.2f}"
                         f"{nat / best[top]:>7.2f}{100 * bound / best[top]:>6.0f}%  {others}  {wrong}")
            if rank == 0:
                print(lines[-1], flush=True)
        for c in comms.values():
            c.Free()
    if rank == 0 and a.out:
        os.makedirs(a.out, exist_ok=True)
        stem = os.path.join(a.out, f"collectives_{n}")
        with open(stem + ".txt", "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(stem + ".json", "w") as f:
            json.dump({"roofline": {"copy_Bps": roof.copy, "reduce_Bps": roof.reduce}, "rows": results}, f, indent=1)
    return 1 if any(r["wrong"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
