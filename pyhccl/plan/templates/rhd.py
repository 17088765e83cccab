"""RHD (Recursive Halving-Doubling) AllReduce, ReduceScatter and AllGather.

HCCL doc: docs/zh/user_guide/coll_algo_intro/RHD.md (doc only, no template in src/ops).
Power of two: Vector Halving + Distance Doubling ReduceScatter, then the mirror AllGather.
Otherwise r = N - 2^floor(log2 N): the first 2r ranks pair up and the odd member's data is
reduced into the even member ("rank1's data is reduced into rank0"), the 2^floor(log2 N)
remaining ranks run the power-of-two algorithm, and each even member finally copies the
result back to its odd partner: two extra steps and one extra full vector each way.
ReduceScatter uses Vector Doubling + Distance Halving instead ("to keep the Scatter order":
position v ends with slice v), with the merged pairs owning two slices; AllGather is its
reverse.
"""

from __future__ import annotations

from ..ir import Buf, Region, Step, reduce
from ..slices import Slices
from ._common import exchange

__all__ = ["allreduce_rhd", "reduce_scatter_rhd", "all_gather_rhd"]


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


def reduce_scatter_rhd(group: tuple[int, ...], pos: int, slices: Slices, *, buf: Buf = Buf.OUTPUT,
                       scratch: int = 0) -> list[Step]:
    """RHD ReduceScatter in place on ``slices``: Vector Doubling + Distance Halving, slice ``pos`` ends reduced.

    HCCL doc RHD.md. p' = 2^floor(log2 N), r = N - p'. With r > 0, positions 2u+1 (u < r) first
    send every slice to 2u and leave; virtual rank u then owns slices 2u, 2u+1 (u < r) or u+r.
    Step i = 0..log2(p')-1: partner v XOR p'/2^(i+1) (distance halving); I send the slices of
    the partner's half of my current virtual range, receive mine into a scratch mirror and
    reduce. Finally 2u sends slice 2u+1 back to 2u+1. Steps: log2 N for a power of two,
    floor(log2 N) + 2 otherwise (idle steps keep every position aligned).
    Bytes: (N-1)/N for a power of two; otherwise the merge adds a whole vector for the odd
    member and the last step one slice. Scratch: a mirror of ``slices``.
    """
    n = len(group)
    if n == 1 or slices.total == 0:
        return []
    p2, extra, k = _shape(n)
    mirror = scratch - slices.base
    steps: list[Step] = []
    if pos < 2 * extra:
        partner = group[pos ^ 1]
        if pos % 2:                     # folded away: send everything, wait, get my slice
            steps.append(exchange(partner, slices.regions(buf, 0, 1, n), None, []))
            steps += [Step()] * k
            steps.append(exchange(None, [], partner, _some(slices.region(buf, pos))))
            return steps
        rx = slices.regions(buf, 0, 1, n)
        scr = [r.moved(Buf.SCRATCH, mirror) for r in rx]
        steps.append(exchange(None, [], partner, scr, [reduce(a, b) for a, b in zip(rx, scr)]))
    elif extra:
        steps.append(Step())
    v = pos // 2 if pos < 2 * extra else pos - extra
    lo, hi = 0, p2
    for i in range(k):                  # vector doubling, distance halving
        d = p2 >> (i + 1)
        mid = lo + d
        keep, give = ((mid, hi), (lo, mid)) if v & d else ((lo, mid), (mid, hi))
        tx = _blocks(slices, buf, give, extra)
        rx = _blocks(slices, buf, keep, extra)
        scr = [r.moved(Buf.SCRATCH, mirror) for r in rx]
        peer = group[_real(v ^ d, extra)]
        steps.append(exchange(peer, tx, peer, scr, [reduce(a, b) for a, b in zip(rx, scr)]))
        lo, hi = keep
    if pos < 2 * extra:
        steps.append(exchange(group[pos + 1], _some(slices.region(buf, pos + 1)), None, []))
    elif extra:
        steps.append(Step())
    return steps


def all_gather_rhd(group: tuple[int, ...], pos: int, slices: Slices, *, buf: Buf = Buf.OUTPUT,
                   scratch: int = 0) -> list[Step]:
    """RHD AllGather in place on ``slices``: the reverse of :func:`reduce_scatter_rhd`, no reduce.

    HCCL doc RHD.md ("AllGather = reverse"). With r > 0, position 2u+1 first sends its slice to
    2u; step i = 0..log2(p')-1 swaps my virtual range with partner v XOR 2^i (distance
    doubling); finally 2u sends 2u+1 every slice but its own. No scratch.
    """
    n = len(group)
    if n == 1 or slices.total == 0:
        return []
    p2, extra, k = _shape(n)
    steps: list[Step] = []
    if pos < 2 * extra:
        partner = group[pos ^ 1]
        if pos % 2:
            steps.append(exchange(partner, _some(slices.region(buf, pos)), None, []))
            steps += [Step()] * k
            rest = slices.regions(buf, 0, 1, pos) + slices.regions(buf, pos + 1, 1, n - pos - 1)
            steps.append(exchange(None, [], partner, rest))
            return steps
        steps.append(exchange(None, [], partner, _some(slices.region(buf, pos + 1))))
    elif extra:
        steps.append(Step())
    v = pos // 2 if pos < 2 * extra else pos - extra
    for i in range(k):                  # distance doubling, vector doubling
        d = 1 << i
        lo = v & ~(d - 1)
        other = lo ^ d
        peer = group[_real(v ^ d, extra)]
        steps.append(exchange(peer, _blocks(slices, buf, (lo, lo + d), extra),
                              peer, _blocks(slices, buf, (other, other + d), extra)))
    if pos < 2 * extra:
        rest = slices.regions(buf, 0, 1, pos + 1) + slices.regions(buf, pos + 2, 1, n - pos - 2)
        steps.append(exchange(group[pos + 1], rest, None, []))
    elif extra:
        steps.append(Step())
    return steps


def _shape(n: int) -> tuple[int, int, int]:
    """(p', r, log2 p'): the power of two below ``n``, the folded pairs, the halving steps."""
    p2 = 1 << (n.bit_length() - 1)
    return p2, n - p2, p2.bit_length() - 1


def _real(u: int, extra: int) -> int:
    """Position of virtual rank ``u`` (the even member of a folded pair)."""
    return 2 * u if u < extra else u + extra


def _blocks(slices: Slices, buf: Buf, vrange: tuple[int, int], extra: int) -> list[Region]:
    """Non-empty slices owned by virtual ranks ``[lo, hi)``: slices [real(lo), real(hi))."""
    a, b = _real(vrange[0], extra), _real(vrange[1], extra)
    return slices.regions(buf, a, 1, b - a)


def _some(r: Region | None) -> list[Region]:
    return [] if r is None else [r]
