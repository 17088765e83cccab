"""The hierarchical runtime's compiler (pyhccl.run.shm.hier) and ``Name@shm`` for HCCL's names, without MPI jobs."""

import pytest

from pyhccl.algo.names import AlgoRef, Runtime
from pyhccl.comm.agree import parse_algo
from pyhccl.core.call import Call
from pyhccl.plan import build_plan
from pyhccl.plan.ir import Kind
from pyhccl.run.shm import compile_hier
from pyhccl.run.shm.engine import HEADER
from pyhccl.topo import machine

NODE, LOCAL = (0, 0, 2, 2), (0, 1, 0, 1)        # 1x2x2: ranks 0, 1 on one node, 2, 3 on the other


def compiled(op, name, rank, count=10, in_place=False):
    call = Call(op, 4, count, in_place=in_place)
    plans = [build_plan(call, name, r, machine("1x2x2")) if NODE[r] == NODE[rank] else None for r in range(4)]
    return plans, compile_hier(plans, rank, NODE, LOCAL, 4, in_place)


@pytest.mark.parametrize("name", ["AicpuAllReduceParallelMeshNHR", "CcuSchedAllReduceSequenceMeshMesh", "NHR"])
def test_transfers_go_by_node(name):
    plans, hp = compiled("allreduce", name, 1)
    mine = plans[1]
    assert len(hp.steps) == max(len(plans[0].steps), len(plans[1].steps))
    for t, (st, step) in enumerate(zip(hp.steps, mine.steps)):
        local = [a for a in step.transfers if NODE[a.peer] == 0]
        assert [(LOCAL[a.peer], a.dst) for a in local if a.kind is Kind.RECV] == [(p, d) for d, p, _ in st.loads]
        assert {p for p, _ in (*st.recvs, *st.sends)} <= {2, 3}
        assert len(st.recvs) + len(st.sends) + len(local) == len(step.transfers)
        peers_load = any(a.kind is Kind.RECV and NODE[a.peer] == 0 for p in plans[:2] if t < len(p.steps)
                         for a in p.steps[t].transfers)
        assert st.sync == peers_load                # both ranks of the node agree on every barrier
    assert compiled("allreduce", name, 0)[1].nbytes == hp.nbytes and all(
        a.sync == b.sync for a, b in zip(compiled("allreduce", name, 0)[1].steps, hp.steps))


def test_loads_read_what_the_peer_sends():
    plans, hp = compiled("all_gather", "AicpuAllGatherParallelMeshNHR", 0)
    for t, st in enumerate(hp.steps):
        for dst, peer, src in st.loads:
            sent = [a.src for a in plans[1].steps[t].transfers if a.kind is Kind.SEND and a.peer == 0]
            assert src in sent and src.size == dst.size


def test_layout_in_the_segment():
    _, hp = compiled("allreduce", "NHR", 0, count=10)
    assert hp.offsets[0] == HEADER and hp.sizes[0] == 10 and hp.offsets[1] > hp.offsets[0]
    assert all(o % 64 == 0 for o in hp.offsets) and hp.nbytes >= hp.offsets[2] + hp.sizes[2] * 4
    _, inplace = compiled("allreduce", "NHR", 0, count=10, in_place=True)
    assert inplace.alias and inplace.offsets[0] == inplace.offsets[1]


def test_hccl_names_take_the_shm_suffix():
    assert parse_algo("AicpuAllReduceParallelMeshNHR@shm") == \
        (AlgoRef("AicpuAllReduceParallelMeshNHR", Runtime.SHM), "AicpuAllReduceParallelMeshNHR")
    assert parse_algo("nhr@SHM") == (AlgoRef("NHR", Runtime.SHM), None)
    with pytest.raises(ValueError, match="or one of pyhccl's templates"):
        parse_algo("NoSuchAlgo@shm")
