"""HCCL's point-to-point ops as plans: Send/Recv pairs, SendRecv and BatchSendRecv through verify() and the simulator."""

from dataclasses import replace

import numpy as np
import pytest

from pyhccl.core.call import make_call
from pyhccl.core.p2p import layout, pair_items, sendrecv_items
from pyhccl.plan import Step, build_plan
from pyhccl.verify import main, verify
from pyhccl.verify.cases import batch_items, calls
from pyhccl.verify.sim import SimulationError, simulate

# rank 0 sends rank 1 two items (3 then 5 elements) and one to itself; rank 1 lists its receives 5 first
BATCH = [[("send", 1, 3), ("send", 1, 5), ("recv", 0, 2), ("send", 0, 2)],
         [("recv", 1, 4), ("recv", 0, 5), ("send", 1, 4), ("recv", 0, 3)]]


def test_largest_item_of_a_pair_meets_the_largest_receive():
    """HCCL orders one pair's items by count, largest first (ins_v2_batch_send_recv_executor.cc SortSendItems)."""
    call = make_call("BatchSendRecv", 2, items=BATCH)
    (_, recvs0), (_, recvs1) = layout(call.items)
    assert recvs1 == ((0, 4, 1, 0), (4, 5, 0, 3), (9, 3, 0, 0))    # out[4:9] <- rank 0's in[3:8]
    assert recvs0 == ((0, 2, 0, 8),)                               # to itself: a local copy
    p0 = build_plan(call, "PairWise", 0)
    assert str(p0.steps[0]).startswith("S>1 in[3:8]")              # the larger send goes first
    # the numpy reference agrees with the layout
    xs = [np.arange(10.0), np.arange(100.0, 104.0)]
    out = call.spec.reference(call, xs, np.add)
    assert list(out[1]) == [100, 101, 102, 103, 3, 4, 5, 6, 7, 0, 1, 2] and list(out[0]) == [8, 9]


@pytest.mark.parametrize("op, kw", [
    ("SendRecv", {"count": 7}),
    ("BatchSendRecv", {"items": pair_items(4, 3, 1, 11)}),                  # a Send/Recv pair
    ("BatchSendRecv", {"items": BATCH[:2]}),
    ("BatchSendRecv", {"items": sendrecv_items(5, 10_000_000_019, shift=2)}),
    ("BatchSendRecv", {"items": batch_items(7, "t")}),
])
@pytest.mark.parametrize("algo", [None, "PairWise"])
def test_verify_ok(op, kw, algo):
    n = len(kw["items"]) if "items" in kw else 4
    res = verify(op, f"1x1x{n}", algo=algo, **kw)
    assert res.ok, res.error
    assert res.algorithm == (algo or "AicpuBatchSendRecvSoleMesh")


def test_sweep_calls_and_cli(capsys):
    cs = calls("batch_send_recv", 5)
    assert any(sum(len(r) for r in c.items) == 2 for c in cs)                       # a Send/Recv pair
    rows = batch_items(5, "batch_send_recv")
    assert any(len({(k, p) for k, p, _ in r}) < len(r) for r in rows)              # a pair more than once
    assert main(["SendRecv", "--ranks", "2-4", "-j", "1"]) == 0
    out = capsys.readouterr().out
    assert "batch_send_recv PairWise n=4: ok" in out and "batch_send_recv auto n=4: ok" in out


def test_mismatched_items_are_argument_errors():
    with pytest.raises(ValueError, match="rank 1 receives 2 elements from rank 0, but its largest send left is 3"):
        make_call("BatchSendRecv", 2, items=[[("send", 1, 3)], [("recv", 0, 2)]])
    with pytest.raises(ValueError, match="rank 0 sends 1 more item"):
        make_call("BatchSendRecv", 2, items=[[("send", 1, 3)], []])
    with pytest.raises(ValueError, match=r"items\[0\]\[0\] as \('send' or 'recv', peer in range\(2\)"):
        make_call("BatchSendRecv", 2, items=[[("put", 1, 3)], []])
    with pytest.raises(ValueError, match="expecting items only for BatchSendRecv"):
        make_call("AllReduce", 2, items=[[], []])


def test_the_simulator_catches_a_lost_receive():
    call = make_call("BatchSendRecv", 6, items=batch_items(6, "lost"))
    plans = [build_plan(call, "PairWise", r) for r in range(6)]
    simulate(plans, call)
    r, t = next((r, t) for r, p in enumerate(plans) for t, s in enumerate(p.steps) if s.transfers)
    steps = list(plans[r].steps)
    steps[t] = Step(steps[t].transfers[1:], steps[t].local)
    bad = list(plans)
    bad[r] = replace(plans[r], steps=tuple(steps))
    with pytest.raises(SimulationError, match="sends and receives must match"):
        simulate(bad, call)
