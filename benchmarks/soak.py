"""Soak: many small and large collectives on pyhccl.Communicator; resident memory must stay flat.

Run under MPI (issue 7, item 5)::

    MPIR_CVAR_ENABLE_HEAVY_YIELD=1 .venv/bin/mpiexec -n 4 .venv/bin/python benchmarks/soak.py [--json FILE]

Two phases, ``small`` (default 100 000 calls of 8 B-4 KiB) and ``large`` (1 000 calls of
4-16 MiB), each cycling through the same list of calls a training loop makes, on four
communicators: HCCL's default selection, ``algo="Ring"`` and two shared-memory engines
(``MeshTwoShot@shm``, ``Mesh@shm``: the window path). The list mixes Allreduce (out of place,
in place, SUM and MAX, float32 and int32), Allgather, Allgatherv and Reduce_scatter in place
(staged), Reduce_scatter_block, Bcast, Reduce, Alltoall and Barrier; ``warm`` calls reuse the
same argument objects (the warm path), ``fresh`` ones allocate new arrays every call. Inputs
change every pass, and every ``--check-every``-th pass each result is compared with its exact
value (small integers, so any reduction order is exact). Bcast and Reduce use root (index of the
size) % ranks.

Every rank samples its resident memory (VmRSS from /proc/self/status, else the peak from
getrusage) at the end of every full cycle (sizes x passes x calls), where the library's caches
are in the same state. The baseline is the first sample after the warm-up (``--warmup``, the
first 10 % of a phase's calls); the largest later sample must stay within ``--tolerance`` (5 %)
of it on every rank. Large arrays are mmapped and unmapped when freed (glibc's mmap threshold
pinned at 256 KiB; ``--keep-malloc`` keeps glibc's default, whose heap fragmentation shows as
RSS growth with flat live memory: see ``pin_mmap_threshold``). At each sample the ranks also
agree on their status (one allreduce), so a wrong result anywhere stops every rank; an exception
aborts the job (MPI_Abort), never a hang.
Rank 0 prints the table (wall time and us/call include filling the inputs and the checks) and
the verdict; the exit status is 1 if memory grew or any result was wrong. Nothing here asserts
timings.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import pyhccl  # noqa: E402
from pyhccl.comm.warm import WarmCache  # noqa: E402

MiB = 1 << 20

# -- warm-path counter: WarmCache.lookup returns the remembered call of a repeated call -------------
_warm_hits = 0
_lookup = WarmCache.lookup


def _counting_lookup(cache, method, args):
    global _warm_hits
    hit = _lookup(cache, method, args)
    if hit is not None:
        _warm_hits += 1
    return hit


WarmCache.lookup = _counting_lookup


def rss_bytes() -> int:
    """Resident memory of this process: VmRSS, else getrusage's peak (Linux: KiB)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def pin_mmap_threshold(nbytes: int) -> bool:
    """glibc: serve allocations of ``nbytes`` or more by mmap and unmap them when freed.

    By default glibc raises this threshold when a large mmapped block is freed, so later 4-16 MiB
    arrays come from the heap, whose fragmentation keeps freed pages resident: RSS then creeps
    up (measured: +3-6 % over 3 000 large calls) while the live memory stays flat. Pinning the
    threshold makes RSS follow the live memory. False where there is no glibc ``mallopt``.
    """
    try:
        return bool(ctypes.CDLL(None).mallopt(-3, nbytes))     # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        return False


def parse_size(text: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip()
    return int(text[:-1]) * mult[text[-1].upper()] if text[-1].upper() in mult else int(text)


def fmt_size(n: int) -> str:
    for unit, k in (("M", MiB), ("K", 1024)):
        if n >= k and n % k == 0:
            return f"{n // k}{unit}"
    return f"{n}"


class Kind:
    """One kind of call: ``fn(kind, size, seed, root, check)`` makes it once; False when checked and wrong.

    The input of rank p is ``pat + 3p + seed`` (``pat``: 0..250 repeating), so sums over ranks
    are exact in every dtype used and each rank's block is distinguishable.
    """

    def __init__(self, label: str, comm: pyhccl.Communicator, fresh: bool, dtype, fn: Callable) -> None:
        self.label, self.comm, self.fresh, self.dtype, self.fn = label, comm, fresh, np.dtype(dtype), fn
        self.state: dict[int, tuple] = {}        # warm: the arrays of each size, reused

    def arrays(self, size: int, make: Callable[[], tuple]) -> tuple:
        if self.fresh:
            return make()
        if size not in self.state:
            self.state[size] = make()
        return self.state[size]


class Soak:
    def __init__(self, world: MPI.Intracomm, max_bytes: int) -> None:
        self.world = world
        self.n, self.r = world.Get_size(), world.Get_rank()
        self.pat = {np.dtype(t): (np.arange(max_bytes // np.dtype(t).itemsize + 2 * self.n + 8) % 251).astype(t)
                    for t in (np.float32, np.float64, np.int32)}
        default = pyhccl.Communicator(world)
        ring = pyhccl.Communicator(world, algo="Ring")
        shm2 = pyhccl.Communicator(world, algo="MeshTwoShot@shm")
        shm = pyhccl.Communicator(world, algo="Mesh@shm")
        self.comms = {"default": default, "Ring": ring, "MeshTwoShot@shm": shm2, "Mesh@shm": shm}
        f32, f64, i32 = np.float32, np.float64, np.int32
        self.kinds = [
            Kind("Allreduce", default, False, f32, self.allreduce),
            Kind("Allreduce in place MAX", default, False, f32, self.allreduce_max_in_place),
            Kind("Allgather", default, False, f32, self.allgather),
            Kind("Reduce_scatter_block", default, False, f32, self.reduce_scatter_block),
            Kind("Bcast", default, False, f64, self.bcast),
            Kind("Allreduce", default, True, i32, self.allreduce),
            Kind("Alltoall", default, True, f32, self.alltoall),
            Kind("Reduce", default, True, f32, self.reduce),
            Kind("Reduce_scatter in place uneven", default, False, f32, self.reduce_scatter_v),
            Kind("Allgatherv in place", default, False, f32, self.allgatherv),
            Kind("Barrier", default, False, f32, self.barrier),
            Kind("Allreduce", ring, False, f32, self.allreduce),
            Kind("Allgather", ring, True, f32, self.allgather),
            Kind("Allreduce", shm2, False, f32, self.allreduce),
            Kind("Allreduce in place", shm2, True, f32, self.allreduce_in_place),
            Kind("Bcast", shm2, False, f32, self.bcast),
            Kind("Allgather", shm, False, f32, self.allgather),
            Kind("Reduce_scatter_block", shm, True, f32, self.reduce_scatter_block),
            Kind("Alltoall", shm, False, f32, self.alltoall),
        ]
        self.wrong: list[str] = []
        self.corrupt_at = -1                    # --corrupt-at: this call's input is made wrong (rank 1)
        self.corrupt = False

    def comm_name(self, k: Kind) -> str:
        return next(name for name, c in self.comms.items() if c is k.comm)

    # -- values ----------------------------------------------------------------------------------
    def inp(self, k: Kind, out: np.ndarray, at: int, rank: int, seed: int) -> np.ndarray:
        """Rank ``rank``'s input at element ``at`` of the pattern, written into ``out``."""
        np.add(self.pat[k.dtype][at:at + out.size], 3 * rank + seed, out=out)
        if self.corrupt:                        # --corrupt-at: a wrong input, so that the results are wrong
            out[:1] += 1
        return out

    def total(self, k: Kind, count: int, at: int, seed: int) -> np.ndarray:
        """The sum over ranks of their inputs (count elements from ``at``)."""
        n = self.n
        return n * self.pat[k.dtype][at:at + count] + (3 * n * (n - 1) // 2 + n * seed)

    # -- the calls ---------------------------------------------------------------------------------
    def allreduce(self, k: Kind, size: int, seed: int, root: int, check: bool) -> bool:
        c = max(1, size // k.dtype.itemsize)
        x, y = k.arrays(size, lambda: (np.empty(c, k.dtype), np.empty(c, k.dtype)))
        k.comm.Allreduce(self.inp(k, x, 0, self.r, seed), y)
        return not check or np.array_equal(y, self.total(k, c, 0, seed))

    def allreduce_in_place(self, k: Kind, size: int, seed: int, root: int, check: bool) -> bool:
        c = max(1, size // k.dtype.itemsize)
        (x,) = k.arrays(size, lambda: (np.empty(c, k.dtype),))
        k.comm.Allreduce(MPI.IN_PLACE, self.inp(k, x, 0, self.r, seed))
        return not check or np.array_equal(x, self.total(k, c, 0, seed))

    def allreduce_max_in_place(self, k: Kind, size: int, seed: int, root: int, check: bool) -> bool:
        c = max(1, size // k.dtype.itemsize)
        (x,) = k.arrays(size, lambda: (np.empty(c, k.dtype),))
        k.comm.Allreduce(MPI.IN_PLACE, self.inp(k, x, 0, self.r, seed), op=MPI.MAX)
        return not check or np.array_equal(x, self.pat[k.dtype][:c] + 3 * (self.n - 1) + seed)

    def allgather(self, k: Kind, size: int, seed: int, root: int, check: bool) -> bool:
        b = max(1, size // k.dtype.itemsize // self.n)
        x, g = k.arrays(size, lambda: (np.empty(b, k.dtype), np.empty(b * self.n, k.dtype)))
        k.comm.Allgather(self.inp(k, x, 0, self.r, seed), g)
        if not check:
            return True
        want = self.pat[k.dtype][:b] + (3 * np.arange(self.n) + seed)[:, None]
        return np.array_equal(g.reshape(self.n, b), want)

    def reduce_scatter_block(self, k: Kind, size: int, seed: int, root: int, check: bool) -> bool:
        b = max(1, size // k.dtype.itemsize // self.n)
        x, y = k.arrays(size, lambda: (np.empty(b * self.n, k.dtype), np.empty(b, k.dtype)))
        k.comm.Reduce_scatter_block(self.inp(k, x, 0, self.r, seed), y)
        return not check or np.array_equal(y, self.total(k, b, self.r * b, seed))

    def reduce_scatter_v(self, k: Kind, size: int, seed: int, root: int, check: bool) -> bool:
        b = max(1, size // k.dtype.itemsize // self.n)
        counts = [b + p % 2 for p in range(self.n)]
        (x,) = k.arrays(size, lambda: (np.empty(sum(counts), k.dtype),))
        k.comm.Reduce_scatter(MPI.IN_PLACE, self.inp(k, x, 0, self.r, seed), counts)
        at = sum(counts[:self.r])
        return not check or np.array_equal(x[:counts[self.r]], self.total(k, counts[self.r], at, seed))

    def allgatherv(self, k: Kind, size: int, seed: int, root: int, check: bool) -> bool:
        b = max(1, size // k.dtype.itemsize // self.n)
        counts = [b + p % 2 for p in range(self.n)]
        displs = np.cumsum([0] + counts[:-1]).tolist()
        (x,) = k.arrays(size, lambda: (np.empty(sum(counts), k.dtype),))
        lo = displs[self.r]
        self.inp(k, x[lo:lo + counts[self.r]], 0, self.r, seed)
        k.comm.Allgatherv(MPI.IN_PLACE, [x, (counts, displs)])
        if not check:
            return True
        return all(np.array_equal(x[d:d + c], self.pat[k.dtype][:c] + 3 * p + seed)
                   for p, (c, d) in enumerate(zip(counts, displs)))

    def bcast(self, k: Kind, size: int, seed: int, root: int, check: bool) -> bool:
        c = max(1, size // k.dtype.itemsize)
        (x,) = k.arrays(size, lambda: (np.zeros(c, k.dtype),))
        if self.r == root:
            self.inp(k, x, 0, root, seed)
        k.comm.Bcast(x, root)
        return not check or np.array_equal(x, self.pat[k.dtype][:c] + 3 * root + seed)

    def reduce(self, k: Kind, size: int, seed: int, root: int, check: bool) -> bool:
        c = max(1, size // k.dtype.itemsize)
        x, y = k.arrays(size, lambda: (np.empty(c, k.dtype), np.empty(c, k.dtype) if self.r == root else None))
        k.comm.Reduce(self.inp(k, x, 0, self.r, seed), y, root=root)
        return not check or self.r != root or np.array_equal(y, self.total(k, c, 0, seed))

    def alltoall(self, k: Kind, size: int, seed: int, root: int, check: bool) -> bool:
        n = self.n
        b = max(1, size // k.dtype.itemsize // n)
        x, y = k.arrays(size, lambda: (np.empty(b * n, k.dtype), np.empty(b * n, k.dtype)))
        pat = self.pat[k.dtype][:b]
        np.add(pat, (3 * self.r + seed + 17 * np.arange(n, dtype=k.dtype))[:, None], out=x.reshape(n, b))
        if self.corrupt:
            x[:1] += 1
        k.comm.Alltoall(x, y)
        return not check or np.array_equal(y.reshape(n, b), pat + (3 * np.arange(n) + 17 * self.r + seed)[:, None])

    def barrier(self, k: Kind, size: int, seed: int, root: int, check: bool) -> bool:
        k.comm.Barrier()
        return True

    # -- a phase -----------------------------------------------------------------------------------
    def phase(self, name: str, calls: int, sizes: list[int], repeat: int, check_every: int,
              warmup: float, every: int = 0) -> dict:
        """Run ``calls`` calls, sampling RSS at every cycle's end (or every ``every`` calls).

        Stops on every rank at the first sample after a wrong result on any rank.
        """
        nk = len(self.kinds)
        block = nk * repeat                     # one size, ``repeat`` passes over the kinds
        cycle = every or block * len(sizes)
        samples = [(0, rss_bytes())]
        self.wrong = []
        checked = 0
        hits0 = _warm_hits
        self.world.Barrier()
        t0 = time.perf_counter()
        done = wrong = 0
        for i in range(calls):
            blk = i // block
            npass, kind = divmod(i, nk)
            k = self.kinds[kind]
            size = sizes[blk % len(sizes)]
            root = blk % len(sizes) % self.n     # one root per size: every cycle leaves the same state
            check = npass % check_every == 0
            self.corrupt = i == self.corrupt_at
            ok = k.fn(k, size, npass % 7, root, check)
            checked += check
            if not ok:
                how = "fresh" if k.fresh else "warm"
                self.wrong.append(f"rank {self.r}: wrong result of {k.label} ({how}, {self.comm_name(k)}, "
                                  f"{fmt_size(size)} B, {k.dtype}) in call {i} of the {name} phase")
                print(self.wrong[-1], file=sys.stderr, flush=True)
            done = i + 1
            if done % cycle == 0 or done == calls:
                samples.append((done, rss_bytes()))
                wrong = self.world.allreduce(len(self.wrong), op=MPI.SUM)     # every rank learns of it
                if wrong:
                    break
        wall = self.world.allreduce(time.perf_counter() - t0, op=MPI.MAX)
        return {"name": name, "calls": done, "planned": calls, "sizes": [fmt_size(s) for s in sizes],
                "wall_s": wall, "us_per_call": wall / max(done, 1) * 1e6, "warm_hits": _warm_hits - hits0,
                "checked": checked, "wrong": len(self.wrong), "wrong_anywhere": wrong,
                "warmup_calls": int(warmup * calls), "samples": samples}


def memory(phase: dict, tolerance: float) -> dict:
    """This rank's baseline (first sample after the warm-up), min, max, final and growth."""
    after = [rss for call, rss in phase["samples"] if call >= phase["warmup_calls"] and call > 0]
    if not after:
        after = [phase["samples"][-1][1]]
    base = after[0]
    growth = (max(after) - base) / base * 100
    return {"baseline": base, "min": min(after), "max": max(after), "final": after[-1], "growth_pct": growth,
            "ok": growth <= tolerance}


def report(n: int, phases: list[dict], planned: list[str], tolerance: float, warmup: float) -> tuple[bool, list[str]]:
    """The table and verdict (rank 0): ``phases`` holds each phase's per-rank dicts."""
    lines = [f"# soak.py: {n} ranks; {MPI.Get_library_version().splitlines()[0].strip()}",
             f"{'phase':<6} {'calls':>7} {'sizes':<12} {'wall s':>8} {'us/call':>9} {'warm path':>10} "
             f"{'checked':>8} {'wrong':>6}"]
    for per_rank in phases:
        p = per_rank[0]
        wrong = sum(q["wrong"] for q in per_rank)
        lines.append(f"{p['name']:<6} {p['calls']:>7} {','.join(p['sizes']):<12} {p['wall_s']:>8.1f} "
                     f"{p['us_per_call']:>9.1f} {p['warm_hits'] / max(p['calls'], 1):>9.0%} "
                     f"{p['checked']:>8} {wrong:>6}")
    lines.append(f"# resident memory (MiB) per rank; baseline: after the warm-up (the first {warmup:.0%} of the "
                 f"phase's calls); growth: (max - baseline) / baseline, at most {tolerance:g} %")
    lines.append(f"{'phase':<6} {'rank':>4} {'start':>8} {'baseline':>9} {'min':>8} {'max':>8} {'final':>8} "
                 f"{'growth':>8}")
    ok = True
    for per_rank in phases:
        for r, p in enumerate(per_rank):
            m = p["memory"]
            ok &= m["ok"]
            lines.append(f"{p['name']:<6} {r:>4} {p['samples'][0][1] / MiB:>8.1f} {m['baseline'] / MiB:>9.1f} "
                         f"{m['min'] / MiB:>8.1f} {m['max'] / MiB:>8.1f} {m['final'] / MiB:>8.1f} "
                         f"{m['growth_pct']:>+7.2f}%{'' if m['ok'] else ' !'}")
    wrong = sum(p["wrong"] for per_rank in phases for p in per_rank)
    short = [p[0]["name"] for p in phases if p[0]["calls"] < p[0]["planned"]]
    skipped = planned[len(phases):]
    passed = ok and not wrong and not short and not skipped
    if passed:
        lines.append(f"PASS: resident memory within {tolerance:g} % of the post-warm-up baseline on every rank; "
                     f"every checked result right")
    else:
        why = ([] if ok else [f"resident memory grew more than {tolerance:g} %"]) + \
              ([f"{wrong} wrong results"] if wrong else []) + \
              ([f"stopped early: {', '.join(short)}"] if short else []) + \
              ([f"skipped: {', '.join(skipped)}"] if skipped else [])
        lines.append("FAIL: " + "; ".join(why))
    return passed, lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--small-calls", type=int, default=100_000, help="collectives in the small phase")
    p.add_argument("--large-calls", type=int, default=1_000, help="collectives in the large phase")
    p.add_argument("--small-sizes", default="8,64,512,4K", help="bytes per call (each rank's largest buffer)")
    p.add_argument("--large-sizes", default="4M,16M", help="bytes per call in the large phase")
    p.add_argument("--repeat", type=int, default=4, help="passes over the list of calls at one size before the next")
    p.add_argument("--check-every", type=int, default=2, help="verify every result of every K-th pass")
    p.add_argument("--sample-every", type=int, default=0, metavar="N",
                   help="sample RSS every N calls (0: at the end of every cycle of sizes x passes x calls, where "
                        "the library's caches are in the same state)")
    p.add_argument("--warmup", type=float, default=0.1,
                   help="fraction of each phase's calls before the baseline (the first sample after them)")
    p.add_argument("--tolerance", type=float, default=5.0, help="allowed RSS growth over the baseline, percent")
    p.add_argument("--keep-malloc", action="store_true",
                   help="keep glibc's dynamic mmap threshold (default: pinned at 256 KiB, see pin_mmap_threshold)")
    p.add_argument("--json", metavar="FILE", help="write the samples and figures here (rank 0)")
    p.add_argument("--corrupt-at", type=int, default=-1, metavar="CALL",
                   help="testing: rank 1 adds 1 to its input of this call of each phase (a checked call: "
                        "the results must be found wrong)")
    a = p.parse_args()
    world = MPI.COMM_WORLD
    pinned = not a.keep_malloc and pin_mmap_threshold(256 * 1024)
    small = [parse_size(s) for s in a.small_sizes.split(",")]
    large = [parse_size(s) for s in a.large_sizes.split(",")]
    soak = Soak(world, max(small + large))
    if world.Get_rank() == 0:
        print(f"# soak.py: {world.Get_size()} ranks; {len(soak.kinds)} kinds of call on "
              f"{', '.join(soak.comms)}; small {a.small_calls} calls, large {a.large_calls}; "
              f"{'mmap threshold pinned at 256 KiB' if pinned else 'default malloc'}", flush=True)
    phases = []
    todo = [(name, calls, sizes) for name, calls, sizes in (("small", a.small_calls, small),
                                                            ("large", a.large_calls, large)) if calls > 0]
    for name, calls, sizes in todo:
        soak.corrupt_at = a.corrupt_at if world.Get_rank() == 1 else -1
        res = soak.phase(name, calls, sizes, a.repeat, a.check_every, a.warmup, a.sample_every)
        res["memory"] = memory(res, a.tolerance)
        phases.append(world.gather(res, root=0))
        if world.Get_rank() == 0:
            m = max(q["memory"]["growth_pct"] for q in phases[-1])
            print(f"# {name}: {res['calls']} calls in {res['wall_s']:.1f} s; max RSS growth {m:+.2f}%", flush=True)
        if res["wrong_anywhere"]:
            break
    passed = False
    if world.Get_rank() == 0:
        passed, lines = report(world.Get_size(), phases, [t[0] for t in todo], a.tolerance, a.warmup)
        print("\n".join(lines), flush=True)
        if a.json:
            Path(a.json).write_text(json.dumps({"ranks": world.Get_size(), "args": vars(a), "passed": passed,
                                                "phases": phases}, indent=1))
    return 0 if world.bcast(passed, root=0) else 1


if __name__ == "__main__":
    try:
        code = main()
    except Exception:                           # noqa: BLE001 - one rank's error must end every rank
        traceback.print_exc()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)
    sys.exit(code)
