"""Selection wired into Communicator.Allreduce on emulated layouts (run at 8 ranks)."""

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl
from pyhccl.core.call import Call
from pyhccl.plan.api import NotRunnableError, build_plan, hccl_names
from pyhccl.select import select_for

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD


def agree(ok):
    return WORLD.allreduce(bool(ok), op=MPI.LAND)


@pytest.mark.skipif(WORLD.Get_size() != 8, reason="the 1x2x4 layout needs 8 ranks")
def test_selected_algorithms_run_on_2x4():
    c = pyhccl.Communicator(WORLD, topo="1x2x4")
    rank = WORLD.Get_rank()
    seen, ok = set(), True
    for count in (1, 1000, 300_000, 1_000_003):          # crosses into the Sequence executor
        x = (np.arange(count) % 7 + rank).astype(np.float32)
        out = np.empty(count, np.float32)
        c.Allreduce(x, out)
        want = (np.arange(count) % 7) * 8 + 28
        ok &= np.array_equal(out, want)
        sel = c.last_selection
        ok &= sel.algorithm == select_for("AllReduce", c.topology.info, count * 4, np.dtype(np.float32), "sum",
                                          inplace=False, algo="").algorithm
        seen.add(sel.algorithm)
    assert agree(ok), seen
    assert "CcuSchedAllReduceSequenceMeshMesh" in seen and "CcuSchedAllReduceSoleMesh" in seen


def unrunnable_allreduce(c, count):
    """AllReduce names whose attributes admit 1x2x4 but whose plan raises NotRunnableError on some rank."""
    rank = c.Get_rank()
    mine = set()
    for name in hccl_names("allreduce"):
        try:
            select_for("AllReduce", c.topology.info, count * 4, np.dtype(np.float32), "sum", algo=name)
        except ValueError:
            continue
        try:
            build_plan(Call("allreduce", c.Get_size(), count), name, rank, c.topology.machine)
        except NotRunnableError:
            mine.add(name)
    return sorted(set.union(*map(set, c.allgather(sorted(mine)))))


@pytest.mark.skipif(WORLD.Get_size() != 8, reason="the 1x2x4 layout needs 8 ranks")
def test_unrunnable_forced_choice_fails_on_every_rank():
    names = unrunnable_allreduce(pyhccl.Communicator(WORLD, topo="1x2x4"), 64)
    if not names:
        pytest.skip("every AllReduce algorithm that applies to 1x2x4 runs")
    c = pyhccl.Communicator(WORLD, topo="1x2x4", algo=names[0])
    with pytest.raises(RuntimeError, match=f"AllReduce of 64 x float32 cannot run: .*NotRunnableError: .*{names[0]}"):
        c.Allreduce(np.ones(64, np.float32), np.empty(64, np.float32))
    WORLD.Barrier()
