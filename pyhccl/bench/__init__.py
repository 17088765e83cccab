"""``python -m pyhccl.bench <op>``: one benchmark driver, one command per collective."""

from __future__ import annotations

import sys
from typing import Callable, Sequence

from mpi4py import MPI

from . import allreduce
from .driver import Row, UsageError, write_footer, write_json, write_rows

__all__ = ["COMMANDS", "main"]

#: Commands by op name: ``run(comm, argv) -> (args, rows)``.
COMMANDS: dict[str, Callable] = {"allreduce": allreduce.run}

_USAGE = f"usage: python -m pyhccl.bench {{{','.join(COMMANDS)}}} [options]   (-h for the options)"


def main(argv: Sequence[str] | None = None, comm: MPI.Intracomm | None = None) -> int:
    """Run one benchmark; rank 0 prints. Returns the exit status (1 if any data was wrong)."""
    comm = MPI.COMM_WORLD if comm is None else comm
    argv = list(sys.argv[1:] if argv is None else argv)
    rank = comm.Get_rank()
    try:
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
    if rank == 0:
        print(f"# pyhccl.bench {argv[0]}: nranks {comm.Get_size()}, "
              f"{MPI.Get_library_version().splitlines()[0].strip()}, iters {args.iters}, warmup {args.warmup}")
        print("# time = slowest rank's mean; ratio = native MPI time / pyhccl out-of-place time")
        write_rows(rows)
        write_footer(rows)
        if args.json:
            write_json(rows, args.json, {"op": argv[0], "nranks": comm.Get_size(),
                                         "mpi": MPI.Get_library_version().splitlines()[0].strip()})
    wrong = sum(r.wrong + r.ip_wrong for r in rows)
    return 1 if wrong else 0
