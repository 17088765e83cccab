"""Shared pytest setup: MPI facts in the header; MPI-only tests collected only under --with-mpi."""

import sys

collect_ignore = [] if "--with-mpi" in sys.argv else ["mpi"]


def pytest_report_header(config):
    try:
        from mpi4py import MPI
    except ImportError:  # pragma: no cover
        return "mpi4py: not importable"
    vendor = MPI.Get_library_version().splitlines()[0].strip()
    c = MPI.COMM_WORLD
    return f"MPI: {vendor}; rank {c.Get_rank()} of {c.Get_size()}"
