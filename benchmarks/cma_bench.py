"""Large messages on one host: the shared-memory engine with cross-memory attach against native MPI.

    mpiexec -n N python benchmarks/cma_bench.py [--ops allreduce,allgather,reducescatter]
        [--sizes 1M,4M,16M,64M] [--rounds 5] [--out benchmarks/results/cma]

Per op and size (nccl-tests' size: the whole buffer), ordinary numpy arrays, out of place, every
form timed interleaved in each round (native MPI, then each algorithm on the ``@shm`` engine
as the Communicator runs it — cross-memory attach from ``CMA_MIN_BYTES`` (2 MiB), the window
below — then the same with ``PYHCCL_CMA=0``: copy-in and copy-out through the window); a form's
time is its best round, a round the slowest rank's mean of two calls. The
table gives the best algorithm of each engine, its ratio to native MPI (native time / pyhccl
time, higher is better) and the % of the one-host memory bound (:mod:`pyhccl.bench.roofline`,
probed once at the start). Results are checked against numpy once per form. Timings on a
shared 2-core machine are noisy: compare ratios from one run.
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

ALGOS = {"allreduce": ["MeshTwoShot", "NHR", "Ring", "MeshOneShot"],
         "allgather": ["Mesh", "NB", "Ring"],
         "reducescatter": ["Mesh", "NHR", "Ring"]}
OP = {"allreduce": "allreduce", "allgather": "all_gather", "reducescatter": "reduce_scatter"}


def communicators(comm, algos, cma):
    os.environ["PYHCCL_CMA"] = "1" if cma else "0"      # read when each Communicator is made
    out = {a: Communicator(comm.Dup(), algo=a + "@shm") for a in algos}
    first = next(iter(out.values()))
    for c in out.values():
        c.share_window(first)
    return out


def forms(op, comm, x, y, comms):
    call = {"allreduce": "Allreduce", "allgather": "Allgather", "reducescatter": "Reduce_scatter_block"}[op]
    fns = {"native": (lambda: getattr(comm, call)(x, y))}
    for tag, cs in comms.items():
        for a, c in cs.items():
            fns[(tag, a)] = (lambda c=c: getattr(c, call)(x, y))
    return fns


def expected(op, comm, nelem):
    n, r = comm.Get_size(), comm.Get_rank()
    xs = [np.arange(nelem // n if op == "allgather" else nelem, dtype=np.float32) % 97 + k for k in range(n)]
    if op == "allreduce":
        return xs[r], sum(xs[1:], xs[0])
    if op == "allgather":
        return xs[r], np.concatenate(xs)
    return xs[r], sum(xs[1:], xs[0])[r * (nelem // n):(r + 1) * (nelem // n)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", default="allreduce,allgather,reducescatter")
    p.add_argument("--sizes", default="1M,4M,16M,64M")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default=None, help="folder for <op>_<N>.txt and .json (default: print only)")
    a = p.parse_args(argv)
    comm = MPI.COMM_WORLD
    n, rank = comm.Get_size(), comm.Get_rank()
    roof = measure(comm)
    lines = [f"# cma_bench: {n} ranks, {MPI.Get_library_version().splitlines()[0].strip()}, rounds {a.rounds}; "
             f"{roof.describe()}",
             "# ratio = native time / pyhccl time (best algorithm of each engine); bound = % of the memory bound"]
    head = f"{'op':<14}{'size':>10}{'native ms':>11}{'cma ms':>9}{'ratio':>7}{'bound':>7}  {'algo':<13}" \
           f"{'window ms':>10}{'ratio':>7}  {'algo':<12}{'#wrong':>7}"
    lines.append(head)
    results = []
    for op in a.ops.split(","):
        comms = {"cma": communicators(comm, ALGOS[op], True), "window": communicators(comm, ALGOS[op], False)}
        engines = {tag: next(iter(cs.values())).shm_engine().cma for tag, cs in comms.items()}
        for size in (parse_size(s) for s in a.sizes.split(",")):
            nelem = size // 4 // n * n
            x, want = expected(op, comm, nelem)
            y = np.empty_like(want)
            fns = forms(op, comm, x, y, comms)
            wrong = 0
            for k, f in fns.items():                  # warm-up and check
                y[:] = -1
                f()
                wrong += int(np.count_nonzero(y != want)) if k != "native" else 0
            wrong = comm.allreduce(wrong)
            best = {k: float("inf") for k in fns}
            for _ in range(a.rounds):
                for k, f in fns.items():
                    comm.Barrier()
                    t = time.perf_counter()
                    f()
                    f()
                    best[k] = min(best[k], comm.allreduce((time.perf_counter() - t) / 2, op=MPI.MAX))
            nat = best["native"]
            row = {"op": op, "size": size, "nranks": n, "native_s": nat, "wrong": wrong, "cma_engine": engines,
                   "bound_s": bound_seconds(OP[op], n, size, roof), "forms": {}}
            for tag in ("cma", "window"):
                k = min((k for k in best if k != "native" and k[0] == tag), key=best.get)
                row["forms"][tag] = {"algo": k[1], "s": best[k], "ratio": nat / best[k],
                                     "all": {kk[1]: best[kk] for kk in best if kk != "native" and kk[0] == tag}}
            results.append(row)
            c, w = row["forms"]["cma"], row["forms"]["window"]
            lines.append(f"{op:<14}{size:>10}{nat * 1e3:>11.2f}{c['s'] * 1e3:>9.2f}{c['ratio']:>7.2f}"
                         f"{100 * row['bound_s'] / c['s']:>6.0f}%  {c['algo']:<13}{w['s'] * 1e3:>10.2f}"
                         f"{w['ratio']:>7.2f}  {w['algo']:<12}{wrong:>7}")
            if rank == 0:
                print(lines[-1], flush=True)
        for cs in comms.values():
            for c in cs.values():
                c.Free()
    if rank == 0:
        print("\n".join(lines[:3]))
        if a.out:
            os.makedirs(a.out, exist_ok=True)
            stem = os.path.join(a.out, f"{'_'.join(a.ops.split(','))}_{n}")
            with open(stem + ".txt", "w") as f:
                f.write("\n".join(lines) + "\n")
            with open(stem + ".json", "w") as f:
                json.dump({"roofline": {"copy_Bps": roof.copy, "reduce_Bps": roof.reduce}, "rows": results}, f,
                          indent=1)
    return 1 if any(r["wrong"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
