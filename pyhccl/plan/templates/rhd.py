"""RHD (Recursive Halving-Doubling) AllReduce.

HCCL doc: docs/zh/user_guide/coll_algo_intro/RHD.md (doc only, no template in src/ops).
Power of two: Vector Halving + Distance Doubling ReduceScatter, then the mirror AllGather.
Otherwise r = N - 2^floor(log2 N): the first 2r ranks pair up and the odd member's data is
reduced into the even member ("rank1's data is reduced into rank0"), the 2^floor(log2 N)
remaining ranks run the power-of-two algorithm, and each even member finally copies the
result back to its odd partner: two extra steps and one extra full vector each way.
"""

from __future__ import annotations

from ..ir import Buf, Region, Step, reduce
from ..slices import Slices
from ._common import exchange

__all__ = ["allreduce_rhd"]


def allreduce_rhd(group: tuple[int, ...], pos: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """RHD AllReduce in place on ``data``.

    Scratch: ``data.count`` elements (the merge step, then a mirror of the halving steps).
    """
    n = len(group)
    if n == 1 or data.count == 0:
        return []
    p2 = 1 << (n.bit_length() - 1)
    extra = n - p2                      # ranks folded into a partner
    k = p2.bit_length() - 1             # halving steps
    idle = Step()
    steps: list[Step] = []
    if pos < 2 * extra:
        partner = group[pos ^ 1]
        whole = Region(Buf.SCRATCH, scratch, data.count)
        if pos % 2:                     # folded away: send, wait, get the result
            steps.append(exchange(partner, [data], None, []))
            steps += [idle] * (2 * k)
            steps.append(exchange(None, [], partner, [data]))
            return steps
        steps.append(exchange(None, [], partner, [whole], [reduce(data, whole)]))
    elif extra:
        steps.append(idle)
    v = pos // 2 if pos < 2 * extra else pos - extra          # virtual rank among the p2

    def real(u: int) -> int:
        return group[2 * u if u < extra else u + extra]

    slices = Slices.floor_tail(data.offset, data.count, p2)
    mirror = scratch - data.offset
    lo, hi = 0, p2
    trail = []
    for i in range(k):                  # vector halving, distance doubling
        mid = (lo + hi) // 2
        keep, give = ((lo, mid), (mid, hi)) if not v >> i & 1 else ((mid, hi), (lo, mid))
        tx = slices.regions(data.buf, give[0], 1, give[1] - give[0])
        rx = slices.regions(data.buf, keep[0], 1, keep[1] - keep[0])
        scr = [r.moved(Buf.SCRATCH, mirror) for r in rx]
        peer = real(v ^ (1 << i))
        steps.append(exchange(peer, tx, peer, scr, [reduce(a, b) for a, b in zip(rx, scr)]))
        trail.append((peer, keep, give))
        lo, hi = keep
    for peer, keep, give in reversed(trail):  # the mirror AllGather
        tx = slices.regions(data.buf, keep[0], 1, keep[1] - keep[0])
        rx = slices.regions(data.buf, give[0], 1, give[1] - give[0])
        steps.append(exchange(peer, tx, peer, rx))
    if pos < 2 * extra:
        steps.append(exchange(group[pos + 1], [data], None, []))
    elif extra:
        steps.append(idle)
    return steps
