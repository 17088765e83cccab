"""The floor under issue 19's large cells: the fewest copies a collective on ordinary arrays can make, timed.

Run under MPI from the repository root, e.g.::

    .venv/bin/mpiexec -n 2 .venv/bin/python benchmarks/floor.py                      # AllReduce, AlltoAll, AllGather
    .venv/bin/mpiexec -n 4 .venv/bin/python benchmarks/floor.py --ops allgather --sizes 16M,64M

Ranks on one host whose arrays are ordinary process memory (what a new user passes) can only reach a
peer's data through a kernel copy (cross-memory attach: ``process_vm_readv`` / ``process_vm_writev``)
or through a shared buffer it is first copied into. The *floor* schedule of each op moves every byte
the fewest times that allows, with nothing else: raw ``ctypes`` calls on arrays prepared once, numpy for
the local copies and adds, no plan, no lookup, a node barrier on either side (a collective may neither
write into a peer nor read from it before the peer has entered the call, nor return before the peers
are done with its buffers; the barrier is the shared-memory engine's, on sequence flags, which yields
the core when ranks outnumber cores: cheaper than an MPI barrier at every rank count here):

- AlltoAll, AllGather: each rank writes its blocks into its peers' outputs (one kernel copy a byte;
  the push is the faster direction here, ``benchmarks/cma_copy.py``) and copies its own block to its
  output.
- AllReduce, two-shot: each rank reads its slice of every peer's input, ``--chunk`` bytes at a time,
  into a buffer that stays in cache and adds it into its output slice (one kernel copy of the peers'
  slices, one reduce pass), then writes its reduced slice into every peer's output (no rank writes
  another's slice: no barrier between).
  One-shot: each rank reads every peer's whole input by chunks and adds it (more bytes, one barrier
  fewer): the faster of the two is the floor.

The floor counts bytes, not calls: at many ranks and small sizes its N - 1 system calls a rank cost
more than the shared slots' two copies and one barrier, and the default communicator beats it there.

Native MPI (the wrapped library's own collective on the same arrays) and pyhccl's default
communicator run in the same rounds, interleaved; a form's time is its best round (each the slowest
rank's median of ``--iters`` calls). Printed per op and size: the three times, ``native / floor`` (the
best ratio to native that any schedule of these copies reaches on this machine) and ``native /
pyhccl``. Every form's output is checked against numpy once. Results: ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyhccl import Communicator  # noqa: E402
from pyhccl.core.units import parse_size  # noqa: E402
from pyhccl.run.shm.cma import Remote, available, reader, writer  # noqa: E402
from pyhccl.run.shm.flags import FlagBarrier  # noqa: E402

OPS = ("allreduce", "alltoall", "allgather")


def _split(total: int, n: int) -> list[tuple[int, int]]:
    """``[0, total)`` in ``n`` slices, floor + tail (element offsets)."""
    q = total // n
    return [(i * q, total if i == n - 1 else (i + 1) * q) for i in range(n)]


class Forms:
    """One op at one size on this rank: its arrays, and each form as a callable of no arguments."""

    def __init__(self, comm: MPI.Intracomm, op: str, nbytes: int, chunk: int, barrier) -> None:
        self.comm, self.op = comm, op
        n, me = comm.Get_size(), comm.Get_rank()
        count = nbytes // 4 // n * n
        blk = count // n
        if op == "allgather":
            self.x = np.random.default_rng(me).random(blk, dtype=np.float32)
            self.y = np.empty(count, np.float32)
        else:
            self.x = np.random.default_rng(me).random(count, dtype=np.float32)
            self.y = np.empty(count, np.float32)
        x, y = self.x, self.y
        peers = comm.allgather((os.getpid(), x.ctypes.data, y.ctypes.data))
        others = [(me + k) % n for k in range(1, n)]
        if op in ("alltoall", "allgather"):
            if op == "alltoall":
                mine = [x[q * blk:(q + 1) * blk] for q in range(n)]
                pushes = [writer(mine[q], Remote(peers[q][0], peers[q][2] + me * blk * 4, blk, 4)) for q in others]
                own_src = mine[me]
            else:
                pushes = [writer(x, Remote(peers[q][0], peers[q][2] + me * blk * 4, blk, 4)) for q in others]
                own_src = x
            own_dst = y[me * blk:(me + 1) * blk]

            def floor() -> None:
                barrier()
                for p in pushes:
                    p()
                np.copyto(own_dst, own_src)
                barrier()

            self.floors = {"push": floor}
        else:
            slices = _split(count, n)
            lo, hi = slices[me]
            bounce = np.empty(max(1, chunk // 4), np.float32)
            # two-shot: my slice of every peer's input, chunk by chunk, added into my output slice

            def reads(lo: int, hi: int) -> list[tuple]:
                """Per chunk of ``[lo, hi)``, per peer: (its read, the bounce buffer, what it adds to, the output);
                the first peer's adds to the input, the next ones' to the output."""
                out = []
                for a in range(lo, hi, len(bounce)):
                    b = min(hi, a + len(bounce))
                    for i, q in enumerate(others):
                        out.append((reader(Remote(peers[q][0], peers[q][1] + a * 4, b - a, 4), bounce[:b - a]),
                                    bounce[:b - a], x[a:b] if i == 0 else y[a:b], y[a:b]))
                return out

            mine = reads(lo, hi)
            pushes = [writer(y[lo:hi], Remote(peers[q][0], peers[q][2] + lo * 4, hi - lo, 4)) for q in others]
            add = np.add

            def two_shot() -> None:
                barrier()
                for read, buf, src, out in mine:
                    read()
                    add(src, buf, out=out)
                for p in pushes:                # no peer writes this slice of any output: no barrier before
                    p()
                barrier()

            whole = reads(0, count)

            def one_shot() -> None:
                barrier()
                for read, buf, src, out in whole:
                    read()
                    add(src, buf, out=out)
                barrier()

            self.floors = {"two-shot": two_shot, "one-shot": one_shot}
        pc = self.pc = Communicator(comm)
        if op == "allreduce":
            self.native = lambda: comm.Allreduce(x, y)
            self.pyhccl = lambda: pc.Allreduce(x, y)
        elif op == "alltoall":
            self.native = lambda: comm.Alltoall(x, y)
            self.pyhccl = lambda: pc.Alltoall(x, y)
        else:
            self.native = lambda: comm.Allgather(x, y)
            self.pyhccl = lambda: pc.Allgather(x, y)

    def expected(self) -> np.ndarray:
        comm, x = self.comm, self.x
        n = comm.Get_size()
        every = comm.allgather(x)           # small enough at these sizes: the check runs once a form
        if self.op == "allreduce":
            out = every[0].copy()
            for v in every[1:]:
                out += v
            return out
        if self.op == "allgather":
            return np.concatenate(every)
        blk = len(x) // n
        me = comm.Get_rank()
        return np.concatenate([v[me * blk:(me + 1) * blk] for v in every])

    def check(self, fn) -> bool:
        self.y[:] = np.nan
        fn()
        self.comm.Barrier()
        want = self.expected()
        ok = np.allclose(self.y, want, rtol=1e-5) if self.op == "allreduce" else np.array_equal(self.y, want)
        return bool(self.comm.allreduce(ok, op=MPI.LAND))


def timed(comm: MPI.Intracomm, fn, iters: int) -> float:
    """The slowest rank's median seconds a call over ``iters`` calls (after one warm call)."""
    fn()
    times = []
    for _ in range(iters):
        comm.Barrier()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return comm.allreduce(float(np.median(times)), op=MPI.MAX)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", default=",".join(OPS), help="comma-separated: " + ", ".join(OPS))
    p.add_argument("--sizes", default="1M,4M,16M,64M", help="nccl-tests' sizes (the whole buffer), comma-separated")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--chunk", default="256K", help="AllReduce floors: bytes read from a peer at a time")
    p.add_argument("--out", default="", help="a file for the table (and .json beside it)")
    a = p.parse_args()
    comm = MPI.COMM_WORLD
    n, me = comm.Get_size(), comm.Get_rank()
    if n < 2 or not comm.allreduce(available(), op=MPI.LAND):
        if me == 0:
            print("expecting 2 or more ranks on one Linux host with cross-memory attach")
        return 1
    flags = FlagBarrier(comm.Split_type(MPI.COMM_TYPE_SHARED))
    ops = [o.strip() for o in a.ops.split(",") if o.strip()]
    bad = [o for o in ops if o not in OPS]
    if bad:
        p.error(f"--ops: unknown {bad}; expecting some of {', '.join(OPS)}")
    lines = [f"# benchmarks/floor.py: {n} ranks, {MPI.Get_library_version().splitlines()[0].strip()}, best of "
             f"{a.rounds} rounds of {a.iters} calls (median, slowest rank), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             "# native / floor: the best ratio to native MPI any schedule of the fewest copies reaches here; "
             "native / pyhccl: the default communicator's",
             f"{'op':<10} {'size':>6} {'native us':>10} {'floor us':>10} {'floor form':>10} {'pyhccl us':>10} "
             f"{'native/floor':>13} {'native/pyhccl':>14}"]
    rows = []
    if me == 0:
        print("\n".join(lines), flush=True)
    for op in ops:
        for size in (parse_size(s) for s in a.sizes.split(",")):
            f = Forms(comm, op, size, parse_size(a.chunk), flags.wait)
            forms = {"native": f.native, "pyhccl": f.pyhccl, **{"floor " + k: v for k, v in f.floors.items()}}
            wrong = [k for k, fn in forms.items() if not f.check(fn)]
            best = {k: float("inf") for k in forms}
            for _ in range(a.rounds):
                for k, fn in forms.items():
                    best[k] = min(best[k], timed(comm, fn, a.iters))
            fk = min((k for k in forms if k.startswith("floor")), key=best.get)
            row = {"op": op, "size": size, "ranks": n, "native_us": best["native"] * 1e6,
                   "floor_us": best[fk] * 1e6, "floor_form": fk[6:], "pyhccl_us": best["pyhccl"] * 1e6,
                   "native_over_floor": best["native"] / best[fk], "native_over_pyhccl": best["native"] / best["pyhccl"],
                   "wrong": wrong}
            rows.append(row)
            line = (f"{op:<10} {size >> 20:>5}M {row['native_us']:>10.0f} {row['floor_us']:>10.0f} {row['floor_form']:>10} "
                    f"{row['pyhccl_us']:>10.0f} {row['native_over_floor']:>13.2f} {row['native_over_pyhccl']:>14.2f}"
                    + (f"   WRONG: {', '.join(wrong)}" if wrong else ""))
            lines.append(line)
            if me == 0:
                print(line, flush=True)
            del f
    if me == 0 and a.out:
        Path(a.out).write_text("\n".join(lines) + "\n")
        Path(a.out).with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if not any(r["wrong"] for r in rows) else 2


if __name__ == "__main__":
    sys.exit(main())
