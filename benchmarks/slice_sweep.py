"""Which UB transfer size (the largest message a step is sliced into) is fastest on this machine.

Run under MPI from the repository root::

    .venv/bin/mpiexec -n 2 .venv/bin/python benchmarks/slice_sweep.py --topo 1x1x2
    MPIR_CVAR_ENABLE_HEAVY_YIELD=1 .venv/bin/mpiexec -n 4 .venv/bin/python benchmarks/slice_sweep.py --topo 1x1x4
    ... benchmarks/slice_sweep.py --topo 1x2x2 --sizes 1M,16M --ubs 128K,512K,2M --algos NHR,Ring --json out.json

(heavy yield where there are more ranks than cores, as benchmarks/compare.py does).

HCCL slices every transfer to the UB size; pyhccl's MPI engine does the same with
``ub_transfer_bytes`` (default 512 KiB, HCCL's figure). Here a message's cost and the overlap of
consecutive messages decide the best size instead. For each algorithm of ``--algos`` (run on the
MPI engine: the ``@shm`` engine does not slice into messages), each message size of ``--sizes`` and
each UB size of ``--ubs``, rank 0 prints the AllReduce time (the slowest rank's median block) and
its ratio to the same algorithm at 512 KiB, with native MPI's time beside it; then, per UB size,
the geometric mean of those ratios over every (algorithm, size), and the fastest UB size.

A tuning file records the UB size it was measured with, and a communicator given that file runs
with it (unless ``ub_transfer_bytes`` or ``PYHCCL_UB_TRANSFER_BYTES`` says otherwise), so to tune
for the fastest size::

    PYHCCL_UB_TRANSFER_BYTES=<fastest> mpiexec -n 4 python -m pyhccl.bench allreduce --algo all --tune t.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyhccl import Communicator  # noqa: E402
from pyhccl.bench.driver import time_call  # noqa: E402
from pyhccl.core.settings import UB_TRANSFER_BYTES  # noqa: E402
from pyhccl.core.units import format_size, parse_size  # noqa: E402


def sizes(text: str, what: str) -> list[int]:
    try:
        out = [parse_size(t) for t in text.split(",") if t.strip()]
    except ValueError as e:
        raise SystemExit(f"{what}: {e}") from None
    if not out or min(out) <= 0:
        raise SystemExit(f"{what}: expecting positive sizes such as 64K,512K,2M, got {text!r}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--topo", default=None, help="topology spec to emulate (default: PYHCCL_TOPO, else detected)")
    p.add_argument("--algos", default="NHR,Ring,MeshTwoShot,RHD", help="pyhccl templates on the MPI engine")
    p.add_argument("--sizes", default="1M,4M,16M,64M", help="AllReduce message sizes")
    p.add_argument("--ubs", default="64K,128K,256K,512K,1M,2M,4M,8M", help="UB transfer sizes to try")
    p.add_argument("--iters", type=int, default=12, help="timed calls per point (in 3 blocks)")
    p.add_argument("--json", default=None, help="write every point here")
    a = p.parse_args(argv)
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    msg_sizes, ubs = sizes(a.sizes, "--sizes"), sizes(a.ubs, "--ubs")
    if UB_TRANSFER_BYTES not in ubs:
        ubs = sorted([*ubs, UB_TRANSFER_BYTES])        # the reference every ratio is taken against
    algos = [t.strip() for t in a.algos.split(",") if t.strip()]
    if any(t.endswith("@shm") for t in algos):
        raise SystemExit("--algos: the @shm engine does not slice into UB messages; name MPI-engine templates")
    comms = {(algo, ub): Communicator(comm, algo=algo, ub_transfer_bytes=ub, topo=a.topo) for algo in algos for ub in ubs}
    points: list[dict] = []
    out = sys.stdout if rank == 0 else None
    head = f"{'size':>6} {'algorithm':<12} {'native us':>10} " + " ".join(f"{format_size(u):>12}" for u in ubs) + "  best"
    if out:
        print(f"# AllReduce float32 sum, {comm.Get_size()} ranks, topo {a.topo or 'detected'}: time (us) per UB size,"
              f" and its ratio to {format_size(UB_TRANSFER_BYTES)}", file=out)
        print(head, file=out, flush=True)
    for nbytes in msg_sizes:
        send = np.full(nbytes // 4, rank + 1, np.float32)
        recv = np.empty_like(send)
        native = time_call(comm, lambda: comm.Allreduce(send, recv), a.iters, 2, blocks=3)
        want = np.float32(comm.Get_size() * (comm.Get_size() + 1) // 2)
        for algo in algos:
            times = {}
            for ub in ubs:
                pc = comms[algo, ub]
                recv.fill(0)
                pc.Allreduce(send, recv)
                if comm.allreduce(int(not np.all(recv == want)), op=MPI.MAX):     # every rank stops
                    raise SystemExit(f"{algo} at UB {ub} gave a wrong AllReduce of {nbytes} B")
                times[ub] = time_call(comm, lambda: pc.Allreduce(send, recv), a.iters, 2, blocks=3)
            ref = times[UB_TRANSFER_BYTES]
            best = min(times, key=times.get)
            for ub, t in times.items():
                points.append({"nbytes": nbytes, "algo": algo, "ub": ub, "seconds": t, "native_seconds": native,
                               "ratio_to_default": t / ref})
            if out:
                cells = " ".join(f"{t * 1e6:>7.0f} {t / ref:>4.2f}" for t in times.values())
                print(f"{format_size(nbytes):>6} {algo:<12} {native * 1e6:>10.0f} {cells}  {format_size(best)}",
                      file=out, flush=True)
    if out:
        gm = {ub: math.exp(sum(math.log(q["ratio_to_default"]) for q in points if q["ub"] == ub) /
                           sum(1 for q in points if q["ub"] == ub)) for ub in ubs}
        print("# geometric mean of time / time at " + format_size(UB_TRANSFER_BYTES) + ": " +
              ", ".join(f"{format_size(u)} {g:.3f}" for u, g in gm.items()), file=out)
        fastest = min(gm, key=gm.get)
        print(f"# fastest UB size here: {format_size(fastest)} ({gm[fastest]:.3f} of the time at "
              f"{format_size(UB_TRANSFER_BYTES)}); tune with PYHCCL_UB_TRANSFER_BYTES={fastest}", file=out)
        if a.json:
            Path(a.json).write_text(json.dumps({"nranks": comm.Get_size(), "topo": a.topo, "points": points,
                                                "geomean_ratio": {str(u): g for u, g in gm.items()},
                                                "fastest_ub": fastest}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
