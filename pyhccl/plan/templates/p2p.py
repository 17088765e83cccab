"""BatchSendRecv (and so Send/Recv pairs and SendRecv) as a plan: HCCL's pair-wise order on two streams.

HCCL: src/ops/batch_send_recv/executor/ins_v2_batch_send_recv_executor.cc (GetPairWiseList,
ProcessSelfSendRecvTasks): items of count 0 are dropped; items to and from the rank itself are
matched largest first and copied locally; the other sends are ordered from the rank downwards
(r-1, r-2, ..., wrapping), the receives from the rank upwards (r+1, r+2, ...), the same peer's
items largest first; sends run in order on one thread, receives on another. pyhccl runs that order in lock-step: in
each step every rank posts the send at the head of its send queue and the receive at the head
of its receive queue wherever the two heads name each other (HCCL also cuts an item into pieces
of its CCL buffer's size; a plan moves it whole).
"""

from __future__ import annotations

from functools import lru_cache

from ...core.call import Call
from ...core.p2p import layout
from ..ir import Buf, Region, Step, copy, recv, send

__all__ = ["P2P", "batch_send_recv"]


@lru_cache(maxsize=16)
def _schedule(call: Call) -> tuple[tuple[tuple[int, int, int, int], ...], ...]:
    """Every step's transfers ``(src, dst, send index on src, receive index on dst)``, for all ranks at once.

    Raises:
        ValueError: HCCL's order leaves sends and receives that wait on each other (a deadlock).
    """
    lay = layout(call.items)
    n = call.nranks
    sendq, recvq = [], []
    for r in range(n):
        sends, recvs = lay[r]
        s = [i for i, (_, c, p) in enumerate(sends) if c and p != r]
        v = [i for i, (_, c, p, _) in enumerate(recvs) if c and p != r]
        # HCCL sorts sends by (peer <= r ? peer + n : peer) descending, receives by (peer < r ? peer + n : peer)
        # ascending, then by count descending, both stable
        s.sort(key=lambda i: (-(sends[i][2] + n if sends[i][2] <= r else sends[i][2]), -sends[i][1]))
        v.sort(key=lambda i: (recvs[i][2] + n if recvs[i][2] < r else recvs[i][2], -recvs[i][1]))
        sendq.append(s[::-1])       # popped from the end
        recvq.append(v[::-1])
    steps = []
    while any(sendq):
        fire = []
        for p in range(n):
            if sendq[p]:
                r = lay[p][0][sendq[p][-1]][2]
                if recvq[r] and lay[r][1][recvq[r][-1]][2] == p:
                    fire.append((p, r, sendq[p][-1], recvq[r][-1]))
        if not fire:
            p = next(p for p in range(n) if sendq[p])
            raise ValueError(f"HCCL's pair-wise order deadlocks: rank {p} waits to send to rank "
                             f"{lay[p][0][sendq[p][-1]][2]}, which waits to receive from another rank first")
        for p, r, _, _ in fire:
            sendq[p].pop()
            recvq[r].pop()
        steps.append(tuple(fire))
    return tuple(steps)


def batch_send_recv(call: Call, rank: int) -> list[Step]:
    """Rank ``rank``'s steps: the local copies of its items to itself, then HCCL's pair-wise transfers."""
    sends, recvs = layout(call.items)[rank]
    local = [copy(Region(Buf.OUTPUT, ro, c), Region(Buf.INPUT, so, c)) for ro, c, p, so in recvs if p == rank and c]
    steps = []
    for fire in _schedule(call):
        xfer = []
        for p, r, si, ri in fire:
            if p == rank:
                o, c, _ = sends[si]
                xfer.append(send(r, Region(Buf.INPUT, o, c)))
            if r == rank:
                o, c, _, _ = recvs[ri]
                xfer.append(recv(p, Region(Buf.OUTPUT, o, c)))
        steps.append(Step(tuple(xfer)))
    if local:       # HCCL copies first; the copies touch no region a transfer does, so they share step 0
        steps[:1] = [Step(steps[0].transfers if steps else (), tuple(local))]
    return steps


#: BatchSendRecv's one schedule (HCCL registers the executor as "BatchSendRecv").
P2P = {"PairWise": batch_send_recv}
