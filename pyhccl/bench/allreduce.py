"""``python -m pyhccl.bench allreduce``: kept as a module for scripts that import ``run`` from it."""

from __future__ import annotations

from typing import Sequence

from mpi4py import MPI

from .collective import run as _run
from .driver import BenchArgs, Row

__all__ = ["run"]


def run(comm: MPI.Intracomm, argv: Sequence[str] | None = None) -> tuple[BenchArgs, list[Row]]:
    """Benchmark AllReduce on ``comm`` (:func:`pyhccl.bench.collective.run`); every rank returns the rows."""
    return _run("allreduce", comm, argv)
