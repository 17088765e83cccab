"""Rooted templates, part two: Broadcast and Reduce (Mesh, MeshTwoShot, NHR, Ring, RHD).

HCCL: src/ops/{broadcast,reduce}/template/aicpu/*.cc and the docs (Mesh.md, Ring.md, RHD.md)
for what has no code. The conventions are :mod:`.rooted`'s (positions in ``group``, the same
number of steps on every position); the Broadcast trees reuse its binomial-tree scatter.
"""

from __future__ import annotations

from typing import Callable

from ..ir import Buf, Region, Step, copy, recv, reduce, send
from ..slices import Slices
from ._common import exchange, reduce_in_rank_order, scratch_slot
from .mesh import reduce_scatter_mesh
from .nhr import all_gather_nhr, allreduce_nhr
from .rooted import nothing_to_move, one_slice, tree_scatter

__all__ = ["BCAST", "REDUCE", "broadcast_mesh", "broadcast_mesh_two_shot", "broadcast_nhr", "broadcast_ring",
           "broadcast_rhd", "reduce_mesh", "reduce_mesh_two_shot", "reduce_nhr", "reduce_nhr_aicpu_reduce",
           "reduce_ring"]


# -- Broadcast ----------------------------------------------------------------------------

def broadcast_mesh(group: tuple[int, ...], pos: int, root: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """Mesh (Star) Broadcast: the root writes the whole vector to every peer; one step.

    HCCL: src/ops/broadcast/template/aicpu/ins_temp_broadcast_mesh_1D.cc (InsTempBroadcastMesh1D)
    """
    n = len(group)
    if nothing_to_move(group, data.count):
        return []
    if pos == root:
        xfer = [send(group[(root + k) % n], data) for k in range(1, n)]
    else:
        xfer = [recv(group[root], data)]
    return [Step(tuple(xfer))]


def broadcast_mesh_two_shot(group: tuple[int, ...], pos: int, root: int, data: Region, *,
                            scratch: int = 0) -> list[Step]:
    """Mesh Broadcast two-shot: scatter chunks with the root's own, then a mesh AllGather of non-roots.

    HCCL: src/ops/broadcast/template/aicpu/ins_temp_broadcast_mesh_1D_two_shot.cc
    "ceil" chunks (ceil(count/N) each). Step 1: the root sends every non-root j chunk j and
    then chunk ``root``. Step 2 (N > 2): every non-root sends its chunk j to the other N-2
    non-roots (the root takes no part). Per link 2 chunks from the root, 1 between non-roots.
    """
    n = len(group)
    if nothing_to_move(group, data.count):
        return []
    ch = Slices.ceil(data.offset, data.count, n)
    buf = data.buf
    others = [(root + k) % n for k in range(1, n)]
    if pos == root:
        first = Step(tuple(send(group[j], r) for j in others
                           for r in one_slice(ch, buf, j) + one_slice(ch, buf, root)))
        second = Step()
    else:
        first = Step(tuple(recv(group[root], r) for r in one_slice(ch, buf, pos) + one_slice(ch, buf, root)))
        peers = [j for j in others if j != pos]
        mine = one_slice(ch, buf, pos)
        second = Step(tuple([send(group[j], r) for j in peers for r in mine]
                            + [recv(group[j], r) for j in peers for r in one_slice(ch, buf, j)]))
    return [first, second] if n > 2 else [first]


def broadcast_nhr(group: tuple[int, ...], pos: int, root: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """NHR Broadcast: NHR Scatter of "floor + tail" slices, then NHR AllGather; 2*ceil(log2 N) steps.

    HCCL: src/ops/broadcast/template/aicpu/ins_temp_broadcast_nhr.cc
    """
    if nothing_to_move(group, data.count):
        return []
    slices = Slices.floor_tail(data.offset, data.count, len(group))
    return (tree_scatter(group, pos, root, slices, data.buf, -1)
            + all_gather_nhr(group, pos, slices, buf=data.buf))


def broadcast_ring(group: tuple[int, ...], pos: int, root: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """Ring Broadcast, unpipelined: the whole vector goes around the ring, N-1 steps.

    HCCL: docs/zh/user_guide/coll_algo_intro/Ring.md (Broadcast row (p-1)α + (p-1)nβ; no template)
    Step t = 0..N-2: the position at distance t to the right of the root sends the whole
    vector to its right neighbour.
    """
    n = len(group)
    if nothing_to_move(group, data.count):
        return []
    e = (pos - root) % n
    steps = []
    for t in range(n - 1):
        tx = [data] if e == t else []
        rx = [data] if e == t + 1 else []
        steps.append(exchange(group[(pos + 1) % n], tx, group[(pos - 1) % n], rx))
    return steps


def broadcast_rhd(group: tuple[int, ...], pos: int, root: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """RHD Broadcast: distance halving over 2^floor(log2 N) positions, then one send to the rest.

    HCCL: docs/zh/user_guide/coll_algo_intro/RHD.md (doc only; cost ceil(log2 N)(α + nβ))
    With x = N - 2^floor(log2 N), the first 2x positions pair up (2u, 2u+1) and the member of
    the root's parity (the even one when the root is not among them) joins the block. In the
    block (virtual ranks, w = v XOR v_root) step i sends the whole vector from w ≡ 0 to
    w + 2^(k-1-i) (distance halving); a last step sends it to the x left-out partners.
    """
    n = len(group)
    if nothing_to_move(group, data.count):
        return []
    p2 = 1 << (n.bit_length() - 1)
    extra = n - p2
    k = p2.bit_length() - 1
    par = root % 2 if root < 2 * extra else 0

    def virt(p: int) -> int:
        return p // 2 if p < 2 * extra else p - extra

    def real(v: int) -> int:
        return group[2 * v + par if v < extra else v + extra]

    joined = pos >= 2 * extra or pos % 2 == par
    steps = []
    if joined:
        v = virt(pos)
        w = v ^ virt(root)
        for i in range(k):
            dist = p2 >> (i + 1)
            if w % (2 * dist) == 0:
                steps.append(exchange(real(v ^ dist), [data], None, []))
            elif w % (2 * dist) == dist:
                steps.append(exchange(None, [], real(v ^ dist), [data]))
            else:
                steps.append(Step())
        if extra:
            steps.append(exchange(group[pos ^ 1], [data], None, []) if pos < 2 * extra else Step())
    else:
        steps = [Step()] * k + [exchange(None, [], group[pos ^ 1], [data])]
    return steps


# -- Reduce -------------------------------------------------------------------------------

def reduce_mesh(group: tuple[int, ...], pos: int, root: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """Mesh Reduce one-shot: every position writes its whole vector into the root's slot; root reduces.

    HCCL: src/ops/reduce/template/aicpu/reduce_mesh_1D.cc
    One step; the root receives N-1 whole vectors into scratch slots (N slots of ``count``)
    and reduces them in group order (bitwise the same whatever the root).
    """
    n = len(group)
    if nothing_to_move(group, data.count):
        return []
    if pos != root:
        return [Step((send(group[root], data),))]
    c = data.count
    slots = [scratch_slot(scratch, t, c, c) for t in range(n)]
    xfer = tuple(recv(group[t], slots[t]) for t in ((root + k) % n for k in range(1, n)))
    return [Step(xfer, tuple(reduce_in_rank_order(data, slots, root)))]


def reduce_mesh_two_shot(group: tuple[int, ...], pos: int, root: int, data: Region, *,
                         scratch: int = 0) -> list[Step]:
    """Mesh Reduce two-shot: mesh ReduceScatter of "ceil" slices, then every slice to the root.

    HCCL: src/ops/reduce/template/aicpu/reduce_mesh_1D_two_shot.cc
    Two steps; the ReduceScatter reduces in canonical rank order (as the TwoShot AllReduce),
    the gather is HCCL's root read, here the owners send. Scratch: N slots of ceil(count/N).
    """
    n = len(group)
    if nothing_to_move(group, data.count):
        return []
    slices = Slices.ceil(data.offset, data.count, n)
    steps = reduce_scatter_mesh(group, pos, slices, buf=data.buf, scratch=scratch, rank_order=True)
    if pos == root:
        xfer = [recv(group[p], r) for p in ((root + k) % n for k in range(1, n))
                for r in one_slice(slices, data.buf, p)]
    else:
        xfer = [send(group[root], r) for r in one_slice(slices, data.buf, pos)]
    return steps + [Step(tuple(xfer))]


def reduce_nhr(group: tuple[int, ...], pos: int, root: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """NHR Reduce: an NHR AllReduce (RS-NHR + AG-NHR), every position ends with the result.

    HCCL: src/ops/reduce/template/aicpu/reduce_nhr.cc (only the root copies out; here every
    position's ``data`` holds the result). 2*ceil(log2 N) steps, scratch: ``count``.
    """
    return allreduce_nhr(group, pos, data, scratch=scratch)


def reduce_nhr_aicpu_reduce(group: tuple[int, ...], pos: int, root: int, data: Region, *,
                            scratch: int = 0) -> list[Step]:
    """NHR Reduce with a CPU-side reduce (64-bit types, PROD): AG-NHR of whole vectors, root reduces.

    HCCL: src/ops/reduce/template/aicpu/reduce_aicpu_reduce_nhr.cc
    A local step copies ``data`` into scratch slot ``pos`` (N slots of ``count``), the NHR
    AllGather fills every slot (ceil(log2 N) steps, (N-1)*count sent per position), and after
    its last step the root reduces the slots into ``data`` in group order.
    """
    n = len(group)
    if nothing_to_move(group, data.count):
        return []
    c = data.count
    slots = [scratch_slot(scratch, t, c, c) for t in range(n)]
    steps = [Step(local=(copy(slots[pos], data),))]
    steps += all_gather_nhr(group, pos, Slices(scratch, n, c, n, 0), buf=Buf.SCRATCH)
    if pos == root:
        last = steps[-1]
        steps[-1] = Step(last.transfers, last.local + tuple(reduce_in_rank_order(data, slots, root)))
    return steps


def reduce_ring(group: tuple[int, ...], pos: int, root: int, data: Region, *, scratch: int = 0) -> list[Step]:
    """Ring Reduce, unpipelined: a partial sum of whole vectors travels root+1 -> root+2 -> ... -> root.

    HCCL: docs/zh/user_guide/coll_algo_intro/Ring.md (Reduce row (p-1)α + (p-1)nβ + (p-1)nγ; no template)
    N-1 steps: at step t the position at distance t+1 right of the root sends its partial sum
    to its right neighbour, which receives it into scratch (``count``) and reduces it into
    ``data``. The reduction order is fixed by the root (deterministic for a given root).
    """
    n = len(group)
    if nothing_to_move(group, data.count):
        return []
    e = (pos - root) % n or n           # the root is the chain's end, distance N
    tmp = Region(Buf.SCRATCH, scratch, data.count)
    steps = []
    for t in range(n - 1):
        tx = [data] if e == t + 1 else []
        rx = [tmp] if e == t + 2 else []
        local = [reduce(data, tmp)] if rx else []
        steps.append(exchange(group[(pos + 1) % n], tx, group[(pos - 1) % n], rx, local))
    return steps


# -- tables -------------------------------------------------------------------------------

BCAST: dict[str, Callable[..., list[Step]]] = {
    "Mesh": broadcast_mesh, "MeshTwoShot": broadcast_mesh_two_shot, "NHR": broadcast_nhr,
    "Ring": broadcast_ring, "RHD": broadcast_rhd,
}
REDUCE: dict[str, Callable[..., list[Step]]] = {
    "Mesh": reduce_mesh, "MeshTwoShot": reduce_mesh_two_shot, "NHR": reduce_nhr,
    "NHRAicpuReduce": reduce_nhr_aicpu_reduce, "Ring": reduce_ring,
}
