"""What slicing a transfer into messages costs with this MPI: one exchange cut into pieces, plain mpi4py.

Run under MPI with 2 ranks, with and without MPICH's heavy yield::

    .venv/bin/mpiexec -n 2 .venv/bin/python benchmarks/message_cost.py
    MPIR_CVAR_ENABLE_HEAVY_YIELD=1 .venv/bin/mpiexec -n 2 .venv/bin/python benchmarks/message_cost.py

Ranks 0 and 1 exchange ``--nbytes`` (default 16 MiB) both ways, posted at once as pieces of each
``--pieces`` size (the way pyhccl's MPI engine posts a step sliced to the UB transfer size), then
``Waitall``; rank 0 prints the time, the bandwidth one way and the time per piece. Then the same
exchange of float32 followed by a reduce, two ways: the reduce after the whole exchange ("after"),
and each piece reduced as soon as it arrives while the later ones are in flight ("arriving").
Each figure is the median of ``--rounds`` blocks of ``--iters`` calls (the slower rank's mean per block). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyhccl.bench.driver import time_call  # noqa: E402
from pyhccl.core.units import format_size, parse_size  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nbytes", default="16M", help="bytes exchanged each way (default 16M)")
    p.add_argument("--pieces", default="64K,512K,4M,16M", help="piece sizes (default 64K,512K,4M,16M)")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    comm = MPI.COMM_WORLD
    if comm.Get_size() != 2:
        raise SystemExit(f"expecting 2 ranks (mpiexec -n 2), got {comm.Get_size()}")
    rank, peer = comm.Get_rank(), 1 - comm.Get_rank()
    nbytes = parse_size(a.nbytes)
    pieces = [parse_size(x) for x in a.pieces.split(",")]
    say = print if rank == 0 else (lambda *_, **__: None)
    say(f"# message_cost.py: {format_size(nbytes)} each way, MPIR_CVAR_ENABLE_HEAVY_YIELD="
        f"{os.environ.get('MPIR_CVAR_ENABLE_HEAVY_YIELD', 'unset')}; {MPI.Get_library_version().splitlines()[0]}")
    src, dst = np.ones(nbytes, np.uint8), np.empty(nbytes, np.uint8)
    for piece in pieces:
        cuts = range(0, nbytes, piece)

        def exchange():
            reqs = [r for lo in cuts for r in (comm.Irecv(dst[lo:lo + piece], peer, 1),
                                                comm.Isend(src[lo:lo + piece], peer, 1))]
            MPI.Request.Waitall(reqs)
        t = time_call(comm, exchange, a.iters * a.rounds, 1, blocks=a.rounds)
        say(f"exchange in {format_size(piece):>5} pieces: {t * 1e3:8.2f} ms, {nbytes / t / 1e9:6.2f} GB/s, "
            f"{t / len(cuts) * 1e6:8.1f} us per piece", flush=True)
    x = np.ones(nbytes // 4, np.float32)
    y, z = np.empty_like(x), np.ones_like(x)
    for piece in pieces:
        k = max(1, piece // 4)
        cuts = range(0, x.size, k)

        def after():
            reqs = [comm.Irecv(y[lo:lo + k], peer, 2) for lo in cuts] + [comm.Isend(x[lo:lo + k], peer, 2) for lo in cuts]
            MPI.Request.Waitall(reqs)
            np.add(z, y, out=z)

        def arriving():
            recvs = [comm.Irecv(y[lo:lo + k], peer, 2) for lo in cuts]
            sends = [comm.Isend(x[lo:lo + k], peer, 2) for lo in cuts]
            for r, lo in zip(recvs, cuts):
                r.Wait()
                np.add(z[lo:lo + k], y[lo:lo + k], out=z[lo:lo + k])
            MPI.Request.Waitall(sends)
        ta = time_call(comm, after, a.iters * a.rounds, 1, blocks=a.rounds)
        tr = time_call(comm, arriving, a.iters * a.rounds, 1, blocks=a.rounds)
        say(f"exchange + reduce in {format_size(piece):>5} pieces: after {ta * 1e3:7.2f} ms, "
            f"arriving {tr * 1e3:7.2f} ms ({tr / ta:.2f}x)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
