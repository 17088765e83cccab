"""Communicator(tuning=): the measured profile chooses, native MPI included; another machine's file is refused."""

import shutil

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl
from pyhccl.tune import NATIVE, Point, Tuning, TuningError
from pyhccl.tune.features import signature

pytestmark = pytest.mark.mpi


def made(tmp, n, times, nranks=None, name="t.json", ub=512 * 1024):
    """Rank 0 writes a tuning file for 1x1xn with ``times`` {algorithm: us at 8 B and 4 KiB}; every rank gets the path."""
    comm = MPI.COMM_WORLD
    path = comm.bcast(str(tmp / name) if comm.Get_rank() == 0 else None)
    if comm.Get_rank() == 0:
        pts = [Point("AllReduce", a, nb, t * (1 + nb / 4096)) for a, t in times.items() for nb in (8, 4096)]
        Tuning(f"1x1x{n}", nranks or n, ub, tuple(pts)).save(path)
    comm.Barrier()
    return path


@pytest.fixture
def tmp():
    import pathlib
    import tempfile
    comm = MPI.COMM_WORLD
    d = comm.bcast(tempfile.mkdtemp(prefix="pyhccl-tune-") if comm.Get_rank() == 0 else None)
    yield pathlib.Path(d)
    comm.Barrier()
    if comm.Get_rank() == 0:
        shutil.rmtree(d, ignore_errors=True)


def same_plans(a, b, n, nbytes):
    return a == b or signature("AllReduce", a, f"1x1x{n}", nbytes, 4) == signature("AllReduce", b, f"1x1x{n}", nbytes, 4)


def run(comm, count):
    a = np.arange(count, dtype=np.float32) + comm.Get_rank()
    b = np.empty_like(a)
    comm.Allreduce(a, b)
    n = comm.Get_size()
    np.testing.assert_array_equal(b, n * np.arange(count, dtype=np.float32) + n * (n - 1) / 2)


@pytest.mark.parametrize("fastest", ["Ring", NATIVE])
def test_measured_choice_runs_and_is_right(tmp, fastest):
    n = MPI.COMM_WORLD.Get_size()
    times = {"Ring": 50.0, "NHR": 60.0, NATIVE: 70.0}
    times[fastest] = 10.0
    c = pyhccl.Communicator(MPI.COMM_WORLD, topo=f"1x1x{n}", tuning=made(tmp, n, times))
    for count in (2, 100, 1024):
        run(c, count)
        chosen = c.last_selection.algorithm
        assert c.last_selection.source == "measured"
        # Names that run the very same plans (Ring and NHR on 1 or 2 ranks) share one price: any of them is right.
        assert same_plans(chosen, fastest, n, count * 4), (chosen, fastest)
    assert c.fallbacks == 0
    assert "tuning file" in str(c.last_selection)
    run(c.Dup(), 7)


def test_foreign_file_raises_on_every_rank(tmp):
    n = MPI.COMM_WORLD.Get_size()
    path = made(tmp, n, {"Ring": 1.0}, nranks=n + 1, name="foreign.json")
    with pytest.raises(TuningError, match=f"measured on {n + 1} ranks"):
        pyhccl.Communicator(MPI.COMM_WORLD, topo=f"1x1x{n}", tuning=path)


def test_missing_file_raises_on_every_rank(tmp):
    n = MPI.COMM_WORLD.Get_size()
    with pytest.raises(TuningError, match="cannot read"):
        pyhccl.Communicator(MPI.COMM_WORLD, topo=f"1x1x{n}", tuning=str(tmp / "none.json"))


def test_file_sets_the_ub_size_unless_told(tmp, monkeypatch):
    n = MPI.COMM_WORLD.Get_size()
    path = made(tmp, n, {"Ring": 10.0, NATIVE: 20.0}, ub=64 * 1024)
    monkeypatch.delenv("PYHCCL_UB_TRANSFER_BYTES", raising=False)
    c = pyhccl.Communicator(MPI.COMM_WORLD, topo=f"1x1x{n}", tuning=path)
    assert c.ub_transfer_bytes == 64 * 1024            # the prices were measured with it
    run(c, 100_000)
    assert c.Dup().ub_transfer_bytes == 64 * 1024
    assert pyhccl.Communicator(MPI.COMM_WORLD, topo=f"1x1x{n}", tuning=path,
                               ub_transfer_bytes=4096).ub_transfer_bytes == 4096
    monkeypatch.setenv("PYHCCL_UB_TRANSFER_BYTES", "8192")
    assert pyhccl.Communicator(MPI.COMM_WORLD, topo=f"1x1x{n}", tuning=path).ub_transfer_bytes == 8192
    assert pyhccl.Communicator(MPI.COMM_WORLD, topo=f"1x1x{n}", tuning="").ub_transfer_bytes == 8192
    monkeypatch.delenv("PYHCCL_UB_TRANSFER_BYTES")
    assert pyhccl.Communicator(MPI.COMM_WORLD, topo=f"1x1x{n}", tuning="").ub_transfer_bytes == 512 * 1024
