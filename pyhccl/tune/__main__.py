"""``mpiexec -n N python -m pyhccl.tune [--refresh] [--topo SPEC]``: this layout's machine profile.

Prints the profile a default Communicator on these ranks uses (measuring it if it is not cached;
``--refresh`` measures it again and replaces the cached file), where it is cached, and per op
the fast path it picks at each size from 8 B to 128 MiB.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from mpi4py import MPI

from ..algo.predicates import op_call
from ..comm import Communicator
from ..comm.probe import auto_profile
from ..core.units import format_size

SIZES = tuple(8 << (3 * i) for i in range(9))          # 8 B, 64 B, ..., 64 MiB


def main(argv: Sequence[str] | None = None, comm: MPI.Intracomm = MPI.COMM_WORLD) -> int:
    p = argparse.ArgumentParser(prog="python -m pyhccl.tune", description=__doc__.splitlines()[0])
    p.add_argument("--refresh", action="store_true", help="measure again and replace the cached profile")
    p.add_argument("--topo", default=None, help="the machine to emulate, as pyhccl.Communicator(topo=...)")
    args = p.parse_args(argv)
    try:
        pc = Communicator(comm, topo=args.topo, profile="hccl")    # measured below, refreshed or not
    except ValueError as e:         # a bad --topo, or one that does not fit these ranks (every rank raises it)
        if comm.Get_rank() == 0:
            print(f"{p.prog}: error: --topo: {e}", file=sys.stderr)
        return 2
    try:
        prof = auto_profile(pc.dispatcher.pcomm, pc.dispatcher.planner, pc.topology, refresh=args.refresh)
    finally:
        pc.release()
    if comm.Get_rank() != 0:
        return 0
    if prof is None:
        print("no machine profile: the ranks span several nodes, where pyhccl uses HCCL's selection")
        return 0
    print(f"machine profile {prof.path or '(not cached)'}")
    print(f"  {prof.layout}; measured {prof.created} in {prof.measure_s:.2f} s")
    for op in sorted(prof.ops()):
        picks = []
        for size in SIZES:
            res, _ = prof.costs(op, pc.topology.info, op_call(op, size))
            picks.append(f"{format_size(size)}: {res.winner.name if res.winner else '-'}")
        print(f"  {op:<14} " + ", ".join(picks))
        most = prof.one_shot_max(op)
        if most is not None:
            print(f"    one-step Mesh on the shared slots for inputs up to {format_size(most)}, above: the peers' "
                  f"arrays read in place (measured)")
        for c in (c for c in prof.candidates if c.op == op and c.points):
            pts = ", ".join(f"{format_size(n)} {t * 1e6:.1f} us" for n, t in c.points)
            print(f"    {c.name:<18} measured: {pts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
