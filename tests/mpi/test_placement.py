"""Any placement: the topology each rank reports and every collective, against the nodes MPI itself reports.

Run by tests/test_hosts_launch.py on emulated hosts (MPICH cliques and hydra's fork launcher), block and
round-robin, with and without PYHCCL_TOPO, and by tests/test_mpi_launch.py on one node. Each rank
works out its place from plain mpi4py (``Split_type(COMM_TYPE_SHARED)``: nodes by their lowest rank,
ranks ascending within one), independently of pyhccl. Every rank's data is a function of places
(its own and, for a buffer of one block per rank, the place of the block's rank), so a run on a
block placement and one on a round-robin placement are the same job under other names: with
``PLACEMENT_DUMP`` set, each rank writes its results in place order (and the algorithms selected)
to ``PLACEMENT_DUMP/<place>.npz`` and the launcher test compares the runs bit for bit.
"""

import json
import os
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.Get_rank(), WORLD.Get_size()
#: float32: HCCL's two-level algorithms do not take float64 (unsupportedDataTypes).
DT = np.float32
#: Element counts: a small call (latency algorithms) and one past HCCL's small-count thresholds.
COUNTS = (7, 24576)


def places():
    """``order[h]``: the rank at place ``h`` (nodes by lowest rank, ranks ascending), and the nodes."""
    node = WORLD.Split_type(MPI.COMM_TYPE_SHARED)
    members = tuple(sorted(node.allgather(RANK)))
    node.Free()
    nodes = sorted(set(WORLD.allgather(members)))
    return tuple(r for n in nodes for r in n), nodes


ORDER, NODES = places()
PLACE = {r: h for h, r in enumerate(ORDER)}
ME = PLACE[RANK]


def data(*key, count):
    """Floats that depend on ``key`` only (places), with sums that depend on their order."""
    return np.random.default_rng([7, *key]).standard_normal(count, np.float32)


def vcount(h):
    return 1 + 3 * h % 5


@pytest.fixture(scope="module")
def comm():
    c = pyhccl.Communicator(WORLD)
    yield c
    c.release()


@pytest.fixture(scope="module")
def results():
    got = {}
    yield got
    where = os.environ.get("PLACEMENT_DUMP")
    if where and got:
        np.savez(Path(where) / f"{ME}.npz", **{k: v for k, v in got.items() if not k.startswith("algo:")},
                 algos=json.dumps({k: v for k, v in got.items() if k.startswith("algo:")}))


def agree(ok):
    return WORLD.allreduce(bool(ok), op=MPI.LAND)


def test_topology_is_the_nodes(comm):
    t = comm.topology
    want_source = "PYHCCL_TOPO" if os.environ.get("PYHCCL_TOPO") else "MPI"
    servers = [list(range(len(n))) for n in NODES]
    mine = next(n for n in NODES if RANK in n)
    ok = (t.source == want_source and t.spec.layout == (tuple(map(tuple, servers)),) and t.order == ORDER
          and t.rank == ME and t.comm_rank == RANK and t.comm_groups[0] == mine
          and t.coords.server == NODES.index(mine) and t.coords.device == mine.index(RANK))
    assert agree(ok), (t, t.order, ORDER, t.comm_groups)


def record(results, comm, name, out):
    results[name] = np.array(out, copy=True)
    sel = comm.last_selection
    results[f"algo:{name}"] = None if sel is None else sel.algorithm


def by_place(buf, counts):
    """A buffer of one block per rank (rank order, packed) -> the blocks in place order."""
    offs = np.concatenate([[0], np.cumsum(counts)])
    return np.concatenate([buf[offs[r]:offs[r + 1]] for r in ORDER])


@pytest.mark.parametrize("count", COUNTS)
def test_reductions(comm, results, count):
    mine = data(ME, count=count)
    total = sum(data(h, count=count) for h in range(SIZE))
    out = np.empty(count, DT)
    comm.Allreduce(mine, out)
    assert agree(np.allclose(out, total, rtol=1e-4, atol=1e-4))
    record(results, comm, f"allreduce{count}", out)
    root = ORDER[-1]                                # the last place's rank
    out = np.full(count, np.nan, DT)
    comm.Reduce(mine, out, root=root)
    assert agree(RANK != root or np.allclose(out, total, rtol=1e-4, atol=1e-4))
    if RANK == root:
        record(results, comm, f"reduce{count}", out)
    buf = data(99, count=count) if RANK == root else np.zeros(count, DT)
    comm.Bcast(buf, root=root)
    assert agree(np.array_equal(buf, data(99, count=count)))


@pytest.mark.parametrize("count", COUNTS)
def test_gathers(comm, results, count):
    every = np.concatenate([data(PLACE[r], count=count) for r in range(SIZE)])
    out = np.empty(SIZE * count, DT)
    comm.Allgather(data(ME, count=count), out)
    assert agree(np.array_equal(out, every))
    record(results, comm, f"allgather{count}", by_place(out, [count] * SIZE))
    out = np.zeros(SIZE * count, DT)
    out[RANK * count:(RANK + 1) * count] = data(ME, count=count)
    comm.Allgather(MPI.IN_PLACE, out)
    assert agree(np.array_equal(out, every))
    root = ORDER[SIZE // 2]
    out = np.zeros(SIZE * count, DT)
    comm.Gather(data(ME, count=count), out if RANK == root else None, root=root)
    assert agree(RANK != root or np.array_equal(out, every))
    counts = [vcount(PLACE[r]) for r in range(SIZE)]
    out = np.empty(sum(counts), DT)
    comm.Allgatherv(data(ME, count=counts[RANK]), [out, counts])
    assert agree(np.array_equal(out, np.concatenate([data(PLACE[r], count=counts[r]) for r in range(SIZE)])))
    record(results, comm, f"allgatherv{count}", by_place(out, counts))


@pytest.mark.parametrize("count", COUNTS)
def test_scatters(comm, results, count):
    # block r of rank h's input: data(place h, place r)
    send = np.concatenate([data(ME, PLACE[r], count=count) for r in range(SIZE)])
    total = sum(data(h, ME, count=count) for h in range(SIZE))
    out = np.empty(count, DT)
    comm.Reduce_scatter_block(send, out)
    assert agree(np.allclose(out, total, rtol=1e-4, atol=1e-4))
    record(results, comm, f"reduce_scatter{count}", out)
    both = send.copy()
    comm.Reduce_scatter_block(MPI.IN_PLACE, both)
    assert agree(np.allclose(both[:count], total, rtol=1e-4, atol=1e-4))      # in place may select another algorithm
    counts = [vcount(PLACE[r]) for r in range(SIZE)]
    sendv = np.concatenate([data(ME, PLACE[r], count=counts[r]) for r in range(SIZE)])
    outv = np.empty(counts[RANK], DT)
    comm.Reduce_scatter(sendv, outv, counts)
    assert agree(np.allclose(outv, sum(data(h, ME, count=counts[RANK]) for h in range(SIZE)), rtol=1e-4, atol=1e-4))
    record(results, comm, f"reduce_scatter_v{count}", outv)
    root = ORDER[0]
    out = np.empty(count, DT)
    comm.Scatter(send if RANK == root else None, out, root=root)
    assert agree(np.array_equal(out, data(PLACE[root], ME, count=count)))


@pytest.mark.parametrize("count", COUNTS)
def test_alltoall(comm, results, count):
    send = np.concatenate([data(ME, PLACE[r], count=count) for r in range(SIZE)])
    want = np.concatenate([data(PLACE[r], ME, count=count) for r in range(SIZE)])
    out = np.empty(SIZE * count, DT)
    comm.Alltoall(send, out)
    assert agree(np.array_equal(out, want))
    record(results, comm, f"alltoall{count}", by_place(out, [count] * SIZE))
    comm.Alltoall(MPI.IN_PLACE, send)
    assert agree(np.array_equal(send, want))
    def n(a, b):                                    # elements from place a to place b
        return 1 + (2 * a + b) % 4

    scounts = [n(ME, PLACE[r]) for r in range(SIZE)]
    rcounts = [n(PLACE[r], ME) for r in range(SIZE)]
    sendv = np.concatenate([data(ME, PLACE[r], count=scounts[r]) for r in range(SIZE)])
    outv = np.empty(sum(rcounts), DT)
    comm.Alltoallv([sendv, scounts], [outv, rcounts])
    assert agree(np.array_equal(outv, np.concatenate([data(PLACE[r], ME, count=rcounts[r]) for r in range(SIZE)])))
    comm.Barrier()


#: Two-level algorithms (level 0 inside a server, level 1 between servers), forced one at a time.
TWO_LEVEL = ("AicpuAllReduceParallelMeshNHR", "AicpuAllReduceSequenceMeshConcurNHR",
             "AicpuAllGatherParallelMeshNHR", "AicpuReduceScatterParallelMeshNHR")


@pytest.mark.skipif(len(NODES) < 2 or len({len(n) for n in NODES}) > 1 or len(NODES[0]) < 2,
                    reason="two-level algorithms: HCCL's executors take two or more equal servers of 2+ devices")
@pytest.mark.parametrize("algo", TWO_LEVEL)
def test_two_level_algorithms(results, algo):
    """Each on MPI, then on ``@shm``, which on several nodes runs hierarchically (pyhccl.run.shm.hier)."""
    c = pyhccl.Communicator(WORLD, algo=algo)
    count = COUNTS[1]
    if "AllReduce" in algo:
        out = np.empty(count, DT)
        c.Allreduce(data(ME, count=count), out)
        want = sum(data(h, count=count) for h in range(SIZE))
    elif "AllGather" in algo:
        out = np.empty(SIZE * count, DT)
        c.Allgather(data(ME, count=count), out)
        want = np.concatenate([data(PLACE[r], count=count) for r in range(SIZE)])
        out = by_place(out, [count] * SIZE)
        want = by_place(want, [count] * SIZE)
    else:
        out = np.empty(count, DT)
        c.Reduce_scatter_block(np.concatenate([data(ME, PLACE[r], count=count) for r in range(SIZE)]), out)
        want = sum(data(h, ME, count=count) for h in range(SIZE))
    assert agree(np.allclose(out, want, rtol=1e-4, atol=1e-4))
    results[algo] = out
    c.release()
    c = pyhccl.Communicator(WORLD, algo=algo + "@shm")     # hierarchical: level 0 on the node's window, MPI between
    again = np.empty_like(out)
    if "AllReduce" in algo:
        c.Allreduce(data(ME, count=count), again)
    elif "AllGather" in algo:
        c.Allgather(data(ME, count=count), again)
        again = by_place(again, [count] * SIZE)
    else:
        c.Reduce_scatter_block(np.concatenate([data(ME, PLACE[r], count=count) for r in range(SIZE)]), again)
    assert agree(again.tobytes() == out.tobytes())          # the same plan: the same bits
    assert agree(type(next(iter(c.compiled_plans.values()))).__name__ == "HierRunner")
    c.release()


def test_in_place_forms(comm):
    """The in-place forms whose own block sits at the rank's MPI index (staged into HCCL's order and back)."""
    count = COUNTS[0]
    every = np.concatenate([data(PLACE[r], count=count) for r in range(SIZE)])
    root = ORDER[-1]
    out = np.zeros(SIZE * count, DT)
    out[RANK * count:(RANK + 1) * count] = data(ME, count=count)
    comm.Gather(MPI.IN_PLACE if RANK == root else out[RANK * count:(RANK + 1) * count], out, root=root)
    assert agree(RANK != root or np.array_equal(out, every))
    counts = [vcount(PLACE[r]) for r in range(SIZE)]
    displs = [int(d) for d in np.cumsum([0] + counts[:-1])]
    outv = np.zeros(sum(counts), DT)
    outv[displs[RANK]:displs[RANK] + counts[RANK]] = data(ME, count=counts[RANK])
    comm.Allgatherv(MPI.IN_PLACE, [outv, (counts, displs)])
    assert agree(np.array_equal(outv, np.concatenate([data(PLACE[r], count=counts[r]) for r in range(SIZE)])))
    both = np.concatenate([data(ME, PLACE[r], count=counts[r]) for r in range(SIZE)])
    comm.Reduce_scatter(MPI.IN_PLACE, both, counts)
    assert agree(np.allclose(both[:counts[RANK]], sum(data(h, ME, count=counts[RANK]) for h in range(SIZE)),
                             rtol=1e-4, atol=1e-4))
    send = np.concatenate([data(ME, PLACE[r], count=count) for r in range(SIZE)]) if RANK == root else None
    mine = np.empty(count, DT)
    comm.Scatter(send, MPI.IN_PLACE if RANK == root else mine, root=root)
    assert agree(RANK == root or np.array_equal(mine, data(PLACE[root], ME, count=count)))


def test_rank_table_of_the_nodes(comm, monkeypatch, tmp_path_factory):
    """A rank table naming each rank's node, rank ids in MPI order (not server by server under round-robin):
    the same layout and order as detection, and the same results, bit for bit."""
    table = {"version": "2.0", "rank_list": [
        {"rank_id": r, "device_id": node.index(r), "level_list": [{"net_layer": 0, "net_instance_id": f"n{node[0]}"}]}
        for r in range(SIZE) for node in NODES if r in node]}
    path = Path(f"/tmp/pyhccl-placement-{os.getpid() if RANK == 0 else 0}.json")
    path = Path(WORLD.bcast(str(path)))
    if RANK == 0:
        path.write_text(json.dumps(table))
    WORLD.Barrier()
    monkeypatch.delenv("PYHCCL_TOPO", raising=False)
    monkeypatch.setenv("PYHCCL_RANK_TABLE", str(path))
    try:
        c = pyhccl.Communicator(WORLD)
    finally:
        WORLD.Barrier()
        if RANK == 0:
            path.unlink()
    t = c.topology
    assert agree(t.spec == comm.topology.spec and t.order == ORDER and t.source.startswith("PYHCCL_RANK_TABLE"))
    count = COUNTS[1]
    send = np.concatenate([data(ME, PLACE[r], count=count) for r in range(SIZE)])
    a, b = np.empty(count, DT), np.empty(count, DT)
    c.Reduce_scatter_block(send, a)
    comm.Reduce_scatter_block(send, b)
    assert agree(a.tobytes() == b.tobytes())
    c.release()


def test_split_keeps_its_nodes(monkeypatch):
    """Every other place's rank: the sub-communicator detects its own nodes, whatever the placement (a
    PYHCCL_TOPO of the world would be read in world rank order, docs/hosts.md)."""
    monkeypatch.delenv("PYHCCL_TOPO", raising=False)
    sub = WORLD.Split(ME % 2, RANK)
    c = pyhccl.Communicator(sub)
    members = sub.allgather(RANK)
    mine = [r for r in next(n for n in NODES if RANK in n) if r in members]
    t = c.topology
    assert agree([members[m] for m in t.comm_groups[0]] == mine)
    out = np.empty(5, DT)
    c.Allreduce(data(ME, count=5), out)
    assert agree(np.allclose(out, sum(data(PLACE[r], count=5) for r in members), rtol=1e-4, atol=1e-4))
    c.Free()


def test_nonblocking_forms(comm):
    """Requests under any placement: rank-renaming ops run pyhccl's plan; ops whose blocks would be staged
    go to the wrapped communicator on every rank alike (a request does not stage around its run)."""
    count = COUNTS[0]
    mine = data(ME, count=count)
    total = sum(data(h, count=count) for h in range(SIZE))
    before = comm.fallbacks
    out, buf, gat = np.empty(count, DT), np.empty(count, DT), np.empty(SIZE * count, DT)
    root = ORDER[-1]
    if RANK == root:
        buf[:] = data(99, count=count)
    reqs = [comm.Iallreduce(mine, out), comm.Ibcast(buf, root=root), comm.Iallgather(mine, gat)]
    MPI.Request.Waitall(reqs)
    assert agree(np.allclose(out, total, rtol=1e-4, atol=1e-4))
    assert agree(np.array_equal(buf, data(99, count=count)))
    assert agree(np.array_equal(gat, np.concatenate([data(PLACE[r], count=count) for r in range(SIZE)])))
    staged = 0 if comm.topology.identity else 1
    assert agree(comm.fallbacks - before == staged)
    p = comm.Allreduce_init(mine, out)
    for _ in range(2):
        out[:] = np.nan
        p.Start()
        p.Wait()
        assert agree(np.allclose(out, total, rtol=1e-4, atol=1e-4))
    p.Free()
