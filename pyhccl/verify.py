"""``python -m pyhccl.verify``: check algorithms in the simulator over ranges of rank counts.

Example: ``python -m pyhccl.verify allreduce --algo NHR --ranks 1-64`` prints one line per
rank count and exits non-zero at the first failure, naming rank, step and region.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Callable, Sequence

from .opspec import get_opspec
from .plan.build import (ALL_GATHER_FORMS, ALLREDUCE_ALGOS, REDUCE_SCATTER_FORMS, build_all_gather, build_allreduce,
                         build_reduce_scatter, resolve_algo)
from .run.sim import SimulationError, simulate

__all__ = ["main", "parse_ranks", "verify"]

#: Per op: the algorithms and a builder ``(algo, rank, nranks, count, in_place) -> Plan``.
_OPS: dict[str, tuple[dict, Callable]] = {
    "allreduce": (ALLREDUCE_ALGOS, build_allreduce),
    "reduce_scatter": (REDUCE_SCATTER_FORMS, lambda a, r, n, c, ip: build_reduce_scatter(a, r, n, c)),
    "all_gather": (ALL_GATHER_FORMS, lambda a, r, n, c, ip: build_all_gather(a, r, n, c)),
}

_LARGE = 10_000_000_019   # a prime above ten billion: counts cost nothing in the simulator


def parse_ranks(text: str) -> list[int]:
    """``1-64``, ``4096`` or ``1,2,8-16`` to a sorted list of rank counts.

    Raises:
        ValueError: a malformed range or a count below 1.
    """
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError:
            raise ValueError(f"expecting --ranks like 1-64, 4096 or 1,2,8-16, got {text!r}") from None
        if a < 1 or b < a:
            raise ValueError(f"expecting rank counts >= 1 in increasing ranges, got {part.strip()!r}")
        out.update(range(a, b + 1))
    return sorted(out)


def default_counts(n: int) -> list[int]:
    """0, 1, N-1, N, N+1, a prime, and ten billion and nineteen."""
    return sorted({0, 1, max(n - 1, 0), n, n + 1, 7919, _LARGE})


def verify(op: str, algo: str, n: int, counts: Sequence[int], in_place: bool = False):
    """Simulate every rank of ``algo`` for each count; return the report of the last one."""
    algos, build = _OPS[op]
    spec = get_opspec(op)
    report = None
    for c in counts:
        plans = [build(algo, r, n, c, in_place) for r in range(n)]
        report = simulate(plans, spec, c, in_place=in_place)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pyhccl.verify", description=__doc__.splitlines()[0])
    p.add_argument("op", help=f"collective: {', '.join(_OPS)}")
    p.add_argument("--algo", default="all", help="algorithm name, or all (default)")
    p.add_argument("--ranks", default="1-16", help="rank counts, e.g. 1-64, 4096, 1,2,8-16 (default 1-16)")
    p.add_argument("--count", type=int, action="append", default=None,
                   help="elements per rank (repeatable; default 0, 1, N-1, N, N+1, 7919, 10000000019)")
    p.add_argument("--in-place", action="store_true", help="AllReduce in place")
    a = p.parse_args(argv)
    op = a.op.lower().replace("-", "_")
    op = {"reducescatter": "reduce_scatter", "allgather": "all_gather"}.get(op, op)
    if op not in _OPS:
        p.error(f"unknown collective {a.op!r}; valid: {', '.join(_OPS)}")
    algos, _ = _OPS[op]
    try:
        names = list(algos) if a.algo == "all" else [resolve_algo(a.algo, algos)]
        ranks = parse_ranks(a.ranks)
    except ValueError as e:
        p.error(str(e))
    if a.count is not None and any(c < 0 for c in a.count):
        p.error(f"expecting --count >= 0, got {a.count}")
    if a.in_place and op != "allreduce":
        p.error("--in-place applies to allreduce only")
    total = time.perf_counter()
    for name in names:
        for n in ranks:
            counts = a.count or default_counts(n)
            t0 = time.perf_counter()
            try:
                rep = verify(op, name, n, counts, a.in_place)
            except SimulationError as e:
                print(f"{op} {name} n={n}: FAIL\n{e}", flush=True)
                return 1
            print(f"{op} {name} n={n}: ok  counts={','.join(map(str, counts))}  rounds={rep.rounds}  "
                  f"max sent/rank={rep.max_elements_sent} elements  ({time.perf_counter() - t0:.2f} s)", flush=True)
    print(f"# all passed in {time.perf_counter() - total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
