"""Shared pytest setup: MPI facts in the header; MPI-only tests collected only under --with-mpi."""

from pathlib import Path

MPI_TESTS = Path(__file__).parent / "mpi"


def pytest_ignore_collect(collection_path, config):
    """tests/mpi runs only under ``--with-mpi``, as tests/test_mpi_launch.py starts it under mpiexec.

    Read from the parsed options, not ``sys.argv``, which pytest-xdist's workers do not share.
    """
    if collection_path == MPI_TESTS and not config.getoption("with_mpi"):
        return True
    return None


def pytest_report_header(config):
    try:
        from mpi4py import MPI
    except ImportError:  # pragma: no cover
        return "mpi4py: not importable"
    vendor = MPI.Get_library_version().splitlines()[0].strip()
    c = MPI.COMM_WORLD
    return f"MPI: {vendor}; rank {c.Get_rank()} of {c.Get_size()}"
