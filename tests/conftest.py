"""Shared pytest setup: MPI facts in the header; MPI-only tests collected only under --with-mpi."""

import os
import tempfile
from pathlib import Path

MPI_TESTS = Path(__file__).parent / "mpi"

# The tests check HCCL's selection, so they run under PYHCCL_PROFILE=hccl unless a test asks for the machine
# profile (Communicator(profile="auto"): tests/mpi/test_fast_path.py); the MPI runs they launch inherit it. What
# the machine profile measures goes to a directory of the test session, not the user's cache.
os.environ.setdefault("PYHCCL_PROFILE", "hccl")
os.environ.setdefault("PYHCCL_CACHE_DIR", os.path.join(tempfile.gettempdir(), f"pyhccl-tests-{os.getuid()}"))


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
