"""The Communicator where mpi4py wants an intracommunicator (issue 17): it is an ``MPI.Intracomm``, and the
communicators made from it (Dup, Split, Clone) are pyhccl's. Run by tests/test_mpi_launch.py."""

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl
from pyhccl.topo import Topology

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
N, RANK = WORLD.Get_size(), WORLD.Get_rank()


def test_is_an_intracomm_over_the_same_handle():
    c = pyhccl.Communicator(WORLD)
    assert isinstance(c, MPI.Intracomm) and c == WORLD and c.comm is WORLD
    assert (c.Get_size(), c.Get_rank()) == (N, RANK)
    assert isinstance(c.topology, Topology)          # pyhccl's, not MPI.Comm.topology
    c.release()


@pytest.mark.skipif(N < 2, reason="an intercommunicator needs two groups")
def test_split_result_and_the_communicator_make_an_intercommunicator():
    """mpi4py's test_cco_buf_inter: ``MPI.Intracomm.Create_intercomm(split, 0, base, leader)``."""
    base = pyhccl.Communicator(WORLD)
    color = int(RANK >= N // 2)
    part = base.Split(color, key=0)
    assert isinstance(part, pyhccl.Communicator) and part.Get_size() == (N // 2 if color == 0 else N - N // 2)
    x = np.arange(5, dtype=np.int64) + RANK
    out = np.zeros(5, np.int64)
    part.Allreduce(x, out)
    members = [r for r in range(N) if int(r >= N // 2) == color]
    assert np.array_equal(out, np.arange(5) * len(members) + sum(members)) and part.fallbacks == 0
    inter = MPI.Intracomm.Create_intercomm(part, 0, base, N // 2 if color == 0 else 0)
    got = np.zeros(5, np.int64)
    inter.Allreduce(x, got)                 # an intercommunicator's Allreduce: the remote group's sum
    others = [r for r in range(N) if r not in members]
    assert np.array_equal(got, np.arange(5) * len(others) + sum(others))
    inter.Free()
    part.Free()
    assert part == MPI.COMM_NULL
    base.release()


def test_split_undefined_color_gives_comm_null_and_made_communicators_keep_settings():
    base = pyhccl.Communicator(WORLD, algo="Ring", timeout=30, abort_on_timeout=False)
    part = base.Split(MPI.UNDEFINED if RANK == N - 1 and N > 1 else 0, RANK)
    if RANK == N - 1 and N > 1:
        assert part == MPI.COMM_NULL
    else:
        assert isinstance(part, pyhccl.Communicator) and (part.algo, part.timeout) == ("Ring", 30)
        part.Free()
    for made in (base.Clone(), base.Dup_with_info(MPI.INFO_NULL)):
        assert isinstance(made, pyhccl.Communicator) and (made.algo, made.timeout) == ("Ring", 30)
        made.Free()
    dup, req = base.Idup()                  # nonblocking: a plain mpi4py communicator
    req.Wait()
    assert type(dup) is MPI.Intracomm and dup.Get_size() == N
    dup.Free()
    base.release()
