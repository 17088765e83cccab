"""``python -m pyhccl.bench <op>``: one benchmark driver, one command per collective."""

from __future__ import annotations

import sys
from functools import partial
from typing import Callable, Sequence

from mpi4py import MPI

from ..core.call import OPS, canonical_op
from .collective import BENCH_OPS, run
from ..core.settings import ub_transfer_bytes
from ..topo import comm_topology
from .driver import Row, UsageError, count_wrong, write_csv, write_footer, write_json, write_rows
from .roofline import Roofline, bound_seconds, measure
from .tuning import finish

__all__ = ["COMMANDS", "main", "run"]

#: Commands by name: ``run(comm, argv) -> (args, rows)``.
COMMANDS: dict[str, Callable] = {name: partial(run, name) for name in BENCH_OPS}

_USAGE = f"usage: python -m pyhccl.bench {{{','.join(COMMANDS)}}} [options]   (-h for the options)"


def _command(name: str) -> str:
    """The benchmark for an op as the other commands take it (``all_reduce``, ``AllReduce``, ``Bcast``:
    :func:`~pyhccl.core.call.canonical_op`); ``name`` itself where none is."""
    try:
        command = canonical_op(name).replace("_", "")
    except ValueError:
        return name
    return command if command in COMMANDS else name


def main(argv: Sequence[str] | None = None, comm: MPI.Intracomm | None = None) -> int:
    """Run one benchmark; rank 0 prints. Returns the exit status (1 if any data was wrong, 2 on a usage error)."""
    comm = MPI.COMM_WORLD if comm is None else comm
    argv = list(sys.argv[1:] if argv is None else argv)
    rank = comm.Get_rank()
    try:
        if argv:
            argv[0] = _command(argv[0])
        if not argv or argv[0] not in COMMANDS:
            if argv and argv[0] in ("-h", "--help"):
                if rank == 0:
                    print(_USAGE)
                return 0
            got = argv[0] if argv else "nothing"
            raise UsageError(f"unknown benchmark {got!r}; valid: {', '.join(COMMANDS)}\n{_USAGE}")
        args, rows = COMMANDS[argv[0]](comm, argv[1:])
    except UsageError as e:
        if rank == 0:
            print(e, file=sys.stderr)
        return 2
    except SystemExit as e:            # -h
        return int(e.code or 0)
    topology = comm_topology(comm, args.topo) if args.tune or args.tuning or args.report or args.plot else None
    roof = _roofline(comm, BENCH_OPS[argv[0]].op, rows)
    if rank == 0:
        n = comm.Get_size()
        spec = OPS[BENCH_OPS[argv[0]].op]
        mpi = MPI.Get_library_version().splitlines()[0].strip()
        print(f"# pyhccl.bench {argv[0]}: nranks {n}, {mpi}, iters {args.iters}, warmup {args.warmup}"
              + (f", topo {args.topo}" if args.topo else "") + (", shared buffers" if args.shared else ""))
        print(f"# time = slowest rank's mean; busbw = algbw x {spec.busbw_factor(n):.4g} (nccl-tests' factor for "
              f"{spec.hccl} at N={n}); ratio = native MPI time / pyhccl out-of-place time")
        print(f"# bound = % of the one-host memory bound (pyhccl.bench.roofline): {roof.describe()}" if roof else
              "# bound: none (ranks on several nodes: the roofline prices one host)")
        write_rows(rows)
        write_footer(rows)
        meta = {"op": argv[0], "nranks": n, "mpi": mpi, "topo": args.topo,
                "buffers": "shared" if args.shared else "numpy",
                "roofline": roof and {"copy_Bps": roof.copy, "reduce_Bps": roof.reduce}}
        if topology is not None:
            try:
                meta.update(finish(args, rows, topology, n, ub_transfer_bytes(), mpi, sys.stdout))
            except (OSError, ValueError) as e:
                print(f"error: {e}", file=sys.stderr)
                return 2
        if args.json:
            write_json(rows, args.json, meta)
        if args.csv:
            write_csv(rows, args.csv)
    return 1 if count_wrong(rows) else 0


def _roofline(comm: MPI.Intracomm, op: str, rows: list[Row]) -> Roofline | None:
    """Measure the host's roofline (collective) and fill each row's % of bound; None on several nodes."""
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    one = comm.allreduce(node.Get_size() == comm.Get_size(), op=MPI.LAND)
    node.Free()
    if not one:
        return None
    roof = measure(comm)
    for r in rows:
        if r.time_us:
            r.bound = 100.0 * bound_seconds(op, comm.Get_size(), r.size, roof) / (r.time_us * 1e-6)
    return roof
