"""A communicator's topology under mpiexec: each rank checks its own coordinates and groups.

Run by tests/test_mpi_launch.py at 1, 2, 3, 4, 5 and 8 ranks. Layouts that need a given size
skip elsewhere with the reason; 3+1 runs on the first four ranks of any world of 4 or more.
"""

import json
import tempfile
from pathlib import Path

import pytest
from mpi4py import MPI

import pyhccl
from pyhccl.topo import Layout, Level0Shape, parse_topo

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.Get_rank(), WORLD.Get_size()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    monkeypatch.delenv("PYHCCL_TOPO", raising=False)
    monkeypatch.delenv("PYHCCL_RANK_TABLE", raising=False)


def agree(comm, ok):
    """Every rank learns whether all ranks passed, so no rank stops early and hangs the others."""
    return comm.allreduce(bool(ok), op=MPI.LAND)


def check_against_layout(c, topo):
    """This rank's view equals the layout's entry for it, and every rank's view is consistent."""
    t, rank = c.topology, c.Get_rank()
    want = Layout(parse_topo(topo))
    mine = (t.coords, t.groups)
    everyone = c.allgather(mine)
    ok = mine == (want.coords[rank], want.groups_of(rank)) and \
        all(everyone[r] == (want.coords[r], want.groups_of(r)) for r in range(c.Get_size()))
    return agree(c.comm, ok), mine


def test_detected_layout_is_one_server_of_local_ranks():
    c = pyhccl.Communicator(WORLD)
    t = c.topology
    ok = (t.source == "MPI" and t.spec.to_text() == f"1x1x{SIZE}" and t.coords.device == RANK
          and t.groups == (tuple(range(SIZE)), (RANK,), (RANK,))
          and t.info.topo_level_nums == 1 and t.info.level0_topo == Level0Shape.MESH_1D)
    assert agree(WORLD, ok), t


@pytest.mark.skipif(SIZE != 8, reason="2 servers x 4 devices needs 8 ranks")
def test_two_servers_of_four_devices():
    c = pyhccl.Communicator(WORLD, topo="1x2x4")
    ok, (coords, groups) = check_against_layout(c, "1x2x4")
    assert ok
    assert (coords.server, coords.device) == divmod(RANK, 4)
    assert groups == (tuple(range(RANK // 4 * 4, RANK // 4 * 4 + 4)), (RANK % 4, RANK % 4 + 4), (RANK,))
    assert c.topology.info.topo_level_nums == 2 and c.topology.info.server_idx == RANK // 4


@pytest.mark.skipif(SIZE < 4, reason="1 super pod of 3+1 devices needs 4 ranks")
def test_one_super_pod_of_three_plus_one_devices():
    sub = WORLD.Split(0 if RANK < 4 else MPI.UNDEFINED, RANK)
    if sub == MPI.COMM_NULL:
        return
    c = pyhccl.Communicator(sub, topo=[[[0, 1, 2], [0]]])
    ok, (coords, groups) = check_against_layout(c, "[[[0,1,2],[0]]]")
    assert ok
    want = {0: (0, 0, ((0, 1, 2), (0, 3))), 1: (0, 1, ((0, 1, 2), (1,))),
            2: (0, 2, ((0, 1, 2), (2,))), 3: (1, 0, ((3,), (0, 3)))}[RANK]
    assert (coords.server, coords.device, groups[:2]) == want
    info = c.topology.info
    assert (info.level0_symmetric, info.level1_nhr, info.device_num_per_module) == \
        (False, True, 3 if RANK < 3 else 1)           # GCD(3, 1) = 1 -> Level1Nhr
    c.Free()


@pytest.mark.skipif(SIZE % 2, reason="two equal servers need an even number of ranks")
def test_env_layout_on_world_and_on_a_split(monkeypatch):
    half = SIZE // 2
    monkeypatch.setenv("PYHCCL_TOPO", f"1x2x{half}")
    c = pyhccl.Communicator(WORLD)
    ok, _ = check_against_layout(c, f"1x2x{half}")
    assert ok and c.topology.source == "PYHCCL_TOPO"
    server = WORLD.Split(RANK // half, RANK)          # each server alone sees its part of the world
    s = pyhccl.Communicator(server)
    assert agree(WORLD, s.topology.spec.to_text() == f"1x1x{half}" and s.topology.groups[0] == tuple(range(half)))
    s.Free()


def test_rank_table_from_env(monkeypatch):
    table = {"version": "2.0", "rank_list": [
        {"rank_id": r, "device_id": r % 2, "level_list": [{"net_layer": 0, "net_instance_id": f"s{r // 2}"}]}
        for r in range(SIZE)]}
    with tempfile.TemporaryDirectory() as tmp:         # not tmp_path: ranks would race on its cleanup
        path = Path(tmp) / "rank_table.json"
        path.write_text(json.dumps(table))
        monkeypatch.setenv("PYHCCL_RANK_TABLE", str(path))
        t = pyhccl.Communicator(WORLD).topology
    want = Layout(parse_topo([[[d % 2 for d in range(s, min(s + 2, SIZE))] for s in range(0, SIZE, 2)]]))
    assert agree(WORLD, t.source.startswith("PYHCCL_RANK_TABLE=") and t.coords == want.coords[RANK])


def test_dup_passes_the_same_topo():
    c = pyhccl.Communicator(WORLD, topo=f"1x1x{SIZE};level0=clos")
    d = c.Dup()
    assert agree(WORLD, d.topology.spec == c.topology.spec and d.topology.source == "topo=")
    assert d.topology.info.level0_topo == Level0Shape.CLOS
    d.Free()


def test_allreduce_runs_on_an_emulated_layout():
    import numpy as np
    c = pyhccl.Communicator(WORLD, topo=[[list(range(SIZE - 1)), [0]]] if SIZE > 1 else "1x1x1")
    out = np.empty(10)
    c.Allreduce(np.full(10, RANK, dtype=float), out)
    assert agree(WORLD, (out == SIZE * (SIZE - 1) / 2).all())


def test_size_mismatch_raises_on_every_rank():
    with pytest.raises(ValueError, match=f"has {SIZE + 1} devices but the communicator has {SIZE} ranks"):
        pyhccl.Communicator(WORLD, topo=f"1x1x{SIZE + 1}")


@pytest.mark.skipif(SIZE < 3, reason="needs a server of 2+ ranks beside a server of 1")
def test_layout_hccl_rejects_on_some_ranks_raises_on_every_rank():
    # mesh_size=1: HCCL's size check fails on the big server only; the 1-rank server passes.
    with pytest.raises(ValueError, match=rf"fails on {SIZE - 1} of {SIZE} ranks; rank 0: level-0 MESH_1D"):
        pyhccl.Communicator(WORLD, topo=f"{json.dumps([[list(range(SIZE - 1)), [0]]])};mesh_size=1")


@pytest.mark.skipif(SIZE < 2, reason="needs two ranks to disagree")
def test_disagreeing_ranks_raise_on_every_rank():
    topo = f"1x1x{SIZE};pod=true" if RANK == 0 else f"1x1x{SIZE}"
    with pytest.raises(ValueError, match="ranks disagree on the topology: rank 0 has"):
        pyhccl.Communicator(WORLD, topo=topo)
